package storage_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/lifeboat-io/lifeboat/internal/storage"
)

func digest(data string) storage.FileDigest {
	sum := sha256.Sum256([]byte(data))
	return storage.FileDigest{SHA256: hex.EncodeToString(sum[:]), Size: int64(len(data))}
}

// failingStore fails every write after reading part of the body.
type failingStore struct{ storage.ObjectStore }

func (f failingStore) PutObject(_ context.Context, _, _ string, body io.Reader) error {
	_, _ = io.CopyN(io.Discard, body, 3)
	return errors.New("disk full")
}

func TestARecordingStoreRecordsWhatItWrote(t *testing.T) {
	plain := storage.NewBackupStore(newFSStore(t), "b", "p")
	rec := storage.NewDigestRecorder()
	s := plain.Recording(rec)
	ctx := t.Context()
	tarball := strings.Repeat("tarball bytes ", 10000)
	// A stream (the tarball) and a body read from memory (the metadata).
	if err := s.PutBackupContents(ctx, "bk", io.MultiReader(strings.NewReader(tarball))); err != nil {
		t.Fatal(err)
	}
	if err := s.PutBackupMetadata(ctx, "bk", []byte(`{"kind":"Backup"}`)); err != nil {
		t.Fatal(err)
	}
	// The plain store it came from records nothing.
	if err := plain.PutBackupFile(ctx, "bk", "other", strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	got := rec.Under(s.BackupDir("bk"))
	want := map[string]storage.FileDigest{"bk.tar.gz": digest(tarball), "velero-backup.json": digest(`{"kind":"Backup"}`)}
	if len(got) != len(want) || got["bk.tar.gz"] != want["bk.tar.gz"] || got["velero-backup.json"] != want["velero-backup.json"] {
		t.Fatalf("recorded %v, want %v", got, want)
	}
	// What was stored is what was recorded.
	rc, err := s.OpenBackupFile(ctx, "bk", "velero-backup.json")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if b, _ := io.ReadAll(rc); !bytes.Equal(b, []byte(`{"kind":"Backup"}`)) {
		t.Fatalf("stored %q", b)
	}
	files, err := s.ListBackupFiles(ctx, "bk")
	if err != nil || strings.Join(files, ",") != "bk.tar.gz,other,velero-backup.json" {
		t.Fatalf("ListBackupFiles = %v, %v", files, err)
	}

	// A failed write records nothing.
	failing := storage.NewBackupStore(failingStore{newFSStore(t)}, "b", "p").Recording(rec)
	if err := failing.PutBackupFile(ctx, "bk", "lost", io.MultiReader(strings.NewReader("abcdef"))); err == nil {
		t.Fatal("the failing write succeeded")
	}
	if _, ok := rec.Under(s.BackupDir("bk"))["lost"]; ok {
		t.Fatal("a failed write was recorded")
	}
}

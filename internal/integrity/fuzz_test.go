package integrity

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"testing"

	"github.com/klauspost/compress/gzip"

	"github.com/lifeboat-io/lifeboat/internal/archive"
)

// FuzzCheck feeds Check hostile digests files and item digests for a
// real backup: it must not fail on them, and whatever it calls verified
// must be: every file it lists is on disk with that sha256 and size, and
// no file of the directory is left unlisted.
func FuzzCheck(f *testing.F) {
	s := writeBackup(f, 3)
	manifest, err := os.ReadFile(s.path(ManifestFile(name)))
	if err != nil {
		f.Fatal(err)
	}
	items, err := os.ReadFile(s.path(ItemDigestsFile(name)))
	if err != nil {
		f.Fatal(err)
	}
	// The backup as written (it verifies), and hand-made ones.
	f.Add(manifest, items)
	f.Add([]byte(`{"version":1,"algorithm":"sha256","backup":"bk","files":{}}`), gzipped([]byte(`{"path":"x"}`+"\n")))
	f.Fuzz(func(t *testing.T, manifest, itemDigests []byte) {
		if err := os.WriteFile(s.path(ManifestFile(name)), manifest, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(s.path(ItemDigestsFile(name)), itemDigests, 0o644); err != nil {
			t.Fatal(err)
		}
		rep, err := Check(context.Background(), s.store, name, "", archive.Limits{})
		if err != nil {
			t.Fatalf("Check failed on a readable store: %v", err)
		}
		if len(rep.Findings) > maxFindings {
			t.Fatalf("%d findings listed, over %d", len(rep.Findings), maxFindings)
		}
		if !rep.Verified() {
			return
		}
		m, _, err := readManifest(context.Background(), s.store, name)
		if err != nil {
			t.Fatalf("verified with an unreadable digests file: %v", err)
		}
		present, err := s.store.ListBackupFiles(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range present {
			want, listed := m.Files[file]
			if file == ManifestFile(name) {
				continue
			}
			data, err := os.ReadFile(s.path(file))
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(data)
			if !listed || want.SHA256 != hex.EncodeToString(sum[:]) || want.Size != int64(len(data)) {
				t.Fatalf("verified, yet %s is %d bytes with sha256 %x against %+v (listed %v)", file, len(data), sum, want, listed)
			}
		}
	})
}

func gzipped(data []byte) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, _ = zw.Write(data)
	_ = zw.Close()
	return b.Bytes()
}

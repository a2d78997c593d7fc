package repository

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/kopia/kopia/repo"
	"github.com/kopia/kopia/repo/blob"
	"github.com/kopia/kopia/repo/blob/filesystem"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// Velero's layout: <prefix>/kopia/<namespace>/, the location's prefix
// trimmed of slashes, none when it has none.
func TestPrefix(t *testing.T) {
	for prefix, want := range map[string]string{
		"":        "kopia/app/",
		"velero":  "velero/kopia/app/",
		"/a/b/":   "a/b/kopia/app/",
		"cluster": "cluster/kopia/app/",
	} {
		bsl := &v1.BackupStorageLocation{Spec: v1.BackupStorageLocationSpec{
			StorageType: v1.StorageType{ObjectStorage: &v1.ObjectStorageLocation{Bucket: "b", Prefix: prefix}},
		}}
		if got := Prefix(bsl, "app"); got != want {
			t.Errorf("Prefix with location prefix %q = %q, want %q", prefix, got, want)
		}
	}
}

// The states Velero tells a repository's storage apart by: nothing, kopia's
// format blob only (creation cut short), both blobs agreeing.
func TestRepositoryStatus(t *testing.T) {
	ctx := t.Context()
	st, err := filesystem.New(ctx, &filesystem.Options{Path: t.TempDir()}, true)
	if err != nil {
		t.Fatal(err)
	}
	check := func(want Status) {
		t.Helper()
		got, err := RepositoryStatus(ctx, st)
		if err != nil || got != want {
			t.Fatalf("RepositoryStatus = %v, %v; want %v", got, err, want)
		}
	}
	check(StatusAbsent)
	if err := repo.Initialize(ctx, st, NewRepositoryOptions(), "pw"); err != nil {
		t.Fatal(err)
	}
	check(StatusUninitialized)
	if err := writeUdmRepoMetadata(ctx, st); err != nil {
		t.Fatal(err)
	}
	check(StatusReady)
	// A marker of another repository.
	if err := st.PutBlob(ctx, udmRepoBlobID, gatherBytes([]byte(`{"uniqueID":"AAAA"}`)), blob.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := RepositoryStatus(ctx, st); err == nil || !strings.Contains(err.Error(), "unique IDs differ") {
		t.Errorf("RepositoryStatus with another repository's marker: %v", err)
	}
}

// Velero writes the marker as {"uniqueID": <base64 of the format blob's
// unique ID>}; Lifeboat writes the same bytes.
func TestMarkerFormat(t *testing.T) {
	ctx := t.Context()
	st, err := filesystem.New(ctx, &filesystem.Options{Path: t.TempDir()}, true)
	if err != nil {
		t.Fatal(err)
	}
	opts := NewRepositoryOptions()
	opts.UniqueID = bytes.Repeat([]byte{1, 2, 3}, 8)
	if err := repo.Initialize(ctx, st, opts, "pw"); err != nil {
		t.Fatal(err)
	}
	if err := writeUdmRepoMetadata(ctx, st); err != nil {
		t.Fatal(err)
	}
	var b bytesOutput
	if err := st.GetBlob(ctx, udmRepoBlobID, 0, -1, &b); err != nil {
		t.Fatal(err)
	}
	if got, want := b.String(), `{"uniqueID":"`+base64.StdEncoding.EncodeToString(opts.UniqueID)+`"}`; got != want {
		t.Errorf("marker %s, want %s", got, want)
	}
}

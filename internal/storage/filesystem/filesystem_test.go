package filesystem

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lifeboat-io/lifeboat/internal/storage"
	"github.com/lifeboat-io/lifeboat/internal/storage/storagetest"
)

func newStore(t *testing.T) (*Store, string, string) {
	t.Helper()
	root := filepath.Join(t.TempDir(), "root")
	if err := os.MkdirAll(filepath.Join(root, "bucket"), 0o700); err != nil {
		t.Fatal(err)
	}
	s, err := New(map[string]string{PathKey: root})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s, root, "bucket"
}

func TestConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) (storage.ObjectStore, string) {
		s, _, bucket := newStore(t)
		return s, bucket
	})
}

func TestNewRefusesBadConfig(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		config map[string]string
		want   string
	}{
		"missing path":  {map[string]string{}, `config key "path" is required`},
		"relative path": {map[string]string{PathKey: "rel/dir"}, "must be an absolute path"},
		"missing root":  {map[string]string{PathKey: filepath.Join(t.TempDir(), "nope")}, "no such file"},
		"root is file":  {map[string]string{PathKey: file}, "not a directory"},
		"unknown key":   {map[string]string{PathKey: t.TempDir(), "region": "x"}, `unknown config key "region" (allowed: bucket, path, prefix)`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := New(tc.config)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New(%v) error = %v, want it to contain %q", tc.config, err, tc.want)
			}
		})
	}
}

func TestRefusesKeysOutsideRoot(t *testing.T) {
	s, root, bucket := newStore(t)
	// A sibling of the bucket and of the root: where an escape would land.
	for _, target := range []string{filepath.Join(root, "victim"), filepath.Join(filepath.Dir(root), "victim")} {
		if err := os.MkdirAll(target, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	ctx := t.Context()
	for _, tc := range []struct{ bucket, key string }{
		{bucket, "../victim/x"},
		{bucket, "a/../../victim/x"},
		{bucket, "../../victim/x"},
		{bucket, "/etc/passwd"},
		{bucket, "a//b"},
		{bucket, "a/"},
		{bucket, "."},
		{bucket, "a/./b"},
		{bucket, ""},
		{bucket, "a\x00b"},
		{bucket, tempPrefix + "x"},
		{"..", "victim/x"},
		{"../root", "bucket/x"},
		{".", "bucket/x"},
		{"", "x"},
		{"a/b", "x"},
	} {
		if err := s.PutObject(ctx, tc.bucket, tc.key, strings.NewReader("x")); err == nil {
			t.Errorf("PutObject(%q, %q) succeeded, want refusal", tc.bucket, tc.key)
		}
		if _, err := s.GetObject(ctx, tc.bucket, tc.key); err == nil || errors.Is(err, storage.ErrNotFound) {
			t.Errorf("GetObject(%q, %q) error = %v, want a refusal (not ErrNotFound)", tc.bucket, tc.key, err)
		}
		if _, err := s.ObjectExists(ctx, tc.bucket, tc.key); err == nil {
			t.Errorf("ObjectExists(%q, %q) succeeded, want refusal", tc.bucket, tc.key)
		}
		if err := s.DeleteObject(ctx, tc.bucket, tc.key); err == nil {
			t.Errorf("DeleteObject(%q, %q) succeeded, want refusal", tc.bucket, tc.key)
		}
		if _, err := s.CreateSignedURL(ctx, tc.bucket, tc.key, time.Minute); err == nil {
			t.Errorf("CreateSignedURL(%q, %q) succeeded, want refusal", tc.bucket, tc.key)
		}
	}
	for _, dir := range []string{filepath.Join(root, "victim"), filepath.Join(filepath.Dir(root), "victim")} {
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("%s gained entries %v", dir, entries)
		}
	}
	// Listing prefixes that climb out find nothing rather than walking
	// another directory.
	if err := os.WriteFile(filepath.Join(root, "victim", "x"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []string{"../victim/", "../", "/", "a/../../victim/"} {
		keys, err := s.ListObjects(ctx, bucket, prefix)
		if err != nil || len(keys) != 0 {
			t.Errorf("ListObjects(%q) = %q, %v; want nothing", prefix, keys, err)
		}
		cps, err := s.ListCommonPrefixes(ctx, bucket, prefix, "/")
		if err != nil || len(cps) != 0 {
			t.Errorf("ListCommonPrefixes(%q) = %q, %v; want nothing", prefix, cps, err)
		}
	}
}

func TestReaderNeverSeesPartialObject(t *testing.T) {
	s, root, bucket := newStore(t)
	ctx := t.Context()
	if err := s.PutObject(ctx, bucket, "obj/replaced", strings.NewReader("old")); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"new/obj", "obj/replaced"} {
		pr, pw := io.Pipe()
		done := make(chan error, 1)
		go func() { done <- s.PutObject(ctx, bucket, key, pr) }()
		if _, err := pw.Write([]byte("first half, ")); err != nil {
			t.Fatal(err)
		}
		// The pipe write returned, so the upload is mid-way: its bytes sit
		// in a temporary file.
		if tmps := tempFiles(t, root); len(tmps) != 1 {
			t.Fatalf("temporary files during upload = %q, want one", tmps)
		}
		switch key {
		case "new/obj":
			if ok, err := s.ObjectExists(ctx, bucket, key); err != nil || ok {
				t.Errorf("ObjectExists(%q) mid-upload = %v, %v; want false", key, ok, err)
			}
			if _, err := s.GetObject(ctx, bucket, key); !errors.Is(err, storage.ErrNotFound) {
				t.Errorf("GetObject(%q) mid-upload error = %v, want ErrNotFound", key, err)
			}
			if cps, err := s.ListCommonPrefixes(ctx, bucket, "", "/"); err != nil || len(cps) != 1 || cps[0] != "obj/" {
				t.Errorf("ListCommonPrefixes mid-upload = %q, %v; want only obj/ (new/ holds no object yet)", cps, err)
			}
		case "obj/replaced":
			if got := readAll(t, s, bucket, key); got != "old" {
				t.Errorf("GetObject(%q) mid-upload = %q, want the old content", key, got)
			}
		}
		if keys, err := s.ListObjects(ctx, bucket, ""); err != nil || strings.Contains(strings.Join(keys, ","), tempPrefix) {
			t.Errorf("ListObjects mid-upload = %q, %v; want no temporary files", keys, err)
		}
		if _, err := pw.Write([]byte("second half")); err != nil {
			t.Fatal(err)
		}
		pw.Close()
		if err := <-done; err != nil {
			t.Fatalf("PutObject(%q): %v", key, err)
		}
		if got := readAll(t, s, bucket, key); got != "first half, second half" {
			t.Errorf("GetObject(%q) = %q after upload", key, got)
		}
	}
	if tmps := tempFiles(t, root); len(tmps) != 0 {
		t.Errorf("temporary files left = %q", tmps)
	}
}

type failingReader struct{ n int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, errors.New("disk on fire")
	}
	r.n--
	return copy(p, "some bytes"), nil
}

func TestFailedPutLeavesNothing(t *testing.T) {
	s, root, bucket := newStore(t)
	err := s.PutObject(t.Context(), bucket, "a/b/c", &failingReader{n: 3})
	if err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("PutObject error = %v, want the reader's error", err)
	}
	entries, err := os.ReadDir(filepath.Join(root, bucket))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("bucket holds %v after a failed put, want nothing (no temporary file, no empty directory)", entries)
	}
}

func TestKeyConflict(t *testing.T) {
	s, _, bucket := newStore(t)
	ctx := t.Context()
	if err := s.PutObject(ctx, bucket, "a", strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutObject(ctx, bucket, "a/b", strings.NewReader("x")); err == nil || !strings.Contains(err.Error(), "conflicts") {
		t.Errorf("PutObject(a/b) over object a: error = %v, want a key conflict", err)
	}
	if err := s.PutObject(ctx, bucket, "c/d", strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutObject(ctx, bucket, "c", strings.NewReader("x")); err == nil || !strings.Contains(err.Error(), "conflicts") {
		t.Errorf("PutObject(c) over prefix c/: error = %v, want a key conflict", err)
	}
	if got := readAll(t, s, bucket, "a"); got != "x" {
		t.Errorf("object a = %q after the refused put", got)
	}
}

func TestSignedURLIsFileURL(t *testing.T) {
	s, root, bucket := newStore(t)
	got, err := s.CreateSignedURL(t.Context(), bucket, "a/b c.txt", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if want := "file://" + filepath.ToSlash(root) + "/bucket/a/b%20c.txt"; got != want {
		t.Errorf("CreateSignedURL = %q, want %q", got, want)
	}
}

func readAll(t *testing.T, s *Store, bucket, key string) string {
	t.Helper()
	rc, err := s.GetObject(t.Context(), bucket, key)
	if err != nil {
		t.Fatalf("GetObject(%q): %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func tempFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), tempPrefix) {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestDeletePrunesEmptyDirectories(t *testing.T) {
	s, root, bucket := newStore(t)
	ctx := t.Context()
	for _, k := range []string{"backups/b1/deep/x", "backups/b1/y", "backups/b2/z"} {
		if err := s.PutObject(ctx, bucket, k, strings.NewReader("x")); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"backups/b1/deep/x", "backups/b1/y"} {
		if err := s.DeleteObject(ctx, bucket, k); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(root, bucket, "backups", "b1")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("directory of deleted backup b1: stat error = %v, want it gone", err)
	}
	if _, err := os.Stat(filepath.Join(root, bucket, "backups", "b2", "z")); err != nil {
		t.Errorf("b2/z: %v", err)
	}
	if err := s.DeleteObject(ctx, bucket, "backups/b2/z"); err != nil {
		t.Fatal(err)
	}
	// The bucket itself stays, as an S3 bucket would.
	entries, err := os.ReadDir(filepath.Join(root, bucket))
	if err != nil || len(entries) != 0 {
		t.Errorf("bucket after deleting everything: %v, %v; want an empty directory", entries, err)
	}
}

func TestUnfinishedUploads(t *testing.T) {
	storagetest.RunUnfinishedUploads(t, func(t *testing.T) (storage.ObjectStore, string) {
		s, _, bucket := newStore(t)
		return s, bucket
	})
}

// A process killed in PutObject leaves its temporary file, which nothing
// lists and DeleteObject cannot name. RemoveUnfinishedUploads finds those
// under a prefix, only those, and prunes the directories they leave empty.
func TestRemoveUnfinishedUploadsLeftByAKilledWriter(t *testing.T) {
	s, root, bucket := newStore(t)
	ctx := t.Context()
	bdir := filepath.Join(root, bucket)
	plant := func(rel string) {
		t.Helper()
		p := filepath.Join(bdir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("half an object"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// b holds nothing but an upload (a backup killed while writing its
	// first file), in two directories; bc holds an upload and an object;
	// the one in backups/ itself could be for any backup's name.
	for _, rel := range []string{
		"p/backups/b/" + tempPrefix + "1", "p/backups/b/deep/" + tempPrefix + "2",
		"p/backups/bc/" + tempPrefix + "3", "p/backups/" + tempPrefix + "4",
	} {
		plant(rel)
	}
	if err := s.PutObject(ctx, bucket, "p/backups/bc/velero-backup.json", strings.NewReader("{}")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutObject(ctx, bucket, "p/backups/bc/x", strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	// Not a regular file: never ours to remove.
	outside := filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(outside, []byte("someone else's"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(bdir, "p", "backups", "bc", tempPrefix+"link")); err != nil {
		t.Fatal(err)
	}

	if got, err := s.ListObjects(ctx, bucket, "p/backups/b/"); err != nil || len(got) != 0 {
		t.Errorf("ListObjects(p/backups/b/) = %q, %v; an unfinished upload is no object", got, err)
	}
	got, err := s.RemoveUnfinishedUploads(ctx, bucket, "p/backups/b/")
	want := []string{"p/backups/b/" + tempPrefix + "1", "p/backups/b/deep/" + tempPrefix + "2"}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("RemoveUnfinishedUploads(p/backups/b/) = %q, %v; want %q", got, err, want)
	}
	if _, err := os.Stat(filepath.Join(bdir, "p", "backups", "b")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("backups/b/ after its uploads were removed: stat error %v, want it gone", err)
	}

	// Without the slash, backups/bc/ is under the prefix but backups/
	// itself is not: its temporary file may be for backups/c.
	got, err = s.RemoveUnfinishedUploads(ctx, bucket, "p/backups/b")
	if want := []string{"p/backups/bc/" + tempPrefix + "3"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("RemoveUnfinishedUploads(p/backups/b) = %q, %v; want %q", got, err, want)
	}
	if got, err := s.ListUnfinishedUploads(ctx, bucket, ""); err != nil || !slices.Equal(got, []string{"p/backups/" + tempPrefix + "4"}) {
		t.Errorf("ListUnfinishedUploads(\"\") = %q, %v; want only the one in backups/", got, err)
	}
	if _, err := os.Stat(outside); err != nil {
		t.Errorf("the symlink's target: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(bdir, "p", "backups", "bc", tempPrefix+"link")); err != nil {
		t.Errorf("a symlink named like a temporary file was removed: %v", err)
	}
	if keys, err := s.ListObjects(ctx, bucket, ""); err != nil || !slices.Equal(keys, []string{"p/backups/bc/velero-backup.json", "p/backups/bc/x"}) {
		t.Errorf("objects after the removals = %q, %v; want them untouched", keys, err)
	}
	// A prefix no key can start with finds nothing, and is no error.
	if got, err := s.RemoveUnfinishedUploads(ctx, bucket, "p/../x/"); err != nil || len(got) != 0 {
		t.Errorf("RemoveUnfinishedUploads(p/../x/) = %q, %v", got, err)
	}
}

package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func newStore(t *testing.T) (*dirStore, string) {
	t.Helper()
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "bucket"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := &dirStore{}
	if err := s.Init(map[string]string{"root": root, "bucket": "bucket", "prefix": "p"}); err != nil {
		t.Fatal(err)
	}
	return s, root
}

func TestInitRefusesBadConfig(t *testing.T) {
	for _, cfg := range []map[string]string{
		{},
		{"root": "relative/dir"},
		{"root": "/does/not/exist"},
		{"root": t.TempDir(), "rooot": "typo"},
	} {
		if err := (&dirStore{}).Init(cfg); err == nil {
			t.Errorf("Init(%v) succeeded", cfg)
		}
	}
}

// Keys and buckets that could name a file outside the bucket are refused
// before any file is touched.
func TestRefusesKeysEscapingTheRoot(t *testing.T) {
	s, root := newStore(t)
	outside := filepath.Join(filepath.Dir(root), "outside-"+filepath.Base(root))
	t.Cleanup(func() { os.RemoveAll(outside) })
	for _, key := range []string{
		"../x", "a/../../x", "..", ".", "a/./b", "/abs", "a//b", "a/", "",
		".dirstore-tmp-123", "a/.dirstore-tmp-x/b", "nul\x00byte",
	} {
		if err := s.PutObject("bucket", key, strings.NewReader("x")); err == nil {
			t.Errorf("PutObject(%q) succeeded", key)
		}
		if _, err := s.GetObject("bucket", key); err == nil {
			t.Errorf("GetObject(%q) succeeded", key)
		}
		if err := s.DeleteObject("bucket", key); err == nil {
			t.Errorf("DeleteObject(%q) succeeded", key)
		}
	}
	for _, bucket := range []string{"..", ".", "a/b", "", `a\b`} {
		if err := s.PutObject(bucket, "k", strings.NewReader("x")); err == nil {
			t.Errorf("PutObject into bucket %q succeeded", bucket)
		}
		if _, err := s.ListObjects(bucket, ""); err == nil {
			t.Errorf("ListObjects of bucket %q succeeded", bucket)
		}
	}
	if _, err := os.Stat(outside); err == nil {
		t.Errorf("something was written outside the root")
	}
}

// A symlink planted in the bucket cannot lead out of the root: os.Root
// refuses to follow it.
func TestSymlinkOutOfTheRootIsRefused(t *testing.T) {
	s, root := newStore(t)
	elsewhere := t.TempDir()
	if err := os.WriteFile(filepath.Join(elsewhere, "secret"), []byte("s3cr3t"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(root, "bucket", "link")); err != nil {
		t.Fatal(err)
	}
	if rc, err := s.GetObject("bucket", "link/secret"); err == nil {
		b, _ := io.ReadAll(rc)
		rc.Close()
		t.Errorf("read %q through a symlink out of the root", b)
	}
	if err := s.PutObject("bucket", "link/planted", strings.NewReader("x")); err == nil {
		t.Errorf("wrote through a symlink out of the root")
	}
	if _, err := os.Stat(filepath.Join(elsewhere, "planted")); err == nil {
		t.Errorf("a file was planted outside the root")
	}
}

func TestSignedURLIsAFileURL(t *testing.T) {
	s, root := newStore(t)
	if err := s.PutObject("bucket", "dir/with space", strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	u, err := s.CreateSignedURL("bucket", "dir/with space", 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := "file://" + filepath.Join(root, "bucket", "dir") + "/with%20space"; u != want {
		t.Errorf("CreateSignedURL = %q, want %q", u, want)
	}
}

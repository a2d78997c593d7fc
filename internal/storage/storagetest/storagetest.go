// Package storagetest is a conformance suite for storage.ObjectStore: every
// store must give the answers S3 gives for the same keys, because the backup
// layout code is written against S3's behaviour.
package storagetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lifeboat-io/lifeboat/internal/storage"
)

// NewStore returns a store and the name of an existing, empty bucket in it
// that no other test uses.
type NewStore func(t *testing.T) (storage.ObjectStore, string)

// Run runs the suite; each subtest gets its own bucket.
func Run(t *testing.T, newStore NewStore) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s storage.ObjectStore, bucket string)
	}{
		{"PutGet", testPutGet},
		{"EmptyObject", testEmptyObject},
		{"GetMissing", testGetMissing},
		{"ObjectExists", testObjectExists},
		{"ListObjects", testListObjects},
		{"ListCommonPrefixes", testListCommonPrefixes},
		{"ListCommonPrefixesOtherDelimiter", testListCommonPrefixesOtherDelimiter},
		{"Delete", testDelete},
		{"DeleteLastKeyRemovesPrefix", testDeleteLastKeyRemovesPrefix},
		{"MissingBucket", testMissingBucket},
		{"StreamLargeObject", testStreamLargeObject},
		{"CancelledPut", testCancelledPut},
		{"SignedURL", testSignedURL},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, bucket := newStore(t)
			tc.fn(t, s, bucket)
		})
	}
}

func put(t *testing.T, s storage.ObjectStore, bucket, key, content string) {
	t.Helper()
	if err := s.PutObject(t.Context(), bucket, key, strings.NewReader(content)); err != nil {
		t.Fatalf("PutObject(%q): %v", key, err)
	}
}

func get(t *testing.T, s storage.ObjectStore, bucket, key string) string {
	t.Helper()
	rc, err := s.GetObject(t.Context(), bucket, key)
	if err != nil {
		t.Fatalf("GetObject(%q): %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %q: %v", key, err)
	}
	return string(b)
}

func exists(t *testing.T, s storage.ObjectStore, bucket, key string) bool {
	t.Helper()
	ok, err := s.ObjectExists(t.Context(), bucket, key)
	if err != nil {
		t.Fatalf("ObjectExists(%q): %v", key, err)
	}
	return ok
}

func putAll(t *testing.T, s storage.ObjectStore, bucket string, keys ...string) {
	t.Helper()
	for _, k := range keys {
		put(t, s, bucket, k, "content of "+k)
	}
}

// sameList compares listings treating nil and empty alike: callers only
// range over them.
func sameList(got, want []string) bool {
	return len(got) == len(want) && (len(got) == 0 || slices.Equal(got, want))
}

func testPutGet(t *testing.T, s storage.ObjectStore, bucket string) {
	put(t, s, bucket, "a/b.json", "hello")
	if got := get(t, s, bucket, "a/b.json"); got != "hello" {
		t.Errorf("GetObject after put = %q, want %q", got, "hello")
	}
	put(t, s, bucket, "a/b.json", "replaced")
	if got := get(t, s, bucket, "a/b.json"); got != "replaced" {
		t.Errorf("GetObject after overwrite = %q, want %q", got, "replaced")
	}
	put(t, s, bucket, "top-level", "x")
	if got := get(t, s, bucket, "top-level"); got != "x" {
		t.Errorf("GetObject(top-level) = %q, want %q", got, "x")
	}
}

func testEmptyObject(t *testing.T, s storage.ObjectStore, bucket string) {
	put(t, s, bucket, "empty", "")
	if !exists(t, s, bucket, "empty") {
		t.Errorf("ObjectExists(empty) = false after putting an empty object")
	}
	if got := get(t, s, bucket, "empty"); got != "" {
		t.Errorf("GetObject(empty) = %q, want empty", got)
	}
}

func testGetMissing(t *testing.T, s storage.ObjectStore, bucket string) {
	put(t, s, bucket, "dir/x", "x")
	for _, key := range []string{"missing", "dir/missing", "dir", "dir/x/deeper"} {
		rc, err := s.GetObject(t.Context(), bucket, key)
		if err == nil {
			rc.Close()
			t.Errorf("GetObject(%q) succeeded, want an error wrapping ErrNotFound", key)
			continue
		}
		if !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("GetObject(%q) error = %v, want one wrapping ErrNotFound", key, err)
		}
	}
}

func testObjectExists(t *testing.T, s storage.ObjectStore, bucket string) {
	put(t, s, bucket, "dir/x", "x")
	for key, want := range map[string]bool{
		"dir/x":   true,
		"dir":     false, // a prefix is not an object
		"dir/y":   false,
		"nothing": false,
		"dir/x/y": false,
	} {
		if got := exists(t, s, bucket, key); got != want {
			t.Errorf("ObjectExists(%q) = %v, want %v", key, got, want)
		}
	}
}

func testListObjects(t *testing.T, s storage.ObjectStore, bucket string) {
	putAll(t, s, bucket, "b", "a/c/e", "ab", "a/b", "a-c", "a/c/d")
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		// Bytewise order over whole keys: '-' (0x2d) sorts before '/'.
		{"", []string{"a-c", "a/b", "a/c/d", "a/c/e", "ab", "b"}},
		{"a", []string{"a-c", "a/b", "a/c/d", "a/c/e", "ab"}},
		{"a/", []string{"a/b", "a/c/d", "a/c/e"}},
		{"a/c", []string{"a/c/d", "a/c/e"}},
		{"a/c/", []string{"a/c/d", "a/c/e"}},
		{"a/c/d", []string{"a/c/d"}},
		{"a/x/", nil},
		{"zzz", nil},
	} {
		got, err := s.ListObjects(t.Context(), bucket, tc.prefix)
		if err != nil {
			t.Fatalf("ListObjects(%q): %v", tc.prefix, err)
		}
		if !sameList(got, tc.want) {
			t.Errorf("ListObjects(%q) = %q, want %q", tc.prefix, got, tc.want)
		}
	}
}

func testListCommonPrefixes(t *testing.T, s storage.ObjectStore, bucket string) {
	putAll(t, s, bucket,
		"top-file",
		"backups/b1/velero-backup.json", "backups/b1/b1.tar.gz",
		"backups/b10/x",
		"backups/b2/y/z",
		"backups/loose-file",
		"p/x/k", "p/x-y/k",
	)
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"", []string{"backups/", "p/"}},
		{"backups/", []string{"backups/b1/", "backups/b10/", "backups/b2/"}},
		{"backups/b1", []string{"backups/b1/", "backups/b10/"}},
		{"backups/b1/", nil},
		{"backups/b2/", []string{"backups/b2/y/"}},
		{"p/", []string{"p/x-y/", "p/x/"}},
		{"nothing/", nil},
	} {
		got, err := s.ListCommonPrefixes(t.Context(), bucket, tc.prefix, "/")
		if err != nil {
			t.Fatalf("ListCommonPrefixes(%q, /): %v", tc.prefix, err)
		}
		if !sameList(got, tc.want) {
			t.Errorf("ListCommonPrefixes(%q, /) = %q, want %q", tc.prefix, got, tc.want)
		}
	}
}

func testListCommonPrefixesOtherDelimiter(t *testing.T, s storage.ObjectStore, bucket string) {
	putAll(t, s, bucket, "r/b1-logs.gz", "r/b1-results.gz", "r/b2-logs.gz", "r/b3", "r/sub/c-d")
	for _, tc := range []struct {
		prefix, delim string
		want          []string
	}{
		{"r/", "-", []string{"r/b1-", "r/b2-", "r/sub/c-"}},
		{"r/b1", "-", []string{"r/b1-"}},
		{"r/b1-", ".", []string{"r/b1-logs.", "r/b1-results."}},
		{"r/", "", nil},
	} {
		got, err := s.ListCommonPrefixes(t.Context(), bucket, tc.prefix, tc.delim)
		if err != nil {
			t.Fatalf("ListCommonPrefixes(%q, %q): %v", tc.prefix, tc.delim, err)
		}
		if !sameList(got, tc.want) {
			t.Errorf("ListCommonPrefixes(%q, %q) = %q, want %q", tc.prefix, tc.delim, got, tc.want)
		}
	}
}

func testDelete(t *testing.T, s storage.ObjectStore, bucket string) {
	putAll(t, s, bucket, "d/one", "d/two")
	if err := s.DeleteObject(t.Context(), bucket, "d/one"); err != nil {
		t.Fatalf("DeleteObject(d/one): %v", err)
	}
	if exists(t, s, bucket, "d/one") {
		t.Errorf("ObjectExists(d/one) = true after delete")
	}
	if _, err := s.GetObject(t.Context(), bucket, "d/one"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("GetObject(d/one) after delete: error = %v, want ErrNotFound", err)
	}
	if got := get(t, s, bucket, "d/two"); got != "content of d/two" {
		t.Errorf("GetObject(d/two) = %q after deleting its sibling", got)
	}
	for _, key := range []string{"d/one", "never/existed", "d"} {
		if err := s.DeleteObject(t.Context(), bucket, key); err != nil {
			t.Errorf("DeleteObject(%q) of a missing key: %v, want nil", key, err)
		}
	}
	if !exists(t, s, bucket, "d/two") {
		t.Errorf("deleting prefix %q removed object d/two", "d")
	}
}

// S3 has no directories: once the last key under a prefix is gone, the
// prefix is gone too, and a store that keeps empty directories must not
// report them.
func testDeleteLastKeyRemovesPrefix(t *testing.T, s storage.ObjectStore, bucket string) {
	putAll(t, s, bucket, "keep/x", "gone/deep/er/x", "gone/y")
	for _, k := range []string{"gone/deep/er/x", "gone/y"} {
		if err := s.DeleteObject(t.Context(), bucket, k); err != nil {
			t.Fatalf("DeleteObject(%q): %v", k, err)
		}
	}
	got, err := s.ListCommonPrefixes(t.Context(), bucket, "", "/")
	if err != nil {
		t.Fatalf("ListCommonPrefixes: %v", err)
	}
	if want := []string{"keep/"}; !sameList(got, want) {
		t.Errorf("ListCommonPrefixes after deleting gone/* = %q, want %q", got, want)
	}
	keys, err := s.ListObjects(t.Context(), bucket, "gone/")
	if err != nil {
		t.Fatalf("ListObjects: %v", err)
	}
	if len(keys) != 0 {
		t.Errorf("ListObjects(gone/) = %q, want none", keys)
	}
	// The prefix can be written again.
	put(t, s, bucket, "gone/deep/again", "z")
	if got := get(t, s, bucket, "gone/deep/again"); got != "z" {
		t.Errorf("GetObject(gone/deep/again) = %q, want z", got)
	}
}

func testMissingBucket(t *testing.T, s storage.ObjectStore, bucket string) {
	missing := bucket + "-missing"
	ctx := t.Context()
	if _, err := s.ListCommonPrefixes(ctx, missing, "", "/"); err == nil {
		t.Errorf("ListCommonPrefixes on a missing bucket succeeded, want an error")
	}
	if _, err := s.ListObjects(ctx, missing, ""); err == nil {
		t.Errorf("ListObjects on a missing bucket succeeded, want an error")
	}
	if err := s.PutObject(ctx, missing, "k", strings.NewReader("x")); err == nil {
		t.Errorf("PutObject into a missing bucket succeeded, want an error")
	}
}

// largeSize is above the S3 store's 16 MiB multipart threshold, so S3 stores
// go through a multipart upload.
const largeSize = 24<<20 + 12345

// testStreamLargeObject feeds PutObject a reader that cannot seek, so a
// store cannot learn the size up front, and checks every byte on the way
// back.
func testStreamLargeObject(t *testing.T, s storage.ObjectStore, bucket string) {
	src := io.LimitReader(rand.NewChaCha8([32]byte{1, 2, 3}), largeSize)
	wantHash := sha256.New()
	if err := s.PutObject(t.Context(), bucket, "big/object.tar.gz", struct{ io.Reader }{io.TeeReader(src, wantHash)}); err != nil {
		t.Fatalf("PutObject: %v", err)
	}
	rc, err := s.GetObject(t.Context(), bucket, "big/object.tar.gz")
	if err != nil {
		t.Fatalf("GetObject: %v", err)
	}
	defer rc.Close()
	gotHash := sha256.New()
	n, err := io.Copy(gotHash, rc)
	if err != nil {
		t.Fatalf("read back: %v", err)
	}
	if n != largeSize {
		t.Errorf("read back %d bytes, want %d", n, largeSize)
	}
	if !bytes.Equal(gotHash.Sum(nil), wantHash.Sum(nil)) {
		t.Errorf("content read back differs from what was written")
	}
}

// cancelAfter cancels its context once n bytes have been read, like a
// caller giving up halfway through an upload.
type cancelAfter struct {
	r      io.Reader
	n      int64
	cancel context.CancelFunc
}

func (c *cancelAfter) Read(p []byte) (int, error) {
	if c.n <= 0 {
		c.cancel()
	}
	n, err := c.r.Read(p)
	c.n -= int64(n)
	return n, err
}

func testCancelledPut(t *testing.T, s storage.ObjectStore, bucket string) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.PutObject(ctx, bucket, "cancelled/before", strings.NewReader("x")); err == nil {
		t.Errorf("PutObject with a cancelled context succeeded")
	}
	ctx, cancel = context.WithCancel(t.Context())
	defer cancel()
	body := &cancelAfter{r: io.LimitReader(rand.NewChaCha8([32]byte{4}), 20<<20), n: 1 << 20, cancel: cancel}
	if err := s.PutObject(ctx, bucket, "cancelled/during", body); err == nil {
		t.Errorf("PutObject whose context was cancelled mid-stream succeeded")
	}
	for _, k := range []string{"cancelled/before", "cancelled/during"} {
		if exists(t, s, bucket, k) {
			t.Errorf("ObjectExists(%q) = true after a cancelled put", k)
		}
	}
	keys, err := s.ListObjects(t.Context(), bucket, "")
	if err != nil {
		t.Fatalf("ListObjects: %v", err)
	}
	if len(keys) != 0 {
		t.Errorf("cancelled puts left keys %q", keys)
	}
}

func testSignedURL(t *testing.T, s storage.ObjectStore, bucket string) {
	key := "signed/dir with space/ünï+code.txt"
	put(t, s, bucket, key, "signed content")
	raw, err := s.CreateSignedURL(t.Context(), bucket, key, time.Minute)
	if err != nil {
		t.Fatalf("CreateSignedURL: %v", err)
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("CreateSignedURL returned %q: %v", raw, err)
	}
	var got []byte
	switch u.Scheme {
	case "file":
		got, err = os.ReadFile(u.Path)
		if err != nil {
			t.Fatalf("read %s: %v", raw, err)
		}
	case "http", "https":
		// No credentials here: the URL alone must be enough.
		resp, err := http.Get(raw)
		if err != nil {
			t.Fatalf("GET %s: %v", raw, err)
		}
		defer resp.Body.Close()
		got, err = io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("read %s: %v", raw, err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s: %s", raw, resp.Status, got)
		}
	default:
		t.Fatalf("CreateSignedURL returned %q, want a file, http or https URL", raw)
	}
	if string(got) != "signed content" {
		t.Errorf("content behind the signed URL = %q, want %q", got, "signed content")
	}
}

// RunUnfinishedUploads checks a store's storage.UnfinishedUploads with
// uploads in flight, which a store cannot tell from those of a process that
// died mid-write: only those under the prefix are found and removed, the
// others and every finished object stay.
func RunUnfinishedUploads(t *testing.T, newStore NewStore) {
	s, bucket := newStore(t)
	uu, ok := s.(storage.UnfinishedUploads)
	if !ok {
		t.Fatalf("%T does not implement storage.UnfinishedUploads", s)
	}
	ctx := t.Context()
	putAll(t, s, bucket, "backups/a/velero-backup.json", "backups/ab/velero-backup.json")
	if got, err := uu.ListUnfinishedUploads(ctx, bucket, ""); err != nil || len(got) != 0 {
		t.Fatalf("ListUnfinishedUploads with only finished objects = %q, %v; want nothing", got, err)
	}
	// "backups/a" is a prefix of "backups/ab" but "backups/a/" is not.
	a := startUpload(t, s, bucket, "backups/a/a.tar.gz")
	ab := startUpload(t, s, bucket, "backups/ab/ab.tar.gz")
	var all []string
	deadline := time.Now().Add(time.Minute)
	for len(all) < 2 && time.Now().Before(deadline) {
		var err error
		if all, err = uu.ListUnfinishedUploads(ctx, bucket, "backups/"); err != nil {
			t.Fatalf("ListUnfinishedUploads: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(all) != 2 || !strings.HasPrefix(all[0], "backups/a/") || !strings.HasPrefix(all[1], "backups/ab/") {
		t.Fatalf("ListUnfinishedUploads(backups/) with two uploads in flight = %q; want one under backups/a/, one under backups/ab/", all)
	}
	if got, err := uu.ListUnfinishedUploads(ctx, bucket, "backups/a/"); err != nil || !slices.Equal(got, all[:1]) {
		t.Errorf("ListUnfinishedUploads(backups/a/) = %q, %v; want %q", got, err, all[:1])
	}

	removed, err := uu.RemoveUnfinishedUploads(ctx, bucket, "backups/a/")
	if err != nil || !slices.Equal(removed, all[:1]) {
		t.Fatalf("RemoveUnfinishedUploads(backups/a/) = %q, %v; want %q", removed, err, all[:1])
	}
	if got, err := uu.ListUnfinishedUploads(ctx, bucket, "backups/"); err != nil || !slices.Equal(got, all[1:]) {
		t.Errorf("after the removal, ListUnfinishedUploads(backups/) = %q, %v; want only %q", got, err, all[1:])
	}
	if err := a.end(errors.New("writer gone")); err == nil {
		t.Errorf("the removed upload of backups/a/a.tar.gz still succeeded")
	}
	if err := ab.end(nil); err != nil {
		t.Errorf("the upload under backups/ab/, not removed, failed: %v", err)
	}
	if got, err := s.ListObjects(ctx, bucket, "backups/"); err != nil ||
		!slices.Equal(got, []string{"backups/a/velero-backup.json", "backups/ab/ab.tar.gz", "backups/ab/velero-backup.json"}) {
		t.Errorf("ListObjects(backups/) = %q, %v; want both finished objects and the finished upload", got, err)
	}
	for _, prefix := range []string{"", "backups/a/"} {
		if got, err := uu.ListUnfinishedUploads(ctx, bucket, prefix); err != nil || len(got) != 0 {
			t.Errorf("ListUnfinishedUploads(%q) at the end = %q, %v; want nothing", prefix, got, err)
		}
		if got, err := uu.RemoveUnfinishedUploads(ctx, bucket, prefix); err != nil || len(got) != 0 {
			t.Errorf("RemoveUnfinishedUploads(%q) with nothing to remove = %q, %v", prefix, got, err)
		}
	}
}

// upload is a PutObject in flight, fed through a pipe.
type upload struct {
	w    *io.PipeWriter
	fed  chan error
	done chan error
}

// startUpload starts a PutObject of key and feeds it more than one part of
// an S3 multipart upload, so that every store has begun storing it; the
// upload then waits for end.
func startUpload(t *testing.T, s storage.ObjectStore, bucket, key string) *upload {
	t.Helper()
	pr, pw := io.Pipe()
	u := &upload{w: pw, fed: make(chan error, 1), done: make(chan error, 1)}
	go func() { u.done <- s.PutObject(context.WithoutCancel(t.Context()), bucket, key, pr) }()
	go func() {
		_, err := io.Copy(pw, io.LimitReader(rand.NewChaCha8([32]byte{5}), 17<<20))
		u.fed <- err
	}()
	t.Cleanup(func() { pw.CloseWithError(errors.New("test ended")) })
	return u
}

// end ends the upload's body, normally (err nil) or with err, and returns
// what PutObject returned.
func (u *upload) end(err error) error {
	if err == nil {
		if ferr := <-u.fed; ferr != nil {
			return fmt.Errorf("feeding the upload: %w", ferr)
		}
		u.w.Close()
	} else {
		u.w.CloseWithError(err)
	}
	select {
	case err := <-u.done:
		return err
	case <-time.After(time.Minute):
		return errors.New("PutObject did not return within a minute of its body ending")
	}
}

package main

// This file exists twice, byte for byte: as examples/plugins/dirstore/store.go,
// served by the example plugin through Lifeboat's SDK, and as
// test/compat/dirstore.go, served by a plugin built with Velero's SDK. That
// module cannot import Lifeboat's (the two SDKs register the same proto
// names), and the store needs nothing but the standard library and has the
// method set of both SDKs' ObjectStore, so one text serves both. Edit the
// example's copy and copy it over: TestCompatPluginHoldsTheSameStore fails
// while the two differ.

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// RootKey is the config key naming the directory that holds the buckets.
const RootKey = "root"

// tempPrefix starts the name of a file still being written. Listings skip
// such files and keys may not use the prefix, so an upload in flight is
// never mistaken for an object.
const tempPrefix = ".dirstore-tmp-"

// allowedKeys are the config keys Init accepts: root, plus the keys the
// server adds to every ObjectStore's config. Anything else is a typo that
// must not be silently ignored.
var allowedKeys = []string{RootKey, "bucket", "prefix", "credentialsFile"}

// dirStore keeps object <bucket>/<key> in the file <root>/<bucket>/<key>.
// Every file access goes through an os.Root, which refuses paths that
// leave the root, symlinks included; keys are also checked up front so
// the error says what is wrong with the key.
type dirStore struct {
	dir  string   // absolute root directory
	root *os.Root // opened once by Init
}

func (s *dirStore) Init(config map[string]string) error {
	var unknown []string
	for k := range config {
		if !slices.Contains(allowedKeys, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return fmt.Errorf("unknown config keys %q (allowed: %q)", unknown, allowedKeys)
	}
	dir := config[RootKey]
	if dir == "" || !filepath.IsAbs(dir) {
		return fmt.Errorf("config key %q must be an absolute directory, got %q", RootKey, dir)
	}
	root, err := os.OpenRoot(filepath.Clean(dir))
	if err != nil {
		return fmt.Errorf("config key %q: %w", RootKey, err)
	}
	if s.root != nil {
		s.root.Close()
	}
	s.dir, s.root = filepath.Clean(dir), root
	return nil
}

// objectPath checks bucket and key and returns the object's path relative
// to the root.
func (s *dirStore) objectPath(bucket, key string) (string, error) {
	if s.root == nil {
		return "", errors.New("object store not initialized")
	}
	if err := checkBucket(bucket); err != nil {
		return "", err
	}
	if key == "" {
		return "", errors.New("empty key")
	}
	if err := checkSegments(key, false); err != nil {
		return "", fmt.Errorf("key %q: %w", key, err)
	}
	return bucket + "/" + key, nil
}

func checkBucket(bucket string) error {
	if bucket == "" || bucket == "." || bucket == ".." || strings.ContainsAny(bucket, `/\`) {
		return fmt.Errorf("bucket %q must be a single directory name", bucket)
	}
	return nil
}

// checkSegments refuses keys (or prefixes, whose last segment may be empty)
// that could name something outside the bucket or a file in flight.
func checkSegments(key string, prefix bool) error {
	segs := strings.Split(key, "/")
	for i, seg := range segs {
		switch {
		case seg == "" && prefix && i == len(segs)-1:
		case seg == "":
			return errors.New("empty path segment (leading, trailing or double /)")
		case seg == "." || seg == "..":
			return fmt.Errorf("%q segment would leave the bucket", seg)
		case strings.HasPrefix(seg, tempPrefix):
			return fmt.Errorf("segments may not start with %q", tempPrefix)
		case strings.ContainsRune(seg, 0):
			return errors.New("NUL byte")
		}
	}
	return nil
}

// bucketExists makes a missing bucket an error, as it is in S3, instead of
// silently creating a directory a typo pointed at.
func (s *dirStore) bucketExists(bucket string) error {
	fi, err := s.root.Stat(bucket)
	if err != nil {
		return fmt.Errorf("bucket %q: %w", bucket, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("bucket %q is not a directory", bucket)
	}
	return nil
}

// PutObject writes the body to a temporary file next to the object and
// renames it into place, so a reader sees the old object or the whole new
// one, never a part. A body that fails midway (the upload was cancelled)
// leaves nothing behind.
func (s *dirStore) PutObject(bucket, key string, body io.Reader) error {
	p, err := s.objectPath(bucket, key)
	if err != nil {
		return err
	}
	if err := s.bucketExists(bucket); err != nil {
		return err
	}
	dir := path.Dir(p)
	var f *os.File
	var tmp string
	// DeleteObject removes directories that became empty, and may do so
	// between MkdirAll and OpenFile here: try again a few times.
	for attempt := 0; ; attempt++ {
		if err := s.root.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("put %s/%s: %w", bucket, key, err)
		}
		tmp = dir + "/" + tempPrefix + randomSuffix()
		f, err = s.root.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) || attempt == 3 {
			return fmt.Errorf("put %s/%s: %w", bucket, key, err)
		}
	}
	committed := false
	defer func() {
		if !committed {
			f.Close()
			s.root.Remove(tmp)
			s.removeEmptyParents(bucket, tmp)
		}
	}()
	if _, err := io.Copy(f, body); err != nil {
		return fmt.Errorf("put %s/%s: %w", bucket, key, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("put %s/%s: %w", bucket, key, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("put %s/%s: %w", bucket, key, err)
	}
	if err := s.root.Rename(tmp, p); err != nil {
		return fmt.Errorf("put %s/%s: %w", bucket, key, err)
	}
	committed = true
	return nil
}

func randomSuffix() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// notThere is true for errors that mean "no such object": the file is
// missing, or a parent of it is a file (key "a/b" when "a" is an object).
func notThere(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

func (s *dirStore) ObjectExists(bucket, key string) (bool, error) {
	p, err := s.objectPath(bucket, key)
	if err != nil {
		return false, err
	}
	fi, err := s.root.Stat(p)
	if notThere(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	// A directory is a prefix, not an object.
	return fi.Mode().IsRegular(), nil
}

func (s *dirStore) GetObject(bucket, key string) (io.ReadCloser, error) {
	p, err := s.objectPath(bucket, key)
	if err != nil {
		return nil, err
	}
	f, err := s.root.Open(p)
	if notThere(err) {
		return nil, fmt.Errorf("object %s/%s not found", bucket, key)
	}
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("object %s/%s not found", bucket, key)
	}
	return f, nil
}

// ListObjects returns every key that starts with prefix, at any depth,
// sorted bytewise as S3 sorts them.
func (s *dirStore) ListObjects(bucket, prefix string) ([]string, error) {
	if s.root == nil {
		return nil, errors.New("object store not initialized")
	}
	if err := checkBucket(bucket); err != nil {
		return nil, err
	}
	if err := s.bucketExists(bucket); err != nil {
		return nil, err
	}
	if prefix != "" {
		if err := checkSegments(prefix, true); err != nil {
			// A prefix that no valid key can have matches nothing.
			return nil, nil
		}
	}
	// Walk only the directory the prefix is in: "a/b/c" and "a/b/" both
	// start at "a/b".
	start := bucket
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		start = bucket + "/" + prefix[:i]
	}
	var keys []string
	err := fs.WalkDir(s.root.FS(), start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == start && notThere(err) {
				return fs.SkipAll
			}
			return err
		}
		if strings.HasPrefix(d.Name(), tempPrefix) || !d.Type().IsRegular() {
			return nil
		}
		key := strings.TrimPrefix(p, bucket+"/")
		if strings.HasPrefix(key, prefix) {
			keys = append(keys, key)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s/%s: %w", bucket, prefix, err)
	}
	slices.Sort(keys)
	return keys, nil
}

// ListCommonPrefixes follows S3: of the keys under prefix, each is cut
// just after the first delimiter that follows the prefix; keys with no
// delimiter there are left out. "backups/" with "/" gives "backups/b1/",
// "backups/b2/" and so on.
func (s *dirStore) ListCommonPrefixes(bucket, prefix, delimiter string) ([]string, error) {
	keys, err := s.ListObjects(bucket, prefix)
	if err != nil || delimiter == "" {
		return nil, err
	}
	var out []string
	for _, k := range keys {
		i := strings.Index(k[len(prefix):], delimiter)
		if i < 0 {
			continue
		}
		out = append(out, k[:len(prefix)+i+len(delimiter)])
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// DeleteObject removes the object and then the directories it leaves
// empty, since S3 has no empty prefixes. A missing key is not an error.
func (s *dirStore) DeleteObject(bucket, key string) error {
	p, err := s.objectPath(bucket, key)
	if err != nil {
		return err
	}
	fi, err := s.root.Lstat(p)
	if notThere(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return nil // a prefix, not an object
	}
	if err := s.root.Remove(p); err != nil && !notThere(err) {
		return fmt.Errorf("delete %s/%s: %w", bucket, key, err)
	}
	s.removeEmptyParents(bucket, p)
	return nil
}

// removeEmptyParents removes the directories above p, up to the bucket,
// while they are empty; Remove fails on the first one that is not.
func (s *dirStore) removeEmptyParents(bucket, p string) {
	for dir := path.Dir(p); dir != bucket && dir != "." && dir != "/"; dir = path.Dir(dir) {
		if s.root.Remove(dir) != nil {
			return
		}
	}
}

// CreateSignedURL returns a file:// URL: a local directory has no
// signatures, and whoever can read the file may use it.
func (s *dirStore) CreateSignedURL(bucket, key string, _ time.Duration) (string, error) {
	p, err := s.objectPath(bucket, key)
	if err != nil {
		return "", err
	}
	return (&url.URL{Scheme: "file", Path: filepath.Join(s.dir, filepath.FromSlash(p))}).String(), nil
}

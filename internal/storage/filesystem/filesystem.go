// Package filesystem is an ObjectStore over a local directory: object
// bucket/key lives at <path>/<bucket>/<key>. It serves tests, single-node
// installs and NFS-mounted backup targets, and behaves like S3 for the same
// keys wherever a directory tree can.
package filesystem

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/lifeboat-io/lifeboat/internal/storage"
)

// ProviderName is the BSL provider that selects this store.
const ProviderName = "lifeboat.io/filesystem"

// PathKey is the config key holding the absolute root directory.
const PathKey = "path"

// tempPrefix marks files that are still being written. Such files are skipped
// by listings and a key segment may not start with it, so an upload in flight
// is never mistaken for an object.
const tempPrefix = ".lifeboat-upload-"

// Backups hold Secrets, so nothing the store writes is readable by other
// users of the machine (os.CreateTemp already makes files 0600).
const dirMode = 0o700

// Store is the filesystem ObjectStore.
type Store struct {
	root string
}

var (
	_ storage.ObjectStore       = (*Store)(nil)
	_ storage.UnfinishedUploads = (*Store)(nil)
)

// New opens the store described by a BSL config.
func New(config map[string]string) (*Store, error) {
	if err := storage.CheckConfigKeys(config, append([]string{PathKey}, storage.VeleroInjectedConfigKeys...)...); err != nil {
		return nil, err
	}
	root := config[PathKey]
	if root == "" {
		return nil, fmt.Errorf("config key %q is required", PathKey)
	}
	if !filepath.IsAbs(root) {
		return nil, fmt.Errorf("config key %q must be an absolute path, got %q", PathKey, root)
	}
	root = filepath.Clean(root)
	// The root must exist: creating it here would let a typo in a BSL
	// scatter backups over a directory nobody looks at.
	fi, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("object store root %s: %w", root, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("object store root %s is not a directory", root)
	}
	return &Store{root: root}, nil
}

// PutObject writes body to a temporary file beside the object and renames it
// into place, so readers see the old object or the whole new one.
func (s *Store) PutObject(ctx context.Context, bucket, key string, body io.Reader) error {
	if err := s.putObject(ctx, bucket, key, body); err != nil {
		return fmt.Errorf("put object %s/%s: %w", bucket, key, err)
	}
	return nil
}

func (s *Store) putObject(ctx context.Context, bucket, key string, body io.Reader) error {
	p, err := s.objectPath(bucket, key)
	if err != nil {
		return err
	}
	if err := s.checkBucket(bucket); err != nil {
		return err
	}
	dir := filepath.Dir(p)
	var f *os.File
	// DeleteObject removes directories that became empty; one may vanish
	// between MkdirAll and CreateTemp, so try again a few times.
	for attempt := 0; ; attempt++ {
		if err := os.MkdirAll(dir, dirMode); err != nil {
			return keyConflict(err)
		}
		f, err = os.CreateTemp(dir, tempPrefix+"*")
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) || attempt == 3 {
			return err
		}
	}
	tmp := f.Name()
	committed := false
	defer func() {
		if !committed {
			f.Close()
			os.Remove(tmp)
			s.removeEmptyParents(bucket, dir)
		}
	}()
	if _, err := io.Copy(f, &ctxReader{ctx: ctx, r: body}); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := os.Rename(tmp, p); err != nil {
		return keyConflict(err)
	}
	committed = true
	return nil
}

// keyConflict explains the one place where a directory tree cannot follow S3:
// "a" and "a/b" cannot both be objects.
func keyConflict(err error) error {
	if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.EEXIST) {
		return fmt.Errorf("key conflicts with an existing object or prefix (a filesystem store cannot hold both \"a\" and \"a/b\"): %w", err)
	}
	return err
}

// GetObject opens the object for streaming.
func (s *Store) GetObject(ctx context.Context, bucket, key string) (io.ReadCloser, error) {
	p, err := s.objectPath(bucket, key)
	if err != nil {
		return nil, fmt.Errorf("get object %s/%s: %w", bucket, key, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("get object %s/%s: %w", bucket, key, err)
	}
	f, err := os.Open(p)
	if err != nil {
		if isNotExist(err) {
			return nil, fmt.Errorf("get object %s/%s: %w", bucket, key, storage.ErrNotFound)
		}
		return nil, fmt.Errorf("get object %s/%s: %w", bucket, key, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("get object %s/%s: %w", bucket, key, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("get object %s/%s: %w", bucket, key, storage.ErrNotFound)
	}
	return &ctxReadCloser{ctxReader: ctxReader{ctx: ctx, r: f}, c: f}, nil
}

// ObjectExists reports whether key is an object; a directory (an S3 prefix)
// is not one.
func (s *Store) ObjectExists(ctx context.Context, bucket, key string) (bool, error) {
	p, err := s.objectPath(bucket, key)
	if err != nil {
		return false, fmt.Errorf("object exists %s/%s: %w", bucket, key, err)
	}
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("object exists %s/%s: %w", bucket, key, err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		if isNotExist(err) {
			return false, nil
		}
		return false, fmt.Errorf("object exists %s/%s: %w", bucket, key, err)
	}
	return fi.Mode().IsRegular(), nil
}

// ListCommonPrefixes answers like S3's ListObjectsV2 with a delimiter. For
// "/" it reads one directory instead of walking the tree below it, which
// matters at the bucket root where a kopia repository may hold many files.
func (s *Store) ListCommonPrefixes(ctx context.Context, bucket, prefix, delimiter string) ([]string, error) {
	out, err := s.listCommonPrefixes(ctx, bucket, prefix, delimiter)
	if err != nil {
		return nil, fmt.Errorf("list common prefixes %s/%s (delimiter %q): %w", bucket, prefix, delimiter, err)
	}
	return out, nil
}

func (s *Store) listCommonPrefixes(ctx context.Context, bucket, prefix, delimiter string) ([]string, error) {
	if err := s.checkBucket(bucket); err != nil {
		return nil, err
	}
	if delimiter == "" {
		return nil, nil
	}
	if delimiter != "/" {
		keys, err := s.listObjects(ctx, bucket, prefix)
		if err != nil {
			return nil, err
		}
		return commonPrefixes(keys, prefix, delimiter), nil
	}
	dir, rest, ok := splitPrefix(prefix)
	if !ok {
		return nil, nil
	}
	base := filepath.Join(s.root, bucket, filepath.FromSlash(dir))
	entries, err := os.ReadDir(base)
	if err != nil {
		if isNotExist(err) {
			return nil, nil
		}
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if !e.IsDir() || !strings.HasPrefix(e.Name(), rest) || strings.HasPrefix(e.Name(), tempPrefix) {
			continue
		}
		// S3 has no empty prefixes: a directory counts only while some
		// object lives below it.
		has, err := hasObject(filepath.Join(base, e.Name()))
		if err != nil {
			return nil, err
		}
		if has {
			out = append(out, joinDir(dir, e.Name())+"/")
		}
	}
	slices.Sort(out)
	return out, nil
}

// commonPrefixes applies S3's delimiter rule to a key listing.
func commonPrefixes(keys []string, prefix, delimiter string) []string {
	var out []string
	for _, k := range keys {
		i := strings.Index(k[len(prefix):], delimiter)
		if i < 0 {
			continue
		}
		// Keys sharing a prefix are adjacent in a sorted listing, so
		// comparing with the last one found removes duplicates.
		cp := k[:len(prefix)+i+len(delimiter)]
		if len(out) == 0 || out[len(out)-1] != cp {
			out = append(out, cp)
		}
	}
	return out
}

// ListObjects walks only the deepest directory that the prefix fully names.
func (s *Store) ListObjects(ctx context.Context, bucket, prefix string) ([]string, error) {
	keys, err := s.listObjects(ctx, bucket, prefix)
	if err != nil {
		return nil, fmt.Errorf("list objects %s/%s: %w", bucket, prefix, err)
	}
	return keys, nil
}

func (s *Store) listObjects(ctx context.Context, bucket, prefix string) ([]string, error) {
	var keys []string
	err := s.walkPrefix(ctx, bucket, prefix, func(key string, d fs.DirEntry) {
		if !strings.HasPrefix(d.Name(), tempPrefix) && strings.HasPrefix(key, prefix) {
			keys = append(keys, key)
		}
	})
	if err != nil {
		return nil, err
	}
	// WalkDir orders per directory, so "a/b" comes before "a-c"; S3 orders
	// whole keys bytewise, where '-' < '/'.
	slices.Sort(keys)
	return keys, nil
}

// walkPrefix calls visit for each regular file in the directories that
// keys starting with prefix can live in, walking only the deepest
// directory that prefix fully names.
func (s *Store) walkPrefix(ctx context.Context, bucket, prefix string, visit func(key string, d fs.DirEntry)) error {
	if err := s.checkBucket(bucket); err != nil {
		return err
	}
	dir, _, ok := splitPrefix(prefix)
	if !ok {
		return nil
	}
	bucketDir := filepath.Join(s.root, bucket)
	base := filepath.Join(bucketDir, filepath.FromSlash(dir))
	return filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == base && isNotExist(err) {
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(bucketDir, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if d.IsDir() {
			if p != base && !strings.HasPrefix(key+"/", prefix) && !strings.HasPrefix(prefix, key+"/") {
				return fs.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() {
			visit(key, d)
		}
		return nil
	})
}

// DeleteObject removes the object and then the directories it leaves empty,
// so that a deleted backup does not linger as a common prefix.
func (s *Store) DeleteObject(ctx context.Context, bucket, key string) error {
	p, err := s.objectPath(bucket, key)
	if err != nil {
		return fmt.Errorf("delete object %s/%s: %w", bucket, key, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete object %s/%s: %w", bucket, key, err)
	}
	fi, err := os.Lstat(p)
	if err != nil {
		if isNotExist(err) {
			return nil
		}
		return fmt.Errorf("delete object %s/%s: %w", bucket, key, err)
	}
	if fi.IsDir() {
		// A prefix, not an object: S3 would delete nothing either.
		return nil
	}
	if err := os.Remove(p); err != nil && !isNotExist(err) {
		return fmt.Errorf("delete object %s/%s: %w", bucket, key, err)
	}
	s.removeEmptyParents(bucket, filepath.Dir(p))
	return nil
}

// removeEmptyParents removes dir and its parents up to, not including, the
// bucket directory, stopping at the first that is not empty.
func (s *Store) removeEmptyParents(bucket, dir string) {
	bucketDir := filepath.Join(s.root, bucket)
	for dir != bucketDir && strings.HasPrefix(dir, bucketDir+string(filepath.Separator)) {
		if err := os.Remove(dir); err != nil {
			return
		}
		dir = filepath.Dir(dir)
	}
}

// ListUnfinishedUploads finds the temporary files of uploads that never
// finished. PutObject removes its own on every error, so the ones found
// were left by a process that died while writing, or belong to an upload
// still running.
func (s *Store) ListUnfinishedUploads(ctx context.Context, bucket, prefix string) ([]string, error) {
	keys, err := s.unfinishedUploads(ctx, bucket, prefix)
	if err != nil {
		return nil, fmt.Errorf("list unfinished uploads %s/%s: %w", bucket, prefix, err)
	}
	return keys, nil
}

// RemoveUnfinishedUploads removes the temporary files ListUnfinishedUploads
// finds, and the directories that leaves empty.
func (s *Store) RemoveUnfinishedUploads(ctx context.Context, bucket, prefix string) ([]string, error) {
	keys, err := s.unfinishedUploads(ctx, bucket, prefix)
	if err != nil {
		return nil, fmt.Errorf("remove unfinished uploads %s/%s: %w", bucket, prefix, err)
	}
	var removed []string
	var errs []error
	for _, k := range keys {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		p := filepath.Join(s.root, bucket, filepath.FromSlash(k))
		if err := os.Remove(p); err != nil && !isNotExist(err) {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, k)
		s.removeEmptyParents(bucket, filepath.Dir(p))
	}
	if err := errors.Join(errs...); err != nil {
		return removed, fmt.Errorf("remove unfinished uploads %s/%s: %w", bucket, prefix, err)
	}
	return removed, nil
}

// unfinishedUploads finds the temporary files under prefix. One in
// directory "d/" is for some key "d/<name>", all of which start with prefix
// exactly when "d/" does; one in a directory that prefix cuts through
// (prefix "backups/b", directory "backups/") may be for "backups/c" as
// well, and is left alone.
func (s *Store) unfinishedUploads(ctx context.Context, bucket, prefix string) ([]string, error) {
	var keys []string
	err := s.walkPrefix(ctx, bucket, prefix, func(key string, d fs.DirEntry) {
		if strings.HasPrefix(d.Name(), tempPrefix) && strings.HasPrefix(strings.TrimSuffix(key, d.Name()), prefix) {
			keys = append(keys, key)
		}
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(keys)
	return keys, nil
}

// CreateSignedURL returns a file:// URL: whoever can read the directory can
// read the object, and there is nothing to sign or expire.
func (s *Store) CreateSignedURL(ctx context.Context, bucket, key string, ttl time.Duration) (string, error) {
	p, err := s.objectPath(bucket, key)
	if err != nil {
		return "", fmt.Errorf("create signed url %s/%s: %w", bucket, key, err)
	}
	return (&url.URL{Scheme: "file", Path: p}).String(), nil
}

func (s *Store) checkBucket(bucket string) error {
	if err := validBucket(bucket); err != nil {
		return err
	}
	fi, err := os.Stat(filepath.Join(s.root, bucket))
	if err != nil {
		if isNotExist(err) {
			return fmt.Errorf("bucket %q does not exist under %s", bucket, s.root)
		}
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("bucket %q under %s is not a directory", bucket, s.root)
	}
	return nil
}

// objectPath maps bucket/key into the root, refusing anything that could
// name a path outside it.
func (s *Store) objectPath(bucket, key string) (string, error) {
	if err := validBucket(bucket); err != nil {
		return "", err
	}
	if err := validKey(key); err != nil {
		return "", err
	}
	return filepath.Join(s.root, bucket, filepath.FromSlash(key)), nil
}

func validBucket(bucket string) error {
	if bucket == "" || bucket == "." || bucket == ".." || strings.ContainsAny(bucket, "/\\\x00") {
		return fmt.Errorf("invalid bucket name %q", bucket)
	}
	return nil
}

// validKey accepts the keys a directory tree can hold without ambiguity:
// S3 would also allow "a//b" or "a/", but those have no file to live in.
func validKey(key string) error {
	if key == "" {
		return errors.New("empty key")
	}
	if strings.HasPrefix(key, "/") {
		return fmt.Errorf("invalid key %q: absolute", key)
	}
	if strings.ContainsRune(key, 0) {
		return fmt.Errorf("invalid key %q: contains NUL", key)
	}
	for _, seg := range strings.Split(key, "/") {
		if err := validSegment(seg); err != nil {
			return fmt.Errorf("invalid key %q: %w", key, err)
		}
	}
	return nil
}

func validSegment(seg string) error {
	switch {
	case seg == "":
		return errors.New("empty path segment")
	case seg == "." || seg == "..":
		return fmt.Errorf("path segment %q", seg)
	case strings.HasPrefix(seg, tempPrefix):
		return fmt.Errorf("path segment starts with reserved %q", tempPrefix)
	}
	return nil
}

// splitPrefix cuts a listing prefix at its last "/" into the directory it
// fully names and the start of a name inside it. ok is false when no valid
// key can start with prefix, so the listing is empty.
func splitPrefix(prefix string) (dir, rest string, ok bool) {
	i := strings.LastIndex(prefix, "/")
	if i < 0 {
		return "", prefix, true
	}
	dir, rest = prefix[:i], prefix[i+1:]
	if dir == "" || strings.ContainsRune(dir, 0) {
		return "", "", false
	}
	for _, seg := range strings.Split(dir, "/") {
		if validSegment(seg) != nil {
			return "", "", false
		}
	}
	return dir, rest, true
}

func joinDir(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// hasObject reports whether any object lives below dir, stopping at the
// first one found.
func hasObject(dir string) (bool, error) {
	found := false
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if isNotExist(err) {
				return nil
			}
			return err
		}
		if d.Type().IsRegular() && !strings.HasPrefix(d.Name(), tempPrefix) {
			found = true
			return fs.SkipAll
		}
		return nil
	})
	return found, err
}

// isNotExist also treats "a path component is a file" as absence: key "a/b"
// does not exist when "a" is an object.
func isNotExist(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// ctxReader makes a copy loop notice cancellation between reads.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

type ctxReadCloser struct {
	ctxReader
	c io.Closer
}

func (c *ctxReadCloser) Close() error { return c.c.Close() }

// Package storage holds the ObjectStore abstraction and Velero's backup layout
// on top of it. The built-in stores live in the filesystem and s3 subpackages;
// provider.Open picks one for a BackupStorageLocation.
package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// ErrNotFound is wrapped by GetObject when the key does not exist.
var ErrNotFound = errors.New("object not found")

// ObjectStore is the storage a BackupStorageLocation points at. It mirrors
// Velero's ObjectStore plugin interface so that an external object-store
// plugin can stand in for a built-in one, but every call takes a context.
//
// Keys are S3 keys: "/"-separated, no leading slash.
type ObjectStore interface {
	// PutObject streams body into key, replacing any existing object. It
	// never holds the whole body in memory, and a concurrent reader sees
	// either the old object or the complete new one.
	PutObject(ctx context.Context, bucket, key string, body io.Reader) error
	// GetObject streams the object. The body may be bound to ctx, so keep ctx
	// alive until the body is closed. A missing key gives an error wrapping
	// ErrNotFound.
	GetObject(ctx context.Context, bucket, key string) (io.ReadCloser, error)
	ObjectExists(ctx context.Context, bucket, key string) (bool, error)
	// ListCommonPrefixes returns, sorted, the distinct prefixes of keys under
	// prefix cut just after the first delimiter that follows prefix, e.g.
	// "p/backups/b1/" for prefix "p/backups/" and delimiter "/".
	ListCommonPrefixes(ctx context.Context, bucket, prefix, delimiter string) ([]string, error)
	// ListObjects returns every key that starts with prefix, recursively,
	// sorted bytewise.
	ListObjects(ctx context.Context, bucket, prefix string) ([]string, error)
	// DeleteObject removes key; a missing key is not an error.
	DeleteObject(ctx context.Context, bucket, key string) error
	// CreateSignedURL returns a URL that lets a client without credentials
	// download key for ttl.
	CreateSignedURL(ctx context.Context, bucket, key string, ttl time.Duration) (string, error)
}

// UnfinishedUploads is implemented by stores that can find what an upload
// leaves when the process writing it dies: the filesystem store's temporary
// files, S3's incomplete multipart uploads. Neither is an object, so
// ListObjects and DeleteObject never see them. Velero's ObjectStore plugin
// API has no such call, so stores served by plugins do not implement it;
// for those, the store's own lifecycle rules (e.g. S3's
// AbortIncompleteMultipartUpload) are the only cleanup.
type UnfinishedUploads interface {
	// ListUnfinishedUploads returns, sorted, a key naming each unfinished
	// upload of an object whose key starts with prefix: S3 gives the
	// object's key (once per upload), the filesystem store its temporary
	// file's, which lives beside the object. The filesystem store cannot
	// tell which object a temporary file was for, so it matches one when
	// every key that directory can hold starts with prefix (always, for a
	// prefix ending in "/").
	ListUnfinishedUploads(ctx context.Context, bucket, prefix string) ([]string, error)
	// RemoveUnfinishedUploads removes the uploads ListUnfinishedUploads
	// returns and returns those it removed, also when it fails part way.
	// An upload still being written under prefix fails, so callers must
	// know none is: the backup or restore that wrote there has ended.
	RemoveUnfinishedUploads(ctx context.Context, bucket, prefix string) ([]string, error)
}

// CheckConfigKeys fails when config holds a key outside allowed, naming the
// unknown keys and listing the allowed ones. A typo in a BSL's config must not
// silently fall back to a default (e.g. "s3forcepathstyle" ignored), which is
// why Velero's plugins refuse unknown keys too.
func CheckConfigKeys(config map[string]string, allowed ...string) error {
	var unknown []string
	for _, k := range slices.Sorted(maps.Keys(config)) {
		if !slices.Contains(allowed, k) {
			unknown = append(unknown, fmt.Sprintf("%q", k))
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	noun := "key"
	if len(unknown) > 1 {
		noun = "keys"
	}
	return fmt.Errorf("unknown config %s %s (allowed: %s)", noun,
		strings.Join(unknown, ", "), strings.Join(slices.Sorted(slices.Values(allowed)), ", "))
}

// VeleroInjectedConfigKeys are the keys Velero's server adds to every object
// store's config (the BSL's bucket and prefix). Stores accept them so that a
// config handed over the Velero way, or copied from a Velero plugin's Init,
// is not refused.
var VeleroInjectedConfigKeys = []string{"bucket", "prefix"}

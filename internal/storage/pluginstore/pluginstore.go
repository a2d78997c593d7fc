// Package pluginstore serves a BackupStorageLocation through an ObjectStore
// plugin: it adapts the plugin interface (pkg/plugin/api), which has no
// contexts, to the server's storage.ObjectStore.
package pluginstore

import (
	"context"
	"fmt"
	"io"
	"maps"
	"time"

	"github.com/lifeboat-io/lifeboat/internal/credentials"
	"github.com/lifeboat-io/lifeboat/internal/storage"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

// Store is a storage.ObjectStore backed by a plugin.
type Store struct {
	plugin api.ObjectStore
	name   string
}

// New initializes plugin with a location's config. As Velero does, the
// plugin also gets the location's bucket and prefix in its config, and the
// path of a file holding the location's credentials as credentialsFile.
func New(plugin api.ObjectStore, name string, config map[string]string, bucket, prefix, credentialsFile string) (*Store, error) {
	cfg := maps.Clone(config)
	if cfg == nil {
		cfg = map[string]string{}
	}
	cfg["bucket"], cfg["prefix"] = bucket, prefix
	if credentialsFile != "" {
		cfg[credentials.ConfigKey] = credentialsFile
	}
	if err := plugin.Init(cfg); err != nil {
		return nil, fmt.Errorf("object store plugin %s: Init: %w", name, err)
	}
	return &Store{plugin: plugin, name: name}, nil
}

var _ storage.ObjectStore = (*Store)(nil)

// The plugin protocol carries no deadlines: the plugin host bounds every
// call by its kind's timeout (uploads and downloads by their progress) and
// restarts a plugin that hangs. The context is checked before each call, so
// a cancelled operation stops at the next one, and it is bound to the
// streams, so a cancelled transfer stops at once.

func (s *Store) PutObject(ctx context.Context, bucket, key string, body io.Reader) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.wrap("PutObject", key, s.plugin.PutObject(bucket, key, ctxReader{ctx, body}))
}

func (s *Store) GetObject(ctx context.Context, bucket, key string) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rc, err := s.plugin.GetObject(bucket, key)
	if err != nil {
		// Plugins word a missing key in their own way; ask plainly.
		if ok, xerr := s.plugin.ObjectExists(bucket, key); xerr == nil && !ok {
			return nil, fmt.Errorf("%s: %w", key, storage.ErrNotFound)
		}
		return nil, s.wrap("GetObject", key, err)
	}
	return bindBody(ctx, rc), nil
}

func (s *Store) ObjectExists(ctx context.Context, bucket, key string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	ok, err := s.plugin.ObjectExists(bucket, key)
	return ok, s.wrap("ObjectExists", key, err)
}

func (s *Store) ListCommonPrefixes(ctx context.Context, bucket, prefix, delimiter string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out, err := s.plugin.ListCommonPrefixes(bucket, prefix, delimiter)
	return out, s.wrap("ListCommonPrefixes", prefix, err)
}

func (s *Store) ListObjects(ctx context.Context, bucket, prefix string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out, err := s.plugin.ListObjects(bucket, prefix)
	return out, s.wrap("ListObjects", prefix, err)
}

func (s *Store) DeleteObject(ctx context.Context, bucket, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.wrap("DeleteObject", key, s.plugin.DeleteObject(bucket, key))
}

func (s *Store) CreateSignedURL(ctx context.Context, bucket, key string, ttl time.Duration) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	url, err := s.plugin.CreateSignedURL(bucket, key, ttl)
	return url, s.wrap("CreateSignedURL", key, err)
}

func (s *Store) wrap(op, key string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("object store plugin %s: %s %s: %w", s.name, op, key, err)
}

// ctxReader stops a streaming upload when its context ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// ctxBody is a download that ends with its context: the Read in progress
// fails (the body is closed under it, which ends the plugin's stream), and
// later ones return the context's error.
type ctxBody struct {
	ctx  context.Context
	rc   io.ReadCloser
	stop func() bool
}

func bindBody(ctx context.Context, rc io.ReadCloser) io.ReadCloser {
	return &ctxBody{ctx: ctx, rc: rc, stop: context.AfterFunc(ctx, func() { _ = rc.Close() })}
}

func (b *ctxBody) Read(p []byte) (int, error) {
	if err := b.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := b.rc.Read(p)
	if err != nil && b.ctx.Err() != nil {
		return n, b.ctx.Err()
	}
	return n, err
}

func (b *ctxBody) Close() error {
	if !b.stop() {
		// The context ended and closed the body already.
		return nil
	}
	return b.rc.Close()
}

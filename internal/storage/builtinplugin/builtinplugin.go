// Package builtinplugin offers the built-in object stores as ObjectStore
// plugins, so that they sit in the plugin registry next to external ones:
// listed by `lifeboat plugin get`, and replaceable by a plugin binary of the
// same name. Storage locations use the stores directly (with contexts);
// this adapter is what a plugin-shaped caller gets.
package builtinplugin

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"time"

	"github.com/lifeboat-io/lifeboat/internal/storage"
	"github.com/lifeboat-io/lifeboat/internal/storage/filesystem"
	"github.com/lifeboat-io/lifeboat/internal/storage/provider"
	"github.com/lifeboat-io/lifeboat/internal/storage/s3"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

// Names are the registry names of the built-in object stores.
var Names = []string{filesystem.ProviderName, api.NormalizeName(s3.ProviderName)}

// callTimeout bounds calls other than the streaming ones, which the
// plugin interface gives no context to.
const callTimeout = 2 * time.Minute

// Store is a built-in store behind the plugin interface.
type Store struct {
	provider string
	store    storage.ObjectStore
}

// New returns the plugin for a built-in provider name.
func New(name string) *Store { return &Store{provider: name} }

// Init opens the store. As Velero does for plugins, the config carries the
// location's bucket and prefix, and credentials as a file path.
func (s *Store) Init(config map[string]string) error {
	cfg := maps.Clone(config)
	var creds []byte
	if path := cfg["credentialsFile"]; path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("reading credentialsFile: %w", err)
		}
		creds = data
	}
	delete(cfg, "credentialsFile")
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	st, err := provider.Open(ctx, s.provider, cfg, creds)
	if err != nil {
		return err
	}
	s.store = st
	return nil
}

func ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), callTimeout)
}

func (s *Store) PutObject(bucket, key string, body io.Reader) error {
	return s.store.PutObject(context.Background(), bucket, key, body)
}

func (s *Store) ObjectExists(bucket, key string) (bool, error) {
	c, cancel := ctx()
	defer cancel()
	return s.store.ObjectExists(c, bucket, key)
}

func (s *Store) GetObject(bucket, key string) (io.ReadCloser, error) {
	return s.store.GetObject(context.Background(), bucket, key)
}

func (s *Store) ListCommonPrefixes(bucket, prefix, delimiter string) ([]string, error) {
	c, cancel := ctx()
	defer cancel()
	return s.store.ListCommonPrefixes(c, bucket, prefix, delimiter)
}

func (s *Store) ListObjects(bucket, prefix string) ([]string, error) {
	c, cancel := ctx()
	defer cancel()
	return s.store.ListObjects(c, bucket, prefix)
}

func (s *Store) DeleteObject(bucket, key string) error {
	c, cancel := ctx()
	defer cancel()
	return s.store.DeleteObject(c, bucket, key)
}

func (s *Store) CreateSignedURL(bucket, key string, ttl time.Duration) (string, error) {
	c, cancel := ctx()
	defer cancel()
	return s.store.CreateSignedURL(c, bucket, key, ttl)
}

var _ api.ObjectStore = (*Store)(nil)

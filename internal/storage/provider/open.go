// Package provider opens the built-in object stores by BSL provider name. It
// is separate from package storage so that the stores can import storage's
// interface without an import cycle.
package provider

import (
	"context"
	"fmt"

	"github.com/lifeboat-io/lifeboat/internal/storage"
	"github.com/lifeboat-io/lifeboat/internal/storage/filesystem"
	"github.com/lifeboat-io/lifeboat/internal/storage/s3"
)

// IsBuiltIn reports whether provider is served inside the server; any other
// provider is an ObjectStore plugin of that name.
func IsBuiltIn(provider string) bool {
	switch provider {
	case filesystem.ProviderName, s3.ProviderName, s3.VeleroProviderName:
		return true
	}
	return false
}

// Open returns the built-in ObjectStore for provider, configured from a BSL's
// config and the content of its credential secret key (nil when the BSL names
// none).
func Open(ctx context.Context, provider string, config map[string]string, credentials []byte) (storage.ObjectStore, error) {
	var (
		store storage.ObjectStore
		err   error
	)
	switch provider {
	case filesystem.ProviderName:
		// The filesystem store has no notion of credentials; ignoring them
		// lets one BSL template serve both stores.
		store, err = filesystem.New(config)
	case s3.ProviderName, s3.VeleroProviderName:
		store, err = s3.New(ctx, config, credentials)
	default:
		return nil, fmt.Errorf("unknown object store provider %q (built-in: %s, %s)", provider, s3.ProviderName, filesystem.ProviderName)
	}
	if err != nil {
		return nil, fmt.Errorf("object store provider %q: %w", provider, err)
	}
	return store, nil
}

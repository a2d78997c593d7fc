package repository

import (
	"context"
	"fmt"
	"path"
	"path/filepath"
	"strings"

	"github.com/kopia/kopia/repo/blob"
	"github.com/kopia/kopia/repo/blob/filesystem"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/locations"
	"github.com/lifeboat-io/lifeboat/internal/podvolume/repository/s3blob"
	fsstore "github.com/lifeboat-io/lifeboat/internal/storage/filesystem"
	s3store "github.com/lifeboat-io/lifeboat/internal/storage/s3"
)

// Layout is where Velero keeps kopia repositories in a location:
// <bucket>/<location prefix>/kopia/<volume namespace>/.
const repoBackend = "kopia"

// StorageResolver reads what a location's store needs besides the location
// (locations.Resolver).
type StorageResolver interface {
	ResolveStorage(ctx context.Context, bsl *v1.BackupStorageLocation) (*locations.ResolvedStorage, error)
}

// Prefix is the repository's key prefix inside the location's bucket, with
// a trailing slash, as Velero computes it.
func Prefix(bsl *v1.BackupStorageLocation, volumeNamespace string) string {
	prefix := ""
	if bsl.Spec.ObjectStorage != nil {
		prefix = strings.Trim(bsl.Spec.ObjectStorage.Prefix, "/")
	}
	return path.Join(prefix, repoBackend, volumeNamespace) + "/"
}

func bucketOf(bsl *v1.BackupStorageLocation) string {
	if bsl.Spec.ObjectStorage == nil {
		return ""
	}
	return strings.Trim(bsl.Spec.ObjectStorage.Bucket, "/")
}

// openStorage connects to the blob storage of (bsl, volume namespace).
// create allows a missing filesystem directory to be made.
func openStorage(ctx context.Context, res *locations.ResolvedStorage, bsl *v1.BackupStorageLocation, volumeNamespace string, create bool) (blob.Storage, error) {
	bucket := bucketOf(bsl)
	prefix := Prefix(bsl, volumeNamespace)
	switch res.Provider {
	case s3store.ProviderName, s3store.VeleroProviderName:
		cfg := map[string]string{}
		for k, v := range res.Config {
			cfg[k] = v
		}
		// As Velero injects it: the location's prefix (the repository's
		// own is Prefix).
		cfg["prefix"] = ""
		if bsl.Spec.ObjectStorage != nil {
			cfg["prefix"] = bsl.Spec.ObjectStorage.Prefix
		}
		st, err := s3blob.New(ctx, &s3blob.Options{Bucket: bucket, Prefix: prefix, Config: cfg, Credentials: res.Credentials}, create)
		if err != nil {
			return nil, fmt.Errorf("BackupStorageLocation %q: kopia S3 storage at %s: %w", bsl.Name, path.Join(bucket, prefix), err)
		}
		return st, nil
	case fsstore.ProviderName:
		root := res.Config[fsstore.PathKey]
		if root == "" || !filepath.IsAbs(root) {
			return nil, fmt.Errorf("BackupStorageLocation %q: config key %q must be an absolute path, got %q", bsl.Name, fsstore.PathKey, root)
		}
		dir := filepath.Join(root, bucket, filepath.FromSlash(prefix))
		st, err := ownFilesystemStorage(ctx, &filesystem.Options{
			Path: dir,
			// As Velero's filesystem backend: private to the server's user
			// (the node agent, root, writes as that user: fsowner.go).
			FileMode:      0o600,
			DirectoryMode: 0o700,
		}, create)
		if err != nil {
			return nil, fmt.Errorf("BackupStorageLocation %q: kopia filesystem storage at %s: %w", bsl.Name, dir, err)
		}
		return st, nil
	}
	return nil, fmt.Errorf("BackupStorageLocation %q: provider %q cannot hold file-system backup repositories in Lifeboat (supported: %s, %s, %s)",
		bsl.Name, res.Provider, s3store.ProviderName, s3store.VeleroProviderName, fsstore.ProviderName)
}

// Package locations finds a backup's BackupStorageLocation and opens the
// object store behind it, credentials included.
package locations

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/storage"
	"github.com/lifeboat-io/lifeboat/internal/storage/pluginstore"
	"github.com/lifeboat-io/lifeboat/internal/storage/provider"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

// Resolver finds and opens storage locations in one namespace.
type Resolver struct {
	// Client reads BackupStorageLocations (a cached client is fine).
	Client client.Reader
	// SecretReader reads credential secrets. It must not be a cached client:
	// caching would make the server watch every Secret in the namespace.
	SecretReader client.Reader
	Namespace    string
	// DefaultName is used when no location is marked default.
	DefaultName string
	// Plugins serves providers that are not built in; nil means none.
	Plugins ObjectStorePlugins
	// CredentialsDir holds the credential files handed to ObjectStore
	// plugins (Velero passes credentials to plugins as a file path).
	CredentialsDir string
}

// ObjectStorePlugins finds ObjectStore plugins by name.
type ObjectStorePlugins interface {
	ObjectStore(name string) (api.ObjectStore, error)
	// IsExternal reports whether a plugin binary serves kind and name; it
	// then wins over a built-in store of the same name.
	IsExternal(kind api.Kind, name string) bool
}

// NotFoundError says that a named location does not exist.
type NotFoundError struct {
	Name     string
	Existing []string
}

func (e *NotFoundError) Error() string {
	if len(e.Existing) == 0 {
		return fmt.Sprintf("no BackupStorageLocation named %q, and none exist; create one (lifeboat install --use-filesystem DIR, or --provider aws --bucket ...)", e.Name)
	}
	return fmt.Sprintf("no BackupStorageLocation named %q; existing locations: %s", e.Name, strings.Join(e.Existing, ", "))
}

// Find returns the location called name, or the default location when name
// is empty: the one marked spec.default, else the one called DefaultName.
func (r *Resolver) Find(ctx context.Context, name string) (*v1.BackupStorageLocation, error) {
	var list v1.BackupStorageLocationList
	if err := r.Client.List(ctx, &list, client.InNamespace(r.Namespace)); err != nil {
		return nil, fmt.Errorf("listing BackupStorageLocations: %w", err)
	}
	var names []string
	for i := range list.Items {
		names = append(names, list.Items[i].Name)
	}
	sort.Strings(names)
	if name == "" {
		for i := range list.Items {
			if list.Items[i].Spec.Default {
				return &list.Items[i], nil
			}
		}
		name = r.DefaultName
	}
	for i := range list.Items {
		if list.Items[i].Name == name {
			return &list.Items[i], nil
		}
	}
	return nil, &NotFoundError{Name: name, Existing: names}
}

// Open connects to the object store of bsl.
func (r *Resolver) Open(ctx context.Context, bsl *v1.BackupStorageLocation) (*storage.BackupStore, error) {
	if bsl.Spec.ObjectStorage == nil || bsl.Spec.ObjectStorage.Bucket == "" {
		return nil, fmt.Errorf("BackupStorageLocation %q: spec.objectStorage.bucket is required", bsl.Name)
	}
	var creds []byte
	if sel := bsl.Spec.Credential; sel != nil {
		var secret corev1.Secret
		err := r.SecretReader.Get(ctx, client.ObjectKey{Namespace: bsl.Namespace, Name: sel.Name}, &secret)
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("BackupStorageLocation %q: spec.credential names secret %q, which does not exist in namespace %q", bsl.Name, sel.Name, bsl.Namespace)
		}
		if err != nil {
			return nil, fmt.Errorf("BackupStorageLocation %q: reading credential secret %q: %w", bsl.Name, sel.Name, err)
		}
		data, ok := secret.Data[sel.Key]
		if !ok {
			return nil, fmt.Errorf("BackupStorageLocation %q: secret %q has no key %q (spec.credential.key)", bsl.Name, sel.Name, sel.Key)
		}
		creds = data
	}
	config := maps.Clone(bsl.Spec.Config)
	if ca := bsl.Spec.ObjectStorage.CACert; len(ca) > 0 {
		if config == nil {
			config = map[string]string{}
		}
		config["caCert"] = string(ca)
	}
	var (
		store storage.ObjectStore
		err   error
	)
	external := r.Plugins != nil && r.Plugins.IsExternal(api.KindObjectStore, bsl.Spec.Provider)
	if provider.IsBuiltIn(bsl.Spec.Provider) && !external {
		store, err = provider.Open(ctx, bsl.Spec.Provider, config, creds)
	} else {
		store, err = r.openPlugin(bsl, config, creds)
	}
	if err != nil {
		return nil, fmt.Errorf("BackupStorageLocation %q: %w", bsl.Name, err)
	}
	return storage.NewBackupStore(store, bsl.Spec.ObjectStorage.Bucket, bsl.Spec.ObjectStorage.Prefix), nil
}

func (r *Resolver) openPlugin(bsl *v1.BackupStorageLocation, config map[string]string, creds []byte) (storage.ObjectStore, error) {
	name := bsl.Spec.Provider
	if r.Plugins == nil {
		return nil, fmt.Errorf("spec.provider %q is not built in (built-in: aws, lifeboat.io/filesystem) and the server runs no plugins", name)
	}
	plugin, err := r.Plugins.ObjectStore(name)
	if err != nil {
		return nil, fmt.Errorf("spec.provider %q: %w", name, err)
	}
	credFile := ""
	if creds != nil {
		if credFile, err = r.writeCredentials(bsl, creds); err != nil {
			return nil, err
		}
	}
	return pluginstore.New(plugin, name, config, bsl.Spec.ObjectStorage.Bucket, bsl.Spec.ObjectStorage.Prefix, credFile)
}

// writeCredentials puts a location's credentials where its plugin can read
// them, readable by the server's user only.
func (r *Resolver) writeCredentials(bsl *v1.BackupStorageLocation, creds []byte) (string, error) {
	dir := r.CredentialsDir
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "lifeboat-credentials")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("creating the credentials dir: %w", err)
	}
	sel := bsl.Spec.Credential
	path := filepath.Join(dir, fmt.Sprintf("%s-%s-%s", bsl.Namespace, sel.Name, sel.Key))
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, creds, 0o600); err != nil {
		return "", fmt.Errorf("writing credentials for the plugin: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("writing credentials for the plugin: %w", err)
	}
	return path, nil
}

// Package locations is the one way to open a location for use: a
// BackupStorageLocation as the object store behind it, a
// VolumeSnapshotLocation as a provider and the config to Init its
// VolumeSnapshotter with. Credentials (spec.credential) are resolved here
// for both, on every path that uses a location (backup, restore, deletion,
// the location checks), so no path runs with other credentials than another.
package locations

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/credentials"
	"github.com/lifeboat-io/lifeboat/internal/storage"
	"github.com/lifeboat-io/lifeboat/internal/storage/pluginstore"
	"github.com/lifeboat-io/lifeboat/internal/storage/provider"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

// callTimeout bounds each API call of the resolver.
const callTimeout = 30 * time.Second

// Resolver finds and opens storage and snapshot locations in one namespace.
type Resolver struct {
	// Client reads BackupStorageLocations (a cached client is fine).
	Client client.Reader
	// SecretReader reads credential secrets and VolumeSnapshotLocations.
	// It must not be a cached client: caching would make the server watch
	// every Secret in the namespace, and a location created a moment ago
	// must be found.
	SecretReader client.Reader
	Namespace    string
	// DefaultName is used when no location is marked default.
	DefaultName string
	// Plugins serves providers that are not built in; nil means none.
	Plugins ObjectStorePlugins
	// Credentials holds the credential files handed to plugins (Velero
	// passes credentials to plugins as a file path); nil refuses every
	// location with spec.credential that a plugin serves.
	Credentials *credentials.Store
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

// ResolvedStorage is a BackupStorageLocation's store settings with what
// it refers to read from its Secrets.
type ResolvedStorage struct {
	Provider string
	// Config is spec.config plus "caCert" (the PEM bundle of
	// spec.objectStorage.caCertRef or caCert) when one is set.
	Config map[string]string
	// Credentials is the content of spec.credential's Secret key; nil when
	// the location names none.
	Credentials []byte
	// CACert is the PEM bundle the store is to be trusted with, or nil.
	CACert []byte
}

// ResolveStorage reads what bsl's store needs besides the location itself
// (credentials, CA bundle), for clients other than Lifeboat's object store
// that reach the same store (the file-system backup repositories).
func (r *Resolver) ResolveStorage(ctx context.Context, bsl *v1.BackupStorageLocation) (*ResolvedStorage, error) {
	if bsl.Spec.ObjectStorage == nil || bsl.Spec.ObjectStorage.Bucket == "" {
		return nil, fmt.Errorf("BackupStorageLocation %q: spec.objectStorage.bucket is required", bsl.Name)
	}
	res := &ResolvedStorage{Provider: bsl.Spec.Provider, Config: maps.Clone(bsl.Spec.Config)}
	if sel := bsl.Spec.Credential; sel != nil {
		data, err := r.secretKey(ctx, "BackupStorageLocation", bsl.Namespace, bsl.Name, "spec.credential", sel)
		if err != nil {
			return nil, err
		}
		res.Credentials = data
	}
	ca, err := r.caCert(ctx, bsl)
	if err != nil {
		return nil, err
	}
	if len(ca) > 0 {
		if res.Config == nil {
			res.Config = map[string]string{}
		}
		// The store's config key, for the built-in S3 store and for
		// plugins alike, as Velero passes it.
		res.Config["caCert"] = string(ca)
		res.CACert = ca
	}
	return res, nil
}

// Open connects to the object store of bsl.
func (r *Resolver) Open(ctx context.Context, bsl *v1.BackupStorageLocation) (*storage.BackupStore, error) {
	res, err := r.ResolveStorage(ctx, bsl)
	if err != nil {
		return nil, err
	}
	config, creds := res.Config, res.Credentials
	var store storage.ObjectStore
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
		loc := credentials.Location{Kind: credentials.StorageLocation, Namespace: bsl.Namespace, Name: bsl.Name}
		if credFile, err = r.writeCredentials(loc, bsl.Spec.Credential, creds); err != nil {
			return nil, err
		}
	}
	return pluginstore.New(plugin, name, config, bsl.Spec.ObjectStorage.Bucket, bsl.Spec.ObjectStorage.Prefix, credFile)
}

// caCert returns the PEM bundle bsl's store is to be trusted with:
// spec.objectStorage.caCertRef's Secret key, or the older inline caCert.
// Velero refuses a location that sets both, and so does Lifeboat.
func (r *Resolver) caCert(ctx context.Context, bsl *v1.BackupStorageLocation) ([]byte, error) {
	st := bsl.Spec.ObjectStorage
	switch {
	case st.CACertRef != nil && len(st.CACert) > 0:
		return nil, fmt.Errorf("BackupStorageLocation %q: spec.objectStorage.caCert and spec.objectStorage.caCertRef are both set; keep caCertRef (caCert is deprecated)", bsl.Name)
	case st.CACertRef != nil:
		if st.CACertRef.Key == "" {
			return nil, fmt.Errorf("BackupStorageLocation %q: spec.objectStorage.caCertRef.key is empty; name the Secret's key holding the PEM bundle", bsl.Name)
		}
		return r.secretKey(ctx, "BackupStorageLocation", bsl.Namespace, bsl.Name, "spec.objectStorage.caCertRef", st.CACertRef)
	}
	return st.CACert, nil
}

// secretKey reads the bytes a location's field (spec.credential, or
// spec.objectStorage.caCertRef) names, from a Secret of the location's own
// namespace (the server's, as in Velero).
func (r *Resolver) secretKey(ctx context.Context, kind, namespace, location, field string, sel *corev1.SecretKeySelector) ([]byte, error) {
	var secret corev1.Secret
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	err := r.SecretReader.Get(cctx, client.ObjectKey{Namespace: namespace, Name: sel.Name}, &secret)
	cancel()
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%s %q: %s names secret %q, which does not exist in namespace %q; create it or fix %s.name", kind, location, field, sel.Name, namespace, field)
	}
	if err != nil {
		return nil, fmt.Errorf("%s %q: reading secret %q (%s): %w", kind, location, sel.Name, field, err)
	}
	data, ok := secret.Data[sel.Key]
	if !ok {
		return nil, fmt.Errorf("%s %q: secret %q has no key %q (%s.key); add it or fix the key", kind, location, sel.Name, sel.Key, field)
	}
	return data, nil
}

// writeCredentials puts a location's credentials where its plugin can
// read them and returns the file's path.
func (r *Resolver) writeCredentials(loc credentials.Location, sel *corev1.SecretKeySelector, data []byte) (string, error) {
	if r.Credentials == nil {
		return "", fmt.Errorf("%s has spec.credential, and the server has no credentials directory to hand it to the plugin", loc)
	}
	return r.Credentials.Write(loc, credentials.Secret{Name: sel.Name, Key: sel.Key}, data)
}

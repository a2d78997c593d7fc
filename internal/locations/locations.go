// Package locations finds a backup's BackupStorageLocation and opens the
// object store behind it, credentials included.
package locations

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/storage"
	"github.com/lifeboat-io/lifeboat/internal/storage/provider"
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
	store, err := provider.Open(ctx, bsl.Spec.Provider, config, creds)
	if err != nil {
		return nil, fmt.Errorf("BackupStorageLocation %q: %w", bsl.Name, err)
	}
	return storage.NewBackupStore(store, bsl.Spec.ObjectStorage.Bucket, bsl.Spec.ObjectStorage.Prefix), nil
}

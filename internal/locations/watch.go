package locations

import (
	"context"
	"fmt"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/credentials"
)

// RemoveCredentialsOfGoneLocations removes a location's credentials files
// from store when the location is deleted, and the files of a secret it no
// longer names when its spec.credential changes: secrets must not stay on
// disk longer than a location uses them. It hooks the informers of the
// server's cache (which every replica runs, leader or not, as every replica
// has its own store); events missed while the server was down need no
// handling, as the store starts empty.
func RemoveCredentialsOfGoneLocations(ctx context.Context, informers cache.Informers, store *credentials.Store, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	kinds := []struct {
		obj  client.Object
		kind credentials.Kind
		sel  func(client.Object) *corev1.SecretKeySelector
	}{
		{&v1.BackupStorageLocation{}, credentials.StorageLocation, func(o client.Object) *corev1.SecretKeySelector {
			if l, ok := o.(*v1.BackupStorageLocation); ok {
				return l.Spec.Credential
			}
			return nil
		}},
		{&v1.VolumeSnapshotLocation{}, credentials.SnapshotLocation, func(o client.Object) *corev1.SecretKeySelector {
			if l, ok := o.(*v1.VolumeSnapshotLocation); ok {
				return l.Spec.Credential
			}
			return nil
		}},
	}
	for _, k := range kinds {
		inf, err := informers.GetInformer(ctx, k.obj)
		if err != nil {
			return fmt.Errorf("watching %T for credentials to remove: %w", k.obj, err)
		}
		remove := func(o client.Object, keep ...credentials.Secret) {
			loc := credentials.Location{Kind: k.kind, Namespace: o.GetNamespace(), Name: o.GetName()}
			if err := store.Remove(loc, keep...); err != nil {
				log.Error("removing a location's credentials files", "location", loc.String(), "error", err)
			}
		}
		_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			UpdateFunc: func(oldObj, newObj any) {
				o, ok1 := oldObj.(client.Object)
				n, ok2 := newObj.(client.Object)
				if !ok1 || !ok2 {
					return
				}
				before, after := k.sel(o), k.sel(n)
				if before == nil || (after != nil && before.Name == after.Name && before.Key == after.Key) {
					return
				}
				var keep []credentials.Secret
				if after != nil {
					keep = append(keep, credentials.Secret{Name: after.Name, Key: after.Key})
				}
				remove(n, keep...)
			},
			DeleteFunc: func(obj any) {
				if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
					obj = tomb.Obj
				}
				if o, ok := obj.(client.Object); ok {
					remove(o)
				}
			},
		})
		if err != nil {
			return fmt.Errorf("watching %T for credentials to remove: %w", k.obj, err)
		}
	}
	return nil
}

package controller

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/deletion"
	"github.com/lifeboat-io/lifeboat/internal/locations"
)

// DeletionCluster is the deletion engine's access to the API server, in
// one namespace.
type DeletionCluster struct {
	Client client.Client
	// Reader reads around the cache.
	Reader    client.Reader
	Namespace string
	// Locations opens VolumeSnapshotLocations, credentials included.
	Locations *locations.Resolver
}

var _ deletion.Cluster = (*DeletionCluster)(nil)

// SnapshotLocation implements deletion.Cluster through the resolver every
// path opens snapshot locations with, so a snapshot is deleted with the
// credentials it was taken with.
func (c *DeletionCluster) SnapshotLocation(ctx context.Context, name string) (string, map[string]string, error) {
	return c.Locations.SnapshotLocation(ctx, name)
}

// Restores implements deletion.Cluster: the Restores whose spec.backupName
// is the backup, as Velero finds them.
func (c *DeletionCluster) Restores(ctx context.Context, backup string) ([]string, error) {
	var list v1.RestoreList
	if err := deletionCall(ctx, func(ctx context.Context) error {
		return c.Reader.List(ctx, &list, client.InNamespace(c.Namespace))
	}); err != nil {
		return nil, fmt.Errorf("listing restores: %w", err)
	}
	var out []string
	for _, rs := range list.Items {
		if rs.Spec.BackupName == backup {
			out = append(out, rs.Name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// DeleteRestore implements deletion.Cluster.
func (c *DeletionCluster) DeleteRestore(ctx context.Context, name string) error {
	rs := &v1.Restore{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: name}}
	err := deletionCall(ctx, func(ctx context.Context) error { return c.Client.Delete(ctx, rs) })
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting restore %s/%s: %w", c.Namespace, name, err)
	}
	return nil
}

// RemoveBackup implements deletion.Cluster. The finalizer goes first (with
// an optimistic lock, so another controller's write is not undone), then
// the object, guarded by its UID so that a new backup created under the
// same name in the meantime is never deleted.
func (c *DeletionCluster) RemoveBackup(ctx context.Context, b *v1.Backup) error {
	var cur v1.Backup
	err := deletionCall(ctx, func(ctx context.Context) error { return c.Reader.Get(ctx, client.ObjectKeyFromObject(b), &cur) })
	if apierrors.IsNotFound(err) || (err == nil && cur.UID != b.UID) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading backup %s/%s: %w", b.Namespace, b.Name, err)
	}
	if controllerutil.ContainsFinalizer(&cur, v1.BackupFinalizer) {
		orig := cur.DeepCopy()
		controllerutil.RemoveFinalizer(&cur, v1.BackupFinalizer)
		err := deletionCall(ctx, func(ctx context.Context) error {
			return c.Client.Patch(ctx, &cur, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
		})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("removing finalizer %s from backup %s/%s: %w", v1.BackupFinalizer, b.Namespace, b.Name, err)
		}
	}
	uid := cur.UID
	err = deletionCall(ctx, func(ctx context.Context) error {
		return c.Client.Delete(ctx, &cur, client.Preconditions{UID: &uid})
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting backup %s/%s: %w", b.Namespace, b.Name, err)
	}
	return nil
}

func deletionCall(ctx context.Context, fn func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, deletionCallTimeout)
	defer cancel()
	return fn(ctx)
}

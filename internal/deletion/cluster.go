package deletion

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/cluster"
	"github.com/lifeboat-io/lifeboat/internal/locations"
)

// APICluster is the engine's Cluster on the server's one cluster access,
// in the server's namespace.
type APICluster struct {
	Access    *cluster.Access
	Namespace string
	// Locations opens VolumeSnapshotLocations, credentials included.
	Locations *locations.Resolver
}

var _ Cluster = (*APICluster)(nil)

// SnapshotLocation implements Cluster through the resolver every
// path opens snapshot locations with, so a snapshot is deleted with the
// credentials it was taken with.
func (c *APICluster) SnapshotLocation(ctx context.Context, name string) (string, map[string]string, error) {
	return c.Locations.SnapshotLocation(ctx, name)
}

// Restores implements Cluster: the Restores whose spec.backupName is the
// backup, as Velero finds them.
func (c *APICluster) Restores(ctx context.Context, backup string) ([]string, error) {
	return cluster.RestoresOf(ctx, c.Access.Client, c.Namespace, backup)
}

// DeleteRestore implements Cluster.
func (c *APICluster) DeleteRestore(ctx context.Context, name string) error {
	rs := &v1.Restore{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: name}}
	err := cluster.Call(ctx, func(ctx context.Context) error { return c.Access.Client.Delete(ctx, rs) })
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting restore %s/%s: %w", c.Namespace, name, err)
	}
	return nil
}

// RemoveBackup implements Cluster. The finalizer goes first (with
// an optimistic lock, so another controller's write is not undone), then
// the object, guarded by its UID so that a new backup created under the
// same name in the meantime is never deleted.
func (c *APICluster) RemoveBackup(ctx context.Context, b *v1.Backup) error {
	var cur v1.Backup
	err := cluster.Call(ctx, func(ctx context.Context) error { return c.Access.Client.Get(ctx, client.ObjectKeyFromObject(b), &cur) })
	if apierrors.IsNotFound(err) || (err == nil && cur.UID != b.UID) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading backup %s/%s: %w", b.Namespace, b.Name, err)
	}
	if controllerutil.ContainsFinalizer(&cur, v1.BackupFinalizer) {
		orig := cur.DeepCopy()
		controllerutil.RemoveFinalizer(&cur, v1.BackupFinalizer)
		err := cluster.Call(ctx, func(ctx context.Context) error {
			return c.Access.Client.Patch(ctx, &cur, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
		})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("removing finalizer %s from backup %s/%s: %w", v1.BackupFinalizer, b.Namespace, b.Name, err)
		}
	}
	uid := cur.UID
	err = cluster.Call(ctx, func(ctx context.Context) error {
		return c.Access.Client.Delete(ctx, &cur, client.Preconditions{UID: &uid})
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting backup %s/%s: %w", b.Namespace, b.Name, err)
	}
	return nil
}

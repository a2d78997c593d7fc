package controller

import (
	"cmp"
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/cluster"
	"github.com/lifeboat-io/lifeboat/internal/deletion"
	"github.com/lifeboat-io/lifeboat/internal/storage"
)

// What a deletion request's decisions are made from, read around the
// cache, and what the request records of its backup.

// facts reads, around the cache, what a decision about dbr is made from.
func (r *DeleteBackupRequestReconciler) facts(ctx context.Context, dbr *v1.DeleteBackupRequest) (deletion.Facts, error) {
	f := deletion.Facts{Request: dbr, Now: r.now()}
	name := dbr.Spec.BackupName
	if name == "" {
		return f, nil
	}
	var b v1.Backup
	switch err := r.get(ctx, r.APIReader, client.ObjectKey{Namespace: dbr.Namespace, Name: name}, &b); {
	case err == nil:
		f.Backup = &b
	case !apierrors.IsNotFound(err):
		return f, fmt.Errorf("reading backup %q: %w", name, err)
	}
	if f.Backup != nil && b.Spec.StorageLocation != "" {
		var bsl v1.BackupStorageLocation
		switch err := r.get(ctx, r.APIReader, client.ObjectKey{Namespace: dbr.Namespace, Name: b.Spec.StorageLocation}, &bsl); {
		case err == nil:
			f.Location = &bsl
		case !apierrors.IsNotFound(err):
			return f, fmt.Errorf("reading BackupStorageLocation %q: %w", b.Spec.StorageLocation, err)
		}
	}
	var restores v1.RestoreList
	if err := cluster.Call(ctx, func(ctx context.Context) error {
		return r.APIReader.List(ctx, &restores, client.InNamespace(dbr.Namespace))
	}); err != nil {
		return f, fmt.Errorf("listing restores: %w", err)
	}
	f.Restores = restores.Items
	var requests v1.DeleteBackupRequestList
	if err := cluster.Call(ctx, func(ctx context.Context) error {
		return r.APIReader.List(ctx, &requests, client.InNamespace(dbr.Namespace))
	}); err != nil {
		return f, fmt.Errorf("listing deletion requests: %w", err)
	}
	f.Requests = requests.Items
	return f, nil
}

// predecessor returns the latest request for this very backup (same UID)
// that ended Failed with a checkpoint: a new request for the backup (the
// user's retry, or the one garbage collection renews) carries on from it
// rather than passing every item to every action again.
func predecessor(dbr *v1.DeleteBackupRequest, b *v1.Backup, requests []v1.DeleteBackupRequest) *v1.DeleteBackupRequest {
	var latest *v1.DeleteBackupRequest
	for i := range requests {
		o := &requests[i]
		if o.Name == dbr.Name || o.Spec.BackupName != b.Name || o.Labels[v1.BackupUIDLabel] != string(b.UID) ||
			o.Status.Phase != v1.DeleteBackupRequestPhaseFailed || o.Status.Checkpoint == nil || o.Status.CompletionTimestamp == nil {
			continue
		}
		if latest == nil || o.Status.CompletionTimestamp.After(latest.Status.CompletionTimestamp.Time) {
			latest = o
		}
	}
	return latest
}

// label labels the request as Velero does, so that tools find the requests
// of a backup (and of this very backup, not an earlier one of that name).
func (r *DeleteBackupRequestReconciler) label(ctx context.Context, dbr *v1.DeleteBackupRequest, b *v1.Backup) error {
	name := v1.LabelValue(b.Name)
	if dbr.Labels[v1.BackupNameLabel] == name && dbr.Labels[v1.BackupUIDLabel] == string(b.UID) {
		return nil
	}
	orig := dbr.DeepCopy()
	metav1.SetMetaDataLabel(&dbr.ObjectMeta, v1.BackupNameLabel, name)
	metav1.SetMetaDataLabel(&dbr.ObjectMeta, v1.BackupUIDLabel, string(b.UID))
	err := cluster.Call(ctx, func(ctx context.Context) error { return r.Client.Patch(ctx, dbr, client.MergeFrom(orig)) })
	if err != nil {
		return fmt.Errorf("labelling deletion request %s/%s: %w", dbr.Namespace, dbr.Name, err)
	}
	return nil
}

// openStore opens a location the decision found usable.
func (r *DeleteBackupRequestReconciler) openStore(ctx context.Context, bsl *v1.BackupStorageLocation) (*storage.BackupStore, error) {
	octx, cancel := context.WithTimeout(ctx, deletionStoreTimeout)
	defer cancel()
	store, err := r.Locations.Open(octx, bsl)
	if err == nil {
		err = store.IsValid(octx)
	}
	if err != nil {
		return nil, fmt.Errorf("storage location %q is not usable: %w", bsl.Name, err)
	}
	return store, nil
}

func (r *DeleteBackupRequestReconciler) maxAttempts() int {
	return cmp.Or(max(r.MaxAttempts, 0), DefaultDeletionMaxAttempts)
}

func (r *DeleteBackupRequestReconciler) retryBase() time.Duration {
	return cmp.Or(max(r.RetryBase, 0), DefaultDeletionRetryBase)
}

func (r *DeleteBackupRequestReconciler) requestTTL() time.Duration {
	return cmp.Or(max(r.RequestTTL, 0), DefaultRequestTTL)
}

func (r *DeleteBackupRequestReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *DeleteBackupRequestReconciler) get(ctx context.Context, reader client.Reader, key client.ObjectKey, obj client.Object) error {
	return cluster.Call(ctx, func(ctx context.Context) error { return reader.Get(ctx, key, obj) })
}

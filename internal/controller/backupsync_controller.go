package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/locations"
)

// BackupSyncReconciler brings backups that exist in a storage location but
// not in the cluster into it, as Velero's sync does: a new cluster pointed
// at an existing bucket, written by Lifeboat or by Velero, can restore
// from it. Backups are only ever added, never deleted, by the sync.
type BackupSyncReconciler struct {
	Client    client.Client
	APIReader client.Reader
	Locations *locations.Resolver
	// DefaultPeriod applies to locations without spec.backupSyncPeriod.
	DefaultPeriod time.Duration
	// AddFinalizer puts v1.BackupFinalizer on the Backups it creates (the
	// server's --backup-finalizer).
	AddFinalizer bool
	Log          *slog.Logger
}

// SetupWithManager registers the reconciler.
func (r *BackupSyncReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1.BackupStorageLocation{}, builder.WithPredicates(specChanged)).
		Named("backupsync").
		Complete(r)
}

// Reconcile implements reconcile.Reconciler.
func (r *BackupSyncReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var bsl v1.BackupStorageLocation
	if err := r.Client.Get(ctx, req.NamespacedName, &bsl); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	period := r.DefaultPeriod
	if p := bsl.Spec.BackupSyncPeriod; p != nil {
		period = p.Duration
	}
	if period <= 0 {
		// A zero period turns sync off for the location, as in Velero.
		return ctrl.Result{}, nil
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := r.sync(sctx, &bsl); err != nil {
		// An unreachable store is the storage location controller's to
		// report; here it only delays the sync.
		r.Log.Warn("syncing backups from storage location", "location", req.String(), "error", err)
	}
	return ctrl.Result{RequeueAfter: period}, nil
}

func (r *BackupSyncReconciler) sync(ctx context.Context, bsl *v1.BackupStorageLocation) error {
	store, err := r.Locations.Open(ctx, bsl)
	if err != nil {
		return err
	}
	names, err := store.ListBackups(ctx)
	if err != nil {
		return err
	}
	var inCluster v1.BackupList
	if err := r.APIReader.List(ctx, &inCluster, client.InNamespace(bsl.Namespace)); err != nil {
		return fmt.Errorf("listing backups: %w", err)
	}
	have := make(map[string]*v1.Backup, len(inCluster.Items))
	for i := range inCluster.Items {
		have[inCluster.Items[i].Name] = &inCluster.Items[i]
	}
	for _, name := range names {
		existing := have[name]
		// A synced backup whose status never got written (the server
		// stopped in between) is finished here.
		if existing != nil && (existing.Status.Phase != "" || existing.Annotations[v1.SyncedAnnotation] == "") {
			continue
		}
		data, err := store.GetBackupMetadata(ctx, name)
		if err != nil {
			r.Log.Warn("reading a backup's metadata during sync", "location", bsl.Name, "backup", name, "error", err)
			continue
		}
		if err := r.create(ctx, bsl, name, data, existing); err != nil {
			r.Log.Warn("syncing a backup", "location", bsl.Name, "backup", name, "error", err)
			continue
		}
		r.Log.Info("synced backup from storage location", "location", bsl.Name, "backup", name)
	}
	return nil
}

// create adds the backup described by data (its velero-backup.json) to the
// cluster, status included; existing is a half-synced Backup to finish.
func (r *BackupSyncReconciler) create(ctx context.Context, bsl *v1.BackupStorageLocation, name string, data []byte, existing *v1.Backup) error {
	var stored v1.Backup
	if err := json.Unmarshal(data, &stored); err != nil {
		return fmt.Errorf("decoding velero-backup.json: %w", err)
	}
	if stored.Name != name {
		return fmt.Errorf("velero-backup.json names backup %q, but it is stored as %q", stored.Name, name)
	}
	b := &v1.Backup{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   bsl.Namespace,
			Name:        name,
			Labels:      stored.Labels,
			Annotations: stored.Annotations,
		},
		Spec: stored.Spec,
	}
	if r.AddFinalizer {
		// From its first moment, as the backup controller would add it:
		// deleting a synced Backup must delete its data, or the next sync
		// brings it back.
		b.Finalizers = []string{v1.BackupFinalizer}
	}
	// The backup belongs to the location it was found in, whatever it was
	// called in the cluster that wrote it.
	b.Spec.StorageLocation = bsl.Name
	if b.Labels == nil {
		b.Labels = map[string]string{}
	}
	b.Labels[v1.StorageLocationLabel] = v1.LabelValue(bsl.Name)
	delete(b.Labels, v1.GCFailureLabel)
	if b.Annotations == nil {
		b.Annotations = map[string]string{}
	}
	b.Annotations[v1.SyncedAnnotation] = bsl.Name
	// The Backup gets a UID of its own; the one the data was written by
	// is what its deletion checks the store against. Whatever the file
	// says on this annotation is not to be trusted over its own UID.
	delete(b.Annotations, v1.StoredUIDAnnotation)
	for _, a := range v1.ClusterOnlyAnnotations {
		delete(b.Annotations, a)
	}
	if stored.UID != "" {
		b.Annotations[v1.StoredUIDAnnotation] = string(stored.UID)
	}
	if existing != nil {
		b = existing
	} else if err := r.Client.Create(ctx, b); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return fmt.Errorf("creating backup: %w", err)
	}
	err := writeStatus(ctx, r.Client, r.APIReader, b, func() {
		b.Status = stored.Status
		setBackupConditions(b)
	})
	if err != nil {
		return fmt.Errorf("recording the synced backup's status: %w", err)
	}
	return nil
}

package controller

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/integrity"
	"github.com/lifeboat-io/lifeboat/internal/locations"
	"github.com/lifeboat-io/lifeboat/internal/storage"
)

// DownloadRequestReconciler answers DownloadRequests with a URL the client
// can read the file from, and deletes requests once their URL has expired.
type DownloadRequestReconciler struct {
	Client    client.Client
	Locations *locations.Resolver
	// URLTTL is how long a download URL stays valid.
	URLTTL time.Duration
	Log    *slog.Logger
}

// SetupWithManager registers the reconciler.
func (r *DownloadRequestReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).For(&v1.DownloadRequest{}).Named("downloadrequest").Complete(r)
}

// Reconcile implements reconcile.Reconciler.
func (r *DownloadRequestReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var dr v1.DownloadRequest
	if err := r.Client.Get(ctx, req.NamespacedName, &dr); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if dr.Status.Phase == v1.DownloadRequestPhaseProcessed {
		if exp := dr.Status.Expiration; exp != nil {
			if wait := time.Until(exp.Time); wait > 0 {
				return ctrl.Result{RequeueAfter: wait}, nil
			}
		}
		return ctrl.Result{}, client.IgnoreNotFound(r.Client.Delete(ctx, &dr))
	}

	url, err := r.url(ctx, &dr)
	exp := metav1.NewTime(time.Now().Add(r.URLTTL))
	werr := writeStatus(ctx, r.Client, nil, &dr, func() {
		dr.Status.Phase = v1.DownloadRequestPhaseProcessed
		dr.Status.Expiration = &exp
		if err != nil {
			// The request is answered either way: a client waiting for it
			// reads the reason from the condition instead of timing out.
			dr.Status.DownloadURL = ""
			setCondition(&dr.Status.Conditions, dr.Generation, ConditionProcessed, false, "Failed", err.Error())
		} else {
			dr.Status.DownloadURL = url
			setCondition(&dr.Status.Conditions, dr.Generation, ConditionProcessed, true, "URLCreated", "")
		}
	})
	if werr != nil {
		return ctrl.Result{}, fmt.Errorf("updating status of download request %s: %w", req, werr)
	}
	return ctrl.Result{RequeueAfter: r.URLTTL}, nil
}

func (r *DownloadRequestReconciler) url(ctx context.Context, dr *v1.DownloadRequest) (string, error) {
	t := dr.Spec.Target
	backupName := t.Name
	isRestore := false
	switch t.Kind {
	case v1.DownloadTargetKindRestoreLog, v1.DownloadTargetKindRestoreResults, v1.DownloadTargetKindRestoreResourceList,
		v1.DownloadTargetKindRestoreItemOperations, v1.DownloadTargetKindRestoreVolumeInfo:
		isRestore = true
		var rs v1.Restore
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: dr.Namespace, Name: t.Name}, &rs); err != nil {
			return "", fmt.Errorf("restore %q: %w", t.Name, err)
		}
		backupName = rs.Spec.BackupName
	}
	var b v1.Backup
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: dr.Namespace, Name: backupName}, &b); err != nil {
		return "", fmt.Errorf("backup %q: %w", backupName, err)
	}
	bsl, err := r.Locations.Find(ctx, b.Spec.StorageLocation)
	if err != nil {
		return "", err
	}
	store, err := r.Locations.Open(ctx, bsl)
	if err != nil {
		return "", err
	}
	var key string
	if isRestore {
		key, err = restoreKey(store, t)
	} else {
		key, err = backupKey(store, t)
	}
	if err != nil {
		return "", err
	}
	return store.ObjectStore().CreateSignedURL(ctx, store.Bucket(), key, r.URLTTL)
}

func backupKey(s *storage.BackupStore, t v1.DownloadTarget) (string, error) {
	n := t.Name
	files := map[v1.DownloadTargetKind]string{
		v1.DownloadTargetKindBackupLog:                 storage.BackupLogFile(n),
		v1.DownloadTargetKindBackupContents:            storage.BackupContentsFile(n),
		v1.DownloadTargetKindBackupVolumeSnapshots:     storage.BackupVolumeSnapshotsFile(n),
		v1.DownloadTargetKindBackupItemOperations:      storage.BackupItemOperationsFile(n),
		v1.DownloadTargetKindBackupResourceList:        storage.BackupResourceListFile(n),
		v1.DownloadTargetKindBackupResults:             storage.BackupResultsFile(n),
		v1.DownloadTargetKindCSIVolumeSnapshots:        storage.CSIVolumeSnapshotsFile(n),
		v1.DownloadTargetKindCSIVolumeSnapshotContents: storage.CSIVolumeSnapshotContentsFile(n),
		v1.DownloadTargetKindBackupVolumeInfos:         storage.BackupVolumeInfoFile(n),
		v1.DownloadTargetKindBackupItemDigests:         integrity.ItemDigestsFile(n),
	}
	f, ok := files[t.Kind]
	if !ok {
		return "", fmt.Errorf("spec.target.kind %q is not a backup file", t.Kind)
	}
	return s.BackupKey(n, f), nil
}

func restoreKey(s *storage.BackupStore, t v1.DownloadTarget) (string, error) {
	n := t.Name
	files := map[v1.DownloadTargetKind]string{
		v1.DownloadTargetKindRestoreLog:            storage.RestoreLogFile(n),
		v1.DownloadTargetKindRestoreResults:        storage.RestoreResultsFile(n),
		v1.DownloadTargetKindRestoreResourceList:   storage.RestoreResourceListFile(n),
		v1.DownloadTargetKindRestoreItemOperations: storage.RestoreItemOperationsFile(n),
		v1.DownloadTargetKindRestoreVolumeInfo:     storage.RestoreVolumeInfoFile(n),
	}
	f, ok := files[t.Kind]
	if !ok {
		return "", fmt.Errorf("spec.target.kind %q is not a restore file", t.Kind)
	}
	return s.RestoreKey(n, f), nil
}

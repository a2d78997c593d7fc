package controller

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/deletion"
)

// What wakes a waiting request: the end of its backup's run or of a
// restore of it.

// waitingOnRestore wakes the unfinished requests for the backup of a
// restore that has ended, so a deletion that waited for it starts at once
// rather than at its next look (retryBase later).
func (r *DeleteBackupRequestReconciler) waitingOnRestore(ctx context.Context, obj client.Object) []reconcile.Request {
	rs, ok := obj.(*v1.Restore)
	if !ok || rs.Spec.BackupName == "" {
		return nil
	}
	switch rs.Status.Phase {
	case "", v1.RestorePhaseNew, v1.RestorePhaseInProgress:
		return nil
	}
	return r.unfinishedRequests(ctx, rs.Namespace, rs.Spec.BackupName)
}

// waitingOnBackup does the same for a backup whose run has ended.
func (r *DeleteBackupRequestReconciler) waitingOnBackup(ctx context.Context, obj client.Object) []reconcile.Request {
	b, ok := obj.(*v1.Backup)
	if !ok || deletion.BackupRunning(b.Status.Phase) {
		return nil
	}
	return r.unfinishedRequests(ctx, b.Namespace, b.Name)
}

// unfinishedRequests names the requests for backup that have not ended,
// from the cache. They are matched by spec.backupName, not by label: a
// request made by hand is labelled only once it starts.
func (r *DeleteBackupRequestReconciler) unfinishedRequests(ctx context.Context, namespace, backup string) []reconcile.Request {
	var list v1.DeleteBackupRequestList
	if err := r.Client.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		r.Log.Warn("listing the deletion requests of a backup", "backup", backup, "error", err)
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if o := &list.Items[i]; o.Spec.BackupName == backup && !requestFinished(o.Status.Phase) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)})
		}
	}
	return out
}

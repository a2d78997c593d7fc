package controller

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/deletion"
)

// followers names the waiting requests for the same backup as obj, and
// the request obj waits for when obj brings consent to skip failed
// actions, so that it takes it at once.
func (r *DeleteBackupRequestReconciler) followers(ctx context.Context, obj client.Object) []reconcile.Request {
	dbr, ok := obj.(*v1.DeleteBackupRequest)
	if !ok || dbr.Spec.BackupName == "" {
		return nil
	}
	var lead []reconcile.Request
	if dbr.Spec.SkipFailedActions && dbr.Status.HandledBy != "" {
		lead = append(lead, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: dbr.Namespace, Name: dbr.Status.HandledBy}})
	}
	var list v1.DeleteBackupRequestList
	if err := r.Client.List(ctx, &list, client.InNamespace(dbr.Namespace)); err != nil {
		r.Log.Warn("listing the deletion requests waiting on another", "request", dbr.Name, "error", err)
		return nil
	}
	out := lead
	for i := range list.Items {
		o := &list.Items[i]
		if o.Name != dbr.Name && o.Spec.BackupName == dbr.Spec.BackupName && requestWaiting(o.Status.Phase) && !o.Spec.DryRun {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)})
		}
	}
	return out
}

// claim takes dbr's backup in this process and returns "", or returns the
// request that holds it. Requests whose listings could not yet see each
// other (made a moment apart, started at once by the two workers) are
// ordered by it; deletion.Decide orders all others. A claim whose request
// is gone or finished is stale.
func (r *DeleteBackupRequestReconciler) claim(dbr *v1.DeleteBackupRequest, requests []v1.DeleteBackupRequest) string {
	key := deletionBackupKey(dbr)
	if holder, ok := r.backups.Load(key); ok && holder != dbr.Name {
		alive := slices.ContainsFunc(requests, func(o v1.DeleteBackupRequest) bool {
			return o.Name == holder && !requestFinished(o.Status.Phase)
		})
		if !alive {
			r.backups.CompareAndDelete(key, holder)
		}
	}
	if holder, loaded := r.backups.LoadOrStore(key, dbr.Name); loaded && holder != dbr.Name {
		return holder.(string)
	}
	return ""
}

// release gives up dbr's claim on its backup, once dbr has ended.
func (r *DeleteBackupRequestReconciler) release(dbr *v1.DeleteBackupRequest) {
	r.backups.CompareAndDelete(deletionBackupKey(dbr), dbr.Name)
}

// follow ends a request that waited for another with that one's outcome.
func (r *DeleteBackupRequestReconciler) follow(ctx context.Context, dbr *v1.DeleteBackupRequest) (ctrl.Result, error) {
	var leader v1.DeleteBackupRequest
	err := r.get(ctx, r.APIReader, client.ObjectKey{Namespace: dbr.Namespace, Name: dbr.Status.HandledBy}, &leader)
	if apierrors.IsNotFound(err) {
		// Gone before it ended: this request does the work itself.
		if err := r.patchStatus(ctx, dbr, func(s *v1.DeleteBackupRequestStatus) { s.HandledBy = "" }); err != nil {
			return ctrl.Result{}, err
		}
		return r.start(ctx, dbr)
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("reading deletion request %s: %w", dbr.Status.HandledBy, err)
	}
	if !requestFinished(leader.Status.Phase) {
		return ctrl.Result{RequeueAfter: deletionWaitRecheck}, nil
	}
	now := metav1.NewTime(r.now())
	return ctrl.Result{}, r.patchStatus(ctx, dbr, func(s *v1.DeleteBackupRequestStatus) {
		s.Phase = leader.Status.Phase
		s.Errors = slices.Clone(leader.Status.Errors)
		s.ErrorDetails = slices.Clone(leader.Status.ErrorDetails)
		s.Report = leader.Status.Report.DeepCopy()
		s.CompletionTimestamp = &now
		setWaiting(dbr, "", "")
	})
}

// joinLeader makes dbr a follower of the request d names: it waits for that
// one and ends with its outcome.
func (r *DeleteBackupRequestReconciler) joinLeader(ctx context.Context, dbr *v1.DeleteBackupRequest, b *v1.Backup, d deletion.Decision) (ctrl.Result, error) {
	if dbr.Status.HandledBy != "" {
		return r.follow(ctx, dbr)
	}
	r.Log.Info("another deletion request for the backup runs first; this one waits for it",
		"request", dbr.Namespace+"/"+dbr.Name, "backup", dbr.Spec.BackupName, "handledBy", d.Leader)
	if b != nil {
		if err := r.label(ctx, dbr, b); err != nil {
			return ctrl.Result{}, err
		}
	}
	err := r.patchStatus(ctx, dbr, func(s *v1.DeleteBackupRequestStatus) {
		s.Phase = v1.DeleteBackupRequestPhaseNew
		s.HandledBy = d.Leader
		setWaiting(dbr, d.Reason, d.Message)
	})
	return ctrl.Result{RequeueAfter: deletionWaitRecheck}, err
}

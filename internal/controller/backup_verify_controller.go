package controller

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/archive"
	"github.com/lifeboat-io/lifeboat/internal/cluster"
	"github.com/lifeboat-io/lifeboat/internal/integrity"
	"github.com/lifeboat-io/lifeboat/internal/locations"
	"github.com/lifeboat-io/lifeboat/internal/metrics"
)

// verifyTimeout bounds one verification: reading a whole backup back,
// minutes for the largest.
const verifyTimeout = time.Hour

// BackupVerifyReconciler answers the verification requests on Backups
// (v1.VerifyRequestAnnotation, set by `lifeboat backup verify` or, for the
// backups of a Schedule annotated v1.VerifyBackupsAnnotation, by the
// schedule): it checks every stored file and tarball entry against the
// digests the backup wrote (internal/integrity) and records the outcome as
// the Verified condition and v1.VerificationAnnotation, then marks the
// request answered (v1.VerifiedRequestAnnotation). A request on a backup
// still running is answered once the backup ends.
type BackupVerifyReconciler struct {
	Client    client.Client
	APIReader client.Reader
	Locations *locations.Resolver
	// Limits bound what a tarball may unpack to, as for restores.
	Limits archive.Limits
	Log    *slog.Logger
	// Now is the clock (tests); nil is time.Now.
	Now func() time.Time
}

// verifyPending says whether o carries a request not answered yet.
func verifyPending(o client.Object) bool {
	a := o.GetAnnotations()
	return a[v1.VerifyRequestAnnotation] != "" && a[v1.VerifyRequestAnnotation] != a[v1.VerifiedRequestAnnotation]
}

// SetupWithManager registers the reconciler. One verification at a time:
// each reads a whole backup from its store.
func (r *BackupVerifyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1.Backup{}, builder.WithPredicates(predicate.NewPredicateFuncs(verifyPending))).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1}).
		Named("backupverify").
		Complete(r)
}

// Reconcile implements reconcile.Reconciler.
func (r *BackupVerifyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var b v1.Backup
	if err := r.reader().Get(ctx, req.NamespacedName, &b); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !verifyPending(&b) || b.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	if !b.Status.Phase.IsTerminal() {
		// Its end is an update, which brings it back here.
		return ctrl.Result{}, nil
	}
	schedule := b.Labels[v1.ScheduleNameLabel]
	vctx, cancel := context.WithTimeout(ctx, verifyTimeout)
	reason, summary, err := r.verify(vctx, &b)
	cancel()
	if err != nil {
		metrics.BackupVerified(schedule, v1.VerificationError)
		return ctrl.Result{}, fmt.Errorf("verifying backup %s: %w", req, err)
	}
	metrics.BackupVerified(schedule, reason)
	r.Log.Info("backup verified", "backup", req.String(), "result", reason, "summary", summary)
	now := r.now().UTC().Format(time.RFC3339)
	if err := writeStatus(ctx, r.Client, r.APIReader, &b, func() {
		setCondition(&b.Status.Conditions, b.Generation, v1.BackupConditionVerified, reason == v1.VerificationVerified, reason, now+": "+summary)
	}); err != nil {
		return ctrl.Result{}, fmt.Errorf("recording the verification of backup %s: %w", req, err)
	}
	// Last: a client that sees its request answered finds the outcome.
	token := b.Annotations[v1.VerifyRequestAnnotation]
	if err := patchObject(ctx, r.Client, &b, func() {
		b.Annotations[v1.VerificationAnnotation] = fmt.Sprintf("%s %s: %s", now, reason, summary)
		b.Annotations[v1.VerifiedRequestAnnotation] = token
	}); err != nil {
		return ctrl.Result{}, fmt.Errorf("recording the verification of backup %s: %w", req, err)
	}
	return ctrl.Result{}, nil
}

// verify checks b's stored files; the error is for a store that could not
// be read, which is retried rather than answered.
func (r *BackupVerifyReconciler) verify(ctx context.Context, b *v1.Backup) (reason, summary string, err error) {
	if b.Status.Phase == v1.BackupPhaseFailed || b.Status.Phase == v1.BackupPhaseFailedValidation {
		return v1.VerificationNotStored, fmt.Sprintf("the backup ended %s: it stored no backup to verify", b.Status.Phase), nil
	}
	bsl, err := r.Locations.Find(ctx, b.Spec.StorageLocation)
	if err != nil {
		return "", "", err
	}
	store, err := r.Locations.Open(ctx, bsl)
	if err != nil {
		return "", "", err
	}
	rep, err := integrity.Check(ctx, store, b.Name, b.Annotations[v1.DigestsAnnotation], r.Limits)
	if err != nil {
		return "", "", err
	}
	switch {
	case rep.NoDigests:
		return v1.VerificationNoDigests, rep.Summary(), nil
	case rep.Verified():
		return v1.VerificationVerified, rep.Summary(), nil
	}
	return v1.VerificationDiffers, rep.Summary(), nil
}

func (r *BackupVerifyReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// reader reads around the cache, each call bounded by cluster.CallTimeout.
func (r *BackupVerifyReconciler) reader() client.Reader {
	return cluster.TimedReader{Reader: r.APIReader}
}

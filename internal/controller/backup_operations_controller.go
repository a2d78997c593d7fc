package controller

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/backup"
	"github.com/lifeboat-io/lifeboat/internal/integrity"
	"github.com/lifeboat-io/lifeboat/internal/itemops"
	"github.com/lifeboat-io/lifeboat/internal/locations"
	"github.com/lifeboat-io/lifeboat/internal/metrics"
	"github.com/lifeboat-io/lifeboat/internal/storage"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

// BackupOperationsReconciler follows the asynchronous operations that
// backup item actions started: it polls each one's Progress until all have
// ended (or timed out, in which case they are cancelled), then moves the
// backup from WaitingForPluginOperations to Completed or PartiallyFailed.
// Progress is kept in the backup's item operations file, so a restarted
// server picks up where it stopped.
type BackupOperationsReconciler struct {
	Client    client.Client
	APIReader client.Reader
	Locations *locations.Resolver
	Plugins   interface {
		BackupItemActionV2(name string) (api.BackupItemActionV2, error)
	}
	// Frequency is how often pending operations are polled.
	Frequency time.Duration
	Log       *slog.Logger
	// Events records the backups' phases as Kubernetes Events.
	Events events.EventRecorder
}

func waitingForOperations(phase v1.BackupPhase) bool {
	return phase == v1.BackupPhaseWaitingForPluginOperations || phase == v1.BackupPhaseWaitingForPluginOperationsPartiallyFailed
}

// SetupWithManager registers the reconciler for backups that wait.
func (r *BackupOperationsReconciler) SetupWithManager(mgr ctrl.Manager) error {
	waiting := predicate.NewPredicateFuncs(func(o client.Object) bool {
		b, ok := o.(*v1.Backup)
		return ok && waitingForOperations(b.Status.Phase)
	})
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1.Backup{}, builder.WithPredicates(waiting)).
		Named("backupoperations").
		Complete(r)
}

// Reconcile implements reconcile.Reconciler.
func (r *BackupOperationsReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var b v1.Backup
	if err := r.APIReader.Get(ctx, req.NamespacedName, &b); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !waitingForOperations(b.Status.Phase) {
		return ctrl.Result{}, nil
	}
	bsl, err := r.Locations.Find(ctx, b.Spec.StorageLocation)
	if err != nil {
		return ctrl.Result{}, err
	}
	store, err := r.Locations.Open(ctx, bsl)
	if err != nil {
		return ctrl.Result{}, err
	}
	written := storage.NewDigestRecorder()
	store = store.Recording(written)
	key := store.BackupKey(b.Name, storage.BackupItemOperationsFile(b.Name))
	var ops []itemops.BackupOperation
	if err := store.GetGzipJSON(ctx, key, &ops); err != nil {
		return ctrl.Result{}, fmt.Errorf("reading the item operations of backup %s: %w", req, err)
	}

	timeout := b.Spec.ItemOperationTimeout.Duration
	if timeout <= 0 {
		timeout = itemops.DefaultTimeout
	}
	now := time.Now()
	for i := range ops {
		r.poll(&b, &ops[i], timeout, now)
	}
	if err := store.PutItemOperations(ctx, b.Name, ops); err != nil {
		return ctrl.Result{}, fmt.Errorf("writing the item operations of backup %s: %w", req, err)
	}
	attempted, completed, failed := itemops.Counts(ops)
	pending := attempted - completed - failed

	// finish records the polled counts on a backup as read, and the end
	// of the wait once nothing is pending.
	finish := func(b *v1.Backup) {
		s := &b.Status
		s.BackupItemOperationsAttempted = attempted
		s.BackupItemOperationsCompleted = completed
		s.BackupItemOperationsFailed = failed
		if pending == 0 {
			partial := failed > 0 || s.Phase == v1.BackupPhaseWaitingForPluginOperationsPartiallyFailed
			s.Phase = v1.BackupPhaseCompleted
			if partial {
				s.Phase = v1.BackupPhasePartiallyFailed
			}
			s.Errors += failed
			done := metav1.NewTime(now)
			s.CompletionTimestamp = &done
		}
		setBackupConditions(b)
	}
	if pending == 0 {
		// The stored metadata says what the backup is; it must not stay
		// "waiting" once the cluster says otherwise.
		ended := b.DeepCopy()
		finish(ended)
		if err := putBackupMetadata(ctx, store, ended); err != nil {
			return ctrl.Result{}, err
		}
		r.Log.Info("asynchronous operations ended", "backup", req.String(), "phase", ended.Status.Phase, "completed", completed, "failed", failed)
	}
	// What was rewritten goes into the digests file, so that a
	// verification does not take this controller's writes for tampering.
	sum, err := integrity.Amend(ctx, store, b.Name, written.Under(store.BackupDir(b.Name)))
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("backup %s: %w", req, err)
	}
	if sum != "" {
		if err := recordDigests(ctx, r.Client, &b, sum); err != nil {
			return ctrl.Result{}, fmt.Errorf("recording the digest of backup %s's digests file: %w", req, err)
		}
	}
	before := string(b.Status.Phase)
	if err := writeStatus(ctx, r.Client, r.APIReader, &b, func() { finish(&b) }); err != nil {
		return ctrl.Result{}, fmt.Errorf("updating status of backup %s: %w", req, err)
	}
	if pending > 0 {
		return ctrl.Result{RequeueAfter: r.Frequency}, nil
	}
	var took time.Duration
	if start := b.Status.StartTimestamp; start != nil {
		took = now.Sub(start.Time)
	}
	metrics.BackupOperationsEnded(b.Labels[v1.ScheduleNameLabel], b.Status.Phase, took, failed, b.Status.Errors)
	recordPhaseChange(r.Events, &b, before)
	return ctrl.Result{}, nil
}

// poll updates one operation: a timed-out operation is cancelled and
// failed; otherwise its action reports progress.
func (r *BackupOperationsReconciler) poll(b *v1.Backup, op *itemops.BackupOperation, timeout time.Duration, now time.Time) {
	if op.Status.Done() {
		return
	}
	action, err := r.Plugins.BackupItemActionV2(op.Spec.BackupItemAction)
	if err != nil {
		// The plugin may come back (a restart, a redeploy); the timeout
		// ends the wait if it does not.
		r.Log.Warn("backup item action of an operation is not available", "action", op.Spec.BackupItemAction, "error", err)
		action = nil
	}
	if op.Status.Created != nil && now.Sub(op.Status.Created.Time) > timeout {
		if action != nil {
			if err := action.Cancel(op.Spec.OperationID, b); err != nil {
				r.Log.Warn("cancelling a timed-out operation", "action", op.Spec.BackupItemAction, "operationID", op.Spec.OperationID, "error", err)
			}
		}
		op.Status.Phase = itemops.PhaseFailed
		op.Status.Error = fmt.Sprintf("operation did not finish within %s (spec.itemOperationTimeout); it was cancelled", timeout)
		return
	}
	if action == nil {
		return
	}
	progress, err := action.Progress(op.Spec.OperationID, b)
	if err != nil {
		op.Status.Phase, op.Status.Error = itemops.PhaseFailed, "reading progress: "+err.Error()
		return
	}
	op.Status.Apply(progress, now)
}

// putBackupMetadata rewrites velero-backup.json with b's current status.
func putBackupMetadata(ctx context.Context, store *storage.BackupStore, b *v1.Backup) error {
	data, err := backup.MarshalMetadata(b)
	if err != nil {
		return err
	}
	if err := store.PutBackupMetadata(ctx, b.Name, data); err != nil {
		return fmt.Errorf("writing the metadata of backup %s: %w", b.Name, err)
	}
	return nil
}

package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/cluster"
	"github.com/lifeboat-io/lifeboat/internal/locations"
)

// Values of the velero.io/gc-failure label: why an expired backup is kept.
// The first three are Velero's; BSLUnavailable is Lifeboat's own, for a
// location not found Available (unreachable, or not checked yet), where a
// deletion would only wait (Velero would try it and fail it).
const (
	GCFailureBSLNotFound    = string(locations.Missing)
	GCFailureBSLCannotGet   = "BSLCannotGet"
	GCFailureBSLReadOnly    = string(locations.ReadOnly)
	GCFailureBSLUnavailable = string(locations.NotAvailable)
)

const (
	// DefaultGCBlockedRetry is how soon a backup whose location keeps it from
	// being collected is looked at again. A change to any location wakes the
	// blocked backups at once; this only covers what no event announces.
	DefaultGCBlockedRetry = time.Minute
	// DefaultDeletionRetry is how long after asking for a backup's deletion
	// it is asked again if the backup is still there: the request may have
	// ended with errors (an unreachable snapshot provider, say), and the data
	// must not be kept forever because of one failure. Velero retries at the
	// same pace.
	DefaultDeletionRetry = time.Hour
	// maxExpiryWait caps a wait for an expiration far ahead. Timers run on
	// the monotonic clock, which stands still while a machine sleeps; a wall
	// clock instant must be checked again now and then.
	maxExpiryWait = 12 * time.Hour
)

// GCReconciler asks for the deletion of expired backups. Each Backup is
// requeued for its own expiration instant, so a backup is collected within
// moments of expiring and an idle server does no periodic scanning.
type GCReconciler struct {
	Client client.Client
	// APIReader lists deletion requests around the cache: a request this
	// controller created a moment ago must be seen, or a second one follows.
	APIReader client.Reader
	Locations *locations.Resolver
	Log       *slog.Logger
	// BlockedRetry and DeletionRetry override DefaultGCBlockedRetry and
	// DefaultDeletionRetry when set.
	BlockedRetry  time.Duration
	DeletionRetry time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// SetupWithManager registers the reconciler. A Backup is looked at when it
// appears and whenever its expiration or phase changes; its own label
// writes do not wake it. A change to a storage location wakes the backups
// that location held back.
func (r *GCReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1.Backup{}, builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				prev, ok1 := e.ObjectOld.(*v1.Backup)
				cur, ok2 := e.ObjectNew.(*v1.Backup)
				if !ok1 || !ok2 {
					return true
				}
				return prev.Status.Phase != cur.Status.Phase || !sameTime(prev.Status.Expiration, cur.Status.Expiration)
			},
			DeleteFunc: func(event.DeleteEvent) bool { return false },
		})).
		Watches(&v1.BackupStorageLocation{}, handler.EnqueueRequestsFromMapFunc(r.blockedBackups)).
		Named("gc").
		Complete(r)
}

// blockedBackups names the backups GC held back because of a location. All
// of them, not only those of this location: which location a backup uses
// can depend on which one is the default, and the set is small.
func (r *GCReconciler) blockedBackups(ctx context.Context, obj client.Object) []reconcile.Request {
	var list v1.BackupList
	err := cluster.Call(ctx, func(ctx context.Context) error {
		return r.Client.List(ctx, &list, client.InNamespace(obj.GetNamespace()), client.HasLabels{v1.GCFailureLabel})
	})
	if err != nil {
		r.Log.Warn("listing the backups garbage collection is holding back", "location", obj.GetName(), "error", err)
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

// Reconcile implements reconcile.Reconciler.
func (r *GCReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var b v1.Backup
	if err := cluster.Call(ctx, func(ctx context.Context) error { return r.Client.Get(ctx, req.NamespacedName, &b) }); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// A deleted Backup is the backup controller's (the finalizer), and one
	// without an expiration never expires.
	if b.DeletionTimestamp != nil || b.Status.Expiration == nil {
		return ctrl.Result{}, nil
	}
	now := r.now()
	if wait := b.Status.Expiration.Sub(now); wait > 0 {
		return ctrl.Result{RequeueAfter: min(wait, maxExpiryWait)}, nil
	}
	switch {
	case b.Status.Phase == v1.BackupPhaseDeleting:
		// Being deleted already; looked at again in case that deletion fails.
		return ctrl.Result{RequeueAfter: r.deletionRetry()}, nil
	case !b.Status.Phase.IsTerminal():
		// Still running or waiting for plugin operations: deleting it now
		// would race with the writes of its last files. The phase change at
		// its end wakes this controller.
		return ctrl.Result{}, nil
	}
	log := r.Log.With("backup", req.String(), "expiration", b.Status.Expiration.Time.UTC().Format(time.RFC3339))

	if reason, detail := r.locationBlocks(ctx, &b); reason != "" {
		if b.Labels[v1.GCFailureLabel] != reason {
			log.Warn("expired backup cannot be garbage-collected yet", "reason", reason, "detail", detail)
		}
		if err := r.setFailureLabel(ctx, &b, reason); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{RequeueAfter: r.blockedRetry()}, nil
	}
	if err := r.setFailureLabel(ctx, &b, ""); err != nil {
		return ctrl.Result{}, err
	}
	name, created, err := ensureBackupDeletionRequested(ctx, r.Client, r.APIReader, &b)
	if err != nil {
		return ctrl.Result{}, err
	}
	if created {
		log.Info("backup expired: requested its deletion", "request", name)
	}
	return ctrl.Result{RequeueAfter: r.deletionRetry()}, nil
}

// locationBlocks says why the backup's location does not allow deleting it
// now ("" when it does), with a message for the log.
func (r *GCReconciler) locationBlocks(ctx context.Context, b *v1.Backup) (reason, detail string) {
	var bsl *v1.BackupStorageLocation
	err := cluster.Call(ctx, func(ctx context.Context) (err error) {
		bsl, err = r.Locations.Find(ctx, b.Spec.StorageLocation)
		return err
	})
	var nf *locations.NotFoundError
	switch {
	case errors.As(err, &nf):
		return GCFailureBSLNotFound, nf.Error()
	case err != nil:
		return GCFailureBSLCannotGet, err.Error()
	}
	// The deletion's own rule: a request made now would only wait.
	problem, msg := locations.Writable(bsl.Name, bsl)
	return string(problem), msg
}

// setFailureLabel sets the gc-failure label to reason, or removes it when
// reason is "". Nothing is written when the label is already right.
func (r *GCReconciler) setFailureLabel(ctx context.Context, b *v1.Backup, reason string) error {
	if b.Labels[v1.GCFailureLabel] == reason {
		return nil
	}
	orig := b.DeepCopy()
	if reason == "" {
		delete(b.Labels, v1.GCFailureLabel)
	} else {
		if b.Labels == nil {
			b.Labels = map[string]string{}
		}
		b.Labels[v1.GCFailureLabel] = reason
	}
	err := cluster.Call(ctx, func(ctx context.Context) error { return r.Client.Patch(ctx, b, client.MergeFrom(orig)) })
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("labelling backup %s/%s %s=%q: %w", b.Namespace, b.Name, v1.GCFailureLabel, reason, err)
	}
	return nil
}

func (r *GCReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *GCReconciler) blockedRetry() time.Duration {
	return cmp.Or(max(r.BlockedRetry, 0), DefaultGCBlockedRetry)
}

func (r *GCReconciler) deletionRetry() time.Duration {
	return cmp.Or(max(r.DeletionRetry, 0), DefaultDeletionRetry)
}

func sameTime(a, b *metav1.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(b)
}

// ensureBackupDeletionRequested creates a DeleteBackupRequest for b unless
// one is pending (New, InProgress, or not yet picked up), and returns the
// name of the pending or new request. Requests are found by the backup's
// name and UID labels, as Velero's tools label them, so a request made by
// Velero's CLI counts too, and one for an earlier backup of the same name
// does not.
func ensureBackupDeletionRequested(ctx context.Context, c client.Client, reader client.Reader, b *v1.Backup) (name string, created bool, err error) {
	lctx, cancel := context.WithTimeout(ctx, cluster.CallTimeout)
	defer cancel()
	var list v1.DeleteBackupRequestList
	if err := reader.List(lctx, &list, client.InNamespace(b.Namespace), client.MatchingLabels(v1.NewDeleteBackupRequest(b).Labels)); err != nil {
		return "", false, fmt.Errorf("listing the deletion requests of backup %s/%s: %w", b.Namespace, b.Name, err)
	}
	for _, dbr := range list.Items {
		switch dbr.Status.Phase {
		case "", v1.DeleteBackupRequestPhaseNew, v1.DeleteBackupRequestPhaseInProgress:
			return dbr.Name, false, nil
		}
	}
	dbr := v1.NewDeleteBackupRequest(b)
	cctx, cancel2 := context.WithTimeout(ctx, cluster.CallTimeout)
	defer cancel2()
	if err := c.Create(cctx, dbr); err != nil {
		return "", false, fmt.Errorf("creating a deletion request for backup %s/%s: %w", b.Namespace, b.Name, err)
	}
	return dbr.Name, true, nil
}

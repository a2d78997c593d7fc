package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/deletion"
	"github.com/lifeboat-io/lifeboat/internal/locations"
	"github.com/lifeboat-io/lifeboat/internal/storage"
)

// Condition types of DeleteBackupRequests and Backups set by the deletion
// controller.
const (
	// ConditionWaiting is True while a request waits: for its backup's
	// storage location to become Available, for a restore of the backup to
	// end, for another request for the same backup, or for its next attempt.
	ConditionWaiting = "Waiting"
	// ConditionDeletionFailed is set on a Backup whose deletion attempt
	// failed; the backup is back in the phase it had before.
	ConditionDeletionFailed = "DeletionFailed"
)

// Defaults of DeleteBackupRequestReconciler fields left at zero.
const (
	DefaultDeletionMaxAttempts = 5
	DefaultDeletionRetryBase   = 30 * time.Second
	// DefaultRequestTTL is how long a finished request is kept, as in Velero.
	DefaultRequestTTL = 24 * time.Hour
	// deletionWaitRecheck is how soon a waiting request looks again when no
	// event is expected to wake it.
	deletionWaitRecheck = 10 * time.Second
	// deletionConcurrency: deletions of different backups run side by side,
	// two at a time, so that a short request (one that fails validation, or
	// a follower) is not stuck behind one long deletion. Each deletion runs
	// its own pool of DeleteItemAction workers.
	deletionConcurrency  = 2
	deletionStoreTimeout = time.Minute
)

// DeleteBackupRequestReconciler carries out DeleteBackupRequests: it checks
// them, runs the deletion engine attempt after attempt with backoff, keeps
// the engine's checkpoint in the request's status so that a failed attempt
// or a restarted server resumes where it stopped, and records the outcome.
//
// Requests for one backup run one at a time. A request that arrives while
// another for the same backup is in progress (or is older and about to
// start) records that one in status.handledBy, waits for it, and ends with
// its outcome: Processed with the same report, or Failed with the same
// errors. Once a deletion succeeds, the other finished requests for the
// backup (earlier failures, validation errors) are deleted so they do not
// pile up; the successful request and its followers are kept, and every
// finished request goes after RequestTTL, as in Velero.
type DeleteBackupRequestReconciler struct {
	Client client.Client
	// APIReader reads around the cache: acting on a stale phase would run
	// a deletion twice, and a Backup or location read from a lagging cache
	// could let a deletion start that validation should refuse.
	APIReader client.Reader
	Locations *locations.Resolver
	Engine    *deletion.Engine
	// MaxAttempts bounds the attempts of one request (default 5).
	MaxAttempts int
	// RetryBase is the wait after the first failed attempt; it doubles
	// after each further one (default 30s, capped at an hour).
	RetryBase time.Duration
	// RequestTTL is how long a finished request is kept (default 24h).
	RequestTTL time.Duration
	Log        *slog.Logger
	// Events records the requests' phases and failed attempts as
	// Kubernetes Events.
	Events events.EventRecorder
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	// running holds the requests this process is executing, to tell a
	// request in progress here from one left InProgress by a server that
	// stopped (which resumes from its checkpoint).
	running inFlight
	// backups maps a backup being deleted by this process to its request:
	// the in-process guard behind the one-request-per-backup rule.
	backups sync.Map
}

// SetupWithManager registers the reconciler. A change to a request also
// wakes the requests for the same backup that follow it, and a backup or a
// restore of it that ends wakes the requests waiting for it.
func (r *DeleteBackupRequestReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1.DeleteBackupRequest{}).
		Watches(&v1.DeleteBackupRequest{}, handler.EnqueueRequestsFromMapFunc(r.followers)).
		Watches(&v1.Restore{}, handler.EnqueueRequestsFromMapFunc(r.waitingOnRestore)).
		Watches(&v1.Backup{}, handler.EnqueueRequestsFromMapFunc(r.waitingOnBackup)).
		WithOptions(controller.Options{MaxConcurrentReconciles: deletionConcurrency}).
		Named("deletebackuprequest").
		Complete(r)
}

func requestWaiting(p v1.DeleteBackupRequestPhase) bool {
	return p == "" || p == v1.DeleteBackupRequestPhaseNew
}

func requestFinished(p v1.DeleteBackupRequestPhase) bool {
	return p == v1.DeleteBackupRequestPhaseProcessed || p == v1.DeleteBackupRequestPhaseFailed
}

// Reconcile implements reconcile.Reconciler.
func (r *DeleteBackupRequestReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var dbr v1.DeleteBackupRequest
	if err := r.get(ctx, r.Client, req.NamespacedName, &dbr); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if requestFinished(dbr.Status.Phase) {
		return r.expire(ctx, &dbr)
	}
	if r.running.has(req.NamespacedName) {
		return ctrl.Result{}, nil
	}
	if err := r.get(ctx, r.APIReader, req.NamespacedName, &dbr); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	switch dbr.Status.Phase {
	case "", v1.DeleteBackupRequestPhaseNew:
		return r.start(ctx, &dbr)
	case v1.DeleteBackupRequestPhaseInProgress:
		return r.attempt(ctx, &dbr, nil)
	}
	return r.expire(ctx, &dbr)
}

// start takes a New request: it joins a deletion already under way for the
// same backup, or checks the request and begins the first attempt.
func (r *DeleteBackupRequestReconciler) start(ctx context.Context, dbr *v1.DeleteBackupRequest) (ctrl.Result, error) {
	log := r.Log.With("request", dbr.Namespace+"/"+dbr.Name, "backup", dbr.Spec.BackupName)
	f, err := r.facts(ctx, dbr)
	if err != nil {
		return ctrl.Result{}, err
	}
	d := deletion.Decide(f)
	if d.Verdict == deletion.Start {
		// Two requests whose listings could not see each other yet: the
		// claim, taken atomically in this process, orders them.
		if holder := r.claim(dbr, f.Requests); holder != "" {
			d = deletion.Decision{Verdict: deletion.Follow, Leader: holder, Reason: deletion.WaitOtherRequest,
				Message: fmt.Sprintf("deletion request %s is deleting backup %s; this request ends with its outcome", holder, dbr.Spec.BackupName)}
		}
	}
	switch d.Verdict {
	case deletion.Refuse:
		log.Info("deletion request refused", "errors", strings.Join(d.Messages, "; "))
		return ctrl.Result{}, r.processedWithErrors(ctx, dbr, d.Messages...)
	case deletion.DryRun:
		return ctrl.Result{}, r.dryRun(ctx, dbr, f)
	case deletion.Wait:
		return r.wait(ctx, dbr, d)
	case deletion.Follow:
		return r.joinLeader(ctx, dbr, f.Backup, d)
	}

	if err := r.begin(ctx, dbr, f); err != nil {
		return ctrl.Result{}, err
	}
	// What start read still holds: only the request changed, and f points
	// at it.
	return r.attempt(ctx, dbr, &f)
}

// wait records why a request waits and looks again later. Waiting does not
// use up attempts.
func (r *DeleteBackupRequestReconciler) wait(ctx context.Context, dbr *v1.DeleteBackupRequest, d deletion.Decision) (ctrl.Result, error) {
	r.Log.Info("backup deletion waits", "request", dbr.Namespace+"/"+dbr.Name, "backup", dbr.Spec.BackupName, "reason", d.Reason, "detail", d.Message)
	err := r.patchStatus(ctx, dbr, func(s *v1.DeleteBackupRequestStatus) {
		if s.Phase == "" {
			s.Phase = v1.DeleteBackupRequestPhaseNew
		}
		setWaiting(dbr, d.Reason, d.Message)
	})
	return ctrl.Result{RequeueAfter: r.retryBase()}, err
}

// attempt runs one attempt of an InProgress request, resuming from its
// checkpoint, and decides what comes next: the end, or another attempt.
// read is what the caller has just read for dbr; nil reads it afresh.
func (r *DeleteBackupRequestReconciler) attempt(ctx context.Context, dbr *v1.DeleteBackupRequest, read *deletion.Facts) (ctrl.Result, error) {
	log := r.Log.With("request", dbr.Namespace+"/"+dbr.Name, "backup", dbr.Spec.BackupName)
	var f deletion.Facts
	if read != nil {
		f = *read
	} else {
		var err error
		if f, err = r.facts(ctx, dbr); err != nil {
			return ctrl.Result{}, err
		}
	}
	if deletion.SkipConsent(dbr, f.Requests) && !dbr.Status.SkipFailedActions {
		// New consent does not wait out the backoff of attempts made
		// without it; it is recorded first, so it starts one attempt only.
		log.Info("going past items whose DeleteItemAction fails, as asked (skipFailedActions)")
		if err := r.patchStatus(ctx, dbr, func(s *v1.DeleteBackupRequestStatus) {
			s.SkipFailedActions = true
			s.NextAttemptTime = nil
		}); err != nil {
			return ctrl.Result{}, err
		}
	}
	// f.Request is dbr, so the decision sees the consent just recorded.
	d := deletion.Decide(f)
	switch d.Verdict {
	case deletion.Later:
		return ctrl.Result{RequeueAfter: d.After}, nil
	case deletion.Gone:
		return ctrl.Result{}, r.backupGone(ctx, dbr)
	case deletion.Wait:
		return r.wait(ctx, dbr, d)
	}
	// A request resumed by a new server claims its backup here; one that
	// started in this process holds the claim already.
	if holder, loaded := r.backups.LoadOrStore(deletionBackupKey(dbr), dbr.Name); loaded && holder != dbr.Name {
		return ctrl.Result{RequeueAfter: deletionWaitRecheck}, nil
	}
	reqKey := client.ObjectKeyFromObject(dbr)
	defer r.running.add(reqKey)()

	b := *f.Backup
	bsl := b.Spec.StorageLocation
	var store *storage.BackupStore
	var failure error
	if d.Verdict == deletion.Fail {
		failure = errors.New(strings.Join(d.Messages, "; "))
	} else if f.Location != nil {
		store, failure = r.openStore(ctx, f.Location)
	}

	attempt := dbr.Status.Attempts + 1
	if err := r.countAttempt(ctx, dbr, &b, attempt); errors.Is(err, errDeletionStateDropped) {
		log.Error("backup deletion refused", "error", err)
		return ctrl.Result{}, r.processedWithErrors(ctx, dbr, err.Error())
	} else if err != nil {
		return ctrl.Result{}, err
	}
	log.Info("backup deletion attempt", "attempt", attempt, "of", r.maxAttempts(), "location", bsl)

	var res deletion.Result
	if failure != nil {
		res = deletion.Result{Err: failure, ErrorCount: 1, Errors: []v1.DeletionError{{Message: failure.Error()}}, State: deletionStateOf(dbr)}
		res.Report = v1.DeletionReport{Warnings: res.State.Warnings}
	} else {
		res = r.Engine.Run(ctx, deletion.Input{
			Backup: &b, Store: store, State: deletionStateOf(dbr), SkipFailedActions: dbr.Status.SkipFailedActions,
			OnState: func(st deletion.State) {
				// Best effort: a lost write costs calls repeated on resume.
				if err := r.patchStatus(ctx, dbr, func(s *v1.DeleteBackupRequestStatus) { applyDeletionState(s, st) }); err != nil {
					log.Warn("recording the deletion checkpoint", "error", err)
				}
			},
		})
	}

	if ctx.Err() != nil {
		return ctrl.Result{}, r.interrupted(ctx, dbr, res, attempt)
	}
	if res.Err == nil {
		return ctrl.Result{}, r.succeeded(ctx, dbr, &b, res)
	}
	return r.failed(ctx, dbr, &b, res, attempt)
}

package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/deletion"
	"github.com/lifeboat-io/lifeboat/internal/locations"
	"github.com/lifeboat-io/lifeboat/internal/metrics"
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
	// maxDeletionRetryDelay caps the backoff between attempts.
	maxDeletionRetryDelay = time.Hour
	// deletionWaitRecheck is how soon a waiting request looks again when no
	// event is expected to wake it.
	deletionWaitRecheck = 10 * time.Second
	// deletionConcurrency: deletions of different backups run side by side,
	// two at a time, so that a short request (one that fails validation, or
	// a follower) is not stuck behind one long deletion. Each deletion runs
	// its own pool of DeleteItemAction workers.
	deletionConcurrency  = 2
	deletionCallTimeout  = 30 * time.Second
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
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	// running holds the requests this process is executing, to tell a
	// request in progress here from one left InProgress by a server that
	// stopped (which resumes from its checkpoint).
	running sync.Map
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
	if _, ok := r.running.Load(req.NamespacedName); ok {
		return ctrl.Result{}, nil
	}
	if err := r.get(ctx, r.APIReader, req.NamespacedName, &dbr); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	switch dbr.Status.Phase {
	case "", v1.DeleteBackupRequestPhaseNew:
		return r.start(ctx, &dbr)
	case v1.DeleteBackupRequestPhaseInProgress:
		return r.attempt(ctx, &dbr)
	}
	return r.expire(ctx, &dbr)
}

// expire deletes a finished request once it is RequestTTL old.
func (r *DeleteBackupRequestReconciler) expire(ctx context.Context, dbr *v1.DeleteBackupRequest) (ctrl.Result, error) {
	ended := dbr.CreationTimestamp.Time
	if c := dbr.Status.CompletionTimestamp; c != nil {
		ended = c.Time
	}
	if wait := ended.Add(r.requestTTL()).Sub(r.now()); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	err := r.call(ctx, func(ctx context.Context) error { return r.Client.Delete(ctx, dbr) })
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("deleting expired deletion request %s/%s: %w", dbr.Namespace, dbr.Name, err)
	}
	return ctrl.Result{}, nil
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
		if dbr.Status.HandledBy != "" {
			return r.follow(ctx, dbr)
		}
		log.Info("another deletion request for the backup runs first; this one waits for it", "handledBy", d.Leader)
		if f.Backup != nil {
			if err := r.label(ctx, dbr, f.Backup); err != nil {
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

	b := f.Backup
	if err := r.label(ctx, dbr, b); err != nil {
		return ctrl.Result{}, err
	}
	prev := predecessor(dbr, b, f.Requests)
	now := metav1.NewTime(r.now())
	if err := r.patchStatus(ctx, dbr, func(s *v1.DeleteBackupRequestStatus) {
		s.Phase = v1.DeleteBackupRequestPhaseInProgress
		s.StartTimestamp = &now
		s.Errors, s.ErrorDetails = nil, nil
		if prev != nil {
			applyDeletionState(s, deletionStateOf(prev))
		}
		setWaiting(dbr, "", "")
	}); err != nil {
		return ctrl.Result{}, err
	}
	if prev != nil {
		log.Info("backup deletion started from the checkpoint of an earlier request", "earlierRequest", prev.Name,
			"completedSteps", prev.Status.Checkpoint.CompletedSteps)
	} else {
		log.Info("backup deletion started")
	}
	return r.attempt(ctx, dbr)
}

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
	if err := r.call(ctx, func(ctx context.Context) error {
		return r.APIReader.List(ctx, &restores, client.InNamespace(dbr.Namespace))
	}); err != nil {
		return f, fmt.Errorf("listing restores: %w", err)
	}
	f.Restores = restores.Items
	var requests v1.DeleteBackupRequestList
	if err := r.call(ctx, func(ctx context.Context) error {
		return r.APIReader.List(ctx, &requests, client.InNamespace(dbr.Namespace))
	}); err != nil {
		return f, fmt.Errorf("listing deletion requests: %w", err)
	}
	f.Requests = requests.Items
	return f, nil
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
	err := r.call(ctx, func(ctx context.Context) error { return r.Client.Patch(ctx, dbr, client.MergeFrom(orig)) })
	if err != nil {
		return fmt.Errorf("labelling deletion request %s/%s: %w", dbr.Namespace, dbr.Name, err)
	}
	return nil
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
func (r *DeleteBackupRequestReconciler) attempt(ctx context.Context, dbr *v1.DeleteBackupRequest) (ctrl.Result, error) {
	log := r.Log.With("request", dbr.Namespace+"/"+dbr.Name, "backup", dbr.Spec.BackupName)
	consent, err := r.skipConsent(ctx, dbr)
	if err != nil {
		return ctrl.Result{}, err
	}
	if consent && !dbr.Status.SkipFailedActions {
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
	f, err := r.facts(ctx, dbr)
	if err != nil {
		return ctrl.Result{}, err
	}
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
	r.running.Store(reqKey, struct{}{})
	defer r.running.Delete(reqKey)

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
	schedule := b.Labels[v1.ScheduleNameLabel]
	metrics.BackupDeletionAttempts.WithLabelValues(schedule).Inc()
	if err := r.patchStatus(ctx, dbr, func(s *v1.DeleteBackupRequestStatus) {
		// Counted before it runs: an attempt that crashes the server is an
		// attempt too, and a deletion that crashes it every time must end.
		s.Attempts = attempt
		s.NextAttemptTime = nil
		if s.StartTimestamp == nil {
			now := metav1.NewTime(r.now())
			s.StartTimestamp = &now
		}
		if s.BackupPhaseBefore == "" && b.Status.Phase != v1.BackupPhaseDeleting {
			s.BackupPhaseBefore = b.Status.Phase
		}
		setWaiting(dbr, "", "")
	}); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.setBackupPhase(ctx, &b, v1.BackupPhaseDeleting, nil); err != nil {
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
		// The server is stopping. The attempt is not held against the
		// request: the next server resumes it from the checkpoint.
		log.Info("backup deletion interrupted; it resumes from its checkpoint when the server starts again")
		return ctrl.Result{}, r.patchStatus(ctx, dbr, func(s *v1.DeleteBackupRequestStatus) {
			applyDeletionState(s, res.State)
			s.Attempts = attempt - 1
		})
	}
	if res.Err == nil {
		return ctrl.Result{}, r.succeeded(ctx, dbr, &b, res)
	}
	return r.failed(ctx, dbr, &b, res, attempt)
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

// succeeded ends a request whose backup is gone.
func (r *DeleteBackupRequestReconciler) succeeded(ctx context.Context, dbr *v1.DeleteBackupRequest, b *v1.Backup, res deletion.Result) error {
	defer r.release(dbr)
	schedule := b.Labels[v1.ScheduleNameLabel]
	metrics.BackupDeletionSuccesses.WithLabelValues(schedule).Inc()
	if start := dbr.Status.StartTimestamp; start != nil {
		metrics.BackupDeletionDuration.WithLabelValues(schedule).Observe(r.now().Sub(start.Time).Seconds())
	}
	now := metav1.NewTime(r.now())
	report := res.Report
	if err := r.patchStatus(ctx, dbr, func(s *v1.DeleteBackupRequestStatus) {
		applyDeletionState(s, res.State)
		s.Phase = v1.DeleteBackupRequestPhaseProcessed
		s.Errors, s.ErrorDetails = nil, nil
		s.Report = &report
		s.NextAttemptTime = nil
		s.CompletionTimestamp = &now
	}); err != nil {
		return err
	}
	r.Log.Info("backup deletion request processed", "request", dbr.Namespace+"/"+dbr.Name, "backup", dbr.Spec.BackupName,
		"attempts", dbr.Status.Attempts, "keysRemoved", report.KeysRemoved)
	r.deleteOldRequests(ctx, dbr)
	return nil
}

// backupGone ends a request whose Backup disappeared between attempts (its
// own last step removed it and the final status write was lost, or it was
// removed by hand).
func (r *DeleteBackupRequestReconciler) backupGone(ctx context.Context, dbr *v1.DeleteBackupRequest) error {
	defer r.release(dbr)
	st := deletionStateOf(dbr)
	now := metav1.NewTime(r.now())
	if slices.Contains(st.Checkpoint.CompletedSteps, v1.DeletionStepBackupData) {
		return r.patchStatus(ctx, dbr, func(s *v1.DeleteBackupRequestStatus) {
			s.Phase = v1.DeleteBackupRequestPhaseProcessed
			s.Errors, s.ErrorDetails = nil, nil
			if s.Report == nil {
				s.Report = &v1.DeletionReport{}
			}
			s.Report.SnapshotsDeleted, s.Report.RestoresDeleted, s.Report.KeysRemoved = s.SnapshotsDeleted, s.RestoresDeleted, s.KeysRemoved
			s.Report.UnfinishedUploadsRemoved = s.UnfinishedUploadsRemoved
			s.CompletionTimestamp = &now
		})
	}
	msg := fmt.Sprintf("backup %q was removed while its deletion was in progress (completed steps: %v); what the remaining steps delete may still be there, e.g. keys under backups/%s/ in its storage location",
		dbr.Spec.BackupName, st.Checkpoint.CompletedSteps, dbr.Spec.BackupName)
	return r.patchStatus(ctx, dbr, func(s *v1.DeleteBackupRequestStatus) {
		s.Phase = v1.DeleteBackupRequestPhaseProcessed
		s.Errors = []string{msg}
		s.ErrorDetails = []v1.DeletionError{{Message: msg}}
		s.CompletionTimestamp = &now
	})
}

// failed records a failed attempt, puts the backup back in its phase, and
// schedules the next attempt or ends the request.
func (r *DeleteBackupRequestReconciler) failed(ctx context.Context, dbr *v1.DeleteBackupRequest, b *v1.Backup, res deletion.Result, attempt int32) (ctrl.Result, error) {
	schedule := b.Labels[v1.ScheduleNameLabel]
	metrics.BackupDeletionFailures.WithLabelValues(schedule).Inc()
	var idErr *deletion.IdentityError
	refused := errors.As(res.Err, &idErr)
	last := int(attempt) >= r.maxAttempts() || refused
	msgs := res.Messages()
	reason := "AttemptFailed"
	switch {
	case refused:
		// Another backup's data: no attempt will ever delete it.
		reason = "NotThisBackupsData"
	case last:
		reason = "AttemptsExhausted"
	}
	summary := fmt.Sprintf("attempt %d of %d failed: %s", attempt, r.maxAttempts(), strings.Join(msgs, "; "))
	before := dbr.Status.BackupPhaseBefore
	if err := r.setBackupPhase(ctx, b, before, &metav1.Condition{Type: ConditionDeletionFailed, Status: metav1.ConditionTrue, Reason: reason,
		Message: fmt.Sprintf("deletion request %s: %s", dbr.Name, summary)}); err != nil {
		return ctrl.Result{}, err
	}
	delay := r.backoff(attempt)
	next := metav1.NewTime(r.now().Add(delay))
	now := metav1.NewTime(r.now())
	report := res.Report
	if err := r.patchStatus(ctx, dbr, func(s *v1.DeleteBackupRequestStatus) {
		applyDeletionState(s, res.State)
		s.Errors = msgs
		s.ErrorDetails = res.Errors
		s.Report = &report
		if last {
			s.Phase = v1.DeleteBackupRequestPhaseFailed
			s.NextAttemptTime = nil
			s.CompletionTimestamp = &now
			setWaiting(dbr, "", "")
		} else {
			s.NextAttemptTime = &next
			setWaiting(dbr, "NextAttempt", fmt.Sprintf("%s; attempt %d starts at %s", summary, attempt+1, next.UTC().Format(time.RFC3339)))
		}
	}); err != nil {
		return ctrl.Result{}, err
	}
	log := r.Log.With("request", dbr.Namespace+"/"+dbr.Name, "backup", dbr.Spec.BackupName, "attempt", attempt, "errors", res.ErrorCount)
	if last {
		r.release(dbr)
		log.Error("backup deletion failed; no attempts left", "error", res.Err)
		return ctrl.Result{}, nil
	}
	log.Warn("backup deletion attempt failed; retrying", "error", res.Err, "retryIn", delay)
	return ctrl.Result{RequeueAfter: delay}, nil
}

// setBackupPhase sets b's phase (unless phase is empty) and cond.
func (r *DeleteBackupRequestReconciler) setBackupPhase(ctx context.Context, b *v1.Backup, phase v1.BackupPhase, cond *metav1.Condition) error {
	if (phase == "" || phase == b.Status.Phase) && cond == nil {
		return nil
	}
	err := writeStatus(ctx, r.Client, r.APIReader, b, func() {
		if phase != "" {
			b.Status.Phase = phase
			setBackupConditions(b)
		}
		if cond != nil {
			cond.ObservedGeneration = b.Generation
			meta.SetStatusCondition(&b.Status.Conditions, *cond)
		}
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("setting phase %s on backup %s/%s: %w", phase, b.Namespace, b.Name, err)
	}
	return nil
}

// deleteOldRequests removes the other finished requests for a backup that
// is now gone: they can never be acted on again. Followers of dbr stay,
// since they carry dbr's outcome for whoever made them.
func (r *DeleteBackupRequestReconciler) deleteOldRequests(ctx context.Context, dbr *v1.DeleteBackupRequest) {
	var list v1.DeleteBackupRequestList
	if err := r.call(ctx, func(ctx context.Context) error {
		return r.APIReader.List(ctx, &list, client.InNamespace(dbr.Namespace))
	}); err != nil {
		r.Log.Warn("listing old deletion requests", "backup", dbr.Spec.BackupName, "error", err)
		return
	}
	uid := dbr.Labels[v1.BackupUIDLabel]
	for i := range list.Items {
		o := &list.Items[i]
		if o.Name == dbr.Name || o.Spec.BackupName != dbr.Spec.BackupName || !requestFinished(o.Status.Phase) || o.Status.HandledBy == dbr.Name {
			continue
		}
		if ouid := o.Labels[v1.BackupUIDLabel]; ouid != "" && uid != "" && ouid != uid {
			continue
		}
		err := r.call(ctx, func(ctx context.Context) error { return r.Client.Delete(ctx, o) })
		if err != nil && !apierrors.IsNotFound(err) {
			r.Log.Warn("deleting an old deletion request", "request", o.Name, "error", err)
		}
	}
}

// processedWithErrors ends a request that cannot be carried out, as
// Velero does: Processed, with the reasons in status.errors.
func (r *DeleteBackupRequestReconciler) processedWithErrors(ctx context.Context, dbr *v1.DeleteBackupRequest, msgs ...string) error {
	defer r.release(dbr)
	now := metav1.NewTime(r.now())
	return r.patchStatus(ctx, dbr, func(s *v1.DeleteBackupRequestStatus) {
		s.Phase = v1.DeleteBackupRequestPhaseProcessed
		s.Errors = slices.Clone(msgs)
		s.ErrorDetails = nil
		for _, m := range msgs {
			s.ErrorDetails = append(s.ErrorDetails, v1.DeletionError{Message: m})
		}
		s.CompletionTimestamp = &now
		setWaiting(dbr, "", "")
	})
}

func (r *DeleteBackupRequestReconciler) backoff(attempt int32) time.Duration {
	d := r.retryBase()
	for i := int32(1); i < attempt && d < maxDeletionRetryDelay; i++ {
		d *= 2
	}
	return min(d, maxDeletionRetryDelay)
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
	return r.call(ctx, func(ctx context.Context) error { return reader.Get(ctx, key, obj) })
}

func (r *DeleteBackupRequestReconciler) call(ctx context.Context, fn func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, deletionCallTimeout)
	defer cancel()
	return fn(ctx)
}

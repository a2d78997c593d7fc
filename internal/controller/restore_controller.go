package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/cluster"
	"github.com/lifeboat-io/lifeboat/internal/locations"
	"github.com/lifeboat-io/lifeboat/internal/metrics"
	"github.com/lifeboat-io/lifeboat/internal/restore"
)

const (
	// restoreStoreCheckTimeout bounds opening and checking the object
	// store, which may mean a credentials read and a LIST on a slow store.
	restoreStoreCheckTimeout = time.Minute
)

// RestoreReconciler runs new Restores: it checks them and the backup they
// restore, hands them to the restore engine and records how they ended.
type RestoreReconciler struct {
	Client client.Client
	// APIReader reads around the cache, for the same reason as in
	// BackupReconciler, and also for the backup: a restore created right
	// after `backup create --wait` returned must not see the backup still
	// InProgress in a lagging cache and fail validation.
	APIReader client.Reader
	Engine    *restore.Engine
	Locations *locations.Resolver
	Log       *slog.Logger
	// Events records the restores' phases as Kubernetes Events.
	Events events.EventRecorder

	// running holds the restores this process is executing, to tell a
	// restore in progress here from one left InProgress by a server that died.
	running inFlight
}

// SetupWithManager registers the reconciler. Restores run one at a time, as
// in Velero: two restores at once could race to create the same objects,
// and the outcome of either would depend on the other.
func (r *RestoreReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1.Restore{}, builder.WithPredicates(specChanged)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1}).
		Named("restore").
		Complete(r)
}

// Reconcile implements reconcile.Reconciler.
func (r *RestoreReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var rs v1.Restore
	if err := r.get(ctx, r.Client, req.NamespacedName, &rs); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	switch rs.Status.Phase {
	case "", v1.RestorePhaseNew, v1.RestorePhaseInProgress:
		if err := r.get(ctx, r.APIReader, req.NamespacedName, &rs); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	switch rs.Status.Phase {
	case "", v1.RestorePhaseNew:
		return ctrl.Result{}, r.runRestore(ctx, &rs)
	case v1.RestorePhaseInProgress:
		if r.running.has(req.NamespacedName) {
			return ctrl.Result{}, nil
		}
		// The engine keeps no checkpoint to resume from, and running the
		// restore again unasked could overwrite what users changed since.
		return ctrl.Result{}, r.patchStatus(ctx, &rs, func(s *v1.RestoreStatus) {
			s.Phase = v1.RestorePhaseFailed
			s.FailureReason = "the server stopped while this restore was in progress; " +
				"items restored before that stay in the cluster; create a new restore to finish the job"
			now := metav1.Now()
			s.CompletionTimestamp = &now
		})
	}
	return ctrl.Result{}, nil
}

func (r *RestoreReconciler) runRestore(ctx context.Context, rs *v1.Restore) error {
	b, msgs, err := r.validate(ctx, rs)
	if err != nil {
		return err
	}
	if len(msgs) > 0 {
		return r.failValidation(ctx, rs, msgs)
	}
	findCtx, cancel := context.WithTimeout(ctx, cluster.CallTimeout)
	bsl, err := r.Locations.Find(findCtx, b.Spec.StorageLocation)
	cancel()
	var nf *locations.NotFoundError
	if errors.As(err, &nf) {
		return r.failValidation(ctx, rs, []string{fmt.Sprintf("spec.backupName: backup %q is stored in a location that is gone: %v", b.Name, nf)})
	}
	if err != nil {
		return fmt.Errorf("finding the storage location of backup %q: %w", b.Name, err)
	}
	if err := r.recordBackup(ctx, rs, b.Name); err != nil {
		return err
	}

	key := client.ObjectKeyFromObject(rs)
	defer r.running.add(key)()
	now := metav1.Now()
	if err := r.patchStatus(ctx, rs, func(s *v1.RestoreStatus) {
		s.Phase = v1.RestorePhaseInProgress
		s.StartTimestamp = &now
		s.Progress = &v1.RestoreProgress{}
	}); err != nil {
		return err
	}
	// Velero's label: the schedule the restore names, not the backup's.
	// A dry run restores nothing: counting it would set off the alerts
	// users keep on Velero's restore metrics.
	schedule := rs.Spec.ScheduleName
	if !rs.Spec.DryRun {
		metrics.RestoreStarted(schedule)
	}

	// The engine logs the start and end of the restore; logging them here
	// too would only double the lines.
	outcome := r.execute(ctx, rs, b, bsl)
	var ended v1.RestoreStatus
	applyRestoreOutcome(&ended, outcome)
	// Counted as the run ends, whether or not the status write succeeds.
	if !rs.Spec.DryRun {
		metrics.RestoreEnded(schedule, ended.Phase)
	}
	return r.patchStatus(ctx, rs, func(s *v1.RestoreStatus) { applyRestoreOutcome(s, outcome) })
}

// validate collects every problem with the restore at once, so a user fixes
// them in one round. It returns the backup to restore when there is one;
// err is only for failures to read, which are retried.
func (r *RestoreReconciler) validate(ctx context.Context, rs *v1.Restore) (*v1.Backup, []string, error) {
	spec := &rs.Spec
	msgs := restore.Validate(spec)
	msgs = append(msgs, restore.ValidatePolicy(ctx, r.APIReader, rs)...)
	if spec.BackupName == "" && spec.ScheduleName == "" {
		return nil, append(msgs, "spec.backupName: name the backup to restore, or set spec.scheduleName to restore the newest Completed backup of a schedule"), nil
	}
	if spec.BackupName == "" {
		b, err := r.newestScheduledBackup(ctx, rs.Namespace, spec.ScheduleName)
		if err != nil {
			return nil, nil, err
		}
		if b == nil {
			return nil, append(msgs, fmt.Sprintf("spec.scheduleName: schedule %q has no Completed backup in namespace %q (none labelled %s=%s)",
				spec.ScheduleName, rs.Namespace, v1.ScheduleNameLabel, v1.LabelValue(spec.ScheduleName))), nil
		}
		return b, msgs, nil
	}

	var b v1.Backup
	err := r.get(ctx, r.APIReader, client.ObjectKey{Namespace: rs.Namespace, Name: spec.BackupName}, &b)
	if apierrors.IsNotFound(err) {
		return nil, append(msgs, fmt.Sprintf("spec.backupName: backup %q not found in namespace %q", spec.BackupName, rs.Namespace)), nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading backup %q: %w", spec.BackupName, err)
	}
	// This controller writes spec.backupName next to spec.scheduleName once
	// it has picked the schedule's backup; that pair is consistent, any
	// other pair is ambiguous.
	if spec.ScheduleName != "" && b.Labels[v1.ScheduleNameLabel] != v1.LabelValue(spec.ScheduleName) {
		msgs = append(msgs, fmt.Sprintf("spec.backupName, spec.scheduleName: set only one of them (backup %q does not belong to schedule %q)",
			b.Name, spec.ScheduleName))
	}
	switch {
	case b.DeletionTimestamp != nil || b.Status.Phase == v1.BackupPhaseDeleting:
		msgs = append(msgs, fmt.Sprintf("spec.backupName: backup %q is being deleted", b.Name))
	case b.Status.Phase != v1.BackupPhaseCompleted && b.Status.Phase != v1.BackupPhasePartiallyFailed:
		msgs = append(msgs, fmt.Sprintf("spec.backupName: backup %q is in phase %s; only Completed or PartiallyFailed backups can be restored",
			b.Name, cmp.Or(b.Status.Phase, v1.BackupPhaseNew)))
	}
	return &b, msgs, nil
}

// newestScheduledBackup picks the Completed backup of the schedule that
// started last, as Velero does; nil when there is none.
func (r *RestoreReconciler) newestScheduledBackup(ctx context.Context, namespace, schedule string) (*v1.Backup, error) {
	var list v1.BackupList
	callCtx, cancel := context.WithTimeout(ctx, cluster.CallTimeout)
	defer cancel()
	err := r.APIReader.List(callCtx, &list, client.InNamespace(namespace),
		client.MatchingLabels{v1.ScheduleNameLabel: v1.LabelValue(schedule)})
	if err != nil {
		return nil, fmt.Errorf("listing the backups of schedule %q: %w", schedule, err)
	}
	started := func(b *v1.Backup) time.Time {
		if b.Status.StartTimestamp != nil {
			return b.Status.StartTimestamp.Time
		}
		return b.CreationTimestamp.Time
	}
	done := slices.DeleteFunc(list.Items, func(b v1.Backup) bool {
		return b.Status.Phase != v1.BackupPhaseCompleted || b.DeletionTimestamp != nil
	})
	if len(done) == 0 {
		return nil, nil
	}
	// Ties on the start second are broken by name, so that the choice does
	// not depend on the order the API server lists backups in.
	newest := slices.MaxFunc(done, func(a, b v1.Backup) int {
		return cmp.Or(started(&a).Compare(started(&b)), strings.Compare(a.Name, b.Name))
	})
	return &newest, nil
}

// recordBackup writes down which backup is restored, as Velero does: the
// backup-name label lets tools (and backup deletion) find the restores of a
// backup, and spec.backupName tells the DownloadRequest controller which
// store holds a schedule restore's log and results.
func (r *RestoreReconciler) recordBackup(ctx context.Context, rs *v1.Restore, backup string) error {
	if rs.Spec.BackupName == backup && rs.Labels[v1.BackupNameLabel] != "" {
		return nil
	}
	err := patchObject(ctx, r.Client, rs, func() {
		rs.Spec.BackupName = backup
		if rs.Labels[v1.BackupNameLabel] == "" {
			metav1.SetMetaDataLabel(&rs.ObjectMeta, v1.BackupNameLabel, v1.LabelValue(backup))
		}
	})
	if err != nil {
		return fmt.Errorf("recording backup %q on restore %s/%s: %w", backup, rs.Namespace, rs.Name, err)
	}
	return nil
}

// execute opens the backup's store and runs the engine. Whatever happens
// in between, it returns an outcome: a restore must never stay InProgress
// because of an error or a panic here.
func (r *RestoreReconciler) execute(ctx context.Context, rs *v1.Restore, b *v1.Backup, bsl *v1.BackupStorageLocation) (out restore.Outcome) {
	log := r.Log.With("restore", rs.Namespace+"/"+rs.Name)
	openCtx, cancel := context.WithTimeout(ctx, restoreStoreCheckTimeout)
	store, err := r.Locations.Open(openCtx, bsl)
	if err == nil {
		err = store.IsValid(openCtx)
	}
	cancel()
	if err != nil {
		log.Warn("restore failed before it started: storage location not usable", "location", bsl.Name, "error", err)
		return restore.Outcome{
			Phase:         v1.RestorePhaseFailed,
			FailureReason: fmt.Sprintf("storage location %q of backup %q is not usable: %v", bsl.Name, b.Name, err),
			Completion:    time.Now(),
		}
	}

	// The engine may report progress from its own goroutine while this one
	// writes the final status; both patch rs.
	var (
		mu       sync.Mutex
		last     v1.RestoreProgress
		finished bool
	)
	defer func() {
		p := recover()
		mu.Lock()
		defer mu.Unlock()
		// A late progress report must not overwrite the final status.
		finished = true
		if p != nil {
			log.Error("restore engine panicked", "panic", p, "stack", string(debug.Stack()))
			out = restore.Outcome{
				Phase:         v1.RestorePhaseFailed,
				FailureReason: fmt.Sprintf("internal error in the restore engine: %v (the server log has the details)", p),
				Progress:      last,
				Completion:    time.Now(),
			}
		}
	}()
	// The engine gets its own copy: it reads the restore while this
	// goroutine rewrites rs from each status patch.
	return r.Engine.Run(ctx, rs.DeepCopy(), b, store, func(p v1.RestoreProgress) {
		mu.Lock()
		defer mu.Unlock()
		if finished || ctx.Err() != nil {
			return
		}
		last = p
		// Progress is best effort: a lost update is corrected by the next.
		if err := r.patchStatus(ctx, rs, func(s *v1.RestoreStatus) { s.Progress = &p }); err != nil {
			log.Warn("recording restore progress", "error", err)
		}
	})
}

// applyRestoreOutcome copies how the engine ended onto the status.
func applyRestoreOutcome(s *v1.RestoreStatus, o restore.Outcome) {
	s.Phase = o.Phase
	s.FailureReason = o.FailureReason
	if s.Phase == "" {
		// Recording a terminal phase matters more than trusting the engine.
		s.Phase = v1.RestorePhaseFailed
		s.FailureReason = cmp.Or(o.FailureReason, "the restore engine ended without saying how")
	}
	s.Warnings, s.Errors = o.Warnings, o.Errors
	s.DryRun = o.DryRun
	// Set on every restore that ran, as Velero sets it.
	s.HookStatus = &v1.HookStatus{HooksAttempted: o.HooksAttempted, HooksFailed: o.HooksFailed}
	p := o.Progress
	s.Progress = &p
	completion := metav1.NewTime(o.Completion)
	if o.Completion.IsZero() {
		completion = metav1.Now()
	}
	s.CompletionTimestamp = &completion
}

func (r *RestoreReconciler) failValidation(ctx context.Context, rs *v1.Restore, msgs []string) error {
	r.Log.Info("restore failed validation", "restore", rs.Namespace+"/"+rs.Name, "errors", strings.Join(msgs, "; "))
	err := r.patchStatus(ctx, rs, func(s *v1.RestoreStatus) {
		s.Phase = v1.RestorePhaseFailedValidation
		s.ValidationErrors = slices.Clone(msgs)
		now := metav1.Now()
		s.CompletionTimestamp = &now
	})
	if err == nil && !rs.Spec.DryRun {
		// Once: a failed write is retried by validating again.
		metrics.RestoreEnded(rs.Spec.ScheduleName, v1.RestorePhaseFailedValidation)
	}
	return err
}

// patchStatus applies change to rs's status and writes it (writeStatus),
// conditions included, and records the new phase as an Event.
func (r *RestoreReconciler) patchStatus(ctx context.Context, rs *v1.Restore, change func(*v1.RestoreStatus)) error {
	before := string(rs.Status.Phase)
	err := writeStatus(ctx, r.Client, r.APIReader, rs, func() {
		change(&rs.Status)
		setRestoreConditions(rs)
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("updating status of restore %s/%s: %w", rs.Namespace, rs.Name, err)
	}
	recordPhaseChange(r.Events, rs, before)
	return nil
}

func (r *RestoreReconciler) get(ctx context.Context, reader client.Reader, key client.ObjectKey, obj client.Object) error {
	callCtx, cancel := context.WithTimeout(ctx, cluster.CallTimeout)
	defer cancel()
	return reader.Get(callCtx, key, obj)
}

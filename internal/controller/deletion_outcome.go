package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/cluster"
	"github.com/lifeboat-io/lifeboat/internal/deletion"
	"github.com/lifeboat-io/lifeboat/internal/metrics"
)

// How a request starts and how each attempt is counted and ends: the
// request's status, the Backup's phase and condition, the metrics.

// begin moves a request that may start to InProgress, taking over the
// checkpoint of an earlier request for the same backup that did not finish.
func (r *DeleteBackupRequestReconciler) begin(ctx context.Context, dbr *v1.DeleteBackupRequest, f deletion.Facts) error {
	if err := r.label(ctx, dbr, f.Backup); err != nil {
		return err
	}
	prev := predecessor(dbr, f.Backup, f.Requests)
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
		return err
	}
	log := r.Log.With("request", dbr.Namespace+"/"+dbr.Name, "backup", dbr.Spec.BackupName)
	if prev != nil {
		log.Info("backup deletion started from the checkpoint of an earlier request", "earlierRequest", prev.Name,
			"completedSteps", prev.Status.Checkpoint.CompletedSteps)
	} else {
		log.Info("backup deletion started")
	}
	return nil
}

// countAttempt records attempt as begun and puts the backup in Deleting.
// It is counted before it runs: an attempt that crashes the server is an
// attempt too, and a deletion that crashes it every time must end.
func (r *DeleteBackupRequestReconciler) countAttempt(ctx context.Context, dbr *v1.DeleteBackupRequest, b *v1.Backup, attempt int32) error {
	metrics.BackupDeletionAttempted(b.Labels[v1.ScheduleNameLabel])
	if err := r.patchStatus(ctx, dbr, func(s *v1.DeleteBackupRequestStatus) {
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
		return err
	}
	if dbr.Status.Attempts != attempt {
		return errDeletionStateDropped
	}
	return r.setBackupPhase(ctx, b, v1.BackupPhaseDeleting, nil)
}

// errDeletionStateDropped: the DeleteBackupRequest CRD in the cluster does
// not keep what a Lifeboat deletion records (the attempt just counted was
// pruned), which is Velero's CRD: it has no status.attempts or
// status.checkpoint, and no spec.dryRun either, so a dry run would reach
// the server as a real deletion. Nothing is deleted with it.
var errDeletionStateDropped = errors.New("the DeleteBackupRequest CRD installed in the cluster drops the fields Lifeboat records a deletion in " +
	"(status.attempts, status.checkpoint, spec.dryRun): it is Velero's, not Lifeboat's, so nothing was deleted. " +
	"Install Lifeboat's CRDs (`lifeboat install --crds-only`; Velero works with them too) and delete the backup again")

// interrupted records an attempt cut short by the server stopping. It is
// not held against the request: the next server resumes it from the
// checkpoint.
func (r *DeleteBackupRequestReconciler) interrupted(ctx context.Context, dbr *v1.DeleteBackupRequest, res deletion.Result, attempt int32) error {
	r.Log.Info("backup deletion interrupted; it resumes from its checkpoint when the server starts again",
		"request", dbr.Namespace+"/"+dbr.Name, "backup", dbr.Spec.BackupName)
	return r.patchStatus(ctx, dbr, func(s *v1.DeleteBackupRequestStatus) {
		applyDeletionState(s, res.State)
		s.Attempts = attempt - 1
	})
}

// succeeded ends a request whose backup is gone.
func (r *DeleteBackupRequestReconciler) succeeded(ctx context.Context, dbr *v1.DeleteBackupRequest, b *v1.Backup, res deletion.Result) error {
	defer r.release(dbr)
	took := time.Duration(-1)
	if start := dbr.Status.StartTimestamp; start != nil {
		took = r.now().Sub(start.Time)
	}
	metrics.BackupDeletionSucceeded(b.Labels[v1.ScheduleNameLabel], took)
	now := metav1.NewTime(r.now())
	report := res.Report
	// The earlier requests go before this one is final, as in Velero: who
	// sees it Processed (a person, an alert on the phase, a test) no
	// longer sees an earlier Failed request for a backup that is gone.
	r.deleteOldRequests(ctx, dbr)
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
		// The attempt that removed the backup ended before its final
		// status write: finish what succeeded would have done.
		r.deleteOldRequests(ctx, dbr)
		return r.patchStatus(ctx, dbr, func(s *v1.DeleteBackupRequestStatus) {
			s.Phase = v1.DeleteBackupRequestPhaseProcessed
			s.Errors, s.ErrorDetails = nil, nil
			if s.Report == nil {
				s.Report = &v1.DeletionReport{}
			}
			s.Report.SnapshotsDeleted, s.Report.RestoresDeleted, s.Report.KeysRemoved = s.SnapshotsDeleted, s.RestoresDeleted, s.KeysRemoved
			s.Report.UnfinishedUploadsRemoved = s.UnfinishedUploadsRemoved
			s.Report.PodVolumeSnapshotsForgotten = s.PodVolumeSnapshotsForgotten
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
	metrics.BackupDeletionFailed(b.Labels[v1.ScheduleNameLabel])
	retry := deletion.AfterFailure(res.Err, int(attempt), r.maxAttempts(), r.retryBase())
	last, reason, delay := retry.Final, retry.Reason, retry.After
	msgs := res.Messages()
	summary := fmt.Sprintf("attempt %d of %d failed: %s", attempt, r.maxAttempts(), strings.Join(msgs, "; "))
	before := dbr.Status.BackupPhaseBefore
	if err := r.setBackupPhase(ctx, b, before, &metav1.Condition{Type: ConditionDeletionFailed, Status: metav1.ConditionTrue, Reason: reason,
		Message: fmt.Sprintf("deletion request %s: %s", dbr.Name, summary)}); err != nil {
		return ctrl.Result{}, err
	}
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
	// The last attempt's failure is the request's phase change; the
	// others are recorded here, on the backup too, which stays.
	retrying := kubeEvent{warning: true, reason: "DeletionAttemptFailed", action: actionDelete,
		note: fmt.Sprintf("deletion of backup %s/%s (request %s): %s; attempt %d starts at %s",
			b.Namespace, b.Name, dbr.Name, summary, attempt+1, next.UTC().Format(time.RFC3339))}
	record(r.Events, dbr, retrying)
	record(r.Events, b, retrying)
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
			setStatusCondition(&b.Status.Conditions, *cond)
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
	if err := cluster.Call(ctx, func(ctx context.Context) error {
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
		err := cluster.Call(ctx, func(ctx context.Context) error { return r.Client.Delete(ctx, o) })
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

// expire deletes a finished request once it is RequestTTL old.
func (r *DeleteBackupRequestReconciler) expire(ctx context.Context, dbr *v1.DeleteBackupRequest) (ctrl.Result, error) {
	ended := dbr.CreationTimestamp.Time
	if c := dbr.Status.CompletionTimestamp; c != nil {
		ended = c.Time
	}
	if wait := ended.Add(r.requestTTL()).Sub(r.now()); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	err := cluster.Call(ctx, func(ctx context.Context) error { return r.Client.Delete(ctx, dbr) })
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("deleting expired deletion request %s/%s: %w", dbr.Namespace, dbr.Name, err)
	}
	return ctrl.Result{}, nil
}

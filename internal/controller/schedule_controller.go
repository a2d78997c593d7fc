package controller

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/backup"
	"github.com/lifeboat-io/lifeboat/internal/cluster"
	"github.com/lifeboat-io/lifeboat/internal/metrics"
	"github.com/lifeboat-io/lifeboat/internal/schedules"
)

// ConditionReady is True while a schedule creates backups: valid and not paused.
const ConditionReady = "Ready"

const (
	// backupTimestampFormat is the suffix of a scheduled backup's name, as
	// in Velero: <schedule>-<YYYYMMDDhhmmss>, in UTC.
	backupTimestampFormat = "20060102150405"
	// maxScheduleNameLen leaves room for "-" and the timestamp within the
	// 253 characters an object name may have.
	maxScheduleNameLen = 253 - 1 - len(backupTimestampFormat)

	// waitForPreviousRun is how often a due schedule looks again while its
	// previous backup is still running. Polling this one schedule is simpler
	// than mapping backups back to schedules, whose label value is hashed
	// for long names.
	waitForPreviousRun = 15 * time.Second
)

// ScheduleReconciler creates a schedule's backups when they are due and
// requeues itself for the next one.
type ScheduleReconciler struct {
	Client client.Client
	Log    *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// SetupWithManager registers the reconciler. Status writes are filtered
// out: each reconcile asks to be woken at the next due time instead.
func (r *ScheduleReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1.Schedule{}, builder.WithPredicates(specChanged)).
		Named("schedule").
		Complete(r)
}

// Reconcile implements reconcile.Reconciler.
func (r *ScheduleReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var s v1.Schedule
	if err := cluster.Call(ctx, func(ctx context.Context) error { return r.Client.Get(ctx, req.NamespacedName, &s) }); err != nil {
		if apierrors.IsNotFound(err) {
			metrics.RemoveSchedule(v1.LabelValue(req.Name))
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if s.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	// Velero keys a schedule's series by its name; its backups carry the
	// name as a label value, which is shortened past 63 characters. The
	// label value is used here, so that the series a schedule starts are
	// the ones its backups move (the same for names Velero can label).
	metrics.InitSchedule(v1.LabelValue(s.Name))
	orig := s.DeepCopy()
	now := r.now()
	// Re-validated every time: the spec may have been edited, and an Enabled
	// phase written by another server is no proof of anything.
	sched, msgs := validateSchedule(&s)
	if len(msgs) > 0 {
		if orig.Status.Phase != v1.SchedulePhaseFailedValidation {
			r.Log.Info("schedule failed validation", "schedule", req.String(), "errors", strings.Join(msgs, "; "))
		}
		s.Status.Phase = v1.SchedulePhaseFailedValidation
		s.Status.ValidationErrors = msgs
		setCondition(&s.Status.Conditions, s.Generation, ConditionReady, false, string(v1.SchedulePhaseFailedValidation), msgs[0])
		return ctrl.Result{}, r.patchStatus(ctx, orig, &s)
	}
	// Ready is the memory of whether the schedule was running before this
	// reconcile: it is not when the schedule is new, was paused or invalid.
	wasReady := meta.IsStatusConditionTrue(s.Status.Conditions, ConditionReady)
	s.Status.Phase = v1.SchedulePhaseEnabled
	s.Status.ValidationErrors = nil
	if s.Spec.Paused {
		setCondition(&s.Status.Conditions, s.Generation, ConditionReady, false, "Paused",
			fmt.Sprintf("the schedule is paused; `lifeboat schedule unpause %s` resumes it", s.Name))
		return ctrl.Result{}, r.patchStatus(ctx, orig, &s)
	}
	if !wasReady && ptr.Deref(s.Spec.SkipImmediately, false) {
		skipped := metav1.NewTime(now.UTC().Truncate(time.Second))
		s.Status.LastSkipped = &skipped
	}

	at, due := schedules.NextRun(sched, schedules.TimesOf(&s), now)
	if due {
		running, err := r.runningBackup(ctx, &s)
		if err != nil {
			return ctrl.Result{}, err
		}
		if running != "" {
			setCondition(&s.Status.Conditions, s.Generation, ConditionReady, true, "WaitingForPreviousBackup",
				fmt.Sprintf("a backup was due at %s; it starts when backup %s has finished", at.Format(time.RFC3339), running))
			return ctrl.Result{RequeueAfter: waitForPreviousRun}, r.patchStatus(ctx, orig, &s)
		}
		if err := r.createBackup(ctx, &s, at); err != nil {
			return ctrl.Result{}, err
		}
		last := metav1.NewTime(at)
		s.Status.LastBackup = &last
		at, _ = schedules.NextRun(sched, schedules.TimesOf(&s), now)
	}
	msg := "next backup due at " + at.Format(time.RFC3339)
	if at.IsZero() {
		msg = "the schedule does not fire within five years of its last backup"
	}
	setCondition(&s.Status.Conditions, s.Generation, ConditionReady, true, string(v1.SchedulePhaseEnabled), msg)
	if err := r.patchStatus(ctx, orig, &s); err != nil || at.IsZero() {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: max(at.Sub(now), time.Second)}, nil
}

// createBackup creates the run due at at. Its name depends only on the
// schedule and at, so a run whose status update was lost (a restart right
// after the create) finds its backup already there and counts it as done.
func (r *ScheduleReconciler) createBackup(ctx context.Context, s *v1.Schedule, at time.Time) error {
	b := scheduledBackup(s, at)
	err := cluster.Call(ctx, func(ctx context.Context) error { return r.Client.Create(ctx, b) })
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("creating backup %s/%s for schedule %s: %w", b.Namespace, b.Name, s.Name, err)
	}
	r.Log.Info("schedule created a backup", "schedule", s.Namespace+"/"+s.Name, "backup", b.Name)
	return nil
}

// runningBackup names a backup of this schedule that has not finished yet,
// or returns "". Like Velero, a schedule never runs two backups at once:
// backups slower than the schedule would otherwise pile up.
func (r *ScheduleReconciler) runningBackup(ctx context.Context, s *v1.Schedule) (string, error) {
	var list v1.BackupList
	err := cluster.Call(ctx, func(ctx context.Context) error {
		return r.Client.List(ctx, &list, client.InNamespace(s.Namespace),
			client.MatchingLabels{v1.ScheduleNameLabel: v1.LabelValue(s.Name)})
	})
	if err != nil {
		return "", fmt.Errorf("listing the backups of schedule %s/%s: %w", s.Namespace, s.Name, err)
	}
	for _, b := range list.Items {
		if b.DeletionTimestamp == nil && !b.Status.Phase.IsTerminal() && b.Status.Phase != v1.BackupPhaseDeleting {
			return b.Name, nil
		}
	}
	return "", nil
}

// patchStatus writes s's status over orig, the schedule as read, only when
// it changed, so a reconcile that finds nothing to do costs no write. A
// conflict is refused (writeStatus): the next reconcile decides again from
// the schedule as it is then, and a run it repeats finds its backup there.
func (r *ScheduleReconciler) patchStatus(ctx context.Context, orig, s *v1.Schedule) error {
	if equality.Semantic.DeepEqual(orig.Status, s.Status) {
		return nil
	}
	cur := orig.DeepCopy()
	err := writeStatus(ctx, r.Client, nil, cur, func() { cur.Status = *s.Status.DeepCopy() })
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("updating status of schedule %s/%s: %w", s.Namespace, s.Name, err)
	}
	return nil
}

func (r *ScheduleReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// scheduledBackup is the Backup a schedule creates for the run due at at.
// It carries the schedule's labels, as Velero's backups do (the template's
// own metadata.labels are refused by validation for now).
func scheduledBackup(s *v1.Schedule, at time.Time) *v1.Backup {
	labels := maps.Clone(s.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[v1.ScheduleNameLabel] = v1.LabelValue(s.Name)
	b := &v1.Backup{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: s.Namespace,
			Name:      s.Name + "-" + at.UTC().Format(backupTimestampFormat),
			Labels:    labels,
			// The schedule's annotations, as Velero's scheduled backups
			// carry them.
			Annotations: maps.Clone(s.Annotations),
		},
		Spec: *s.Spec.Template.DeepCopy(),
	}
	requestVerification(s, b)
	if ptr.Deref(s.Spec.UseOwnerReferencesInBackup, false) {
		b.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: v1.SchemeGroupVersion.String(), Kind: "Schedule",
			Name: s.Name, UID: s.UID, Controller: ptr.To(true),
		}}
	}
	return b
}

// requestVerification asks for b's verification once it ends
// (BackupVerifyReconciler) when its schedule s is annotated
// v1.VerifyBackupsAnnotation.
func requestVerification(s *v1.Schedule, b *v1.Backup) {
	if s.Annotations[v1.VerifyBackupsAnnotation] != "true" {
		return
	}
	if b.Annotations == nil {
		b.Annotations = map[string]string{}
	}
	b.Annotations[v1.VerifyRequestAnnotation] = "schedule"
}

// specField finds the field paths in backup.Validate's messages, which
// name a Backup's fields; in a schedule they live under spec.template.
var specField = regexp.MustCompile(`\bspec\.`)

func validateSchedule(s *v1.Schedule) (cron.Schedule, []string) {
	var msgs []string
	sched, err := schedules.ParseCron(s.Spec.Schedule)
	if err != nil {
		msgs = append(msgs, "spec.schedule: "+err.Error())
	}
	if len(s.Name) > maxScheduleNameLen {
		msgs = append(msgs, fmt.Sprintf("metadata.name: %d characters; at most %d, so that the names of its backups (NAME-YYYYMMDDhhmmss) are valid", len(s.Name), maxScheduleNameLen))
	}
	for _, m := range backup.Validate(&s.Spec.Template) {
		msgs = append(msgs, specField.ReplaceAllString(m, "spec.template."))
	}
	return sched, msgs
}

package controller

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// base is 2026-03-01 12:00:00 UTC, the "now" most cases count from.
var base = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestValidateScheduleNamesFields(t *testing.T) {
	s := &v1.Schedule{
		ObjectMeta: metav1.ObjectMeta{Name: strings.Repeat("a", 240)},
		Spec: v1.ScheduleSpec{
			Schedule: "every day",
			Template: v1.BackupSpec{
				Hooks: v1.BackupHooks{Resources: []v1.BackupResourceHookSpec{{Name: "x",
					LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Sometimes"}}}}}},
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}},
				OrLabelSelectors: []*metav1.LabelSelector{
					{MatchLabels: map[string]string{"c": "d"}},
				},
			},
		},
	}
	_, msgs := validateSchedule(s)
	got := strings.Join(msgs, "\n")
	for _, want := range []string{
		`spec.schedule: "every day" is not a valid cron expression`,
		"metadata.name: 240 characters",
		"spec.template.hooks.resources[0].labelSelector:",
		"spec.template.labelSelector, spec.template.orLabelSelectors:",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("validation errors lack %q:\n%s", want, got)
		}
	}
	for _, m := range msgs[2:] {
		if strings.Contains(strings.ReplaceAll(m, "spec.template.", ""), "spec.") {
			t.Errorf("a template field is named outside spec.template: %s", m)
		}
	}
}

func TestScheduledBackup(t *testing.T) {
	s := &v1.Schedule{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "velero", UID: types.UID("u-1"), Labels: map[string]string{"team": "ops"}},
		Spec: v1.ScheduleSpec{
			Schedule: "0 3 * * *",
			Template: v1.BackupSpec{IncludedNamespaces: []string{"shop"}, TTL: metav1.Duration{Duration: time.Hour}},
		},
	}
	b := scheduledBackup(s, time.Date(2026, 3, 1, 3, 0, 0, 0, time.FixedZone("X", 7200)))
	if b.Name != "nightly-20260301010000" || b.Namespace != "velero" {
		t.Errorf("backup %s/%s, want velero/nightly-20260301010000 (UTC)", b.Namespace, b.Name)
	}
	if b.Labels[v1.ScheduleNameLabel] != "nightly" || b.Labels["team"] != "ops" {
		t.Errorf("labels = %v", b.Labels)
	}
	if len(b.Spec.IncludedNamespaces) != 1 || b.Spec.TTL.Duration != time.Hour {
		t.Errorf("spec = %+v, want the template", b.Spec)
	}
	if len(b.OwnerReferences) != 0 {
		t.Error("owner reference set without useOwnerReferencesInBackup")
	}
	if s.Labels[v1.ScheduleNameLabel] != "" {
		t.Error("the schedule's own labels were modified")
	}
	if b.Annotations != nil {
		t.Errorf("annotations %v of a schedule without any", b.Annotations)
	}
	// The schedule's annotations, as Velero's; asked to, a verification
	// request besides, answered once the backup ends.
	s.Annotations = map[string]string{"owner": "ops", v1.VerifyBackupsAnnotation: "true"}
	b = scheduledBackup(s, base)
	if b.Annotations["owner"] != "ops" || b.Annotations[v1.VerifyRequestAnnotation] == "" || s.Annotations[v1.VerifyRequestAnnotation] != "" {
		t.Errorf("annotations %v (schedule's %v)", b.Annotations, s.Annotations)
	}
	s.Spec.UseOwnerReferencesInBackup = ptr.To(true)
	ref := scheduledBackup(s, base).OwnerReferences
	if len(ref) != 1 || ref[0].Kind != "Schedule" || ref[0].Name != "nightly" || ref[0].UID != "u-1" || !ptr.Deref(ref[0].Controller, false) {
		t.Errorf("owner references = %+v", ref)
	}
}

// reconcileAt runs one reconcile of the schedule "s" at now.
func reconcileAt(t *testing.T, c client.Client, now time.Time) ctrl.Result {
	t.Helper()
	r := &ScheduleReconciler{Client: c, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { return now }}
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "velero", Name: "s"}})
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	return res
}

func newScheduleClient(t *testing.T, s *v1.Schedule, objs ...client.Object) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	s.Name, s.Namespace, s.CreationTimestamp = "s", "velero", metav1.NewTime(base)
	// No status subresource, as the velero.io CRDs have none.
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(append(objs, s)...).Build()
}

func readSchedule(t *testing.T, c client.Client) *v1.Schedule {
	t.Helper()
	var s v1.Schedule
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "velero", Name: "s"}, &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

func backupNames(t *testing.T, c client.Client) []string {
	t.Helper()
	var list v1.BackupList
	if err := c.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, b := range list.Items {
		names = append(names, b.Name)
	}
	return names
}

func TestScheduleReconcileRunsAndRequeues(t *testing.T) {
	c := newScheduleClient(t, &v1.Schedule{Spec: v1.ScheduleSpec{Schedule: "@every 1h"}})
	res := reconcileAt(t, c, base.Add(2*time.Second))
	if got := backupNames(t, c); len(got) != 1 || got[0] != "s-20260301120000" {
		t.Fatalf("backups = %v, want the first run at once", got)
	}
	s := readSchedule(t, c)
	if s.Status.Phase != v1.SchedulePhaseEnabled || s.Status.LastBackup == nil || !s.Status.LastBackup.Time.Equal(base) {
		t.Errorf("status = %+v", s.Status)
	}
	if !meta.IsStatusConditionTrue(s.Status.Conditions, ConditionReady) {
		t.Errorf("Ready is not True: %+v", s.Status.Conditions)
	}
	if want := time.Hour - 2*time.Second; res.RequeueAfter != want {
		t.Errorf("requeue after %s, want %s (the next run)", res.RequeueAfter, want)
	}

	// The next firing waits for the first backup, still New here.
	res = reconcileAt(t, c, base.Add(time.Hour))
	if got := backupNames(t, c); len(got) != 1 || res.RequeueAfter != waitForPreviousRun {
		t.Fatalf("backups = %v, requeue %s; want no second backup while the first runs", got, res.RequeueAfter)
	}
	b := &v1.Backup{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "velero", Name: "s-20260301120000"}, b); err != nil {
		t.Fatal(err)
	}
	b.Status.Phase = v1.BackupPhaseCompleted
	if err := c.Update(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	reconcileAt(t, c, base.Add(time.Hour+10*time.Second))
	if got := backupNames(t, c); len(got) != 2 || got[1] != "s-20260301130000" {
		t.Errorf("backups = %v, want the 13:00 run once the first finished", got)
	}
}

func TestScheduleReconcileBackupExistsCountsAsDone(t *testing.T) {
	// A restart between the create and the status update: the backup of
	// this run is there, lastBackup is not.
	existing := &v1.Backup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: "s-20260301120000", Labels: map[string]string{v1.ScheduleNameLabel: "s"}},
		Status:     v1.BackupStatus{Phase: v1.BackupPhaseCompleted},
	}
	c := newScheduleClient(t, &v1.Schedule{Spec: v1.ScheduleSpec{Schedule: "@every 1h"}}, existing)
	reconcileAt(t, c, base.Add(5*time.Second))
	if got := backupNames(t, c); len(got) != 1 {
		t.Errorf("backups = %v, want the existing one only", got)
	}
	if s := readSchedule(t, c); s.Status.LastBackup == nil || !s.Status.LastBackup.Time.Equal(base) {
		t.Errorf("lastBackup = %v, want %s", s.Status.LastBackup, base)
	}
}

func TestScheduleReconcilePausedAndSkipImmediately(t *testing.T) {
	c := newScheduleClient(t, &v1.Schedule{Spec: v1.ScheduleSpec{Schedule: "@every 1h", Paused: true, SkipImmediately: ptr.To(true)}})
	res := reconcileAt(t, c, base.Add(time.Second))
	s := readSchedule(t, c)
	ready := meta.FindStatusCondition(s.Status.Conditions, ConditionReady)
	if len(backupNames(t, c)) != 0 || res.RequeueAfter != 0 || ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != "Paused" {
		t.Fatalf("paused schedule: backups %v, requeue %s, Ready %+v", backupNames(t, c), res.RequeueAfter, ready)
	}

	// Unpausing with skipImmediately skips the run that is due at once.
	s.Spec.Paused = false
	if err := c.Update(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	unpaused := base.Add(10 * time.Minute)
	res = reconcileAt(t, c, unpaused)
	s = readSchedule(t, c)
	if len(backupNames(t, c)) != 0 || s.Status.LastSkipped == nil || !s.Status.LastSkipped.Time.Equal(unpaused) {
		t.Fatalf("backups %v, lastSkipped %v; want the immediate run skipped", backupNames(t, c), s.Status.LastSkipped)
	}
	if res.RequeueAfter != time.Hour {
		t.Errorf("requeue after %s, want 1h", res.RequeueAfter)
	}
	// Once Ready, skipImmediately does not skip the runs that follow.
	reconcileAt(t, c, unpaused.Add(time.Hour))
	if got := backupNames(t, c); len(got) != 1 || got[0] != "s-20260301131000" {
		t.Errorf("backups = %v, want the 13:10 run", got)
	}
}

func TestScheduleReconcileFailedValidation(t *testing.T) {
	c := newScheduleClient(t, &v1.Schedule{Spec: v1.ScheduleSpec{Schedule: "0 25 * * *"}})
	res := reconcileAt(t, c, base)
	s := readSchedule(t, c)
	if s.Status.Phase != v1.SchedulePhaseFailedValidation || len(s.Status.ValidationErrors) != 1 ||
		!strings.HasPrefix(s.Status.ValidationErrors[0], "spec.schedule: ") {
		t.Errorf("status = %+v", s.Status)
	}
	ready := meta.FindStatusCondition(s.Status.Conditions, ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != "FailedValidation" {
		t.Errorf("Ready = %+v", ready)
	}
	if len(backupNames(t, c)) != 0 || res.RequeueAfter != 0 {
		t.Errorf("an invalid schedule created backups or requeued")
	}
}

// TestScheduleMetricSeries: a schedule's metric series exist at 0 once the
// controller has seen it (paused too, as in Velero), and go with it.
func TestScheduleMetricSeries(t *testing.T) {
	c := newScheduleClient(t, &v1.Schedule{Spec: v1.ScheduleSpec{Schedule: "@every 1h", Paused: true}})
	reconcileAt(t, c, base)
	for _, name := range []string{"velero_backup_attempt_total", "velero_backup_failure_total", "velero_restore_attempt_total"} {
		if v, ok := scheduleSeries(t, name, "s"); !ok || v != 0 {
			t.Errorf("%s{schedule=\"s\"} = %v (present %v), want 0", name, v, ok)
		}
	}
	if v, ok := scheduleSeries(t, "velero_backup_last_status", "s"); !ok || v != 1 {
		t.Errorf("velero_backup_last_status{schedule=\"s\"} = %v (present %v), want 1", v, ok)
	}
	if err := c.Delete(context.Background(), readSchedule(t, c)); err != nil {
		t.Fatal(err)
	}
	reconcileAt(t, c, base)
	if _, ok := scheduleSeries(t, "velero_backup_attempt_total", "s"); ok {
		t.Error("velero_backup_attempt_total{schedule=\"s\"} is still served after the schedule was deleted")
	}
}

// scheduleSeries reads the value of a counter or gauge series with the
// given schedule label from the server's registry.
func scheduleSeries(t *testing.T, name, schedule string) (float64, bool) {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "schedule" && l.GetValue() == schedule {
					if g := m.GetGauge(); g != nil {
						return g.GetValue(), true
					}
					return m.GetCounter().GetValue(), true
				}
			}
		}
	}
	return 0, false
}

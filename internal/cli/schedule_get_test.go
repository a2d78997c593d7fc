package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// sampleSchedules are an enabled schedule that has run, a paused one the
// server has not seen yet and one that failed validation.
func sampleSchedules() []client.Object {
	nightly := &v1.Schedule{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "velero", Labels: map[string]string{"team": "ops"},
			CreationTimestamp: metav1.NewTime(testNow.Add(-72 * time.Hour))},
		Spec: v1.ScheduleSpec{
			Schedule: "0 3 * * *",
			Template: v1.BackupSpec{
				IncludedNamespaces: []string{"shop"},
				LabelSelector:      &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				TTL:                metav1.Duration{Duration: 168 * time.Hour},
				StorageLocation:    "default",
			},
			UseOwnerReferencesInBackup: ptr.To(true),
		},
		Status: v1.ScheduleStatus{
			Phase:      v1.SchedulePhaseEnabled,
			LastBackup: timePtr(time.Date(2026, 3, 1, 3, 0, 0, 0, time.UTC)),
			Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Enabled",
				LastTransitionTime: metav1.NewTime(testNow.Add(-72 * time.Hour)), Message: "next backup due at 2026-03-02T03:00:00Z"}},
		},
	}
	hourly := &v1.Schedule{
		ObjectMeta: metav1.ObjectMeta{Name: "hourly", Namespace: "velero", CreationTimestamp: metav1.NewTime(testNow.Add(-time.Minute))},
		Spec:       v1.ScheduleSpec{Schedule: "@every 1h", Paused: true},
	}
	broken := &v1.Schedule{
		ObjectMeta: metav1.ObjectMeta{Name: "broken", Namespace: "velero", CreationTimestamp: metav1.NewTime(testNow.Add(-time.Hour))},
		Spec:       v1.ScheduleSpec{Schedule: "every day"},
		Status: v1.ScheduleStatus{Phase: v1.SchedulePhaseFailedValidation,
			ValidationErrors: []string{`spec.schedule: "every day" is not a valid cron expression`}},
	}
	return []client.Object{nightly, hourly, broken}
}

func TestScheduleGetTable(t *testing.T) {
	c := newFakeBuilder(t, sampleSchedules()...).Build()
	out, _, err := run(t, newTestFactory(c), "schedule", "get")
	if err != nil {
		t.Fatal(err)
	}
	want := "" +
		"NAME      STATUS             CREATED                         SCHEDULE    BACKUP TTL   LAST BACKUP   SELECTOR   PAUSED\n" +
		"broken    FailedValidation   2026-03-01 11:00:00 +0000 UTC   every day   <default>    n/a           <none>     false\n" +
		"hourly    New                2026-03-01 11:59:00 +0000 UTC   @every 1h   <default>    n/a           <none>     true\n" +
		"nightly   Enabled            2026-02-26 12:00:00 +0000 UTC   0 3 * * *   168h0m0s     9h ago        app=web    false\n"
	if out != want {
		t.Errorf("table:\n%s\nwant:\n%s", out, want)
	}
}

func TestScheduleGetEmptyAndSelector(t *testing.T) {
	c := newFakeBuilder(t).Build()
	out, errOut, err := run(t, newTestFactory(c), "schedule", "get")
	if err != nil || out != "" || !strings.Contains(errOut, `No schedules found in namespace "velero"`) {
		t.Errorf("empty: err %v, stdout %q, stderr %q", err, out, errOut)
	}
	c = newFakeBuilder(t, sampleSchedules()...).Build()
	out, _, err = run(t, newTestFactory(c), "schedule", "get", "-l", "team=ops")
	if err != nil || !strings.Contains(out, "nightly") || strings.Contains(out, "hourly") {
		t.Errorf("selector: err %v, output:\n%s", err, out)
	}
}

func TestScheduleGetEncoded(t *testing.T) {
	c := newFakeBuilder(t, sampleSchedules()...).Build()
	out, _, err := run(t, newTestFactory(c), "schedule", "get", "nightly", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var one v1.Schedule
	if err := json.Unmarshal([]byte(out), &one); err != nil {
		t.Fatal(err)
	}
	if one.Kind != "Schedule" || one.APIVersion != "velero.io/v1" || one.Name != "nightly" || one.Status.Phase != v1.SchedulePhaseEnabled {
		t.Errorf("printed %s/%s %s %s", one.APIVersion, one.Kind, one.Name, one.Status.Phase)
	}
	out, _, err = run(t, newTestFactory(c), "schedule", "get", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var list v1.ScheduleList
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	if list.Kind != "ScheduleList" || len(list.Items) != 3 || list.Items[0].Kind != "Schedule" {
		t.Errorf("list printed as %s with %d items", list.Kind, len(list.Items))
	}
}

func TestScheduleNotFound(t *testing.T) {
	c := newFakeBuilder(t, sampleSchedules()...).Build()
	for _, verb := range []string{"get", "describe", "pause", "unpause"} {
		_, _, err := run(t, newTestFactory(c), "schedule", verb, "nope")
		if err == nil || !strings.Contains(err.Error(), `schedule "nope" not found in namespace "velero"`) {
			t.Errorf("schedule %s nope: error = %v, want it to name the schedule", verb, err)
		}
	}
}

func TestScheduleDescribe(t *testing.T) {
	c := newFakeBuilder(t, sampleSchedules()...).Build()
	out, _, err := run(t, newTestFactory(c), "schedule", "describe", "nightly")
	if err != nil {
		t.Fatal(err)
	}
	got := squeeze(out)
	for _, want := range []string{
		"Name: nightly\n",
		"Labels: team=ops\n",
		"Phase: Enabled\n",
		"Paused: false\nSchedule: 0 3 * * *\nSkip immediately: false\nOwner references in backups: true\n",
		"Backup Template:\n Namespaces:\n Included: shop\n Excluded: <none>\n",
		" Label selector: app=web\n",
		" Storage Location: default\n",
		" TTL: 168h0m0s\n",
		"Last Backup: 2026-03-01 03:00:00 +0000 UTC\n",
		"Next Backup: 2026-03-02 03:00:00 +0000 UTC (in 15h)\n",
		" Ready True Enabled 2026-02-26 12:00:00 +0000 UTC next backup due at 2026-03-02T03:00:00Z\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("description lacks %q:\n%s", want, out)
		}
	}
}

func TestScheduleDescribeNotRunning(t *testing.T) {
	c := newFakeBuilder(t, sampleSchedules()...).Build()
	out, _, err := run(t, newTestFactory(c), "schedule", "describe", "hourly", "broken")
	if err != nil {
		t.Fatal(err)
	}
	got := squeeze(out)
	for _, want := range []string{
		"Name: hourly\n", "Phase: New\n", "Paused: true\n", "Last Backup: <never>\n", "Next Backup: <paused>\n",
		"Name: broken\n", "Validation errors:\n - spec.schedule: \"every day\" is not a valid cron expression\n",
		"Next Backup: <n/a: the schedule failed validation>\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("description lacks %q:\n%s", want, out)
		}
	}
}

func TestSchedulePauseAndUnpause(t *testing.T) {
	c := newFakeBuilder(t, sampleSchedules()...).Build()
	read := func(name string) *v1.Schedule {
		s := &v1.Schedule{}
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: "velero", Name: name}, s); err != nil {
			t.Fatal(err)
		}
		return s
	}

	// A missing name is reported, and the others are paused all the same.
	out, _, err := run(t, newTestFactory(c), "schedule", "pause", "nightly", "nope", "hourly")
	if err == nil || !strings.Contains(err.Error(), `"nope" not found`) {
		t.Errorf("error = %v, want it to name the missing schedule", err)
	}
	if !strings.Contains(out, `Schedule "nightly" paused.`) || !strings.Contains(out, `Schedule "hourly" is already paused.`) {
		t.Errorf("output:\n%s", out)
	}
	if s := read("nightly"); !s.Spec.Paused || s.Spec.Schedule != "0 3 * * *" || len(s.Spec.Template.IncludedNamespaces) != 1 {
		t.Errorf("nightly after pause: %+v", s.Spec)
	}

	out, _, err = run(t, newTestFactory(c), "schedule", "unpause", "nightly", "--skip-immediately")
	if err != nil || !strings.Contains(out, `Schedule "nightly" unpaused.`) {
		t.Fatalf("unpause: %v\n%s", err, out)
	}
	if s := read("nightly"); s.Spec.Paused || !ptr.Deref(s.Spec.SkipImmediately, false) {
		t.Errorf("nightly after unpause: paused %v, skipImmediately %v", s.Spec.Paused, s.Spec.SkipImmediately)
	}

	out, _, err = run(t, newTestFactory(c), "schedule", "unpause", "--all")
	if err != nil || !strings.Contains(out, `Schedule "hourly" unpaused.`) || !strings.Contains(out, `Schedule "nightly" is already unpaused.`) {
		t.Errorf("unpause --all: %v\n%s", err, out)
	}
}

func TestSchedulePauseNeedsATarget(t *testing.T) {
	c := newFakeBuilder(t, sampleSchedules()...).Build()
	for _, args := range [][]string{{"pause"}, {"pause", "nightly", "--all"}, {"unpause", "--all", "-l", "a=b"}} {
		_, _, err := run(t, newTestFactory(c), append([]string{"schedule"}, args...)...)
		if err == nil || !strings.Contains(err.Error(), "names, --all or --selector") {
			t.Errorf("%v: error = %v", args, err)
		}
	}
}

package e2e

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/testutil/testenv"
)

// scheduledBackups lists the backups a schedule created, found the way
// Velero's tools find them: by the schedule-name label.
func scheduledBackups(t *testing.T, schedule string) []v1.Backup {
	t.Helper()
	var list v1.BackupList
	if err := env.Client.List(testenv.Ctx(t), &list, client.InNamespace(env.Namespace),
		client.MatchingLabels{v1.ScheduleNameLabel: v1.LabelValue(schedule)}); err != nil {
		t.Fatalf("listing backups of schedule %s: %v", schedule, err)
	}
	return list.Items
}

func waitScheduledBackup(t *testing.T, schedule string) v1.Backup {
	t.Helper()
	var found []v1.Backup
	err := wait.PollUntilContextTimeout(testenv.Ctx(t), 100*time.Millisecond, 15*time.Second, true, func(context.Context) (bool, error) {
		found = scheduledBackups(t, schedule)
		return len(found) > 0, nil
	})
	if err != nil {
		t.Fatalf("schedule %s created no backup: %v", schedule, err)
	}
	return found[0]
}

// waitSchedule waits until ok holds for the schedule; what says what was
// awaited.
func waitSchedule(t *testing.T, name, what string, ok func(*v1.Schedule) bool) *v1.Schedule {
	t.Helper()
	var s v1.Schedule
	err := wait.PollUntilContextTimeout(testenv.Ctx(t), 100*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, clientKey(name), &s); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return ok(&s), nil
	})
	if err != nil {
		t.Fatalf("schedule %s: %s not reached (status %+v): %v", name, what, s.Status, err)
	}
	return &s
}

func readyReason(s *v1.Schedule) string {
	c := meta.FindStatusCondition(s.Status.Conditions, "Ready")
	if c == nil {
		return ""
	}
	return string(c.Status) + "/" + c.Reason
}

func TestScheduleCreatesBackupsAndPauses(t *testing.T) {
	bsl, _ := env.FilesystemLocation(t, env.Name("sched"))
	ns := env.NewNamespace(t, "sched")
	env.Create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"}, Data: map[string]string{"a": "b"}})

	// A new schedule backs up at once, then every minute.
	name := env.Name("every")
	mustLifeboat(t, "schedule", "create", name, "--schedule", "@every 1m", "--include-namespaces", ns,
		"--storage-location", bsl.Name, "--labels", "team=ops", "--use-owner-references-in-backup")
	first := waitScheduledBackup(t, name)
	if !regexp.MustCompile("^" + regexp.QuoteMeta(name) + `-\d{14}$`).MatchString(first.Name) {
		t.Errorf("backup name %q is not %s-YYYYMMDDhhmmss", first.Name, name)
	}
	if first.Labels["team"] != "ops" || len(first.Spec.IncludedNamespaces) != 1 || first.Spec.IncludedNamespaces[0] != ns {
		t.Errorf("backup labels %v, spec %+v: want the schedule's labels and template", first.Labels, first.Spec)
	}
	if refs := first.OwnerReferences; len(refs) != 1 || refs[0].Kind != "Schedule" || refs[0].Name != name {
		t.Errorf("owner references = %+v, want the schedule", refs)
	}
	done := env.WaitBackup(t, first.Name, time.Minute)
	if done.Status.Phase != v1.BackupPhaseCompleted || done.Status.Progress == nil || done.Status.Progress.ItemsBackedUp == 0 {
		t.Fatalf("scheduled backup: phase %s, failure %q, validation %v", done.Status.Phase, done.Status.FailureReason, done.Status.ValidationErrors)
	}
	s := waitSchedule(t, name, "lastBackup set", func(s *v1.Schedule) bool { return s.Status.LastBackup != nil })
	if s.Status.Phase != v1.SchedulePhaseEnabled || readyReason(s) != "True/Enabled" {
		t.Errorf("phase %s, Ready %s; want Enabled, True/Enabled", s.Status.Phase, readyReason(s))
	}
	if stamp := s.Status.LastBackup.UTC().Format("20060102150405"); first.Name != name+"-"+stamp {
		t.Errorf("lastBackup %s does not name backup %s", s.Status.LastBackup.UTC(), first.Name)
	}

	mustLifeboat(t, "schedule", "pause", name)
	s = waitSchedule(t, name, "paused", func(s *v1.Schedule) bool { return readyReason(s) == "False/Paused" })
	if !s.Spec.Paused || s.Status.Phase != v1.SchedulePhaseEnabled {
		t.Errorf("paused %v, phase %s", s.Spec.Paused, s.Status.Phase)
	}

	// A schedule created paused would otherwise back up at once: nothing
	// may come of it while paused, and its backup comes with unpause.
	held := env.Name("held")
	mustLifeboat(t, "schedule", "create", held, "--schedule", "@every 1m", "--include-namespaces", ns,
		"--storage-location", bsl.Name, "--paused")
	waitSchedule(t, held, "paused", func(s *v1.Schedule) bool { return readyReason(s) == "False/Paused" })
	time.Sleep(3 * time.Second)
	if got := scheduledBackups(t, held); len(got) != 0 {
		t.Fatalf("a paused schedule created %d backups", len(got))
	}
	if got := scheduledBackups(t, name); len(got) != 1 {
		t.Errorf("schedule %s has %d backups after pausing, want 1", name, len(got))
	}
	out := mustLifeboat(t, "schedule", "get", name, held)
	for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		if !strings.Contains(line, "@every 1m") || !strings.HasSuffix(line, "true") {
			t.Errorf("schedule get does not show a paused @every 1m schedule:\n%s", out)
		}
	}

	mustLifeboat(t, "schedule", "unpause", held)
	env.WaitBackup(t, waitScheduledBackup(t, held).Name, time.Minute)
	out = mustLifeboat(t, "schedule", "describe", held)
	for _, want := range []string{"Phase:", "Enabled", "Paused:", "false", "Last Backup:", "Next Backup:", ns} {
		if !strings.Contains(out, want) {
			t.Errorf("schedule describe lacks %q:\n%s", want, out)
		}
	}
}

func TestScheduleWithInvalidCronFailsValidation(t *testing.T) {
	s := &v1.Schedule{
		ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: env.Name("bad")},
		Spec:       v1.ScheduleSpec{Schedule: "0 25 * * *"},
	}
	env.Create(t, s)
	got := waitSchedule(t, s.Name, "FailedValidation", func(s *v1.Schedule) bool {
		return s.Status.Phase == v1.SchedulePhaseFailedValidation
	})
	if len(got.Status.ValidationErrors) != 1 || !strings.HasPrefix(got.Status.ValidationErrors[0], "spec.schedule: ") {
		t.Errorf("validation errors = %q, want one naming spec.schedule", got.Status.ValidationErrors)
	}
	if readyReason(got) != "False/FailedValidation" {
		t.Errorf("Ready = %s, want False/FailedValidation", readyReason(got))
	}
	if n := len(scheduledBackups(t, s.Name)); n != 0 {
		t.Errorf("an invalid schedule created %d backups", n)
	}

	// The CLI refuses the same mistake before it reaches the server.
	out, err := lifeboat(t, "schedule", "create", env.Name("bad"), "--schedule", "0 25 * * *")
	if err == nil || !strings.Contains(err.Error(), "--schedule") || !strings.Contains(err.Error(), `"0 3 * * *"`) {
		t.Errorf("schedule create with a bad cron: %v\n%s", err, out)
	}
}

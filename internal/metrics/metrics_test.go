package metrics

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// fresh swaps in a new set of metrics for the test, with a clock stopped
// at clock, and returns a registry that serves only it.
func fresh(t *testing.T) *prometheus.Registry {
	t.Helper()
	old, oldNow := m, now
	m = newSet()
	now = func() time.Time { return clock }
	t.Cleanup(func() { m, now = old, oldNow })
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m.collectors()...)
	return reg
}

var clock = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// compare checks the series of the named metrics against want, given as
// the text exposition format without HELP lines.
func compare(t *testing.T, reg *prometheus.Registry, want string, names ...string) {
	t.Helper()
	if err := testutil.GatherAndCompare(reg, strings.NewReader(withHelp(t, reg, want)), names...); err != nil {
		t.Error(err)
	}
}

// withHelp adds the HELP line of each family in want, so that the tests
// state values and labels, not help texts.
func withHelp(t *testing.T, reg *prometheus.Registry, want string) string {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	help := map[string]string{}
	for _, f := range families {
		help[f.GetName()] = f.GetHelp()
	}
	var out strings.Builder
	for line := range strings.Lines(strings.TrimSpace(want) + "\n") {
		line = strings.TrimSpace(line)
		if name, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, _, _ = strings.Cut(name, " ")
			out.WriteString("# HELP " + name + " " + help[name] + "\n")
		}
		out.WriteString(line + "\n")
	}
	return out.String()
}

// backupMetrics are the metrics a backup moves.
var backupMetrics = []string{
	"velero_backup_attempt_total", "velero_backup_success_total", "velero_backup_partial_failure_total",
	"velero_backup_failure_total", "velero_backup_validation_failure_total", "velero_backup_warning_total",
	"velero_backup_duration_seconds", "velero_backup_last_status", "velero_backup_tarball_size_bytes",
	"velero_backup_items_total", "velero_backup_items_errors", "velero_backup_last_successful_timestamp",
	"velero_volume_snapshot_attempt_total", "velero_volume_snapshot_success_total", "velero_volume_snapshot_failure_total",
}

func TestBackupCompletedSetsEveryBackupMetric(t *testing.T) {
	reg := fresh(t)
	BackupStarted("nightly")
	BackupRan("nightly", BackupRun{
		Phase: v1.BackupPhaseCompleted, Processed: true, Took: 330*time.Second + 900*time.Millisecond,
		TarballBytes: 4096, Items: 12, Warnings: 2, SnapshotsAttempted: 3, SnapshotsCompleted: 2,
	})
	compare(t, reg, `
		# TYPE velero_backup_attempt_total counter
		velero_backup_attempt_total{schedule="nightly"} 1
		# TYPE velero_backup_success_total counter
		velero_backup_success_total{schedule="nightly"} 1
		# TYPE velero_backup_warning_total counter
		velero_backup_warning_total{schedule="nightly"} 1
		# TYPE velero_backup_duration_seconds histogram
		velero_backup_duration_seconds_bucket{schedule="nightly",le="60"} 0
		velero_backup_duration_seconds_bucket{schedule="nightly",le="300"} 0
		velero_backup_duration_seconds_bucket{schedule="nightly",le="600"} 1
		velero_backup_duration_seconds_bucket{schedule="nightly",le="900"} 1
		velero_backup_duration_seconds_bucket{schedule="nightly",le="1800"} 1
		velero_backup_duration_seconds_bucket{schedule="nightly",le="3600"} 1
		velero_backup_duration_seconds_bucket{schedule="nightly",le="7200"} 1
		velero_backup_duration_seconds_bucket{schedule="nightly",le="10800"} 1
		velero_backup_duration_seconds_bucket{schedule="nightly",le="14400"} 1
		velero_backup_duration_seconds_bucket{schedule="nightly",le="+Inf"} 1
		velero_backup_duration_seconds_sum{schedule="nightly"} 330
		velero_backup_duration_seconds_count{schedule="nightly"} 1
		# TYPE velero_backup_last_status gauge
		velero_backup_last_status{schedule="nightly"} 1
		# TYPE velero_backup_tarball_size_bytes gauge
		velero_backup_tarball_size_bytes{schedule="nightly"} 4096
		# TYPE velero_backup_items_total gauge
		velero_backup_items_total{schedule="nightly"} 12
		# TYPE velero_backup_items_errors gauge
		velero_backup_items_errors{schedule="nightly"} 0
		# TYPE velero_backup_last_successful_timestamp gauge
		velero_backup_last_successful_timestamp{schedule="nightly"} 1.7723664e+09
		# TYPE velero_volume_snapshot_attempt_total counter
		velero_volume_snapshot_attempt_total{schedule="nightly"} 3
		# TYPE velero_volume_snapshot_success_total counter
		velero_volume_snapshot_success_total{schedule="nightly"} 2
		# TYPE velero_volume_snapshot_failure_total counter
		velero_volume_snapshot_failure_total{schedule="nightly"} 1
	`, backupMetrics...)
}

// TestBackupOutcomes: each way a backup ends moves its counter and
// velero_backup_last_status, and nothing else of the outcome metrics.
func TestBackupOutcomes(t *testing.T) {
	for _, tt := range []struct {
		phase      v1.BackupPhase
		counter    string
		lastStatus float64
	}{
		{v1.BackupPhaseCompleted, "velero_backup_success_total", 1},
		{v1.BackupPhasePartiallyFailed, "velero_backup_partial_failure_total", 0},
		{v1.BackupPhaseFailed, "velero_backup_failure_total", 0},
	} {
		t.Run(string(tt.phase), func(t *testing.T) {
			fresh(t)
			InitSchedule("s")
			BackupStarted("s")
			BackupRan("s", BackupRun{Phase: tt.phase, Processed: true, Took: time.Second, Errors: 4})
			counters := map[string]*prometheus.CounterVec{
				"velero_backup_success_total":         m.backupSuccesses,
				"velero_backup_partial_failure_total": m.backupPartialFailures,
				"velero_backup_failure_total":         m.backupFailures,
			}
			for name, c := range counters {
				want := 0.0
				if name == tt.counter {
					want = 1
				}
				if got := testutil.ToFloat64(c.WithLabelValues("s")); got != want {
					t.Errorf("%s = %v, want %v", name, got, want)
				}
			}
			if got := testutil.ToFloat64(m.backupLastStatus.WithLabelValues("s")); got != tt.lastStatus {
				t.Errorf("velero_backup_last_status = %v, want %v", got, tt.lastStatus)
			}
			if got := testutil.ToFloat64(m.backupItemErrors.WithLabelValues("s")); got != 4 {
				t.Errorf("velero_backup_items_errors = %v, want 4", got)
			}
			if got := testutil.ToFloat64(m.backupAttempts.WithLabelValues("s")); got != 1 {
				t.Errorf("velero_backup_attempt_total = %v, want 1", got)
			}
		})
	}
}

// TestBackupNotProcessed: a backup refused before it backed anything up
// (its store unusable, its name taken) counts as Failed, and sets no size,
// item count or duration, as in Velero.
func TestBackupNotProcessed(t *testing.T) {
	reg := fresh(t)
	BackupStarted("")
	BackupRan("", BackupRun{Phase: v1.BackupPhaseFailed, Took: 3 * time.Second, TarballBytes: 99, Items: 5, Warnings: 1})
	compare(t, reg, `
		# TYPE velero_backup_attempt_total counter
		velero_backup_attempt_total{schedule=""} 1
		# TYPE velero_backup_failure_total counter
		velero_backup_failure_total{schedule=""} 1
		# TYPE velero_backup_last_status gauge
		velero_backup_last_status{schedule=""} 0
	`, backupMetrics...)
}

// TestBackupValidationFailed: not an attempt, no duration.
func TestBackupValidationFailed(t *testing.T) {
	reg := fresh(t)
	BackupValidationFailed("")
	compare(t, reg, `
		# TYPE velero_backup_validation_failure_total counter
		velero_backup_validation_failure_total{schedule=""} 1
		# TYPE velero_backup_last_status gauge
		velero_backup_last_status{schedule=""} 0
	`, backupMetrics...)
}

// TestBackupWaitingForOperations: the run records what it stored; the
// outcome and duration come when the operations end.
func TestBackupWaitingForOperations(t *testing.T) {
	reg := fresh(t)
	BackupStarted("")
	BackupRan("", BackupRun{Phase: v1.BackupPhaseWaitingForPluginOperations, Processed: true, Took: time.Second, TarballBytes: 10, Items: 2})
	compare(t, reg, `
		# TYPE velero_backup_attempt_total counter
		velero_backup_attempt_total{schedule=""} 1
		# TYPE velero_backup_tarball_size_bytes gauge
		velero_backup_tarball_size_bytes{schedule=""} 10
		# TYPE velero_backup_items_total gauge
		velero_backup_items_total{schedule=""} 2
		# TYPE velero_backup_items_errors gauge
		velero_backup_items_errors{schedule=""} 0
		# TYPE velero_volume_snapshot_attempt_total counter
		velero_volume_snapshot_attempt_total{schedule=""} 0
		# TYPE velero_volume_snapshot_success_total counter
		velero_volume_snapshot_success_total{schedule=""} 0
		# TYPE velero_volume_snapshot_failure_total counter
		velero_volume_snapshot_failure_total{schedule=""} 0
	`, backupMetrics...)

	BackupOperationsEnded("", v1.BackupPhasePartiallyFailed, 75*time.Second, 1, 1)
	compare(t, reg, `
		# TYPE velero_backup_partial_failure_total counter
		velero_backup_partial_failure_total{schedule=""} 1
		# TYPE velero_backup_last_status gauge
		velero_backup_last_status{schedule=""} 0
		# TYPE velero_backup_items_errors gauge
		velero_backup_items_errors{schedule=""} 1
		# TYPE velero_backup_duration_seconds histogram
		velero_backup_duration_seconds_bucket{schedule="",le="60"} 0
		velero_backup_duration_seconds_bucket{schedule="",le="300"} 1
		velero_backup_duration_seconds_bucket{schedule="",le="600"} 1
		velero_backup_duration_seconds_bucket{schedule="",le="900"} 1
		velero_backup_duration_seconds_bucket{schedule="",le="1800"} 1
		velero_backup_duration_seconds_bucket{schedule="",le="3600"} 1
		velero_backup_duration_seconds_bucket{schedule="",le="7200"} 1
		velero_backup_duration_seconds_bucket{schedule="",le="10800"} 1
		velero_backup_duration_seconds_bucket{schedule="",le="14400"} 1
		velero_backup_duration_seconds_bucket{schedule="",le="+Inf"} 1
		velero_backup_duration_seconds_sum{schedule=""} 75
		velero_backup_duration_seconds_count{schedule=""} 1
	`, "velero_backup_partial_failure_total", "velero_backup_last_status", "velero_backup_items_errors", "velero_backup_duration_seconds")
}

func TestRestoreOutcomes(t *testing.T) {
	reg := fresh(t)
	RestoreStarted("")
	RestoreEnded("", v1.RestorePhaseCompleted)
	RestoreStarted("daily")
	RestoreEnded("daily", v1.RestorePhasePartiallyFailed)
	RestoreStarted("daily")
	RestoreEnded("daily", v1.RestorePhaseFailed)
	RestoreEnded("", v1.RestorePhaseFailedValidation)
	compare(t, reg, `
		# TYPE velero_restore_attempt_total counter
		velero_restore_attempt_total{schedule=""} 2
		velero_restore_attempt_total{schedule="daily"} 2
		# TYPE velero_restore_success_total counter
		velero_restore_success_total{schedule=""} 1
		# TYPE velero_restore_partial_failure_total counter
		velero_restore_partial_failure_total{schedule="daily"} 1
		# TYPE velero_restore_failed_total counter
		velero_restore_failed_total{schedule="daily"} 1
		# TYPE velero_restore_validation_failed_total counter
		velero_restore_validation_failed_total{schedule=""} 1
	`, "velero_restore_attempt_total", "velero_restore_success_total", "velero_restore_partial_failure_total",
		"velero_restore_failed_total", "velero_restore_validation_failed_total")
}

// TestInitSchedule: a schedule's series exist at 0 (last status 1) before
// its first backup; seeing the schedule again does not hide a failure;
// removing it removes them all.
func TestInitSchedule(t *testing.T) {
	reg := fresh(t)
	InitSchedule("daily")
	zeros := `
		# TYPE velero_backup_attempt_total counter
		velero_backup_attempt_total{schedule="daily"} 0
		# TYPE velero_backup_success_total counter
		velero_backup_success_total{schedule="daily"} 0
		# TYPE velero_backup_partial_failure_total counter
		velero_backup_partial_failure_total{schedule="daily"} 0
		# TYPE velero_backup_failure_total counter
		velero_backup_failure_total{schedule="daily"} 0
		# TYPE velero_backup_validation_failure_total counter
		velero_backup_validation_failure_total{schedule="daily"} 0
		# TYPE velero_backup_warning_total counter
		velero_backup_warning_total{schedule="daily"} 0
		# TYPE velero_backup_last_status gauge
		velero_backup_last_status{schedule="daily"} 1
		# TYPE velero_backup_items_total gauge
		velero_backup_items_total{schedule="daily"} 0
		# TYPE velero_backup_items_errors gauge
		velero_backup_items_errors{schedule="daily"} 0
		# TYPE velero_volume_snapshot_attempt_total counter
		velero_volume_snapshot_attempt_total{schedule="daily"} 0
		# TYPE velero_volume_snapshot_success_total counter
		velero_volume_snapshot_success_total{schedule="daily"} 0
		# TYPE velero_volume_snapshot_failure_total counter
		velero_volume_snapshot_failure_total{schedule="daily"} 0
		# TYPE velero_backup_deletion_attempt_total counter
		velero_backup_deletion_attempt_total{schedule="daily"} 0
		# TYPE velero_backup_deletion_success_total counter
		velero_backup_deletion_success_total{schedule="daily"} 0
		# TYPE velero_backup_deletion_failure_total counter
		velero_backup_deletion_failure_total{schedule="daily"} 0
		# TYPE velero_restore_attempt_total counter
		velero_restore_attempt_total{schedule="daily"} 0
		# TYPE velero_restore_success_total counter
		velero_restore_success_total{schedule="daily"} 0
		# TYPE velero_restore_partial_failure_total counter
		velero_restore_partial_failure_total{schedule="daily"} 0
		# TYPE velero_restore_failed_total counter
		velero_restore_failed_total{schedule="daily"} 0
		# TYPE velero_restore_validation_failed_total counter
		velero_restore_validation_failed_total{schedule="daily"} 0
		# TYPE velero_csi_snapshot_attempt_total counter
		velero_csi_snapshot_attempt_total{backupName="",schedule="daily"} 0
		# TYPE velero_csi_snapshot_success_total counter
		velero_csi_snapshot_success_total{backupName="",schedule="daily"} 0
		# TYPE velero_csi_snapshot_failure_total counter
		velero_csi_snapshot_failure_total{backupName="",schedule="daily"} 0
	`
	all := []string{
		"velero_backup_attempt_total", "velero_backup_success_total", "velero_backup_partial_failure_total",
		"velero_backup_failure_total", "velero_backup_validation_failure_total", "velero_backup_warning_total",
		"velero_backup_last_status", "velero_backup_items_total", "velero_backup_items_errors",
		"velero_volume_snapshot_attempt_total", "velero_volume_snapshot_success_total", "velero_volume_snapshot_failure_total",
		"velero_backup_deletion_attempt_total", "velero_backup_deletion_success_total", "velero_backup_deletion_failure_total",
		"velero_restore_attempt_total", "velero_restore_success_total", "velero_restore_partial_failure_total",
		"velero_restore_failed_total", "velero_restore_validation_failed_total",
		"velero_csi_snapshot_attempt_total", "velero_csi_snapshot_success_total", "velero_csi_snapshot_failure_total",
		"velero_backup_duration_seconds", "velero_backup_tarball_size_bytes", "velero_backup_last_successful_timestamp",
	}
	compare(t, reg, zeros, all...)

	BackupStarted("daily")
	BackupRan("daily", BackupRun{Phase: v1.BackupPhaseFailed, Processed: true})
	InitSchedule("daily")
	if got := testutil.ToFloat64(m.backupLastStatus.WithLabelValues("daily")); got != 0 {
		t.Errorf("velero_backup_last_status after a failed backup and the schedule seen again = %v, want 0", got)
	}
	if got := testutil.ToFloat64(m.backupFailures.WithLabelValues("daily")); got != 1 {
		t.Errorf("velero_backup_failure_total = %v, want 1 (InitSchedule must not reset counters)", got)
	}

	RemoveSchedule("daily")
	if n, err := testutil.GatherAndCount(reg, all...); err != nil || n != 0 {
		t.Errorf("after RemoveSchedule: %d series left (err %v), want 0", n, err)
	}
	InitSchedule("daily")
	compare(t, reg, zeros, all...)
}

func TestBackupLocationStatus(t *testing.T) {
	reg := fresh(t)
	BackupLocationChecked("default", true)
	BackupLocationChecked("broken", false)
	compare(t, reg, `
		# TYPE velero_backup_location_status_gauge gauge
		velero_backup_location_status_gauge{backup_location_name="broken"} 0
		velero_backup_location_status_gauge{backup_location_name="default"} 1
	`, "velero_backup_location_status_gauge")
	BackupLocationRemoved("broken")
	compare(t, reg, `
		# TYPE velero_backup_location_status_gauge gauge
		velero_backup_location_status_gauge{backup_location_name="default"} 1
	`, "velero_backup_location_status_gauge")
}

func TestDeletion(t *testing.T) {
	reg := fresh(t)
	BackupDeletionAttempted("")
	BackupDeletionFailed("")
	BackupDeletionAttempted("")
	BackupDeletionSucceeded("", 2*time.Second)
	DeleteItemActionCalled("example.io/cleanup", nil)
	DeleteItemActionCalled("example.io/cleanup", errors.New("boom"))
	compare(t, reg, `
		# TYPE velero_backup_deletion_attempt_total counter
		velero_backup_deletion_attempt_total{schedule=""} 2
		# TYPE velero_backup_deletion_failure_total counter
		velero_backup_deletion_failure_total{schedule=""} 1
		# TYPE velero_backup_deletion_success_total counter
		velero_backup_deletion_success_total{schedule=""} 1
		# TYPE lifeboat_delete_item_action_calls_total counter
		lifeboat_delete_item_action_calls_total{plugin="example.io/cleanup",result="failure"} 1
		lifeboat_delete_item_action_calls_total{plugin="example.io/cleanup",result="success"} 1
	`, "velero_backup_deletion_attempt_total", "velero_backup_deletion_failure_total", "velero_backup_deletion_success_total",
		"lifeboat_delete_item_action_calls_total")
	if n := testutil.CollectAndCount(m.deletionDuration); n != 1 {
		t.Errorf("lifeboat_backup_deletion_duration_seconds: %d series, want 1", n)
	}
}

// TestCensus: the totals come from the census at each scrape, only while a
// census is set; the last success time follows the newest Completed backup
// and stays when the backups it came from are gone.
func TestCensus(t *testing.T) {
	reg := fresh(t)
	names := []string{"velero_backup_total", "velero_restore_total", "velero_backup_last_successful_timestamp"}
	if n, err := testutil.GatherAndCount(reg, names...); err != nil || n != 0 {
		t.Fatalf("without a census: %d series (err %v), want none", n, err)
	}

	older, newer := clock.Add(-2*time.Hour), clock.Add(-time.Hour)
	current := Census{Backups: 3, Restores: 1, NewestCompleted: map[string]time.Time{"": newer, "daily": older}}
	var fail error
	stop := UseCensus(func(context.Context) (Census, error) { return current, fail })
	t.Cleanup(stop)
	compare(t, reg, `
		# TYPE velero_backup_total gauge
		velero_backup_total 3
		# TYPE velero_restore_total gauge
		velero_restore_total 1
		# TYPE velero_backup_last_successful_timestamp gauge
		velero_backup_last_successful_timestamp{schedule=""} 1.7723628e+09
		velero_backup_last_successful_timestamp{schedule="daily"} 1.7723592e+09
	`, names...)

	// The manual backups are deleted: their time stays. A census that
	// fails leaves the totals out and the scrape working.
	current = Census{Backups: 1, NewestCompleted: map[string]time.Time{"daily": older}}
	compare(t, reg, `
		# TYPE velero_backup_total gauge
		velero_backup_total 1
		# TYPE velero_restore_total gauge
		velero_restore_total 0
		# TYPE velero_backup_last_successful_timestamp gauge
		velero_backup_last_successful_timestamp{schedule=""} 1.7723628e+09
		velero_backup_last_successful_timestamp{schedule="daily"} 1.7723592e+09
	`, names...)
	fail = errors.New("cache not synced")
	compare(t, reg, `
		# TYPE velero_backup_last_successful_timestamp gauge
		velero_backup_last_successful_timestamp{schedule=""} 1.7723628e+09
		velero_backup_last_successful_timestamp{schedule="daily"} 1.7723592e+09
	`, names...)
}

// TestCensusOf: every backup counts; the newest Completed one per schedule
// label gives the last success time, other phases and backups without a
// completion time do not.
func TestCensusOf(t *testing.T) {
	at := func(d time.Duration) *metav1.Time { tm := metav1.NewTime(clock.Add(d)); return &tm }
	backup := func(schedule string, phase v1.BackupPhase, done *metav1.Time) v1.Backup {
		b := v1.Backup{Status: v1.BackupStatus{Phase: phase, CompletionTimestamp: done}}
		if schedule != "" {
			b.Labels = map[string]string{v1.ScheduleNameLabel: schedule}
		}
		return b
	}
	got := CensusOf([]v1.Backup{
		backup("", v1.BackupPhaseCompleted, at(-3*time.Hour)),
		backup("", v1.BackupPhaseCompleted, at(-time.Hour)),
		backup("", v1.BackupPhaseFailed, at(0)),
		backup("daily", v1.BackupPhasePartiallyFailed, at(0)),
		backup("daily", v1.BackupPhaseCompleted, at(-2*time.Hour)),
		backup("weekly", v1.BackupPhaseCompleted, nil),
		backup("weekly", v1.BackupPhaseInProgress, nil),
	}, 4)
	want := Census{Backups: 7, Restores: 4, NewestCompleted: map[string]time.Time{"": clock.Add(-time.Hour), "daily": clock.Add(-2 * time.Hour)}}
	if got.Backups != want.Backups || got.Restores != want.Restores || !maps.EqualFunc(got.NewestCompleted, want.NewestCompleted, time.Time.Equal) {
		t.Errorf("CensusOf = %+v, want %+v", got, want)
	}
}

// TestUseCensusStop: stopping an earlier census leaves a later one.
func TestUseCensusStop(t *testing.T) {
	reg := fresh(t)
	stopFirst := UseCensus(func(context.Context) (Census, error) { return Census{Backups: 1}, nil })
	stopSecond := UseCensus(func(context.Context) (Census, error) { return Census{Backups: 2}, nil })
	stopFirst()
	compare(t, reg, `
		# TYPE velero_backup_total gauge
		velero_backup_total 2
	`, "velero_backup_total")
	stopSecond()
	if n, err := testutil.GatherAndCount(reg, "velero_backup_total"); err != nil || n != 0 {
		t.Errorf("after both stopped: %d series (err %v), want none", n, err)
	}
}

// TestBackupCSISnapshots: a backup that took CSI snapshots counts them per
// schedule and backup, as Velero does; one that took none adds no series.
func TestBackupCSISnapshots(t *testing.T) {
	reg := fresh(t)
	BackupRan("nightly", BackupRun{Phase: v1.BackupPhasePartiallyFailed, Processed: true, BackupName: "nightly-1",
		CSISnapshotsAttempted: 3, CSISnapshotsCompleted: 2})
	BackupRan("nightly", BackupRun{Phase: v1.BackupPhaseCompleted, Processed: true, BackupName: "nightly-2"})
	compare(t, reg, `
		# TYPE velero_csi_snapshot_attempt_total counter
		velero_csi_snapshot_attempt_total{backupName="nightly-1",schedule="nightly"} 3
		# TYPE velero_csi_snapshot_success_total counter
		velero_csi_snapshot_success_total{backupName="nightly-1",schedule="nightly"} 2
		# TYPE velero_csi_snapshot_failure_total counter
		velero_csi_snapshot_failure_total{backupName="nightly-1",schedule="nightly"} 1
	`, "velero_csi_snapshot_attempt_total", "velero_csi_snapshot_success_total", "velero_csi_snapshot_failure_total")
}

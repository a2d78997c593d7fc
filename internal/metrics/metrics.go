// Package metrics holds the server's Prometheus metrics, registered on
// controller-runtime's registry so that they are served on the server's
// metrics endpoint next to the controllers' metrics.
//
// Where Velero (v1.18) has a metric for the same thing, it has Velero's
// name, type, labels and label values, and moves on the same events, so
// that dashboards and alerts written for Velero keep working. Each rule
// ("a backup that ends PartiallyFailed counts here and sets that to 0")
// lives in one function of this package, which the controllers call once
// per event; nothing outside this package touches a metric.
package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Label names.
const (
	// ScheduleLabel is Velero's label on backup and restore metrics. On
	// backup metrics it is the backup's velero.io/schedule-name label
	// value, empty for a backup made by hand; on restore metrics the
	// restore's spec.scheduleName; on the series a schedule initialises,
	// the schedule's name.
	ScheduleLabel = "schedule"
	// LocationLabel names a BackupStorageLocation (Velero's label).
	LocationLabel = "backup_location_name"
	// BackupNameLabel is Velero's second label on its CSI snapshot
	// counters.
	BackupNameLabel = "backupName"
	// PluginLabel names a plugin.
	PluginLabel = "plugin"
	// ResultLabel is "success" or "failure".
	ResultLabel = "result"
)

// Values of ResultLabel.
const (
	ResultSuccess = "success"
	ResultFailure = "failure"
)

// Values of velero_backup_last_status, as Velero sets them.
const (
	lastStatusFailure = 0
	lastStatusSuccess = 1
)

// durationBuckets are Velero's buckets for backup durations: 1, 5, 10,
// 15 and 30 minutes, then 1 to 4 hours.
var durationBuckets = []float64{60, 300, 600, 900, 1800, 3600, 7200, 10800, 14400}

func scheduleCounter(name, help string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{ScheduleLabel})
}

func scheduleGauge(name, help string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, []string{ScheduleLabel})
}

func csiCounter(name, help string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{ScheduleLabel, BackupNameLabel})
}

// set is every metric of the server but lifeboat_leader. The server has
// one, m; tests swap in a fresh one to see exactly what a call did.
type set struct {
	// Velero's, by what they count.
	backupAttempts, backupSuccesses, backupPartialFailures, backupFailures, backupValidationFailures *prometheus.CounterVec
	backupWarnings                                                                                   *prometheus.CounterVec
	backupDuration                                                                                   *prometheus.HistogramVec
	backupLastStatus, backupTarballBytes, backupItems, backupItemErrors                              *prometheus.GaugeVec

	volumeSnapshotAttempts, volumeSnapshotSuccesses, volumeSnapshotFailures *prometheus.CounterVec
	csiSnapshotAttempts, csiSnapshotSuccesses, csiSnapshotFailures          *prometheus.CounterVec

	restoreAttempts, restoreSuccesses, restorePartialFailures, restoreFailures, restoreValidationFailures *prometheus.CounterVec

	locationStatus *prometheus.GaugeVec

	deletionAttempts, deletionSuccesses, deletionFailures *prometheus.CounterVec

	// census serves the totals and the last success times.
	census *censusCollector

	// Lifeboat's own.
	deletionDuration      *prometheus.HistogramVec
	deleteItemActionCalls *prometheus.CounterVec
	verifications         *prometheus.CounterVec

	// initialised are the schedules whose series InitSchedule made.
	mu          sync.Mutex
	initialised map[string]bool
}

func newSet() *set {
	return &set{
		backupAttempts:           scheduleCounter("velero_backup_attempt_total", "Backups that started running (validated backups)"),
		backupSuccesses:          scheduleCounter("velero_backup_success_total", "Backups that ended Completed"),
		backupPartialFailures:    scheduleCounter("velero_backup_partial_failure_total", "Backups that ended PartiallyFailed"),
		backupFailures:           scheduleCounter("velero_backup_failure_total", "Backups that ended Failed"),
		backupValidationFailures: scheduleCounter("velero_backup_validation_failure_total", "Backups that ended FailedValidation"),
		backupWarnings:           scheduleCounter("velero_backup_warning_total", "Backups that ended with at least one warning"),
		backupDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "velero_backup_duration_seconds",
			Help:    "Time from a backup's start to its end, in whole seconds",
			Buckets: durationBuckets,
		}, []string{ScheduleLabel}),
		backupLastStatus:   scheduleGauge("velero_backup_last_status", "How the schedule's latest backup ended: 1 Completed, 0 anything else"),
		backupTarballBytes: scheduleGauge("velero_backup_tarball_size_bytes", "Size of the schedule's latest backup archive (compressed), in bytes"),
		backupItems:        scheduleGauge("velero_backup_items_total", "Items stored by the schedule's latest backup"),
		backupItemErrors:   scheduleGauge("velero_backup_items_errors", "Errors recorded by the schedule's latest backup"),

		volumeSnapshotAttempts:  scheduleCounter("velero_volume_snapshot_attempt_total", "Native volume snapshots backups attempted"),
		volumeSnapshotSuccesses: scheduleCounter("velero_volume_snapshot_success_total", "Native volume snapshots backups completed"),
		volumeSnapshotFailures:  scheduleCounter("velero_volume_snapshot_failure_total", "Native volume snapshots backups attempted that did not complete"),
		// Labelled by backup too, as Velero's: a series per backup that
		// took CSI snapshots.
		csiSnapshotAttempts:  csiCounter("velero_csi_snapshot_attempt_total", "CSI volume snapshots attempted"),
		csiSnapshotSuccesses: csiCounter("velero_csi_snapshot_success_total", "CSI volume snapshots completed"),
		csiSnapshotFailures:  csiCounter("velero_csi_snapshot_failure_total", "CSI volume snapshots failed"),

		restoreAttempts:           scheduleCounter("velero_restore_attempt_total", "Restores looked at, those that failed validation included"),
		restoreSuccesses:          scheduleCounter("velero_restore_success_total", "Restores that ended Completed"),
		restorePartialFailures:    scheduleCounter("velero_restore_partial_failure_total", "Restores that ended PartiallyFailed"),
		restoreFailures:           scheduleCounter("velero_restore_failed_total", "Restores that ended Failed"),
		restoreValidationFailures: scheduleCounter("velero_restore_validation_failed_total", "Restores that ended FailedValidation"),

		locationStatus: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "velero_backup_location_status_gauge",
			Help: "Whether the backup storage location was found usable at its last check: 1 Available, 0 Unavailable",
		}, []string{LocationLabel}),

		deletionAttempts: scheduleCounter("velero_backup_deletion_attempt_total",
			"Backup deletion attempts (Lifeboat retries a failed deletion, and each attempt counts)"),
		deletionSuccesses: scheduleCounter("velero_backup_deletion_success_total", "Backup deletions that removed the backup"),
		deletionFailures:  scheduleCounter("velero_backup_deletion_failure_total", "Failed backup deletion attempts, retried or not"),

		census: newCensus(),

		deletionDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "lifeboat_backup_deletion_duration_seconds",
			Help:    "Time taken to delete a backup, from the first attempt to the end, in seconds",
			Buckets: []float64{1, 5, 15, 30, 60, 300, 900, 1800, 3600, 4 * 3600},
		}, []string{ScheduleLabel}),
		deleteItemActionCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lifeboat_delete_item_action_calls_total",
			Help: "Total number of DeleteItemAction calls, by plugin and result",
		}, []string{PluginLabel, ResultLabel}),
		verifications: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lifeboat_backup_verification_total",
			Help: "Backup verifications, by schedule and result: Verified, Differs (a stored file or item differs from its digests), NoDigests (nothing to check against), Error (the store could not be read)",
		}, []string{ScheduleLabel, ResultLabel}),

		initialised: map[string]bool{},
	}
}

// collectors are what the set registers.
func (s *set) collectors() []prometheus.Collector {
	return []prometheus.Collector{
		s.backupAttempts, s.backupSuccesses, s.backupPartialFailures, s.backupFailures, s.backupValidationFailures,
		s.backupWarnings, s.backupDuration, s.backupLastStatus, s.backupTarballBytes, s.backupItems, s.backupItemErrors,
		s.volumeSnapshotAttempts, s.volumeSnapshotSuccesses, s.volumeSnapshotFailures,
		s.csiSnapshotAttempts, s.csiSnapshotSuccesses, s.csiSnapshotFailures,
		s.restoreAttempts, s.restoreSuccesses, s.restorePartialFailures, s.restoreFailures, s.restoreValidationFailures,
		s.locationStatus,
		s.deletionAttempts, s.deletionSuccesses, s.deletionFailures,
		s.census,
		s.deletionDuration, s.deleteItemActionCalls, s.verifications,
	}
}

// startAtZero are the per-schedule counters a schedule starts at 0
// (InitSchedule): Velero's set.
func (s *set) startAtZero() []*prometheus.CounterVec {
	return []*prometheus.CounterVec{
		s.backupAttempts, s.backupSuccesses, s.backupPartialFailures, s.backupFailures, s.backupValidationFailures, s.backupWarnings,
		s.deletionAttempts, s.deletionSuccesses, s.deletionFailures,
		s.restoreAttempts, s.restoreSuccesses, s.restorePartialFailures, s.restoreFailures, s.restoreValidationFailures,
		s.volumeSnapshotAttempts, s.volumeSnapshotSuccesses, s.volumeSnapshotFailures,
	}
}

// csiCounters are labelled by schedule and backup name.
func (s *set) csiCounters() []*prometheus.CounterVec {
	return []*prometheus.CounterVec{s.csiSnapshotAttempts, s.csiSnapshotSuccesses, s.csiSnapshotFailures}
}

// m is the server's set.
var m = newSet()

func init() {
	ctrlmetrics.Registry.MustRegister(m.collectors()...)
}

// Result is the ResultLabel value for err.
func Result(err error) string {
	if err != nil {
		return ResultFailure
	}
	return ResultSuccess
}

// DeleteItemActionCalled counts one call to a DeleteItemAction plugin.
func DeleteItemActionCalled(plugin string, err error) {
	m.deleteItemActionCalls.WithLabelValues(plugin, Result(err)).Inc()
}

package metrics

import (
	"time"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// BackupRun is what one run of the backup engine did, in the numbers
// Velero's backup metrics report.
type BackupRun struct {
	// Phase is the phase the run left the backup in: a final one, or
	// WaitingForPluginOperations(PartiallyFailed) while plugin operations
	// go on (BackupOperationsEnded ends those).
	Phase v1.BackupPhase
	// Processed: the engine got to back anything up. A run refused before
	// that (its name taken in the store, a store that cannot be used)
	// only counts its outcome, as in Velero, where such a backup fails
	// before its metrics are recorded.
	Processed bool
	// Took is from the backup's start to the run's end.
	Took time.Duration
	// TarballBytes is the size of the archive written (compressed).
	TarballBytes int64
	// Items is how many items were stored.
	Items int
	// Errors and Warnings are the backup's counts (status.errors and
	// status.warnings).
	Errors, Warnings int
	// SnapshotsAttempted and SnapshotsCompleted count the native volume
	// snapshots (status.volumeSnapshotsAttempted and ...Completed).
	SnapshotsAttempted, SnapshotsCompleted int
	// BackupName and CSISnapshotsAttempted, CSISnapshotsCompleted: the
	// CSI snapshots (status.csiVolumeSnapshotsAttempted and ...Completed),
	// counted per schedule and backup as Velero does.
	BackupName                                   string
	CSISnapshotsAttempted, CSISnapshotsCompleted int
}

// BackupValidationFailed records a backup that ended FailedValidation
// without running. Like Velero, it is not counted as an attempt.
func BackupValidationFailed(schedule string) {
	m.backupEnded(schedule, v1.BackupPhaseFailedValidation, 0, false)
}

// BackupStarted records a validated backup that starts running.
func BackupStarted(schedule string) {
	m.backupAttempts.WithLabelValues(schedule).Inc()
}

// BackupRan records the end of a backup's run, once per backup: what it
// stored and, when the run ended the backup, how it ended.
func BackupRan(schedule string, run BackupRun) {
	if run.Processed {
		m.backupTarballBytes.WithLabelValues(schedule).Set(float64(run.TarballBytes))
		m.backupItems.WithLabelValues(schedule).Set(float64(run.Items))
		m.backupItemErrors.WithLabelValues(schedule).Set(float64(run.Errors))
		if run.Warnings > 0 {
			m.backupWarnings.WithLabelValues(schedule).Inc()
		}
		m.volumeSnapshotAttempts.WithLabelValues(schedule).Add(float64(run.SnapshotsAttempted))
		m.volumeSnapshotSuccesses.WithLabelValues(schedule).Add(float64(run.SnapshotsCompleted))
		m.volumeSnapshotFailures.WithLabelValues(schedule).Add(float64(run.SnapshotsAttempted - run.SnapshotsCompleted))
		if run.CSISnapshotsAttempted > 0 {
			m.csiSnapshotAttempts.WithLabelValues(schedule, run.BackupName).Add(float64(run.CSISnapshotsAttempted))
			m.csiSnapshotSuccesses.WithLabelValues(schedule, run.BackupName).Add(float64(run.CSISnapshotsCompleted))
			m.csiSnapshotFailures.WithLabelValues(schedule, run.BackupName).Add(float64(run.CSISnapshotsAttempted - run.CSISnapshotsCompleted))
		}
	}
	m.backupEnded(schedule, run.Phase, run.Took, run.Processed)
}

// BackupOperationsEnded records a backup whose asynchronous plugin
// operations have all ended, which ends the backup (Completed or
// PartiallyFailed) took after it started. When operations failed, errors
// is the backup's new error count.
func BackupOperationsEnded(schedule string, phase v1.BackupPhase, took time.Duration, failedOperations, errors int) {
	if failedOperations > 0 {
		m.backupItemErrors.WithLabelValues(schedule).Set(float64(errors))
	}
	m.backupEnded(schedule, phase, took, true)
}

// backupEnded counts a backup that reached phase, if that phase ends it;
// timed says whether its duration is observed.
func (s *set) backupEnded(schedule string, phase v1.BackupPhase, took time.Duration, timed bool) {
	switch phase {
	case v1.BackupPhaseCompleted:
		s.backupSuccesses.WithLabelValues(schedule).Inc()
		s.backupLastStatus.WithLabelValues(schedule).Set(lastStatusSuccess)
		s.census.backupSucceeded(schedule, now())
	case v1.BackupPhasePartiallyFailed:
		s.backupPartialFailures.WithLabelValues(schedule).Inc()
		s.backupLastStatus.WithLabelValues(schedule).Set(lastStatusFailure)
	case v1.BackupPhaseFailed:
		s.backupFailures.WithLabelValues(schedule).Inc()
		s.backupLastStatus.WithLabelValues(schedule).Set(lastStatusFailure)
	case v1.BackupPhaseFailedValidation:
		s.backupValidationFailures.WithLabelValues(schedule).Inc()
		s.backupLastStatus.WithLabelValues(schedule).Set(lastStatusFailure)
		return
	default:
		// Still waiting for plugin operations: not ended yet.
		return
	}
	if timed {
		// Velero observes whole seconds.
		s.backupDuration.WithLabelValues(schedule).Observe(took.Truncate(time.Second).Seconds())
	}
}

// now is the clock of the last-success times; tests replace it.
var now = time.Now

// BackupVerified counts one verification of a backup made by schedule,
// by its result (the reason of the Verified condition).
func BackupVerified(schedule, result string) {
	m.verifications.WithLabelValues(schedule, result).Inc()
}

package metrics

import "time"

// BackupDeletionAttempted counts one deletion attempt of a backup made by
// schedule. Velero counts one attempt per request; Lifeboat retries a
// failed deletion, and each retry counts.
func BackupDeletionAttempted(schedule string) {
	m.deletionAttempts.WithLabelValues(schedule).Inc()
}

// BackupDeletionSucceeded records a deletion that removed the backup,
// took after its first attempt started (negative: not known, not
// observed).
func BackupDeletionSucceeded(schedule string, took time.Duration) {
	m.deletionSuccesses.WithLabelValues(schedule).Inc()
	if took >= 0 {
		m.deletionDuration.WithLabelValues(schedule).Observe(took.Seconds())
	}
}

// BackupDeletionFailed records a failed deletion attempt, retried or not.
func BackupDeletionFailed(schedule string) {
	m.deletionFailures.WithLabelValues(schedule).Inc()
}

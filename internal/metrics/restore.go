package metrics

import (
	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// RestoreStarted records a validated restore that starts running.
func RestoreStarted(schedule string) {
	m.restoreAttempts.WithLabelValues(schedule).Inc()
}

// RestoreEnded records how a restore ended, once per restore. One that
// failed validation never started, but counts as an attempt too, as in
// Velero.
func RestoreEnded(schedule string, phase v1.RestorePhase) {
	switch phase {
	case v1.RestorePhaseCompleted:
		m.restoreSuccesses.WithLabelValues(schedule).Inc()
	case v1.RestorePhasePartiallyFailed:
		m.restorePartialFailures.WithLabelValues(schedule).Inc()
	case v1.RestorePhaseFailed:
		m.restoreFailures.WithLabelValues(schedule).Inc()
	case v1.RestorePhaseFailedValidation:
		m.restoreAttempts.WithLabelValues(schedule).Inc()
		m.restoreValidationFailures.WithLabelValues(schedule).Inc()
	}
}

// Package metrics holds the server's own Prometheus metrics, registered on
// controller-runtime's registry so that they are served on the server's
// metrics endpoint next to the controllers' metrics. Where Velero has a
// metric for the same thing, it has Velero's name and labels, so that
// dashboards and alerts written for Velero keep working.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Label names.
const (
	// ScheduleLabel is Velero's label on backup metrics: the schedule that
	// made the backup (its velero.io/schedule-name label), empty for a
	// backup made by hand.
	ScheduleLabel = "schedule"
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

var (
	// BackupDeletionAttempts counts deletion attempts. Velero counts one per
	// request; Lifeboat retries a failed deletion, and each retry counts.
	BackupDeletionAttempts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "velero_backup_deletion_attempt_total",
		Help: "Total number of attempted backup deletions",
	}, []string{ScheduleLabel})
	// BackupDeletionSuccesses counts deletions that removed the backup.
	BackupDeletionSuccesses = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "velero_backup_deletion_success_total",
		Help: "Total number of successful backup deletions",
	}, []string{ScheduleLabel})
	// BackupDeletionFailures counts failed deletion attempts, retried or not.
	BackupDeletionFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "velero_backup_deletion_failure_total",
		Help: "Total number of failed backup deletions",
	}, []string{ScheduleLabel})
	// BackupDeletionDuration is how long a successful deletion took, from
	// its first attempt's start to its end, retries included.
	BackupDeletionDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "lifeboat_backup_deletion_duration_seconds",
		Help:    "Time taken to delete a backup, from the first attempt to the end, in seconds",
		Buckets: []float64{1, 5, 15, 30, 60, 300, 900, 1800, 3600, 4 * 3600},
	}, []string{ScheduleLabel})
	// DeleteItemActionCalls counts calls to DeleteItemActions by plugin and
	// result.
	DeleteItemActionCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lifeboat_delete_item_action_calls_total",
		Help: "Total number of DeleteItemAction calls, by plugin and result",
	}, []string{PluginLabel, ResultLabel})
)

func init() {
	ctrlmetrics.Registry.MustRegister(
		BackupDeletionAttempts, BackupDeletionSuccesses, BackupDeletionFailures,
		BackupDeletionDuration, DeleteItemActionCalls,
	)
}

// Result is the ResultLabel value for err.
func Result(err error) string {
	if err != nil {
		return ResultFailure
	}
	return ResultSuccess
}

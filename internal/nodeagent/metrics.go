package nodeagent

import (
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// Velero's node agent metrics of pod volume backups, with its names and
// labels (namespace podVolume), served on the node agent's metrics port.
var (
	pvbEnqueued = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "podVolume", Name: "pod_volume_backup_enqueue_count",
		Help: "Total number of pod_volume_backup objects enqueued",
	}, []string{"node"})
	pvbDequeued = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "podVolume", Name: "pod_volume_backup_dequeue_count",
		Help: "Total number of pod_volume_backup objects dequeued",
	}, []string{"node"})
	opLatencyGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "podVolume", Name: "pod_volume_operation_latency_seconds_gauge",
		Help: "Gauge metric indicating time taken, in seconds, to perform pod volume operations",
	}, []string{"node", "operation", "backupName", "pod_volume_backup"})
	opLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "podVolume", Name: "pod_volume_operation_latency_seconds",
		Help:    "Time taken to complete pod volume operations, in seconds",
		Buckets: []float64{60, 300, 600, 900, 1800, 3600, 7200, 10800, 14400},
	}, []string{"node", "operation", "backupName", "pod_volume_backup"})
	registerMetrics sync.Once
)

// initMetrics registers the metrics (once per process: the tests run
// several node agents) and starts the node's counters at 0, as Velero's.
func initMetrics(node string) {
	registerMetrics.Do(func() {
		ctrlmetrics.Registry.MustRegister(pvbEnqueued, pvbDequeued, opLatencyGauge, opLatency)
	})
	pvbEnqueued.WithLabelValues(node).Add(0)
	pvbDequeued.WithLabelValues(node).Add(0)
}

// observeCompleted records a completed PodVolumeBackup as Velero does: its
// latency from start to completion, labelled with Velero's operation name
// and the owning backup.
func observeCompleted(node string, pvb *v1.PodVolumeBackup, completed time.Time) {
	pvbDequeued.WithLabelValues(node).Inc()
	if pvb.Status.StartTimestamp == nil {
		return
	}
	backup := pvb.Namespace + "/"
	if len(pvb.OwnerReferences) > 0 {
		backup += pvb.OwnerReferences[0].Name
	}
	op := fmt.Sprintf("%s-%s-%s-%s-backup", pvb.Name, pvb.Spec.BackupStorageLocation, pvb.Spec.Pod.Namespace, pvb.Spec.UploaderType)
	seconds := completed.Sub(pvb.Status.StartTimestamp.Time).Seconds()
	opLatency.WithLabelValues(node, op, backup, pvb.Name).Observe(seconds)
	opLatencyGauge.WithLabelValues(node, op, backup, pvb.Name).Set(seconds)
}

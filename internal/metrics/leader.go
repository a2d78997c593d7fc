package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Leader is 1 while this server acts (it holds the leader lease, or runs
// with leader election off) and 0 while it stands by. Summed over the
// servers of a namespace it must be 1: 0 means nothing runs backups, 2
// means leader election is off on more than one server.
var Leader = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "lifeboat_leader",
	Help: "1 while this server is the one acting on its namespace (the leader), 0 while it stands by",
})

func init() {
	ctrlmetrics.Registry.MustRegister(Leader)
}

// Package nodeagent is `lifeboat node-agent`: on every node, it carries out
// the PodVolumeBackups and PodVolumeRestores (Velero's objects, phases and
// fields) of the pods that run there. It finds the pod's volume in the
// kubelet's pod directory (internal/hostpods) and hands the directory to a
// podvolume.DataPath, which moves the files to or from the repository; it
// never touches the repository itself.
//
// Unlike Velero v1.18, which starts a pod per transfer (its "micro
// service"), the transfer runs in the node agent's own process: a node
// agent that restarts loses the transfers it ran, and marks them Failed at
// its next start (Velero resumes them from the still-running pod or
// cancels them).
package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lifeboat-io/lifeboat/internal/hostpods"
	"github.com/lifeboat-io/lifeboat/internal/podvolume"
)

// Options configure the node agent.
type Options struct {
	// Namespace holds the PodVolumeBackups and PodVolumeRestores, the
	// storage locations and their credentials (the server's namespace).
	Namespace string
	// NodeName is the node this agent serves (NODE_NAME from the downward
	// API, as Velero's node agent reads it).
	NodeName string
	// HostPodsDir is the kubelet's pod directory as this process sees it.
	HostPodsDir string
	// MetricsAddress and HealthAddress serve Prometheus metrics and
	// /healthz and /readyz; "0" disables either.
	MetricsAddress string
	HealthAddress  string
	// ProfilingAddress serves net/http/pprof ("" or "0": off), for
	// looking at a transfer's memory and CPU while it runs.
	ProfilingAddress string
	// Concurrency bounds the transfers running at once on this node
	// (Velero's default load concurrency is 1).
	Concurrency int
	// ProgressInterval bounds how often a transfer's progress is written.
	ProgressInterval time.Duration
	// ClientQPS and ClientBurst rate-limit the API calls; negative QPS is
	// no client-side limit.
	ClientQPS   float32
	ClientBurst int
	LogLevel    string
	LogFormat   string
	// CheckpointInterval is how often a running backup saves a kopia
	// checkpoint snapshot (0: kopia's 45 minutes). The in-cluster test
	// shortens it to see a killed upload's checkpoints go with their
	// backup; kopia refuses more than 45 minutes.
	CheckpointInterval time.Duration
}

// MaxCheckpointInterval is the longest checkpoint interval kopia accepts
// (and its default): with more, every upload would fail.
const MaxCheckpointInterval = 45 * time.Minute

// DefaultOptions are the flags' defaults.
func DefaultOptions() Options {
	return Options{
		Namespace:        "velero",
		HostPodsDir:      hostpods.MountPath,
		MetricsAddress:   ":8085",
		HealthAddress:    ":8086",
		Concurrency:      1,
		ProgressInterval: time.Second,
		ClientQPS:        -1,
		ClientBurst:      100,
		LogLevel:         "info",
		LogFormat:        "text",
	}
}

// Validate names the flag of each wrong value.
func (o Options) Validate() error {
	var errs []error
	if o.NodeName == "" {
		errs = append(errs, errors.New("no node name: set NODE_NAME (the DaemonSet sets it from spec.nodeName) or --node-name"))
	}
	if o.HostPodsDir == "" {
		errs = append(errs, errors.New("invalid --host-pods-dir: give the directory where the kubelet's pod directory is mounted"))
	}
	if o.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("invalid --concurrency %d: must be at least 1", o.Concurrency))
	}
	if o.ProgressInterval <= 0 {
		errs = append(errs, fmt.Errorf("invalid progress interval %s: must be positive", o.ProgressInterval))
	}
	if o.CheckpointInterval < 0 || o.CheckpointInterval > MaxCheckpointInterval {
		errs = append(errs, fmt.Errorf("invalid --checkpoint-interval %s: must be between 0 (kopia's default) and %s", o.CheckpointInterval, MaxCheckpointInterval))
	}
	return errors.Join(errs...)
}

// Deps are what a data path is built from: the node agent's clients and
// namespace (the storage locations, their credentials and the repository
// password are read there).
type Deps struct {
	// Client reads through the node agent's cache (its namespace's
	// velero.io objects) and writes.
	Client client.Client
	// Reader reads uncached (Secrets and ConfigMaps are never cached).
	Reader    client.Reader
	Namespace string
	Log       *slog.Logger
	// CheckpointInterval is Options.CheckpointInterval.
	CheckpointInterval time.Duration
}

// DataPathFactory builds the node agent's data path once its clients
// exist. Nil, or a factory returning a nil DataPath, leaves the node agent
// without one: every transfer then fails saying so (NoDataPath).
type DataPathFactory func(ctx context.Context, deps Deps) (podvolume.DataPath, error)

// ErrNoDataPath is the error of every transfer of a node agent built
// without a data path.
var ErrNoDataPath = errors.New("no data path: this node agent was built without one, so it cannot move volume data")

// NoDataPath is the data path of a node agent built without one.
type NoDataPath struct{}

// Backup fails with ErrNoDataPath.
func (NoDataPath) Backup(context.Context, podvolume.BackupRequest) (podvolume.BackupResult, error) {
	return podvolume.BackupResult{}, ErrNoDataPath
}

// Restore fails with ErrNoDataPath.
func (NoDataPath) Restore(context.Context, podvolume.RestoreRequest) (int64, error) {
	return 0, ErrNoDataPath
}

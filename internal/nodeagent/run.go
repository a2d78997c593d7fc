package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/buildinfo"
	"github.com/lifeboat-io/lifeboat/internal/cluster"
	"github.com/lifeboat-io/lifeboat/internal/podvolume"
	"github.com/lifeboat-io/lifeboat/internal/server"
)

// Run runs the node agent until ctx is cancelled. newDataPath builds the
// data path (nil: none, every transfer fails with ErrNoDataPath); a data
// path that is an io.Closer is closed once its transfers have ended.
func Run(ctx context.Context, cfg *rest.Config, opts Options, newDataPath DataPathFactory) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	log, err := server.NewLogger(os.Stderr, opts.LogLevel, opts.LogFormat)
	if err != nil {
		return err
	}
	log = log.With("node", opts.NodeName)
	ctrl.SetLogger(logr.FromSlogHandler(log.Handler()))
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = opts.ClientQPS, opts.ClientBurst
	scheme, err := cluster.NewScheme()
	if err != nil {
		return err
	}
	if fi, err := os.Stat(opts.HostPodsDir); err != nil || !fi.IsDir() {
		// As Velero: the agent still serves (it may restore into pods
		// later mounted right), but says why every volume will be missed.
		log.Warn("the kubelet's pod directory is not there: no pod volume can be found", "dir", opts.HostPodsDir, "error", err)
	}

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		Cache: cache.Options{
			DefaultNamespaces: map[string]cache.Config{opts.Namespace: {}},
			ByObject: map[client.Object]cache.ByObject{
				// Only this node's pods, in every namespace: the memory
				// of a node agent grows with its node, not the cluster.
				&corev1.Pod{}: {
					Namespaces: map[string]cache.Config{cache.AllNamespaces: {}},
					Field:      fields.OneTermEqualSelector("spec.nodeName", opts.NodeName),
				},
			},
		},
		Client: client.Options{Cache: &client.CacheOptions{
			DisableFor: []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}},
		}},
		Metrics:                 metricsserver.Options{BindAddress: opts.MetricsAddress},
		HealthProbeBindAddress:  opts.HealthAddress,
		PprofBindAddress:        pprofAddress(opts.ProfilingAddress),
		GracefulShutdownTimeout: ptr.To(30 * time.Second),
		Controller:              config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return fmt.Errorf("creating controller manager: %w", err)
	}
	initMetrics(opts.NodeName)
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("cache", func(req *http.Request) error {
		c, cancel := context.WithTimeout(req.Context(), time.Second)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(c) {
			return errors.New("the node agent's cache has not synced yet")
		}
		return nil
	}); err != nil {
		return err
	}

	// Before any controller runs: what a previous process of this node
	// agent left mid-transfer is lost (the transfer was a goroutine of it).
	direct, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	if err := MarkLost(ctx, direct, opts.Namespace, opts.NodeName, log); err != nil {
		return err
	}

	var dp podvolume.DataPath
	if newDataPath != nil {
		if dp, err = newDataPath(ctx, Deps{
			Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Namespace: opts.Namespace,
			Log: log.With("component", "datapath"), CheckpointInterval: opts.CheckpointInterval,
		}); err != nil {
			return fmt.Errorf("building the data path: %w", err)
		}
	}
	if dp == nil {
		log.Warn("this node agent has no data path: every PodVolumeBackup and PodVolumeRestore it takes will fail")
		dp = NoDataPath{}
	}
	a := &agent{
		client: mgr.GetClient(), reader: mgr.GetAPIReader(), namespace: opts.Namespace, node: opts.NodeName,
		hostPods: opts.HostPodsDir, dataPath: dp, transfers: newTransfers(opts.Concurrency), base: ctx,
		progress: opts.ProgressInterval, log: log, now: time.Now,
	}
	if err := (&BackupReconciler{agent: a}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&RestoreReconciler{agent: a}).SetupWithManager(mgr); err != nil {
		return err
	}
	log.Info("starting lifeboat node agent", "version", buildinfo.Version, "namespace", opts.Namespace, "hostPods", opts.HostPodsDir)
	err = mgr.Start(ctx)
	// The transfers end with ctx; each writes its outcome before it
	// releases its slot.
	a.transfers.wait()
	// Only then the data path's repositories, which the transfers used.
	if c, ok := dp.(io.Closer); ok {
		if cerr := c.Close(); cerr != nil {
			log.Warn("closing the data path", "error", cerr)
		}
	}
	if err != nil {
		return fmt.Errorf("running controllers: %w", err)
	}
	return nil
}

func pprofAddress(addr string) string {
	if addr == "0" {
		return ""
	}
	return addr
}

// lose ends a transfer's status Failed with message; false when, read
// again, it is New or has ended (nothing was lost). The two kinds' statuses
// are different types with the same fields.
func lose(phase *v1.PodVolumePhase, message *string, start, completion **metav1.Time, msg string) bool {
	if isNew(*phase) || final(*phase) {
		return false
	}
	now := &metav1.Time{Time: time.Now()}
	*phase, *message, *completion = v1.PodVolumePhaseFailed, msg, now
	if *start == nil {
		*start = now
	}
	return true
}

// LostMessage is the message of a transfer a node agent process did not
// live to finish.
func LostMessage(node string, phase v1.PodVolumePhase) string {
	return fmt.Sprintf("the node agent on node %s restarted while this transfer was %s: the transfer ran in the node agent's "+
		"process and was lost with it (Lifeboat does not resume transfers); back up or restore again", node, phase)
}

// MarkLost ends Failed every PodVolumeBackup and PodVolumeRestore of node
// that is past New and not final: their transfer ran in a process of this
// node agent that is gone. Velero resumes such a transfer from its still
// running data mover pod, or cancels it; Lifeboat's transfers run in the
// node agent, so none survives. Never left InProgress, never Completed.
func MarkLost(ctx context.Context, c client.Client, namespace, node string, log *slog.Logger) error {
	var pvbs v1.PodVolumeBackupList
	if err := c.List(ctx, &pvbs, client.InNamespace(namespace)); err != nil {
		return fmt.Errorf("listing PodVolumeBackups: %w", err)
	}
	for _, pvb := range pvbs.Items {
		if pvb.Spec.Node != node || isNew(pvb.Status.Phase) || final(pvb.Status.Phase) {
			continue
		}
		was := pvb.Status.Phase
		if _, err := update(ctx, c, c, objectKey(namespace, pvb.Name), &v1.PodVolumeBackup{}, func(p *v1.PodVolumeBackup) bool {
			return lose(&p.Status.Phase, &p.Status.Message, &p.Status.StartTimestamp, &p.Status.CompletionTimestamp, LostMessage(node, was))
		}); err != nil {
			return fmt.Errorf("marking PodVolumeBackup %s Failed: %w", pvb.Name, err)
		}
		log.Warn("PodVolumeBackup lost with the previous node agent: Failed", "podvolumebackup", pvb.Name, "was", was)
	}
	var pvrs v1.PodVolumeRestoreList
	if err := c.List(ctx, &pvrs, client.InNamespace(namespace)); err != nil {
		return fmt.Errorf("listing PodVolumeRestores: %w", err)
	}
	for _, pvr := range pvrs.Items {
		if pvr.Status.Node != node || isNew(pvr.Status.Phase) || final(pvr.Status.Phase) {
			continue
		}
		was := pvr.Status.Phase
		if _, err := update(ctx, c, c, objectKey(namespace, pvr.Name), &v1.PodVolumeRestore{}, func(p *v1.PodVolumeRestore) bool {
			return lose(&p.Status.Phase, &p.Status.Message, &p.Status.StartTimestamp, &p.Status.CompletionTimestamp, LostMessage(node, was))
		}); err != nil {
			return fmt.Errorf("marking PodVolumeRestore %s Failed: %w", pvr.Name, err)
		}
		log.Warn("PodVolumeRestore lost with the previous node agent: Failed", "podvolumerestore", pvr.Name, "was", was)
	}
	return nil
}

// Package server wires Lifeboat's controllers into a controller-runtime
// manager: `lifeboat server` and the end-to-end tests both start it here.
package server

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/backup"
	"github.com/lifeboat-io/lifeboat/internal/buildinfo"
	"github.com/lifeboat-io/lifeboat/internal/cluster"
	"github.com/lifeboat-io/lifeboat/internal/controller"
	"github.com/lifeboat-io/lifeboat/internal/credentials"
	"github.com/lifeboat-io/lifeboat/internal/deleteactions"
	"github.com/lifeboat-io/lifeboat/internal/locations"
	"github.com/lifeboat-io/lifeboat/internal/metrics"
	"github.com/lifeboat-io/lifeboat/internal/pluginhost"
	"github.com/lifeboat-io/lifeboat/internal/podvolume/kopiapath"
	"github.com/lifeboat-io/lifeboat/internal/podvolume/repository"
	"github.com/lifeboat-io/lifeboat/internal/restore"
	"github.com/lifeboat-io/lifeboat/internal/snapshotcheck"
	"github.com/lifeboat-io/lifeboat/internal/storage/builtinplugin"
	"github.com/lifeboat-io/lifeboat/internal/workdir"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

// Run runs the controllers until ctx is cancelled.
func Run(ctx context.Context, cfg *rest.Config, opts Options) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	log, err := NewLogger(os.Stderr, opts.LogLevel, opts.LogFormat)
	if err != nil {
		return err
	}
	ctrl.SetLogger(logr.FromSlogHandler(log.Handler()))
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = opts.ClientQPS, opts.ClientBurst

	// The one way every engine and reconciler reaches the cluster, apart
	// from the manager's cache and its writes.
	acc, err := cluster.New(cfg)
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: acc.Scheme,
		// Only the server's own namespace is watched, and only for the
		// velero.io kinds the controllers own: caching cluster content
		// would make memory grow with the cluster.
		Cache: cache.Options{DefaultNamespaces: map[string]cache.Config{opts.Namespace: {}}},
		Client: client.Options{Cache: &client.CacheOptions{
			DisableFor: []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}},
		}},
		Metrics:                 metricsserver.Options{BindAddress: opts.MetricsAddress},
		HealthProbeBindAddress:  opts.HealthAddress,
		PprofBindAddress:        offIfZero(opts.ProfilingAddress),
		GracefulShutdownTimeout: durationPtr(30 * time.Second),
		// Controller names are global metrics labels; a process that runs
		// the server twice (the end-to-end tests restart it) would be
		// refused without this.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		// One server acts on a namespace at a time: its controllers (every
		// one of them writes) start only once it holds the Lease, in the
		// namespace it serves, since that is what two servers must not
		// share. A server that stops releases the Lease once its
		// controllers have stopped, so a standby takes over within a retry
		// period instead of a lease duration.
		LeaderElection:                opts.LeaderElect,
		LeaderElectionID:              LeaderElectionID,
		LeaderElectionNamespace:       opts.Namespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &opts.LeaseDuration,
		RenewDeadline:                 &opts.RenewDeadline,
		RetryPeriod:                   &opts.RetryPeriod,
	})
	if err != nil {
		return fmt.Errorf("creating controller manager: %w", err)
	}
	// The series of backups made by hand exist from the start, as in
	// Velero; each schedule's start when its controller sees it.
	metrics.InitSchedule("")
	if err := mgr.Add(leading(opts, log, census(mgr.GetCache(), opts.Namespace))); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	checks := &controller.LocationChecks{}
	ready := &readiness{cache: mgr.GetCache(), elected: mgr.Elected(), checks: checks}
	if err := mgr.AddReadyzCheck("cache", ready.cacheSynced); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("locations", ready.locations); err != nil {
		return err
	}

	// Before anything that writes there: what a killed server left goes
	// first, and this server's own directory is made.
	work, err := workdir.Open(opts.WorkDir, log.With("component", "workdir"))
	if err != nil {
		return fmt.Errorf("--work-dir: %w", err)
	}
	defer func() {
		if err := work.Close(); err != nil {
			log.Warn("removing the server's work directory", "dir", work.Path(), "error", err)
		}
	}()

	plugins, err := startPlugins(ctx, acc, opts, log.With("component", "plugins"))
	if err != nil {
		return err
	}
	defer plugins.Close()

	// By default in this server's own work directory: private, removed at
	// stop, and swept by the next server after a crash.
	credsDir := cmp.Or(opts.CredentialsDir, filepath.Join(work.Path(), "credentials"))
	creds, err := credentials.Open(credsDir, log.With("component", "credentials"))
	if err != nil {
		return fmt.Errorf("--credentials-dir: %w", err)
	}
	defer func() {
		if err := creds.Close(); err != nil {
			log.Error("removing credentials files", "error", err)
		}
	}()
	if err := locations.RemoveCredentialsOfGoneLocations(ctx, mgr.GetCache(), creds, log.With("component", "credentials")); err != nil {
		return err
	}
	resolver := &locations.Resolver{
		Client:       mgr.GetClient(),
		SecretReader: acc.Reader,
		Namespace:    opts.Namespace,
		DefaultName:  opts.DefaultBackupStorageLocation,
		Plugins:      plugins,
		Credentials:  creds,
	}

	engine := backup.NewEngine(acc, opts.ListWorkers, log.With("component", "backup"))
	engine.Plugins = plugins
	engine.WorkDir = work.Path()
	engine.Limits = opts.ArchiveLimits
	engine.SnapshotLocations = resolver
	restoreEngine := restore.NewEngine(acc, log.With("component", "restore"))
	restoreEngine.Plugins = plugins
	restoreEngine.WorkDir = work.Path()
	restoreEngine.Limits = opts.ArchiveLimits
	restoreEngine.SnapshotLocations = resolver
	// Events go to the events.k8s.io API, reported by "lifeboat"; install's
	// RBAC lets the server write them in its namespace, where the objects
	// they are about live.
	events := mgr.GetEventRecorder(EventsReporter)
	reconcilers := []interface{ SetupWithManager(ctrl.Manager) error }{
		&controller.BackupReconciler{
			Client: mgr.GetClient(), APIReader: acc.Reader, Engine: engine, Locations: resolver,
			DefaultTTL: opts.DefaultBackupTTL, AddFinalizer: opts.BackupFinalizer, Log: log.With("controller", "backup"),
			Events: events,
		},
		&controller.RestoreReconciler{
			Client: mgr.GetClient(), APIReader: acc.Reader, Engine: restoreEngine, Locations: resolver,
			Log: log.With("controller", "restore"), Events: events,
		},
		&controller.BackupVerifyReconciler{
			Client: mgr.GetClient(), APIReader: acc.Reader, Locations: resolver, Limits: opts.ArchiveLimits,
			Snapshots: &snapshotcheck.CSI{Dynamic: acc.Dynamic},
			Log:       log.With("controller", "backupverify"),
		},
		&controller.BackupOperationsReconciler{
			Client: mgr.GetClient(), APIReader: acc.Reader, Locations: resolver, Plugins: plugins,
			Frequency: opts.ItemOperationSyncFrequency, Log: log.With("controller", "backupoperations"), Events: events,
		},
		&controller.BackupSyncReconciler{
			Client: mgr.GetClient(), APIReader: acc.Reader, Locations: resolver,
			DefaultPeriod: opts.BackupSyncPeriod, AddFinalizer: opts.BackupFinalizer, Log: log.With("controller", "backupsync"),
		},
		&controller.BackupStorageLocationReconciler{
			Client: mgr.GetClient(), Locations: resolver, Checks: checks,
			DefaultFrequency: opts.StoreValidationFrequency, Log: log.With("controller", "backupstoragelocation"),
		},
		&controller.ScheduleReconciler{Client: mgr.GetClient(), Log: log.With("controller", "schedule")},
		&controller.GCReconciler{
			Client: mgr.GetClient(), APIReader: acc.Reader, Locations: resolver,
			Log: log.With("controller", "gc"),
		},
		&controller.ServerStatusReconciler{Client: mgr.GetClient(), Version: buildinfo.ServerVersion(buildinfo.Version), Plugins: pluginInfos(plugins), TTL: time.Minute},
		&controller.DownloadRequestReconciler{
			Client: mgr.GetClient(), Locations: resolver, URLTTL: 10 * time.Minute,
			Log: log.With("controller", "downloadrequest"),
		},
	}
	// File-system backup repositories: kept open (per location and volume
	// namespace) while in use and for the Manager's idle timeout after,
	// all closed before the work directory holding their caches is removed.
	repos := &repository.Manager{
		Storage: resolver, Secrets: acc.Reader, Namespace: opts.Namespace,
		WorkDir: work.Path(), Log: log.With("component", "repositories"),
		Compression: opts.FSBackupCompression,
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := repos.Close(cctx); err != nil {
			log.Warn("closing file-system backup repositories", "error", err)
		}
	}()
	// Backups hand fs-backup volumes to the node agent once the volume
	// namespace's repository is ready.
	engine.Repositories = &repository.Ensurer{Client: mgr.GetClient(), Namespace: opts.Namespace}
	engine.FSBackupTimeout = opts.FSBackupTimeout
	// Deleting a backup forgets its pod volume snapshots in these
	// repositories.
	forgetter := &kopiapath.DataPath{Repositories: repos, Log: log.With("component", "deletion")}
	reconcilers = append(reconcilers, newDeletionReconciler(mgr, acc, opts, plugins, resolver, forgetter, events, log))
	// File-system restores: repositories made ready through their
	// BackupRepository objects, PodVolumeRestores left to the node agent.
	restoreEngine.PodVolumes = &restore.PodVolumeOptions{
		Repositories: &repository.Ensurer{Client: mgr.GetClient(), Namespace: opts.Namespace},
		Image:        opts.RestoreHelperImage,
		// Velero's --fs-backup-timeout bounds restores' transfers too.
		Timeout: opts.FSBackupTimeout,
	}
	reconcilers = append(reconcilers, &controller.BackupRepositoryReconciler{
		Client: mgr.GetClient(), Repositories: repos,
		EnsurePassword: func(ctx context.Context) error {
			return repository.EnsurePasswordSecret(ctx, mgr.GetClient(), opts.Namespace)
		},
		DefaultFrequency: repository.DefaultMaintenanceFrequency, Log: log.With("controller", "backuprepository"),
	})
	for _, rec := range reconcilers {
		if err := rec.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up controllers: %w", err)
		}
	}
	// Anything added here that writes to the cluster or a store must be a
	// controller or a runnable that needs leader election (the default for
	// mgr.Add), so that a standby never runs it.
	log.Info("starting lifeboat server", "version", buildinfo.Version, "namespace", opts.Namespace, "leaderElection", opts.LeaderElect)
	if opts.LeaderElect {
		log.Info("standing by until this server holds the leader lease", "lease", opts.Namespace+"/"+LeaderElectionID)
	}
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("running controllers: %w", err)
	}
	return nil
}

// NewLogger builds the server's structured logger.
func NewLogger(w *os.File, level, format string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", level)
	}
	hopts := &slog.HandlerOptions{Level: lvl}
	switch strings.ToLower(format) {
	case "text", "":
		return slog.New(slog.NewTextHandler(w, hopts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, hopts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: use text or json", format)
}

func durationPtr(d time.Duration) *time.Duration { return &d }

// EventsReporter is the reporting controller of the server's Kubernetes
// Events.
const EventsReporter = "lifeboat"

// leading runs while this server is the one acting on its namespace: it
// says so in the log and in the lifeboat_leader gauge, and counts the
// namespace's backups and restores for the metrics (a standby does not).
// Like the controllers, the manager starts it only once the lease is held.
func leading(opts Options, log *slog.Logger, take metrics.CensusFunc) manager.RunnableFunc {
	return func(ctx context.Context) error {
		if opts.LeaderElect {
			log.Info("this server is the leader: its controllers start", "lease", opts.Namespace+"/"+LeaderElectionID)
		}
		metrics.Leader.Set(1)
		stopCensus := metrics.UseCensus(take)
		<-ctx.Done()
		stopCensus()
		metrics.Leader.Set(0)
		return nil
	}
}

// census counts the Backups and Restores of namespace in the manager's
// cache, which holds them anyway (the controllers watch them), without
// copying them.
func census(c cache.Cache, namespace string) metrics.CensusFunc {
	return func(ctx context.Context) (metrics.Census, error) {
		var backups v1.BackupList
		if err := c.List(ctx, &backups, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
			return metrics.Census{}, fmt.Errorf("listing backups: %w", err)
		}
		var restores v1.RestoreList
		if err := c.List(ctx, &restores, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
			return metrics.Census{}, fmt.Errorf("listing restores: %w", err)
		}
		return metrics.CensusOf(backups.Items, len(restores.Items)), nil
	}
}

// startPlugins finds the plugins of the plugin dir and lists them in the
// log. A plugin that cannot be listed stops the server: running without it
// could silently skip what it does.
func startPlugins(ctx context.Context, acc *cluster.Access, opts Options, log *slog.Logger) (*pluginhost.Host, error) {
	h := pluginhost.New(pluginhost.Options{Dir: opts.PluginDir, Timeouts: opts.PluginTimeouts, LogLevel: opts.LogLevel, Log: log,
		MaxMessageSize: int(opts.PluginMaxMessageSize), IdleTimeout: opts.PluginIdleTimeout})
	for _, name := range builtinplugin.Names {
		if err := h.RegisterBuiltIn(api.KindObjectStore, name, func() (any, error) { return builtinplugin.New(name), nil }); err != nil {
			return nil, err
		}
	}
	cleanup := deleteactions.NewClients(acc, opts.Namespace, log)
	cleanup.CSIWait = opts.CSISnapshotWait
	if err := h.RegisterBuiltIn(api.KindDeleteItemAction, deleteactions.CSISnapshotCleanupName, func() (any, error) {
		return deleteactions.NewCSISnapshotCleanup(cleanup), nil
	}); err != nil {
		return nil, err
	}
	if err := h.RegisterBuiltIn(api.KindDeleteItemAction, deleteactions.LabelledResourceCleanupName, func() (any, error) {
		return deleteactions.NewLabelledResourceCleanup(cleanup), nil
	}); err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := h.Discover(dctx); err != nil {
		h.Close()
		return nil, fmt.Errorf("loading plugins from %s: %w", opts.PluginDir, err)
	}
	for _, e := range h.List() {
		log.Info("plugin", "kind", e.Kind, "name", e.Name, "binary", e.Binary)
	}
	return h, nil
}

func pluginInfos(h *pluginhost.Host) []v1.PluginInfo {
	var out []v1.PluginInfo
	for _, e := range h.List() {
		out = append(out, v1.PluginInfo{Name: e.Name, Kind: string(e.Kind), Binary: e.Binary})
	}
	return out
}

// offIfZero is controller-runtime's address for an endpoint flag: "0",
// as the other endpoint flags spell off, is "" there.
func offIfZero(addr string) string {
	if addr == "0" {
		return ""
	}
	return addr
}

package cli

import (
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/lifeboat-io/lifeboat/internal/archive"
	"github.com/lifeboat-io/lifeboat/internal/pluginhost"
	"github.com/lifeboat-io/lifeboat/internal/server"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

// runServer is server.Run; tests swap it to see the options the flags built.
var runServer = server.Run

func newServerCommand(f *Factory) *cobra.Command {
	opts := server.DefaultOptions()
	var pluginTimeouts map[string]string
	pluginMaxMessageSize := resource.NewQuantity(opts.PluginMaxMessageSize, resource.BinarySI).String()
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run the Lifeboat controllers",
		Long: "Run the controllers that carry out backups, restores and deletions.\n" +
			"The server works on the objects in the namespace given by -n (default velero).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			timeouts, err := parsePluginTimeouts(pluginTimeouts)
			if err != nil {
				return err
			}
			opts.PluginTimeouts = timeouts
			if opts.PluginMaxMessageSize, err = parsePluginMaxMessageSize(pluginMaxMessageSize); err != nil {
				return err
			}
			// Checked before connecting, so a wrong value names its flag
			// instead of surfacing later as some other error.
			if err := opts.Validate(); err != nil {
				return err
			}
			opts.Namespace = f.Namespace
			cfg, err := f.RESTConfig()
			if err != nil {
				return err
			}
			// cmd.Context() is cancelled on SIGINT/SIGTERM by Execute, which
			// is what lets the manager shut down cleanly.
			if err := runServer(cmd.Context(), cfg, opts); err != nil {
				return f.explain(fmt.Errorf("server: %w", err))
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.MetricsAddress, "metrics-address", opts.MetricsAddress, `address to serve Prometheus metrics on ("0" disables)`)
	fl.StringVar(&opts.HealthAddress, "health-address", opts.HealthAddress, `address to serve /healthz and /readyz on ("0" disables)`)
	fl.StringVar(&opts.ProfilingAddress, "profiling-address", "", "serve net/http/pprof on this address (go tool pprof http://ADDRESS/debug/pprof/heap)")
	_ = fl.MarkHidden("profiling-address")
	fl.StringVar(&opts.DefaultBackupStorageLocation, "default-backup-storage-location", opts.DefaultBackupStorageLocation, "storage location for backups that name none when no location is marked default")
	fl.DurationVar(&opts.DefaultBackupTTL, "default-backup-ttl", opts.DefaultBackupTTL, "how long backups without spec.ttl are kept")
	fl.DurationVar(&opts.StoreValidationFrequency, "store-validation-frequency", opts.StoreValidationFrequency, "how often storage locations are checked when they set no validationFrequency")
	fl.IntVar(&opts.ListWorkers, "list-workers", opts.ListWorkers, "concurrent LIST calls while a backup collects items")
	fl.DurationVar(&opts.BackupSyncPeriod, "backup-sync-period", opts.BackupSyncPeriod, "how often backups in storage locations are synced into the cluster when a location sets no backupSyncPeriod (0 disables)")
	fl.DurationVar(&opts.ItemOperationSyncFrequency, "item-operation-sync-frequency", opts.ItemOperationSyncFrequency, "how often asynchronous plugin operations are polled")
	fl.DurationVar(&opts.FSBackupTimeout, "fs-backup-timeout", opts.FSBackupTimeout, "how long a backup waits for its pod volume backups (file-system backup by the node agent); those not ended then are cancelled and the backup ends PartiallyFailed")
	fl.StringVar(&opts.FSBackupCompression, "fs-backup-compression", opts.FSBackupCompression, "kopia compressor of the file-system backup repositories this server creates, e.g. zstd-fastest or s2-default (none, as Velero, by default; existing repositories keep theirs)")
	fl.IntVar(&opts.DeleteItemActionWorkers, "delete-item-action-workers", opts.DeleteItemActionWorkers, "concurrent DeleteItemAction calls while a backup is deleted")
	fl.IntVar(&opts.DeletionMaxAttempts, "deletion-max-attempts", opts.DeletionMaxAttempts, "attempts at a backup deletion before its request ends Failed")
	fl.DurationVar(&opts.DeletionRetryBase, "deletion-retry-base", opts.DeletionRetryBase, "wait after a failed deletion attempt; doubles after each further one (at most 1h)")
	fl.Var(byteSize{&opts.ArchiveLimits.MaxEntryBytes}, archive.FlagMaxEntryBytes,
		"largest item (one object's JSON) a backup archive may hold; backups fail on a larger one, restores and deletions refuse it")
	fl.Var(byteSize{&opts.ArchiveLimits.MaxTotalBytes}, archive.FlagMaxTotalBytes,
		"largest a backup archive may unpack to, tar headers included; backups fail past it, restores (which spool the archive to disk) and deletions refuse it")
	fl.Int64Var(&opts.ArchiveLimits.MaxRatio, archive.FlagMaxRatio, opts.ArchiveLimits.MaxRatio,
		fmt.Sprintf("most times larger than its compressed size a backup archive may unpack to, once past %s; restores and deletions refuse more as a likely decompression bomb, backups fail on it", archive.Quantity(archive.RatioGrace)))
	fl.StringVar(&opts.PluginDir, "plugin-dir", opts.PluginDir, "directory searched (recursively) for plugin binaries")
	fl.StringToStringVar(&pluginTimeouts, "plugin-timeout", nil, "per-kind bound on one plugin call, e.g. DeleteItemAction=2m,BackupItemAction=30s (0 for none); ObjectStore uploads and downloads are bound by their progress, not their length")
	fl.StringVar(&pluginMaxMessageSize, "plugin-max-message-size", pluginMaxMessageSize, "largest gRPC message the server accepts from a plugin, e.g. 256Mi (4Mi to 2Gi-1)")
	fl.DurationVar(&opts.PluginIdleTimeout, "plugin-idle-timeout", opts.PluginIdleTimeout, "how long a plugin process started for one storage or snapshot location config may sit without calls before it is stopped (the next call starts it again)")
	fl.StringVar(&opts.CredentialsDir, "credentials-dir", opts.CredentialsDir, "directory of the server's own (made mode 0700, owned by the server's user, never a symbolic link, emptied at start and stop) for the credential files handed to ObjectStore and VolumeSnapshotter plugins (default: credentials/ in the server's own directory under --work-dir, removed at stop and, after a crash, by the next server)")
	fl.StringVar(&opts.WorkDir, "work-dir", opts.WorkDir, "directory for restore spools and run logs, created with mode 0700 if missing; at start the server removes what stopped servers left there, and only that (default: lifeboat-<uid> under the system temp dir)")
	fl.Float32Var(&opts.ClientQPS, "client-qps", opts.ClientQPS, "queries per second the server may send to the API server; -1 (the default) sets no client-side limit: the server's load is bounded by its worker pools and the API server's priority and fairness")
	fl.IntVar(&opts.ClientBurst, "client-burst", opts.ClientBurst, "burst of queries above --client-qps the server may send")
	fl.BoolVar(&opts.BackupFinalizer, "backup-finalizer", opts.BackupFinalizer, "put the lifeboat.io/backup-data finalizer on Backups, so that deleting a Backup object (kubectl delete backup) deletes its data, snapshots and restores too; a Backup deleted with its namespace, with the Backup CRD or by garbage collection of its owner still only loses the object. Off, deleting the object only removes the object, as in Velero")
	fl.StringVar(&opts.RestoreHelperImage, "restore-helper-image", opts.RestoreHelperImage, "image of the restore-wait init container put into pods whose volumes are restored from file-system backups (it runs `lifeboat restore-helper`): the server's own image, which `lifeboat install` and the Helm chart set; a ConfigMap labelled velero.io/plugin-config and velero.io/pod-volume-restore=RestoreItemAction may override it with its image key, as in Velero")
	fl.StringVar(&opts.LogLevel, "log-level", opts.LogLevel, "log level: debug, info, warn or error")
	fl.StringVar(&opts.LogFormat, "log-format", opts.LogFormat, "log format: text or json")
	fl.BoolVar(&opts.LeaderElect, "leader-elect", opts.LeaderElect, "act only while holding the Lease "+server.LeaderElectionID+" in the server's namespace, so that of several servers (a rolling update, a server started by hand) one acts and the others stand by; --leader-elect=false only when exactly one server runs")
	fl.DurationVar(&opts.LeaseDuration, "leader-elect-lease-duration", opts.LeaseDuration, "how long standbys wait after the leader's last renewal before taking over from a leader that vanished")
	fl.DurationVar(&opts.RenewDeadline, "leader-elect-renew-deadline", opts.RenewDeadline, "how long the leader tries to renew its lease before it stops acting and exits")
	fl.DurationVar(&opts.RetryPeriod, "leader-elect-retry-period", opts.RetryPeriod, "how often standbys try to take the lease and the leader renews it")
	return cmd
}

// parsePluginMaxMessageSize reads --plugin-max-message-size, a quantity
// such as 128Mi.
func parsePluginMaxMessageSize(in string) (int64, error) {
	q, err := resource.ParseQuantity(in)
	if err != nil {
		return 0, fmt.Errorf("invalid --plugin-max-message-size %q: want a size such as 128Mi", in)
	}
	if err := pluginhost.CheckMaxMessageSize(q.Value()); err != nil {
		return 0, fmt.Errorf("invalid --plugin-max-message-size %s: %w", in, err)
	}
	return q.Value(), nil
}

// parsePluginTimeouts reads --plugin-timeout kind=duration pairs.
func parsePluginTimeouts(in map[string]string) (map[api.Kind]time.Duration, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make(map[api.Kind]time.Duration, len(in))
	for kind, d := range in {
		if !slices.Contains(api.AllKinds, api.Kind(kind)) {
			return nil, fmt.Errorf("invalid --plugin-timeout: %q is not a plugin kind (use one of %v)", kind, api.AllKinds)
		}
		dur, err := time.ParseDuration(d)
		if err != nil || dur < 0 {
			return nil, fmt.Errorf("invalid --plugin-timeout %s=%s: want a duration such as 2m", kind, d)
		}
		out[api.Kind(kind)] = dur
	}
	return out, nil
}

package server

import (
	"fmt"
	"time"

	"k8s.io/client-go/tools/leaderelection"

	"github.com/lifeboat-io/lifeboat/internal/archive"
	"github.com/lifeboat-io/lifeboat/internal/pluginhost"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

// Options configure `lifeboat server`.
type Options struct {
	// Namespace is where the server reads and writes its velero.io objects.
	Namespace string
	// MetricsAddress serves Prometheus metrics; "0" disables the endpoint.
	MetricsAddress string
	// HealthAddress serves /healthz and /readyz; "0" disables the endpoint.
	HealthAddress string
	// ProfilingAddress serves net/http/pprof ("" or "0": off), for the
	// benchmark's heap profiles of a backup, restore or deletion at scale.
	ProfilingAddress string
	// DefaultBackupStorageLocation is used by backups that name no location
	// when no location is marked default.
	DefaultBackupStorageLocation string
	// DefaultBackupTTL applies to backups without spec.ttl.
	DefaultBackupTTL time.Duration
	// StoreValidationFrequency is how often storage locations are checked
	// when a location sets no validationFrequency.
	StoreValidationFrequency time.Duration
	// BackupSyncPeriod is how often backups in storage locations are synced
	// into the cluster when a location sets no backupSyncPeriod; 0 disables.
	BackupSyncPeriod time.Duration
	// ClientQPS and ClientBurst rate-limit the server's API calls; a
	// negative QPS sets no client-side limit. The default is no limit: the
	// server's requests are already bounded by its worker pools (LIST
	// workers, restore create workers, one reconcile per controller), and
	// the API server protects itself with priority and fairness. A token
	// bucket on top only turned a 10,000-item restore from 7 s into 98 s.
	ClientQPS   float32
	ClientBurst int
	// ListWorkers bounds concurrent LIST calls while a backup collects items.
	ListWorkers int
	// ItemOperationSyncFrequency is how often asynchronous plugin
	// operations are polled.
	ItemOperationSyncFrequency time.Duration
	// FSBackupTimeout bounds how long a backup waits for its
	// PodVolumeBackups (Velero's --fs-backup-timeout).
	FSBackupTimeout time.Duration
	// FSBackupCompression is the kopia compressor of the file-system
	// backup repositories this server creates ("none", Velero's, by
	// default); existing repositories keep theirs.
	FSBackupCompression string
	// DeleteItemActionWorkers bounds concurrent DeleteItemAction calls
	// while one backup is deleted.
	DeleteItemActionWorkers int
	// DeletionMaxAttempts bounds the attempts of one DeleteBackupRequest;
	// after the last failed one the request ends Failed.
	DeletionMaxAttempts int
	// DeletionRetryBase is the wait after a failed deletion attempt; it
	// doubles after each further one (capped at an hour).
	DeletionRetryBase time.Duration
	// ArchiveLimits bound backup archives: restores and deletions refuse an
	// archive past them (a hostile or corrupt one), and backups fail rather
	// than write one, so that every backup this server takes can be
	// restored and deleted by it.
	ArchiveLimits archive.Limits
	// PluginDir is scanned recursively for plugin binaries.
	PluginDir string
	// PluginTimeouts override the plugin host's per-kind call timeouts.
	PluginTimeouts map[api.Kind]time.Duration
	// PluginMaxMessageSize bounds one gRPC message from a plugin, in bytes.
	PluginMaxMessageSize int64
	// PluginIdleTimeout stops a plugin process started for one config (of a
	// storage or snapshot location) after this long without calls.
	PluginIdleTimeout time.Duration
	// CSISnapshotWait bounds each wait of the built-in CSI cleanup for the
	// snapshot controllers (deleteactions.Clients.CSIWait); zero is its
	// default. Not a flag: the tests shorten it to see a failure quickly.
	CSISnapshotWait time.Duration
	// CredentialsDir holds the credential files handed to ObjectStore and
	// VolumeSnapshotter plugins (internal/credentials): mode 0700, owned
	// by the server, emptied at start and stop. Empty means credentials/ in
	// the server's own work directory (WorkDir).
	CredentialsDir string
	// BackupFinalizer puts the lifeboat.io/backup-data finalizer on every
	// Backup, so that deleting a Backup object deletes its data too (the
	// same deletion as `lifeboat backup delete`). Off by default: in
	// Velero, deleting the object only removes the object.
	BackupFinalizer bool
	// RestoreHelperImage runs the restore-wait init container of pods
	// whose volumes are restored from file-system backups: the server's
	// own image (install sets it). Empty, such pods fail to restore.
	RestoreHelperImage string
	// WorkDir holds what the server keeps on local disk while it works
	// (restore spools, run logs), each server process in a directory of
	// its own; at start the server removes what stopped servers left
	// there. Empty means workdir.DefaultRoot (under the system temp dir).
	WorkDir string
	// LogLevel is debug, info, warn or error.
	LogLevel string
	// LogFormat is text or json.
	LogFormat string

	// LeaderElect makes the server act only while it holds the Lease
	// LeaderElectionID in Namespace; other servers started on the same
	// namespace stand by until it is released or expires.
	LeaderElect bool
	// LeaseDuration is how long standbys wait after the leader's last
	// renewal before taking over from a leader that vanished.
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader keeps trying to renew before it
	// stops acting (the server exits).
	RenewDeadline time.Duration
	// RetryPeriod is how often standbys try to take the lease, and the
	// leader to renew it.
	RetryPeriod time.Duration
}

// LeaderElectionID names the Lease that elects the one server acting on a
// namespace. It is Lifeboat's own: Velero's server takes no lease, so no
// name could make the two exclude each other, and a Lifeboat server and a
// Velero server must not serve one namespace at the same time.
const LeaderElectionID = "lifeboat-server"

// ValidateLeaderElection checks the lease timings the way the elector
// needs them, naming the flags.
func (o Options) ValidateLeaderElection() error {
	if !o.LeaderElect {
		return nil
	}
	if o.RetryPeriod <= 0 || o.RenewDeadline <= 0 || o.LeaseDuration <= 0 {
		return fmt.Errorf("invalid --leader-elect-lease-duration %s / --leader-elect-renew-deadline %s / --leader-elect-retry-period %s: each must be a positive duration",
			o.LeaseDuration, o.RenewDeadline, o.RetryPeriod)
	}
	// The leader must give up before a standby may take over, and have
	// more than one try at renewing before it does.
	if o.LeaseDuration <= o.RenewDeadline {
		return fmt.Errorf("invalid --leader-elect-lease-duration %s: must be longer than --leader-elect-renew-deadline %s", o.LeaseDuration, o.RenewDeadline)
	}
	if float64(o.RenewDeadline) <= leaderelection.JitterFactor*float64(o.RetryPeriod) {
		return fmt.Errorf("invalid --leader-elect-renew-deadline %s: must be longer than %.1f times --leader-elect-retry-period %s",
			o.RenewDeadline, leaderelection.JitterFactor, o.RetryPeriod)
	}
	return nil
}

// DefaultOptions are the server's defaults, shared by the CLI flags and tests.
func DefaultOptions() Options {
	return Options{
		Namespace:                    "velero",
		MetricsAddress:               ":8085",
		HealthAddress:                ":8086",
		DefaultBackupStorageLocation: "default",
		DefaultBackupTTL:             720 * time.Hour,
		StoreValidationFrequency:     time.Minute,
		BackupSyncPeriod:             time.Minute,
		ClientQPS:                    -1,
		ClientBurst:                  200,
		ListWorkers:                  8,
		PluginDir:                    "/plugins",
		PluginMaxMessageSize:         pluginhost.DefaultMaxMessageSize,
		PluginIdleTimeout:            pluginhost.DefaultIdleTimeout,
		ItemOperationSyncFrequency:   10 * time.Second,
		FSBackupTimeout:              4 * time.Hour,
		FSBackupCompression:          "none",
		DeleteItemActionWorkers:      8,
		DeletionMaxAttempts:          5,
		DeletionRetryBase:            30 * time.Second,
		ArchiveLimits:                archive.DefaultLimits(),
		LogLevel:                     "info",
		LogFormat:                    "text",
		LeaderElect:                  true,
		LeaseDuration:                15 * time.Second,
		RenewDeadline:                10 * time.Second,
		RetryPeriod:                  2 * time.Second,
	}
}

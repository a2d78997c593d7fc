package server

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/lifeboat-io/lifeboat/internal/archive"
	"github.com/lifeboat-io/lifeboat/internal/pluginhost"
	"github.com/lifeboat-io/lifeboat/internal/podvolume/repository"
)

// LogLevels and LogFormats are what --log-level and --log-format take.
var (
	LogLevels  = []string{"debug", "info", "warn", "error"}
	LogFormats = []string{"text", "json"}
)

// Validate checks every option for a value that makes no sense, before
// anything starts: each problem is named by its flag, with what to give
// instead. A zero that would quietly mean "default" or "never" further
// down is refused like any other wrong value. All problems are returned.
func (o Options) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("invalid "+format, args...)) }
	positive := func(flag string, d time.Duration, example string) {
		if d <= 0 {
			bad("--%s %s: must be a positive duration such as %s", flag, d, example)
		}
	}
	notNegative := func(flag string, d time.Duration, zero string) {
		if d < 0 {
			bad("--%s %s: must not be negative (0 %s)", flag, d, zero)
		}
	}
	atLeastOne := func(flag string, n int, why string) {
		if n < 1 {
			bad("--%s %d: must be at least 1%s", flag, n, why)
		}
	}

	if !slices.Contains(LogLevels, o.LogLevel) {
		bad("--log-level %q: must be one of %v", o.LogLevel, LogLevels)
	}
	if !slices.Contains(LogFormats, o.LogFormat) {
		bad("--log-format %q: must be one of %v", o.LogFormat, LogFormats)
	}
	for flag, addr := range map[string]string{"metrics-address": o.MetricsAddress, "health-address": o.HealthAddress} {
		if addr == "0" {
			continue
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			bad("--%s %q: want host:port such as :8085, or 0 to turn it off", flag, addr)
		}
	}
	if o.DefaultBackupStorageLocation == "" {
		bad("--default-backup-storage-location: must name a BackupStorageLocation (the default is %q)", DefaultOptions().DefaultBackupStorageLocation)
	}
	if o.PluginDir == "" {
		bad("--plugin-dir: must name a directory (the default is %s)", DefaultOptions().PluginDir)
	}
	positive("default-backup-ttl", o.DefaultBackupTTL, "720h")
	notNegative("store-validation-frequency", o.StoreValidationFrequency, "turns periodic checks off")
	notNegative("backup-sync-period", o.BackupSyncPeriod, "turns the sync off")
	positive("item-operation-sync-frequency", o.ItemOperationSyncFrequency, "10s")
	positive("fs-backup-timeout", o.FSBackupTimeout, "4h")
	if err := repository.CheckCompression(o.FSBackupCompression); err != nil {
		bad("--fs-backup-compression: %v", err)
	}
	positive("deletion-retry-base", o.DeletionRetryBase, "30s")
	positive("plugin-idle-timeout", o.PluginIdleTimeout, "5m")
	if o.ClientQPS == 0 || o.ClientQPS < -1 {
		bad("--client-qps %v: must be positive, or -1 for no client-side limit", o.ClientQPS)
	}
	atLeastOne("client-burst", o.ClientBurst, "")
	atLeastOne("list-workers", o.ListWorkers, "")
	atLeastOne("delete-item-action-workers", o.DeleteItemActionWorkers, "")
	atLeastOne("deletion-max-attempts", o.DeletionMaxAttempts, " (1 means no retry)")
	for kind, d := range o.PluginTimeouts {
		notNegative("plugin-timeout "+string(kind), d, "means no timeout")
	}
	if err := pluginhost.CheckMaxMessageSize(o.PluginMaxMessageSize); err != nil {
		bad("--plugin-max-message-size %d: %w", o.PluginMaxMessageSize, err)
	}
	if err := validateArchiveLimits(o.ArchiveLimits); err != nil {
		errs = append(errs, err)
	}
	if err := o.ValidateLeaderElection(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// validateArchiveLimits checks the archive limit flags.
func validateArchiveLimits(l archive.Limits) error {
	if l.MaxEntryBytes <= 0 {
		return fmt.Errorf("invalid --%s %s: must be a positive size such as 64Mi", archive.FlagMaxEntryBytes, archive.Quantity(l.MaxEntryBytes))
	}
	if l.MaxTotalBytes <= 0 {
		return fmt.Errorf("invalid --%s %s: must be a positive size such as 20Gi", archive.FlagMaxTotalBytes, archive.Quantity(l.MaxTotalBytes))
	}
	if l.MaxEntryBytes > l.MaxTotalBytes {
		return fmt.Errorf("invalid --%s %s: larger than --%s %s, which bounds the whole archive",
			archive.FlagMaxEntryBytes, archive.Quantity(l.MaxEntryBytes), archive.FlagMaxTotalBytes, archive.Quantity(l.MaxTotalBytes))
	}
	if l.MaxRatio < 1 {
		return fmt.Errorf("invalid --%s %d: must be at least 1 (the default is %d)", archive.FlagMaxRatio, l.MaxRatio, archive.DefaultMaxRatio)
	}
	return nil
}

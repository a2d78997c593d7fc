package server

import "time"

// Options configure `lifeboat server`.
type Options struct {
	// Namespace is where the server reads and writes its velero.io objects.
	Namespace string
	// MetricsAddress serves Prometheus metrics; "0" disables the endpoint.
	MetricsAddress string
	// HealthAddress serves /healthz and /readyz; "0" disables the endpoint.
	HealthAddress string
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
	// ClientQPS and ClientBurst rate-limit the server's API calls. A backup
	// issues one LIST per resource type and page, so the limit must sit
	// well above client-go's default of 5 for backups not to be throttled.
	ClientQPS   float32
	ClientBurst int
	// ListWorkers bounds concurrent LIST calls while a backup collects items.
	ListWorkers int
	// LogLevel is debug, info, warn or error.
	LogLevel string
	// LogFormat is text or json.
	LogFormat string
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
		ClientQPS:                    100,
		ClientBurst:                  200,
		ListWorkers:                  8,
		LogLevel:                     "info",
		LogFormat:                    "text",
	}
}

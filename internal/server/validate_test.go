package server

import (
	"strings"
	"testing"
	"time"
)

func TestDefaultOptionsAreValid(t *testing.T) {
	if err := DefaultOptions().Validate(); err != nil {
		t.Fatalf("the defaults are refused: %v", err)
	}
}

// Every problem is reported at once, each named by its flag: fixing one
// flag at a time against a server that names only the first is tedious.
func TestValidateNamesEveryWrongFlag(t *testing.T) {
	o := DefaultOptions()
	o.DefaultBackupTTL = 0
	o.ItemOperationSyncFrequency = 0
	o.BackupSyncPeriod = -time.Minute
	o.ListWorkers = 0
	o.ArchiveLimits.MaxRatio = 0
	o.RetryPeriod = 0
	o.FSBackupCompression = "brotli"
	err := o.Validate()
	if err == nil {
		t.Fatal("nonsense options accepted")
	}
	for _, flag := range []string{"--default-backup-ttl", "--item-operation-sync-frequency", "--backup-sync-period",
		"--list-workers", "--max-archive-ratio", "--leader-elect-retry-period", `--fs-backup-compression: unknown compressor "brotli"`} {
		if !strings.Contains(err.Error(), flag) {
			t.Errorf("error %q does not name %s", err, flag)
		}
	}
	// Zero is a meaningful value for these two: off.
	o = DefaultOptions()
	o.BackupSyncPeriod, o.StoreValidationFrequency = 0, 0
	if err := o.Validate(); err != nil {
		t.Errorf("sync and validation turned off: %v", err)
	}
}

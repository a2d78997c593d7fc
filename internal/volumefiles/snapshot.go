// Package volumefiles holds the per-volume files a backup stores next to its
// tarball, in the shapes Velero writes and reads: the native snapshots
// (<name>-volumesnapshots.json.gz) and the per-volume information
// (<name>-volumeinfo.json.gz).
package volumefiles

import (
	"context"
	"errors"
	"fmt"

	"github.com/lifeboat-io/lifeboat/internal/storage"
)

// SnapshotPhase is where a native snapshot is in its life.
type SnapshotPhase string

// Snapshot phases, as Velero names them.
const (
	SnapshotPhaseNew       SnapshotPhase = "New"
	SnapshotPhaseCompleted SnapshotPhase = "Completed"
	SnapshotPhaseFailed    SnapshotPhase = "Failed"
)

// Snapshot is one native volume snapshot taken through a VolumeSnapshotter
// plugin, as stored in <name>-volumesnapshots.json.gz.
type Snapshot struct {
	Spec   SnapshotSpec   `json:"spec"`
	Status SnapshotStatus `json:"status"`
}

// SnapshotSpec says what was snapshotted and where.
type SnapshotSpec struct {
	BackupName string `json:"backupName"`
	BackupUID  string `json:"backupUID"`
	// Location is the VolumeSnapshotLocation whose plugin took the
	// snapshot, and is the one to delete it or restore from it.
	Location string `json:"location"`
	// Velero's struct tag for this field is malformed, so Velero writes the
	// key as "PersistentVolumeName". Go's decoder matches keys
	// case-insensitively, so either spelling reads back on both sides; this
	// one is what Velero's own files hold.
	PersistentVolumeName string `json:"PersistentVolumeName"`
	ProviderVolumeID     string `json:"providerVolumeID"`
	VolumeType           string `json:"volumeType"`
	VolumeAZ             string `json:"volumeAZ,omitempty"`
	VolumeIOPS           *int64 `json:"volumeIOPS,omitempty"`
}

// SnapshotStatus is the snapshot's outcome.
type SnapshotStatus struct {
	ProviderSnapshotID string        `json:"providerSnapshotID,omitempty"`
	Phase              SnapshotPhase `json:"phase,omitempty"`
}

// GetSnapshots reads a backup's native snapshots. A backup without the file
// (older backups, or ones written before any volume was snapshotted) has
// none; a file holding null has none too.
func GetSnapshots(ctx context.Context, store *storage.BackupStore, backup string) ([]Snapshot, error) {
	var snaps []Snapshot
	err := store.GetGzipJSON(ctx, store.BackupKey(backup, storage.BackupVolumeSnapshotsFile(backup)), &snaps)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the volume snapshots of backup %s: %w", backup, err)
	}
	return snaps, nil
}

package volumefiles

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lifeboat-io/lifeboat/internal/storage"
)

// Method is how a volume's data was backed up, with Velero's names.
type Method string

// The methods Lifeboat records.
const (
	NativeSnapshot  Method = "NativeSnapshot"
	PodVolumeBackup Method = "PodVolumeBackup"
	CSISnapshot     Method = "CSISnapshot"
	// PodVolumeRestore is a restore's method for a volume whose files a
	// PodVolumeRestore wrote.
	PodVolumeRestore Method = "PodVolumeRestore"
)

// Result says whether a volume's data was backed up.
type Result string

// Results, with Velero's values.
const (
	ResultSucceeded Result = "succeeded"
	ResultFailed    Result = "failed"
)

// BackupVolumeInfo is one volume's entry in <name>-volumeinfo.json.gz. The
// fields up to PVInfo are Velero's (its tools read them); Decision is
// Lifeboat's and says which action was taken and why.
type BackupVolumeInfo struct {
	PVCName               string       `json:"pvcName,omitempty"`
	PVCNamespace          string       `json:"pvcNamespace,omitempty"`
	PVName                string       `json:"pvName,omitempty"`
	BackupMethod          Method       `json:"backupMethod,omitempty"`
	SnapshotDataMoved     bool         `json:"snapshotDataMoved"`
	PreserveLocalSnapshot bool         `json:"preserveLocalSnapshot"`
	Skipped               bool         `json:"skipped"`
	SkippedReason         string       `json:"skippedReason,omitempty"`
	StartTimestamp        *metav1.Time `json:"startTimestamp,omitempty"`
	CompletionTimestamp   *metav1.Time `json:"completionTimestamp,omitempty"`
	Result                Result       `json:"result,omitempty"`

	CSISnapshotInfo    *CSISnapshotInfo    `json:"csiSnapshotInfo,omitempty"`
	NativeSnapshotInfo *NativeSnapshotInfo `json:"nativeSnapshotInfo,omitempty"`
	// PVBInfo names the pod volume for volumes reached through a pod.
	PVBInfo *PodVolumeInfo `json:"pvbInfo,omitempty"`
	PVInfo  *PVInfo        `json:"pvInfo,omitempty"`

	Decision *Decision `json:"lifeboatDecision,omitempty"`
}

// NativeSnapshotInfo describes a snapshot taken by a VolumeSnapshotter.
type NativeSnapshotInfo struct {
	SnapshotHandle string        `json:"snapshotHandle"`
	VolumeType     string        `json:"volumeType"`
	VolumeAZ       string        `json:"volumeAZ"`
	IOPS           string        `json:"iops"`
	Phase          SnapshotPhase `json:"Phase,omitempty"`
}

// CSISnapshotInfo describes a CSI snapshot, with Velero's fields (its
// ReadyToUse has no JSON name, so it is written as Go names it).
type CSISnapshotInfo struct {
	SnapshotHandle string `json:"snapshotHandle"`
	Size           int64  `json:"size"`
	Driver         string `json:"driver"`
	VSCName        string `json:"vscName"`
	OperationID    string `json:"operationID,omitempty"`
	ReadyToUse     *bool
	// VolumeSnapshot is Lifeboat's: the namespace/name of the stored
	// VolumeSnapshot (Velero's tools ignore it).
	VolumeSnapshot string `json:"volumeSnapshot,omitempty"`
}

// PodVolumeInfo names a pod's volume and, for a volume copied by a
// PodVolumeBackup, what it became (Velero's fields).
type PodVolumeInfo struct {
	// SnapshotHandle is the kopia snapshot's ID.
	SnapshotHandle string `json:"snapshotHandle,omitempty"`
	// Size is the volume's bytes; IncrementalSize those read anew.
	Size            int64  `json:"size,omitempty"`
	IncrementalSize int64  `json:"incrementalSize,omitempty"`
	UploaderType    string `json:"uploaderType"`
	VolumeName      string `json:"volumeName"`
	PodName         string `json:"podName"`
	PodNamespace    string `json:"podNamespace"`
	// NodeName is the node whose agent copied the volume.
	NodeName string `json:"nodeName,omitempty"`
	// Phase is the PodVolumeBackup's; Velero's field has no JSON name.
	Phase string
}

// PVInfo keeps what a restore needs to recreate the PV as it was.
type PVInfo struct {
	ReclaimPolicy string            `json:"reclaimPolicy"`
	Labels        map[string]string `json:"labels"`
}

// Decision is the volume policy outcome for one volume.
type Decision struct {
	// Action is snapshot, fs-backup, skip or custom.
	Action string `json:"action"`
	// Rule is the index of the volume policy that matched; nil when a
	// fallback decided.
	Rule       *int           `json:"rule,omitempty"`
	Parameters map[string]any `json:"parameters,omitempty"`
	// Reason is the fallback used, or why the action was not carried out.
	Reason string `json:"reason,omitempty"`
	// ClaimedBy is the plugin that handled a custom action and said so
	// with Lifeboat's claimed-by annotation.
	ClaimedBy string `json:"claimedBy,omitempty"`
	// HandledBy are the backup item actions that ran on the volume's claim
	// or PersistentVolume (a pod volume: its pod), for a custom action:
	// plugins built on Velero's SDK handle custom volumes without the
	// annotation.
	HandledBy []string `json:"handledBy,omitempty"`
}

// GetVolumeInfo reads a backup's volume information; a backup without the
// file has none.
func GetVolumeInfo(ctx context.Context, store *storage.BackupStore, backup string) ([]BackupVolumeInfo, error) {
	var infos []BackupVolumeInfo
	err := store.GetGzipJSON(ctx, store.BackupKey(backup, storage.BackupVolumeInfoFile(backup)), &infos)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the volume information of backup %s: %w", backup, err)
	}
	return infos, nil
}

// RestoreVolumeInfo is one volume's entry in a restore's
// <restore>-volumeinfo.json.gz, with Velero's field names.
type RestoreVolumeInfo struct {
	PVCName            string              `json:"pvcName,omitempty"`
	PVCNamespace       string              `json:"pvcNamespace,omitempty"`
	PVName             string              `json:"pvName,omitempty"`
	RestoreMethod      Method              `json:"restoreMethod,omitempty"`
	SnapshotDataMoved  bool                `json:"snapshotDataMoved"`
	CSISnapshotInfo    *CSISnapshotInfo    `json:"csiSnapshotInfo,omitempty"`
	NativeSnapshotInfo *NativeSnapshotInfo `json:"nativeSnapshotInfo,omitempty"`
	// PVRInfo is the pod volume a PodVolumeRestore wrote, as Velero fills
	// it: the snapshot, its size, the uploader type, the pod and volume
	// (no node, and an empty Phase).
	PVRInfo *PodVolumeInfo `json:"pvrInfo,omitempty"`
}

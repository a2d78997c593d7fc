package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/lifeboat-io/lifeboat/internal/volumefiles"
)

// TestDescribeVolumesNamesCSISnapshots: describe --details says which CSI
// snapshot each volume got, from Lifeboat's volume information and from
// Velero's (no decision, no VolumeSnapshot name).
func TestDescribeVolumesNamesCSISnapshots(t *testing.T) {
	ready := true
	infos := []volumefiles.BackupVolumeInfo{
		{PVCName: "data", PVCNamespace: "shop", PVName: "pvc-1", BackupMethod: volumefiles.CSISnapshot, Result: volumefiles.ResultSucceeded,
			CSISnapshotInfo: &volumefiles.CSISnapshotInfo{SnapshotHandle: "snap-1", Size: 1 << 30, Driver: "hostpath.csi.lifeboat.io", VSCName: "snapcontent-1",
				ReadyToUse: &ready, VolumeSnapshot: "shop/velero-data-abcde"},
			Decision: &volumefiles.Decision{Action: "snapshot", Reason: "snapshotVolumes unset"}},
		{PVCName: "logs", PVCNamespace: "shop", PVName: "pvc-2", BackupMethod: volumefiles.CSISnapshot, Result: volumefiles.ResultSucceeded,
			CSISnapshotInfo: &volumefiles.CSISnapshotInfo{SnapshotHandle: "snap-2", Size: 5, Driver: "ebs.csi.aws.com", VSCName: "snapcontent-2"}},
		{PVCName: "slow", PVCNamespace: "shop", PVName: "pvc-3", BackupMethod: volumefiles.CSISnapshot, Result: volumefiles.ResultFailed, Skipped: true,
			SkippedReason: "CSI snapshot failed: not ready", CSISnapshotInfo: &volumefiles.CSISnapshotInfo{VolumeSnapshot: "shop/velero-slow-xyz12"}},
	}
	var out bytes.Buffer
	if err := describeVolumes(&out, &volumeInfoResult{infos: infos}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"CSI snapshot snap-1 (VolumeSnapshot shop/velero-data-abcde, content snapcontent-1, driver hostpath.csi.lifeboat.io, 1073741824 bytes)",
		"pvc shop/logs (pv pvc-2)  CSISnapshot",
		"CSI snapshot snap-2 (content snapcontent-2, driver ebs.csi.aws.com, 5 bytes)",
		"failed: CSI snapshot failed: not ready",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("describe lacks %q:\n%s", want, out.String())
		}
	}
}

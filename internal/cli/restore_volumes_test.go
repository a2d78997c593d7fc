package cli

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/lifeboat-io/lifeboat/internal/volumefiles"
)

// TestDescribeRestoreVolumes: restore describe --details counts and lists
// the volumes restored from snapshots, with what Velero's describe shows
// of a CSI snapshot restore (claim, content, storage snapshot ID, driver)
// whether Lifeboat or Velero wrote the file, and says when there is none
// or the file is missing.
func TestDescribeRestoreVolumes(t *testing.T) {
	infos := []volumefiles.RestoreVolumeInfo{
		{PVCName: "data", PVCNamespace: "shop-2", RestoreMethod: volumefiles.CSISnapshot,
			CSISnapshotInfo: &volumefiles.CSISnapshotInfo{SnapshotHandle: "snap-1", Size: 3 << 20, Driver: "hostpath.csi.lifeboat.io", VSCName: "9f3c",
				VolumeSnapshot: "shop-2/9f3c"}},
		// As Velero writes it: the bound PV, no VolumeSnapshot name.
		{PVCName: "logs", PVCNamespace: "shop-2", PVName: "pvc-9", RestoreMethod: volumefiles.CSISnapshot,
			CSISnapshotInfo: &volumefiles.CSISnapshotInfo{SnapshotHandle: "snap-2", Size: 5, Driver: "ebs.csi.aws.com", VSCName: "77ab"}},
		{PVName: "pv-old", PVCName: "cache", PVCNamespace: "shop-2", RestoreMethod: volumefiles.NativeSnapshot,
			NativeSnapshotInfo: &volumefiles.NativeSnapshotInfo{SnapshotHandle: "snap-native"}},
		// A volume a PodVolumeRestore wrote, as Velero's restore lists it.
		{PVCName: "db", PVCNamespace: "shop-2", PVName: "pvc-db", RestoreMethod: volumefiles.PodVolumeRestore,
			PVRInfo: &volumefiles.PodVolumeInfo{SnapshotHandle: "k9f", Size: 4096, UploaderType: "kopia", VolumeName: "data", PodName: "db-0", PodNamespace: "shop-2"}},
	}
	var out bytes.Buffer
	if err := describeRestoreVolumes(&out, &restoreVolumesResult{infos: infos}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Volumes: 2 from CSI snapshots, 1 from native snapshots, 1 by pod volume restore\n",
		"pvc shop-2/db (pv pvc-db) kopia snapshot k9f into volume data of pod shop-2/db-0 (4096 bytes)",
		"pvc shop-2/data CSI snapshot snap-1 (VolumeSnapshot shop-2/9f3c, content 9f3c, driver hostpath.csi.lifeboat.io, 3145728 bytes)",
		"pvc shop-2/logs (pv pvc-9) CSI snapshot snap-2 (content 77ab, driver ebs.csi.aws.com, 5 bytes)",
		"pvc shop-2/cache (pv pv-old) snapshot snap-native",
	} {
		if !strings.Contains(squeeze(out.String()), want) {
			t.Errorf("describe lacks %q:\n%s", want, out.String())
		}
	}
	for _, tc := range []struct {
		res  *restoreVolumesResult
		want string
	}{
		{&restoreVolumesResult{infos: []volumefiles.RestoreVolumeInfo{}}, "Volumes:  <none restored from snapshots>"},
		{&restoreVolumesResult{err: errFileNotFound}, "Volumes:  <restore volume information not found>"},
		{&restoreVolumesResult{err: fmt.Errorf("timed out")}, "Volumes:  <error getting restore volume information: timed out>"},
	} {
		out.Reset()
		if err := describeRestoreVolumes(&out, tc.res); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), tc.want) {
			t.Errorf("describe %+v: %q, want %q", tc.res, out.String(), tc.want)
		}
	}
}

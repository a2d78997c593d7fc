package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/volumefiles"
)

// restoreVolumesResult carries a restore's volume information
// (<restore>-volumeinfo.json.gz, Velero's file) or why it could not be read.
type restoreVolumesResult struct {
	infos []volumefiles.RestoreVolumeInfo
	err   error
}

func fetchRestoreVolumes(ctx context.Context, d *downloader, restore string) *restoreVolumesResult {
	var infos []volumefiles.RestoreVolumeInfo
	err := readGzipJSON(ctx, d, v1.DownloadTargetKindRestoreVolumeInfo, restore, fmt.Sprintf("volume information of restore %q", restore), &infos)
	return &restoreVolumesResult{infos: infos, err: err}
}

// describeRestoreVolumes prints the volumes whose data the restore brought
// back from a snapshot, with the count of each kind: what Velero's
// describe shows as "CSI Snapshot Restores" (claim, content, storage
// snapshot ID, driver) and of native snapshots, plus the restored
// VolumeSnapshot and the size. Volumes a PodVolumeRestore wrote (Velero
// lists them in the file too, and describes them from the PodVolumeRestores
// in its "kopia Restores" section, as Lifeboat also does) are listed with
// their snapshot, pod and volume. A restore that wrote no such file (an
// older Velero's) says so.
func describeRestoreVolumes(w io.Writer, res *restoreVolumesResult) error {
	fmt.Fprintln(w)
	switch {
	case errors.Is(res.err, errFileNotFound):
		fmt.Fprintln(w, "Volumes:  <restore volume information not found>")
		return nil
	case res.err != nil:
		fmt.Fprintf(w, "Volumes:  <error getting restore volume information: %v>\n", res.err)
		return nil
	}
	var csi, native, fs, other int
	for _, in := range res.infos {
		switch {
		case in.RestoreMethod == volumefiles.CSISnapshot && in.CSISnapshotInfo != nil:
			csi++
		case in.NativeSnapshotInfo != nil:
			native++
		case in.PVRInfo != nil:
			fs++
		default:
			other++
		}
	}
	if len(res.infos) == 0 {
		fmt.Fprintln(w, "Volumes:  <none restored from snapshots>")
		return nil
	}
	fmt.Fprintf(w, "Volumes:  %d from CSI snapshots, %d from native snapshots", csi, native)
	if fs > 0 {
		fmt.Fprintf(w, ", %d by pod volume restore", fs)
	}
	if other > 0 {
		fmt.Fprintf(w, ", %d otherwise", other)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  VOLUME\tRESTORED FROM")
	for i := range res.infos {
		in := &res.infos[i]
		fmt.Fprintf(tw, "  %s\t%s\n", restoredVolumeName(in), restoredFrom(in))
	}
	return tw.Flush()
}

func restoredVolumeName(in *volumefiles.RestoreVolumeInfo) string {
	switch {
	case in.PVCName != "" && in.PVName != "":
		return fmt.Sprintf("pvc %s/%s (pv %s)", in.PVCNamespace, in.PVCName, in.PVName)
	case in.PVCName != "":
		return fmt.Sprintf("pvc %s/%s", in.PVCNamespace, in.PVCName)
	}
	return "pv " + valueOr(in.PVName, none)
}

func restoredFrom(in *volumefiles.RestoreVolumeInfo) string {
	switch {
	case in.CSISnapshotInfo != nil:
		return csiOutcome(in.CSISnapshotInfo)
	case in.NativeSnapshotInfo != nil:
		return "snapshot " + valueOr(in.NativeSnapshotInfo.SnapshotHandle, none)
	case in.PVRInfo != nil:
		p := in.PVRInfo
		s := fmt.Sprintf("%s snapshot %s into volume %s of pod %s/%s", valueOr(p.UploaderType, "kopia"), valueOr(p.SnapshotHandle, none), p.VolumeName, p.PodNamespace, p.PodName)
		if p.Size > 0 {
			s += fmt.Sprintf(" (%d bytes)", p.Size)
		}
		return s
	}
	return valueOr(string(in.RestoreMethod), none)
}

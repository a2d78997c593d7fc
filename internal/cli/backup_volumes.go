package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/volumefiles"
)

// volumeInfoResult carries a backup's volume information or why it could
// not be read, as resourceListResult does for the resource list.
type volumeInfoResult struct {
	infos []volumefiles.BackupVolumeInfo
	err   error
}

func fetchVolumeInfo(ctx context.Context, d *downloader, backup string) *volumeInfoResult {
	var infos []volumefiles.BackupVolumeInfo
	err := readGzipJSON(ctx, d, v1.DownloadTargetKindBackupVolumeInfos, backup, fmt.Sprintf("volume information of backup %q", backup), &infos)
	return &volumeInfoResult{infos: infos, err: err}
}

// describeVolumes prints one line per volume: what it is, the action, what
// chose it, and what came of it.
func describeVolumes(w io.Writer, res *volumeInfoResult) error {
	fmt.Fprintln(w)
	switch {
	case errors.Is(res.err, errFileNotFound):
		fmt.Fprintln(w, "Volumes:  <backup volume information not found>")
		return nil
	case res.err != nil:
		fmt.Fprintf(w, "Volumes:  <error getting backup volume information: %v>\n", res.err)
		return nil
	case len(res.infos) == 0:
		fmt.Fprintln(w, "Volumes:  <none>")
		return nil
	}
	fmt.Fprintln(w, "Volumes:")
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  VOLUME\tACTION\tCHOSEN BY\tOUTCOME")
	for i := range res.infos {
		in := &res.infos[i]
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", volumeName(in), volumeAction(in), chosenBy(in), volumeOutcome(in))
	}
	return tw.Flush()
}

func volumeName(in *volumefiles.BackupVolumeInfo) string {
	switch {
	case in.PVBInfo != nil:
		return fmt.Sprintf("pod %s/%s:%s", in.PVBInfo.PodNamespace, in.PVBInfo.PodName, in.PVBInfo.VolumeName)
	case in.PVCName != "" && in.PVName != "":
		return fmt.Sprintf("pvc %s/%s (pv %s)", in.PVCNamespace, in.PVCName, in.PVName)
	case in.PVCName != "":
		return fmt.Sprintf("pvc %s/%s", in.PVCNamespace, in.PVCName)
	}
	return "pv " + in.PVName
}

func volumeAction(in *volumefiles.BackupVolumeInfo) string {
	if in.Decision == nil {
		// Written by Velero, which records the method only.
		return valueOr(string(in.BackupMethod), none)
	}
	if len(in.Decision.Parameters) == 0 {
		return in.Decision.Action
	}
	parts := make([]string, 0, len(in.Decision.Parameters))
	for _, k := range slices.Sorted(maps.Keys(in.Decision.Parameters)) {
		parts = append(parts, fmt.Sprintf("%s=%v", k, in.Decision.Parameters[k]))
	}
	return in.Decision.Action + " (" + strings.Join(parts, ",") + ")"
}

func chosenBy(in *volumefiles.BackupVolumeInfo) string {
	switch {
	case in.Decision == nil:
		return none
	case in.Decision.Rule != nil:
		return fmt.Sprintf("volume policy %d", *in.Decision.Rule)
	case in.Decision.Reason != "":
		return "fallback: " + in.Decision.Reason
	}
	return "fallback"
}

func volumeOutcome(in *volumefiles.BackupVolumeInfo) string {
	switch {
	case in.Decision != nil && in.Decision.ClaimedBy != "":
		return "handled by plugin " + in.Decision.ClaimedBy
	case in.Decision != nil && len(in.Decision.HandledBy) > 0:
		return "left to backup item action(s) " + strings.Join(in.Decision.HandledBy, ", ")
	case in.NativeSnapshotInfo != nil && in.Result == volumefiles.ResultSucceeded:
		return "snapshot " + in.NativeSnapshotInfo.SnapshotHandle
	case in.CSISnapshotInfo != nil && in.Result == volumefiles.ResultSucceeded:
		return csiOutcome(in.CSISnapshotInfo)
	case in.BackupMethod == volumefiles.PodVolumeBackup && in.PVBInfo != nil && in.Result == volumefiles.ResultSucceeded:
		return fmt.Sprintf("pod volume backup %s (node %s, %d bytes)", valueOr(in.PVBInfo.SnapshotHandle, "<empty volume, no snapshot>"), valueOr(in.PVBInfo.NodeName, none), in.PVBInfo.Size)
	case in.BackupMethod == volumefiles.PodVolumeBackup && in.PVBInfo != nil && in.Result == volumefiles.ResultFailed:
		return "pod volume backup " + valueOr(in.PVBInfo.Phase, "failed") + ": see the backup's errors"
	case in.Result == volumefiles.ResultFailed:
		return "failed: " + valueOr(in.SkippedReason, "see the backup's errors")
	case in.Skipped:
		return "not backed up: " + valueOr(in.SkippedReason, "skipped")
	}
	return valueOr(string(in.Result), none)
}

// csiOutcome names a volume's CSI snapshot: the storage snapshot's handle,
// then what Velero's describe --details shows of it (content, driver,
// size) and the stored VolumeSnapshot.
func csiOutcome(c *volumefiles.CSISnapshotInfo) string {
	parts := []string{"content " + valueOr(c.VSCName, none), "driver " + valueOr(c.Driver, none), fmt.Sprintf("%d bytes", c.Size)}
	if c.VolumeSnapshot != "" {
		parts = append([]string{"VolumeSnapshot " + c.VolumeSnapshot}, parts...)
	}
	return "CSI snapshot " + valueOr(c.SnapshotHandle, none) + " (" + strings.Join(parts, ", ") + ")"
}

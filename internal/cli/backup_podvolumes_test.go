package cli

import (
	"bytes"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/volumefiles"
)

func TestDescribePodVolumeBackups(t *testing.T) {
	start := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	end := metav1.NewTime(start.Add(3 * time.Second))
	pvb := func(pod, vol string, phase v1.PodVolumePhase, total, incr int64) v1.PodVolumeBackup {
		p := v1.PodVolumeBackup{
			Spec:   v1.PodVolumeBackupSpec{Pod: corev1.ObjectReference{Namespace: "shop", Name: pod}, Volume: vol, UploaderType: "kopia"},
			Status: v1.PodVolumeBackupStatus{Phase: phase, IncrementalBytes: incr, Progress: v1.DataMoveOperationProgress{TotalBytes: total, BytesDone: total / 2}},
		}
		if phase == v1.PodVolumePhaseCompleted || phase == v1.PodVolumePhaseFailed {
			p.Status.StartTimestamp, p.Status.CompletionTimestamp = &start, &end
		}
		return p
	}
	pvbs := []v1.PodVolumeBackup{
		pvb("web", "data", v1.PodVolumePhaseCompleted, 4096, 0),
		pvb("web", "cache", v1.PodVolumePhaseCompleted, 100, 10),
		pvb("db", "wal", v1.PodVolumePhaseFailed, 0, 0),
		pvb("db", "data", v1.PodVolumePhaseInProgress, 200, 0),
		pvb("db", "tmp", "", 0, 0),
	}
	for _, tc := range []struct {
		details bool
		want    string
	}{
		{false, `
Pod Volume Backups - kopia (specify --details for more information):
  Completed:  2
  Failed:  1
  In Progress:  1
  New:  1
`},
		{true, `
Pod Volume Backups - kopia:
  Completed:
    shop/web: cache (size: 100, incremental size: 10, took 3s), data (size: 4096, took 3s)
  Failed:
    shop/db: wal (took 3s)
  In Progress:
    shop/db: data (50.00%)
  New:
    shop/db: tmp
`},
	} {
		var out bytes.Buffer
		if err := writePodVolumeBackups(&out, pvbs, tc.details); err != nil {
			t.Fatal(err)
		}
		if out.String() != tc.want {
			t.Errorf("details=%v:\n%s\nwant:\n%s", tc.details, out.String(), tc.want)
		}
	}
	var out bytes.Buffer
	if err := writePodVolumeBackups(&out, nil, true); err != nil || out.String() != "\nPod Volume Backups:  <none included>\n" {
		t.Errorf("no pod volume backups: %q %v", out.String(), err)
	}
}

func TestDescribeVolumesShowsPodVolumeBackups(t *testing.T) {
	infos := []volumefiles.BackupVolumeInfo{
		{BackupMethod: volumefiles.PodVolumeBackup, Result: volumefiles.ResultSucceeded, Decision: &volumefiles.Decision{Action: "fs-backup"},
			PVBInfo: &volumefiles.PodVolumeInfo{SnapshotHandle: "k123", Size: 4096, NodeName: "node-1", PodNamespace: "shop", PodName: "web", VolumeName: "cache", Phase: "Completed"}},
		{BackupMethod: volumefiles.PodVolumeBackup, Result: volumefiles.ResultFailed, Decision: &volumefiles.Decision{Action: "fs-backup"},
			PVBInfo: &volumefiles.PodVolumeInfo{PodNamespace: "shop", PodName: "web", VolumeName: "data", Phase: "Canceled"}},
	}
	var out bytes.Buffer
	if err := describeVolumes(&out, &volumeInfoResult{infos: infos}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"pod volume backup k123 (node node-1, 4096 bytes)", "pod volume backup Canceled: see the backup's errors"} {
		if !bytes.Contains(out.Bytes(), []byte(want)) {
			t.Errorf("describe lacks %q:\n%s", want, out.String())
		}
	}
}

package nodeagent

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

func TestBackupCompletesWithVeleroStatus(t *testing.T) {
	f := newFixture(t)
	p := f.pod("web", f.node, nil, emptyDir("data"))
	dir := f.volumeDir(p, "data")
	files := map[string][]byte{"a.txt": []byte("hello"), "sub/b.bin": bytes.Repeat([]byte{7}, 5000)}
	for name, data := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	dp := &copyDataPath{dir: t.TempDir()}
	f.startAgent(dataPath(dp))
	f.pvb("web-data", p, f.node, "data")

	got := f.waitPVB("web-data", "Completed", func(p *v1.PodVolumeBackup) bool { return final(p.Status.Phase) })
	s := got.Status
	if s.Phase != v1.PodVolumePhaseCompleted {
		t.Fatalf("phase %s (%s), want Completed", s.Phase, s.Message)
	}
	if s.Path != dir {
		t.Errorf("status.path %q, want %q", s.Path, dir)
	}
	if s.SnapshotID != "snap-1" {
		t.Errorf("status.snapshotID %q, want snap-1", s.SnapshotID)
	}
	if s.AcceptedTimestamp == nil || s.StartTimestamp == nil || s.CompletionTimestamp == nil {
		t.Errorf("timestamps accepted %v start %v completion %v: want all set", s.AcceptedTimestamp, s.StartTimestamp, s.CompletionTimestamp)
	}
	if s.Progress.TotalBytes != 5005 || s.Progress.BytesDone != 5005 {
		t.Errorf("progress %+v, want 5005 of 5005", s.Progress)
	}
	for name, data := range files {
		stored, err := os.ReadFile(filepath.Join(dp.dir, "snap-1", name))
		if err != nil || !bytes.Equal(stored, data) {
			t.Errorf("stored %s: %v, content equal %v", name, err, bytes.Equal(stored, data))
		}
	}
	if n := testutil.ToFloat64(pvbDequeued.WithLabelValues(f.node)); n != 1 {
		t.Errorf("podVolume_pod_volume_backup_dequeue_count{node=%s} = %v, want 1", f.node, n)
	}
	if n := testutil.ToFloat64(pvbEnqueued.WithLabelValues(f.node)); n != 1 {
		t.Errorf("podVolume_pod_volume_backup_enqueue_count{node=%s} = %v, want 1", f.node, n)
	}
	req := dp.backups[0]
	if req.Repository.VolumeNamespace != f.ns || req.Repository.Location == nil || req.Repository.Location.Name != "default" || req.Tags["backup"] != "b1" {
		t.Errorf("request repository %+v tags %v: want namespace %s, location default, the PVB's tags", req.Repository, req.Tags, f.ns)
	}
	if req.ParallelFilesUpload != 3 {
		t.Errorf("request parallel file reads %d: want the PVB's (ParallelFilesUpload 3)", req.ParallelFilesUpload)
	}
}

func TestBackupOfAnotherNodeIsLeftAlone(t *testing.T) {
	f := newFixture(t)
	p := f.pod("web", "elsewhere", nil, emptyDir("data"))
	f.startAgent(dataPath(&copyDataPath{dir: t.TempDir()}))
	f.pvb("other", p, "elsewhere", "data")
	time.Sleep(2 * time.Second)
	got := f.waitPVB("other", "read", func(*v1.PodVolumeBackup) bool { return true })
	if !isNew(got.Status.Phase) {
		t.Fatalf("another node's PodVolumeBackup went %s", got.Status.Phase)
	}
}

func TestBackupFailsNamingWhatIsWrong(t *testing.T) {
	f := newFixture(t)
	hostPath := corev1.Volume{Name: "logs", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/log"}}}
	p := f.pod("web", f.node, nil, emptyDir("data"), hostPath)
	f.startAgent(dataPath(&copyDataPath{dir: t.TempDir()}))

	f.pvb("hostpath", p, f.node, "logs")
	got := f.waitPVB("hostpath", "Failed", phaseIs(v1.PodVolumePhaseFailed))
	for _, want := range []string{`volume "logs"`, "pod " + f.ns + "/web", "hostPath"} {
		if !strings.Contains(got.Status.Message, want) {
			t.Errorf("hostPath message %q lacks %q", got.Status.Message, want)
		}
	}

	// No directory made for "data": the message names the path looked for.
	f.pvb("missing", p, f.node, "data")
	got = f.waitPVB("missing", "Failed", phaseIs(v1.PodVolumePhaseFailed))
	want := filepath.Join(f.hostPods, string(p.UID), "volumes", "*", "data")
	if !strings.Contains(got.Status.Message, want) {
		t.Errorf("missing directory message %q does not name %s", got.Status.Message, want)
	}
	if got.Status.CompletionTimestamp == nil || got.Status.StartTimestamp == nil {
		t.Errorf("a failed PVB has start and completion times, got %+v", got.Status)
	}
}

// The test of the real node (test/incluster) expects this message until a
// data path is plugged in.
func TestBackupWithoutDataPathFailsSayingSo(t *testing.T) {
	f := newFixture(t)
	p := f.pod("web", f.node, nil, emptyDir("data"))
	f.volumeDir(p, "data")
	f.startAgent(nil)
	f.pvb("nodp", p, f.node, "data")
	got := f.waitPVB("nodp", "Failed", phaseIs(v1.PodVolumePhaseFailed))
	if !strings.Contains(got.Status.Message, ErrNoDataPath.Error()) || got.Status.Path == "" {
		t.Fatalf("status %+v: want the volume's path and a message saying there is no data path", got.Status)
	}
}

func TestBackupCancelledWhileInProgress(t *testing.T) {
	f := newFixture(t)
	p := f.pod("web", f.node, nil, emptyDir("data"))
	f.volumeDir(p, "data")
	dp := newBlocking()
	f.startAgent(dataPath(dp))
	f.pvb("cancel-me", p, f.node, "data")
	<-dp.started
	// Progress is written while the transfer runs.
	f.waitPVB("cancel-me", "progress 300 of 1000", func(p *v1.PodVolumeBackup) bool {
		return p.Status.Phase == v1.PodVolumePhaseInProgress && p.Status.Progress.BytesDone == 300 && p.Status.Progress.TotalBytes == 1000
	})
	patchCancel(t, &v1.PodVolumeBackup{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "cancel-me"}})
	select {
	case err := <-dp.ended:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("transfer ended with %v, want its context cancelled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the transfer's context was never cancelled")
	}
	got := f.waitPVB("cancel-me", "Canceled", phaseIs(v1.PodVolumePhaseCanceled))
	if got.Status.CompletionTimestamp == nil {
		t.Errorf("Canceled without completion time: %+v", got.Status)
	}
}

func TestBackupCancelledBeforeItStarts(t *testing.T) {
	f := newFixture(t)
	p := f.pod("web", "no-agent-here", nil, emptyDir("data"))
	f.startAgent(nil)
	pvb := &v1.PodVolumeBackup{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "early"},
		Spec:       v1.PodVolumeBackupSpec{Node: "no-agent-here", Volume: "data", BackupStorageLocation: "default", Cancel: true, Pod: corev1.ObjectReference{Namespace: f.ns, Name: p.Name}},
	}
	f.create(pvb)
	f.waitPVB("early", "Canceled", phaseIs(v1.PodVolumePhaseCanceled))
}

func TestBackupStoppedWithTheAgentFails(t *testing.T) {
	f := newFixture(t)
	p := f.pod("web", f.node, nil, emptyDir("data"))
	f.volumeDir(p, "data")
	dp := newBlocking()
	stop := f.startAgent(dataPath(dp))
	f.pvb("stopped", p, f.node, "data")
	<-dp.started
	stop()
	got := f.waitPVB("stopped", "Failed", phaseIs(v1.PodVolumePhaseFailed))
	if !strings.Contains(got.Status.Message, "stopped during the transfer") {
		t.Errorf("message %q: want it to say the node agent stopped during the transfer", got.Status.Message)
	}
}

// A node agent killed mid-transfer leaves its objects InProgress (or
// Accepted, Prepared, Canceling); the next one marks them Failed, and
// leaves other nodes' and final ones alone.
func TestRestartedAgentFailsWhatItOwned(t *testing.T) {
	f := newFixture(t)
	p := f.pod("web", f.node, nil, emptyDir("data"))
	leftover := func(name, node string, phase v1.PodVolumePhase) {
		pvb := f.pvb(name, p, node, "data")
		pvb.Status.Phase = phase
		pvb.Status.StartTimestamp = &metav1.Time{Time: time.Now().Add(-time.Minute)}
		if err := kube.Update(ctx(t), pvb); err != nil {
			t.Fatal(err)
		}
	}
	leftover("was-running", f.node, v1.PodVolumePhaseInProgress)
	leftover("was-accepted", f.node, v1.PodVolumePhaseAccepted)
	leftover("other-node", "elsewhere", v1.PodVolumePhaseInProgress)
	leftover("done", f.node, v1.PodVolumePhaseCompleted)
	pvr := &v1.PodVolumeRestore{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "was-restoring"},
		Spec:       v1.PodVolumeRestoreSpec{Pod: corev1.ObjectReference{Namespace: f.ns, Name: "web"}, Volume: "data", BackupStorageLocation: "default", SnapshotID: "s", SourceNamespace: f.ns},
	}
	f.create(pvr)
	pvr.Status = v1.PodVolumeRestoreStatus{Phase: v1.PodVolumePhaseInProgress, Node: f.node}
	if err := kube.Update(ctx(t), pvr); err != nil {
		t.Fatal(err)
	}

	f.startAgent(nil)
	for name, was := range map[string]v1.PodVolumePhase{"was-running": v1.PodVolumePhaseInProgress, "was-accepted": v1.PodVolumePhaseAccepted} {
		got := f.waitPVB(name, "Failed", phaseIs(v1.PodVolumePhaseFailed))
		if got.Status.Message != LostMessage(f.node, was) || got.Status.CompletionTimestamp == nil {
			t.Errorf("%s: message %q completion %v, want %q", name, got.Status.Message, got.Status.CompletionTimestamp, LostMessage(f.node, was))
		}
	}
	gotR := f.waitPVR("was-restoring", "Failed", func(p *v1.PodVolumeRestore) bool { return p.Status.Phase == v1.PodVolumePhaseFailed })
	if gotR.Status.Message != LostMessage(f.node, v1.PodVolumePhaseInProgress) {
		t.Errorf("PodVolumeRestore message %q", gotR.Status.Message)
	}
	if got := f.waitPVB("other-node", "read", func(*v1.PodVolumeBackup) bool { return true }); got.Status.Phase != v1.PodVolumePhaseInProgress {
		t.Errorf("another node's InProgress PVB went %s", got.Status.Phase)
	}
	if got := f.waitPVB("done", "read", func(*v1.PodVolumeBackup) bool { return true }); got.Status.Phase != v1.PodVolumePhaseCompleted {
		t.Errorf("a Completed PVB went %s", got.Status.Phase)
	}
}

// One transfer at a time (the default concurrency): a second
// PodVolumeBackup of the node waits, New, until the first is done.
func TestBackupsWaitForATransferSlot(t *testing.T) {
	f := newFixture(t)
	p := f.pod("web", f.node, nil, emptyDir("a"), emptyDir("b"))
	f.volumeDir(p, "a")
	f.volumeDir(p, "b")
	dp := newBlocking()
	f.startAgent(dataPath(dp))
	f.pvb("first", p, f.node, "a")
	<-dp.started
	f.pvb("second", p, f.node, "b")
	time.Sleep(time.Second)
	if got := f.waitPVB("second", "read", func(*v1.PodVolumeBackup) bool { return true }); !isNew(got.Status.Phase) {
		t.Fatalf("the second PodVolumeBackup went %s while the first transfer ran", got.Status.Phase)
	}
	close(dp.release)
	f.waitPVB("first", "Completed", phaseIs(v1.PodVolumePhaseCompleted))
	<-dp.started
	f.waitPVB("second", "Completed", phaseIs(v1.PodVolumePhaseCompleted))
}

package nodeagent

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

func TestRestoreWaitsForTheWaitContainerThenReleasesIt(t *testing.T) {
	f := newFixture(t)
	dp := &copyDataPath{dir: t.TempDir()}
	snap := filepath.Join(dp.dir, "snap-9")
	if err := os.MkdirAll(filepath.Join(snap, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(snap, "sub", "f.txt"), []byte("restored"), 0o644); err != nil {
		t.Fatal(err)
	}
	init := []corev1.Container{{Name: "setup", Image: "busybox"}, {Name: WaitInitContainer, Image: "lifeboat"}}
	p := f.pod("web", f.node, init, emptyDir("data"))
	dir := f.volumeDir(p, "data")
	// A marker of an earlier restore of the same data is not carried over.
	if err := os.MkdirAll(filepath.Join(dir, DoneDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, DoneDir, "old-restore"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f.startAgent(dataPath(dp))
	restoreUID := "7c1d3a52-restore-uid"
	pvr := &v1.PodVolumeRestore{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: f.ns, Name: "web-data",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "velero.io/v1", Kind: "Restore", Name: "r1", UID: "7c1d3a52-restore-uid"}},
		},
		Spec: v1.PodVolumeRestoreSpec{
			Pod:    corev1.ObjectReference{Kind: "Pod", Namespace: f.ns, Name: "web", UID: p.UID},
			Volume: "data", BackupStorageLocation: "default", UploaderType: "kopia", SnapshotID: "snap-9", SourceNamespace: "src-ns",
		},
	}
	f.create(pvr)

	// The wait container is not running yet: nothing happens.
	time.Sleep(2 * time.Second)
	if got := f.waitPVR("web-data", "read", func(*v1.PodVolumeRestore) bool { return true }); !isNew(got.Status.Phase) {
		t.Fatalf("PodVolumeRestore went %s before the pod's restore-wait container ran", got.Status.Phase)
	}

	p.Status.Phase = corev1.PodPending
	p.Status.InitContainerStatuses = []corev1.ContainerStatus{
		{Name: "setup", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}},
		{Name: WaitInitContainer, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}},
	}
	if err := kube.Status().Update(ctx(t), p); err != nil {
		t.Fatal(err)
	}
	got := f.waitPVR("web-data", "final", func(p *v1.PodVolumeRestore) bool { return final(p.Status.Phase) })
	if got.Status.Phase != v1.PodVolumePhaseCompleted {
		t.Fatalf("phase %s (%s), want Completed", got.Status.Phase, got.Status.Message)
	}
	if got.Status.Node != f.node || got.Status.StartTimestamp == nil || got.Status.CompletionTimestamp == nil || got.Status.Progress.BytesDone != 8 {
		t.Errorf("status %+v: want node %s, times and 8 bytes done", got.Status, f.node)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "sub", "f.txt")); err != nil || string(data) != "restored" {
		t.Errorf("restored file: %q, %v", data, err)
	}
	entries, err := os.ReadDir(filepath.Join(dir, DoneDir))
	if err != nil || len(entries) != 1 || entries[0].Name() != restoreUID {
		t.Errorf("done markers %v (%v): want exactly %s", entries, err, restoreUID)
	}
	if req := dp.restores[0]; req.Repository.VolumeNamespace != "src-ns" || req.SnapshotID != "snap-9" || req.Path != dir {
		t.Errorf("restore request %+v: want the source namespace's repository, the snapshot and the volume's path", req)
	}
}

func TestRestoreCancelledWhileInProgress(t *testing.T) {
	f := newFixture(t)
	p := f.pod("web", f.node, []corev1.Container{{Name: WaitInitContainer, Image: "lifeboat"}}, emptyDir("data"))
	f.volumeDir(p, "data")
	p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: WaitInitContainer, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	if err := kube.Status().Update(ctx(t), p); err != nil {
		t.Fatal(err)
	}
	dp := newBlocking()
	f.startAgent(dataPath(dp))
	f.create(&v1.PodVolumeRestore{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "r", OwnerReferences: []metav1.OwnerReference{{APIVersion: "velero.io/v1", Kind: "Restore", Name: "r1", UID: "u"}}},
		Spec:       v1.PodVolumeRestoreSpec{Pod: corev1.ObjectReference{Namespace: f.ns, Name: "web"}, Volume: "data", BackupStorageLocation: "default", SnapshotID: "s", SourceNamespace: f.ns},
	})
	<-dp.started
	patchCancel(t, &v1.PodVolumeRestore{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "r"}})
	f.waitPVR("r", "Canceled", func(p *v1.PodVolumeRestore) bool { return p.Status.Phase == v1.PodVolumePhaseCanceled })
	if _, err := os.Stat(filepath.Join(f.hostPods, string(p.UID), "volumes", "kubernetes.io~empty-dir", "data", DoneDir)); !os.IsNotExist(err) {
		t.Errorf("a cancelled restore released the pod (done marker: %v)", err)
	}
}

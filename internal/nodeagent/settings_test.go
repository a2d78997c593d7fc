package nodeagent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// The uploader settings Velero's server writes into a PodVolumeBackup
// reach the data path; one the node agent cannot read fails the transfer
// before it starts, naming the setting and the fix.
func TestBackupUploaderSettings(t *testing.T) {
	f := newFixture(t)
	p := f.pod("web", f.node, nil, emptyDir("data"), emptyDir("logs"))
	f.volumeDir(p, "data")
	f.volumeDir(p, "logs")
	dp := &copyDataPath{dir: t.TempDir()}
	f.startAgent(dataPath(dp))
	for name, settings := range map[string]map[string]string{
		"good": {"ParallelFilesUpload": "6"},
		"bad":  {"ParallelFilesUpload": "six"},
	} {
		vol := map[string]string{"good": "data", "bad": "logs"}[name]
		f.create(&v1.PodVolumeBackup{
			ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
			Spec: v1.PodVolumeBackupSpec{
				Node: f.node, Volume: vol, BackupStorageLocation: "default", UploaderType: "kopia",
				Pod:              corev1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID},
				UploaderSettings: settings,
			},
		})
	}
	good := f.waitPVB("good", "final", func(p *v1.PodVolumeBackup) bool { return final(p.Status.Phase) })
	bad := f.waitPVB("bad", "final", func(p *v1.PodVolumeBackup) bool { return final(p.Status.Phase) })
	if good.Status.Phase != v1.PodVolumePhaseCompleted {
		t.Fatalf("good: %s (%s)", good.Status.Phase, good.Status.Message)
	}
	if len(dp.backups) != 1 || dp.backups[0].ParallelFilesUpload != 6 {
		t.Errorf("data path requests %+v: want one with ParallelFilesUpload 6", dp.backups)
	}
	if bad.Status.Phase != v1.PodVolumePhaseFailed || !strings.Contains(bad.Status.Message, `spec.uploaderSettings["ParallelFilesUpload"]: "six" is not a whole number`) {
		t.Errorf("bad: %s (%s), want Failed naming the setting", bad.Status.Phase, bad.Status.Message)
	}
}

func TestRestoreUploaderSettings(t *testing.T) {
	f := newFixture(t)
	p := f.pod("web", f.node, []corev1.Container{{Name: WaitInitContainer, Image: "lifeboat"}}, emptyDir("data"), emptyDir("logs"))
	f.volumeDir(p, "data")
	f.volumeDir(p, "logs")
	p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: WaitInitContainer, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	if err := kube.Status().Update(ctx(t), p); err != nil {
		t.Fatal(err)
	}
	dp := &copyDataPath{dir: t.TempDir()}
	// copyDataPath restores from its directory: give it the snapshot.
	if err := os.MkdirAll(filepath.Join(dp.dir, "snap-x"), 0o755); err != nil {
		t.Fatal(err)
	}
	f.startAgent(dataPath(dp))
	for name, settings := range map[string]map[string]string{
		"good": {"WriteSparseFiles": "true", "ParallelFilesDownload": "3"},
		"bad":  {"WriteSparseFiles": "sometimes"},
	} {
		vol := map[string]string{"good": "data", "bad": "logs"}[name]
		f.create(&v1.PodVolumeRestore{
			ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name, OwnerReferences: []metav1.OwnerReference{{APIVersion: "velero.io/v1", Kind: "Restore", Name: "r1", UID: "u"}}},
			Spec: v1.PodVolumeRestoreSpec{
				Pod:    corev1.ObjectReference{Kind: "Pod", Namespace: f.ns, Name: "web", UID: p.UID},
				Volume: vol, BackupStorageLocation: "default", UploaderType: "kopia", SnapshotID: "snap-x", SourceNamespace: f.ns,
				UploaderSettings: settings,
			},
		})
	}
	good := f.waitPVR("good", "final", func(p *v1.PodVolumeRestore) bool { return final(p.Status.Phase) })
	bad := f.waitPVR("bad", "final", func(p *v1.PodVolumeRestore) bool { return final(p.Status.Phase) })
	if good.Status.Phase != v1.PodVolumePhaseCompleted {
		t.Fatalf("good: %s (%s)", good.Status.Phase, good.Status.Message)
	}
	if len(dp.restores) != 1 || !dp.restores[0].WriteSparseFiles || dp.restores[0].ParallelFilesDownload != 3 {
		t.Errorf("data path requests %+v: want one with WriteSparseFiles and ParallelFilesDownload 3", dp.restores)
	}
	if bad.Status.Phase != v1.PodVolumePhaseFailed || !strings.Contains(bad.Status.Message, `spec.uploaderSettings["WriteSparseFiles"]: "sometimes" is not true or false`) {
		t.Errorf("bad: %s (%s), want Failed naming the setting", bad.Status.Phase, bad.Status.Message)
	}
}

package incluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/install"
	"github.com/lifeboat-io/lifeboat/internal/integrity"
	"github.com/lifeboat-io/lifeboat/internal/podvolume/repository"
	"github.com/lifeboat-io/lifeboat/internal/restore"
	"github.com/lifeboat-io/lifeboat/internal/storage"
	"github.com/lifeboat-io/lifeboat/internal/storage/filesystem"
)

// TestARestoreBringsPodVolumeDataBackThroughTheNodeAgent: a pod's emptyDir
// is stored by a hand-made PodVolumeBackup, listed in its backup's
// podvolumebackups file (what the backup will write); the namespace is
// deleted and restored: the restored pod's restore-wait container holds
// it back until the node agent has restored the volume, and its own
// container then reads the same files. The restore asks for sparse files
// (spec.uploaderConfig.writeSparseFiles, Velero's): a 64 MiB file with
// 4 KiB of data comes back as few blocks as it had.
func TestARestoreBringsPodVolumeDataBackThroughTheNodeAgent(t *testing.T) {
	store := installWithNodeAgent(t)

	const ns = "fs-restore"
	testNamespace(t, ns)
	pod := shellPod(ns)
	// Written once: the restored pod must find the restored files, not
	// write new ones.
	pod.Spec.Containers[0].Command = []string{"/bin/busybox", "sh", "-c",
		"[ -e /data/greeting ] || { echo hello > /data/greeting; mkdir /data/sub; head -c 300000 /dev/urandom > /data/sub/blob; " +
			"dd if=/dev/urandom of=/data/sparse bs=4096 count=1 seek=16384 2>/dev/null; sync; }; exec /bin/busybox sleep 3600"}
	create(t, pod)
	waitPodRunning(t, ns, "web")
	get(t, client.ObjectKeyFromObject(pod), pod)
	sums := func() string {
		var out string
		poll(t, "the pod's files", func(context.Context) (bool, error) {
			out = execIn(t, ns, "web", "/bin/busybox", "md5sum", "/data/greeting", "/data/sub/blob", "/data/sparse")
			return strings.Count(out, "/data/") == 3, nil
		})
		return out
	}
	before := sums()

	ensurer := &repository.Ensurer{Client: admin, Namespace: serverNamespace, Timeout: 2 * time.Minute}
	if _, err := ensurer.Ensure(ctx(t), ns, install.LocationName); err != nil {
		t.Fatalf("the server setting up the repository of %s: %v", ns, err)
	}
	pvb := &v1.PodVolumeBackup{
		ObjectMeta: metav1.ObjectMeta{Namespace: serverNamespace, Name: "fs-restore-web-data"},
		Spec: v1.PodVolumeBackupSpec{
			Node:                  pod.Spec.NodeName,
			Pod:                   corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod.Name, UID: pod.UID},
			Volume:                "data",
			BackupStorageLocation: install.LocationName,
			UploaderType:          "kopia",
			Tags:                  map[string]string{"backup": "fs-restore-1", "ns": ns, "pod": pod.Name, "volume": "data"},
		},
	}
	create(t, pvb)
	waitFor(t, pvb, "the node agent to finish the PodVolumeBackup", func(p *v1.PodVolumeBackup) bool {
		return p.Status.Phase == v1.PodVolumePhaseCompleted || p.Status.Phase == v1.PodVolumePhaseFailed
	})
	if pvb.Status.Phase != v1.PodVolumePhaseCompleted || pvb.Status.SnapshotID == "" {
		t.Fatalf("PodVolumeBackup %s %q: want Completed with a snapshot", pvb.Status.Phase, pvb.Status.Message)
	}

	b := &v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: serverNamespace, Name: "fs-restore-1"},
		Spec: v1.BackupSpec{IncludedNamespaces: []string{ns}}}
	create(t, b)
	waitFor(t, b, "the backup to complete", func(b *v1.Backup) bool { return b.Status.Phase == v1.BackupPhaseCompleted })
	writePodVolumeBackups(t, store, b, []v1.PodVolumeBackup{*pvb})

	if err := admin.Delete(ctx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the namespace to be gone", func(c context.Context) (bool, error) {
		err := admin.Get(c, client.ObjectKey{Name: ns}, &corev1.Namespace{})
		return apierrors.IsNotFound(err), nil
	})

	sparse := true
	rs := &v1.Restore{ObjectMeta: metav1.ObjectMeta{Namespace: serverNamespace, Name: "fs-restore-1"},
		Spec: v1.RestoreSpec{BackupName: b.Name, UploaderConfig: &v1.UploaderConfigForRestore{WriteSparseFiles: &sparse, ParallelFilesDownload: 2}}}
	create(t, rs)
	waitFor(t, rs, "the restore to end", func(r *v1.Restore) bool {
		return r.Status.Phase == v1.RestorePhaseCompleted || r.Status.Phase == v1.RestorePhasePartiallyFailed || r.Status.Phase == v1.RestorePhaseFailed
	})
	if rs.Status.Phase != v1.RestorePhaseCompleted {
		t.Fatalf("restore %s (%q, %d errors):\n%s", rs.Status.Phase, rs.Status.FailureReason, rs.Status.Errors,
			lifeboat(t, "restore", "describe", rs.Name, "--details"))
	}
	var pvrs v1.PodVolumeRestoreList
	if err := admin.List(ctx(t), &pvrs, client.InNamespace(serverNamespace), client.MatchingLabels{restore.RestoreUIDLabel: string(rs.UID)}); err != nil {
		t.Fatal(err)
	}
	if len(pvrs.Items) != 1 || pvrs.Items[0].Status.Phase != v1.PodVolumePhaseCompleted || pvrs.Items[0].Spec.SnapshotID != pvb.Status.SnapshotID {
		t.Fatalf("PodVolumeRestores: %+v, want one Completed from snapshot %s", pvrs.Items, pvb.Status.SnapshotID)
	}
	if s := pvrs.Items[0].Spec.UploaderSettings; s["WriteSparseFiles"] != "true" || s["ParallelFilesDownload"] != "2" {
		t.Errorf("PodVolumeRestore uploaderSettings %v, want Velero's WriteSparseFiles true and ParallelFilesDownload 2", s)
	}
	waitPodRunning(t, ns, "web")
	var restored corev1.Pod
	get(t, client.ObjectKey{Namespace: ns, Name: "web"}, &restored)
	if len(restored.Status.InitContainerStatuses) == 0 || restored.Status.InitContainerStatuses[0].Name != restore.RestoreWaitContainer ||
		restored.Status.InitContainerStatuses[0].State.Terminated == nil || restored.Status.InitContainerStatuses[0].State.Terminated.ExitCode != 0 {
		t.Errorf("restore-wait: %+v, want it first and exited 0", restored.Status.InitContainerStatuses)
	}
	if after := sums(); after != before {
		t.Errorf("the restored pod's files:\n%s\nwant what the original pod wrote:\n%s", after, before)
	}
	// 512-byte blocks allocated: the 4 KiB of data and little else, not
	// the 64 MiB of zeros before it.
	out := strings.TrimSpace(execIn(t, ns, "web", "/bin/busybox", "stat", "-c", "%b", "/data/sparse"))
	if blocks, err := strconv.Atoi(out); err != nil || blocks > 1024 {
		t.Errorf("restored /data/sparse has %q blocks allocated: writeSparseFiles did not keep its hole", out)
	}
	// The node agent wrote the done marker as root; the wait container,
	// user 1000, cannot remove it: it stays, as with Velero.
	if ls := execIn(t, ns, "web", "/bin/busybox", "ls", "/data/.velero"); strings.TrimSpace(ls) != string(rs.UID) {
		t.Errorf("the done markers in the volume: %q, want the restore's UID %s", ls, rs.UID)
	}
}

// writePodVolumeBackups writes backup b's PodVolumeBackups file into
// the filesystem location at storeRoot, as the backup will, and records it
// in the backup's digests as a backup does (else the restore rightly
// refuses the backup as changed since it was written).
func writePodVolumeBackups(t *testing.T, storeRoot string, b *v1.Backup, pvbs []v1.PodVolumeBackup) {
	t.Helper()
	fs, err := filesystem.New(map[string]string{filesystem.PathKey: storeRoot})
	if err != nil {
		t.Fatal(err)
	}
	store := storage.NewBackupStore(fs, "backups", "")
	written := storage.NewDigestRecorder()
	if err := store.Recording(written).PutPodVolumeBackups(ctx(t), b.Name, pvbs); err != nil {
		t.Fatal(err)
	}
	sum, err := integrity.Amend(ctx(t), store, b.Name, written.Under(store.BackupDir(b.Name)))
	if err != nil || sum == "" {
		t.Fatalf("amending the backup's digests file: %q, %v", sum, err)
	}
	// Written as root here; the server, which owns the directory, reads them.
	dir := filepath.Join(storeRoot, "backups", store.BackupDir(b.Name))
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	owner := fi.Sys().(*syscall.Stat_t)
	for _, f := range []string{storage.PodVolumeBackupsFile(b.Name), integrity.ManifestFile(b.Name)} {
		if err := os.Chown(filepath.Join(dir, f), int(owner.Uid), int(owner.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, v1.DigestsAnnotation, sum)
	if err := admin.Patch(ctx(t), b, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
}

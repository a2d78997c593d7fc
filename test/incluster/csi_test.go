package incluster

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/testutil/csistack"
)

// TestCSISnapshotCarriesPodDataThroughBackupAndRestore: a pod on the real
// node writes into a CSI volume; the installed server backs the namespace
// up with a CSI snapshot, under a pre hook that writes a marker the
// snapshot must hold; the namespace is deleted (claim, volume and pod
// gone); the restore makes a new volume from the snapshot, and the
// restored pod reads the data back.
func TestCSISnapshotCarriesPodDataThroughBackupAndRestore(t *testing.T) {
	if node.CSI == nil {
		t.Fatal("the node runs no CSI stack")
	}
	store := storeDir(t)
	lifeboat(t, "install", "--image", images["lifeboat"], "--image-pull-policy", "Never",
		"--use-filesystem", store, "--wait", "--timeout", "4m")
	t.Cleanup(func() { uninstallAndWait(t) })

	const ns = "csi-shop"
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	create(t, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To(csistack.StorageClass),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}},
		},
	})
	pod := hookPod(ns, "web", nil, map[string]string{
		"pre.hook.backup.velero.io/command":  `["/bin/busybox","sh","-c","echo frozen > /data/marker"]`,
		"post.hook.backup.velero.io/command": `["/bin/busybox","sh","-c","echo thawed >> /data/marker"]`,
	})
	pod.Spec.Containers[0].Command = []string{"/bin/busybox", "sh", "-c", "echo hello from the pod > /data/greeting; exec /bin/busybox sleep 3600"}
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
	create(t, pod)
	waitPodRunning(t, ns, "web")
	if got := execIn(t, ns, "web", "/bin/busybox", "cat", "/data/greeting"); got != "hello from the pod\n" {
		t.Fatalf("the pod's volume holds %q", got)
	}

	b := &v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: serverNamespace, Name: "csi-shop-1"},
		Spec: v1.BackupSpec{IncludedNamespaces: []string{ns}}}
	create(t, b)
	waitFor(t, b, "the backup to end", func(b *v1.Backup) bool {
		return b.Status.Phase == v1.BackupPhaseCompleted || b.Status.Phase == v1.BackupPhasePartiallyFailed || b.Status.Phase == v1.BackupPhaseFailed
	})
	if b.Status.Phase != v1.BackupPhaseCompleted || b.Status.CSIVolumeSnapshotsCompleted != 1 {
		t.Fatalf("backup ended %s, CSI snapshots %d/%d\n%s", b.Status.Phase, b.Status.CSIVolumeSnapshotsCompleted, b.Status.CSIVolumeSnapshotsAttempted, serverLog(t))
	}
	// The snapshot was cut between the hooks: it holds the pre hook's
	// marker, not the post hook's line.
	snaps, err := node.CSI.Snapshots()
	if err != nil || len(snaps) != 1 {
		t.Fatalf("driver snapshots %v, %v; want one", snaps, err)
	}
	files, err := node.CSI.SnapshotFiles(snaps[0])
	if err != nil || string(files["greeting"]) != "hello from the pod\n" || string(files["marker"]) != "frozen\n" {
		t.Errorf("the snapshot holds %q (%v); want the greeting and only the pre hook's marker", files, err)
	}
	if got := execIn(t, ns, "web", "/bin/busybox", "cat", "/data/marker"); got != "frozen\nthawed\n" {
		t.Errorf("the pod's marker after the backup: %q", got)
	}
	poll(t, "the backup's VolumeSnapshot and content gone from the cluster", func(c context.Context) (bool, error) {
		var vss snapshotv1.VolumeSnapshotList
		var vscs snapshotv1.VolumeSnapshotContentList
		if err := admin.List(c, &vss, client.InNamespace(ns)); err != nil {
			return false, err
		}
		if err := admin.List(c, &vscs); err != nil {
			return false, err
		}
		return len(vss.Items) == 0 && !slices.ContainsFunc(vscs.Items, func(x snapshotv1.VolumeSnapshotContent) bool {
			return x.Spec.VolumeSnapshotRef.Namespace == ns
		}), nil
	})

	// Lose the namespace: pod, claim and (reclaim policy Delete) volume.
	var pvc corev1.PersistentVolumeClaim
	get(t, client.ObjectKey{Namespace: ns, Name: "data"}, &pvc)
	original := pvc.Spec.VolumeName
	if err := admin.Delete(ctx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the namespace and its volume gone", func(c context.Context) (bool, error) {
		nsErr := admin.Get(c, client.ObjectKey{Name: ns}, &corev1.Namespace{})
		pvErr := admin.Get(c, client.ObjectKey{Name: original}, &corev1.PersistentVolume{})
		return apierrors.IsNotFound(nsErr) && apierrors.IsNotFound(pvErr), nil
	})

	rs := &v1.Restore{ObjectMeta: metav1.ObjectMeta{Namespace: serverNamespace, Name: "csi-shop-1-back"}, Spec: v1.RestoreSpec{BackupName: b.Name}}
	create(t, rs)
	waitFor(t, rs, "the restore to end", func(r *v1.Restore) bool {
		return r.Status.Phase == v1.RestorePhaseCompleted || r.Status.Phase == v1.RestorePhasePartiallyFailed || r.Status.Phase == v1.RestorePhaseFailed
	})
	if rs.Status.Phase != v1.RestorePhaseCompleted {
		t.Fatalf("restore ended %s\n%s", rs.Status.Phase, serverLog(t))
	}
	waitPodRunning(t, ns, "web")
	get(t, client.ObjectKey{Namespace: ns, Name: "data"}, &pvc)
	if pvc.Spec.VolumeName == original || pvc.Spec.DataSource == nil || pvc.Spec.DataSource.Kind != "VolumeSnapshot" {
		t.Errorf("restored claim: volume %s (original %s), data source %+v", pvc.Spec.VolumeName, original, pvc.Spec.DataSource)
	}
	// The restored pod's command writes the greeting again; the marker
	// comes from the snapshot alone.
	if got := execIn(t, ns, "web", "/bin/busybox", "cat", "/data/marker"); got != "frozen\n" {
		t.Errorf("the restored pod reads the marker %q, want the snapshot's \"frozen\\n\"", got)
	}
	if logs := serverLog(t); strings.Contains(logs, "forbidden") {
		t.Errorf("the server was refused something it needs:\n%s", logs)
	}
	// Leave the node as found: the restored namespace goes.
	_ = admin.Delete(ctx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
}

func poll(t *testing.T, what string, check func(context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(ctx(t), 250*time.Millisecond, 3*time.Minute, true, check); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

package csi

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/storage"
	"github.com/lifeboat-io/lifeboat/internal/storage/provider"
	"github.com/lifeboat-io/lifeboat/internal/testutil/csistack"
	"github.com/lifeboat-io/lifeboat/internal/testutil/testenv"
	"github.com/lifeboat-io/lifeboat/internal/testutil/velerocsi"
)

var (
	vsGVR    = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshots"}
	vscGVR   = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshotcontents"}
	classGVR = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshotclasses"}
)

// TestRestoreAVeleroMadeCSIBackup: a backup with a CSI snapshot laid out
// as Velero v1.18.3 writes it (internal/testutil/velerocsi: the snapshot
// taken on the stack as Velero's claim action takes it, the objects
// removed from the cluster as Velero's finalize step does) is restored by
// Lifeboat into another namespace: a new volume made from the storage
// snapshot, with the data.
func TestRestoreAVeleroMadeCSIBackup(t *testing.T) {
	ctx := testenv.Ctx(t)
	d := dynamic.NewForConfigOrDie(env.Config)
	c := env.CSI.Client
	ns := env.NewNamespace(t, "velero-made")
	handle := boundClaim(t, ns, "data")
	if err := env.CSI.WriteVolumeFiles(handle, map[string][]byte{"orders.db": []byte("written before Velero's backup")}); err != nil {
		t.Fatal(err)
	}
	backupName := env.Name("velero-csi")
	// The snapshot, as Velero's claim action makes it.
	vs := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
		"metadata": map[string]any{"namespace": ns, "generateName": "velero-data-",
			"labels": map[string]any{"app": "shop", v1.BackupNameLabel: v1.LabelValue(backupName)}},
		"spec": map[string]any{"source": map[string]any{"persistentVolumeClaimName": "data"}, "volumeSnapshotClassName": csistack.SnapshotClass},
	}}
	created, err := d.Resource(vsGVR).Namespace(ns).Create(ctx, vs, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ready *unstructured.Unstructured
	poll(t, "Velero's VolumeSnapshot ready", 2*time.Minute, func(ctx context.Context) (bool, error) {
		got, err := d.Resource(vsGVR).Namespace(ns).Get(ctx, created.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ready = got
		ok, _, _ := unstructured.NestedBool(got.Object, "status", "readyToUse")
		return ok, nil
	})
	contentName, _, _ := unstructured.NestedString(ready.Object, "status", "boundVolumeSnapshotContentName")
	if err := velerocsi.LabelContent(ctx, d, contentName, backupName); err != nil {
		t.Fatal(err)
	}
	content, err := d.Resource(vscGVR).Get(ctx, contentName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claim, err := d.Resource(schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}).Namespace(ns).Get(ctx, "data", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pvName, _, _ := unstructured.NestedString(claim.Object, "spec", "volumeName")
	pv, err := d.Resource(schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumes"}).Get(ctx, pvName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	class, err := d.Resource(classGVR).Get(ctx, csistack.SnapshotClass, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// Velero's bucket, then Velero's end of the backup.
	bsl, bucketDir := env.FilesystemLocation(t, env.Name("velero-bucket"))
	fs, err := provider.Open(ctx, "lifeboat.io/filesystem", map[string]string{"path": filepath.Dir(bucketDir)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	store := storage.NewBackupStore(fs, filepath.Base(bucketDir), "lifeboat")
	b := &v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: backupName, UID: types.UID(env.Name("velero-uid")),
		Labels: map[string]string{v1.StorageLocationLabel: bsl.Name}},
		Spec: v1.BackupSpec{IncludedNamespaces: []string{ns}, StorageLocation: bsl.Name, TTL: metav1.Duration{Duration: 720 * time.Hour}}}
	if _, err := velerocsi.Write(ctx, store, velerocsi.Fixture{Backup: b, Class: class,
		Volumes: []velerocsi.Volume{{Claim: claim, Volume: pv, Snapshot: ready, Content: content}}}); err != nil {
		t.Fatal(err)
	}
	if err := velerocsi.Finalize(ctx, d, ready); err != nil {
		t.Fatal(err)
	}
	// The Backup object as Velero's server leaves it (the sync would bring
	// the same in, a minute later).
	inCluster := b.DeepCopy()
	inCluster.UID = ""
	inCluster.Status = v1.BackupStatus{Phase: v1.BackupPhaseCompleted}
	env.Create(t, inCluster)

	target := env.Name("velero-made-restored")
	rs := &v1.Restore{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: env.Name("rs")},
		Spec: v1.RestoreSpec{BackupName: backupName, NamespaceMapping: map[string]string{ns: target}}}
	env.Create(t, rs)
	poll(t, "restore finished", 3*time.Minute, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(rs), rs); err != nil {
			return false, err
		}
		return rs.Status.Phase != "" && rs.Status.Phase != v1.RestorePhaseNew && rs.Status.Phase != v1.RestorePhaseInProgress, nil
	})
	if rs.Status.Phase != v1.RestorePhaseCompleted {
		t.Fatalf("restore status %+v", rs.Status)
	}
	var restoredHandle string
	poll(t, "the restored claim bound to a volume made from Velero's snapshot", 2*time.Minute, func(ctx context.Context) (bool, error) {
		pvc := &corev1.PersistentVolumeClaim{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: target, Name: "data"}, pvc); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		if pvc.Status.Phase != corev1.ClaimBound {
			return false, nil
		}
		pv := &corev1.PersistentVolume{}
		if err := c.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil {
			return false, err
		}
		restoredHandle = pv.Spec.CSI.VolumeHandle
		return ptr.Deref(pvc.Spec.DataSource, corev1.TypedLocalObjectReference{}).Kind == "VolumeSnapshot", nil
	})
	if restoredHandle == handle {
		t.Fatalf("the restored claim uses the original volume %s", handle)
	}
	files, err := env.CSI.VolumeFiles(restoredHandle)
	if err != nil || string(files["orders.db"]) != "written before Velero's backup" {
		t.Errorf("restored volume %s holds %v (%v)", restoredHandle, files, err)
	}
}

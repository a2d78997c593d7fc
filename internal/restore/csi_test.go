package restore

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/archive/archivetest"
	"github.com/lifeboat-io/lifeboat/internal/csisnapshot"
	"github.com/lifeboat-io/lifeboat/internal/volumefiles"
)

var snapshotCRDs sync.Once

// installSnapshotCRDs installs the external-snapshotter's v1 CRDs (from
// its client module) on the package's API server.
func installSnapshotCRDs(t *testing.T) {
	t.Helper()
	var err error
	snapshotCRDs.Do(func() {
		var out []byte
		out, err = exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/kubernetes-csi/external-snapshotter/client/v8").Output()
		if err == nil {
			_, err = envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{
				Paths: []string{filepath.Join(strings.TrimSpace(string(out)), "config", "crd")}, ErrorIfPathMissing: true})
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}

var (
	vsGVR    = schema.GroupVersionResource{Group: csisnapshot.Group, Version: "v1", Resource: "volumesnapshots"}
	vscGVR   = schema.GroupVersionResource{Group: csisnapshot.Group, Version: "v1", Resource: "volumesnapshotcontents"}
	classGVR = schema.GroupVersionResource{Group: csisnapshot.Group, Version: "v1", Resource: "volumesnapshotclasses"}
)

// TestRestoreClaimFromCSISnapshot restores a CSI backup laid out as
// Velero v1.18 writes it (claim naming its VolumeSnapshot, ready
// VolumeSnapshot with Velero's annotations, its content and class, the
// volume information) into a mapped namespace: the content is re-created
// pre-bound to the stored handle with Retain, the snapshot points at it,
// both named from the restore's UID, the claim's data source is the
// restored snapshot and it has no volumeName, and the PV is not restored.
func TestRestoreClaimFromCSISnapshot(t *testing.T) {
	installSnapshotCRDs(t)
	w := newWorld(t)
	from, to := uniq("csi-from"), uniq("csi-to")
	driver := "hostpath.csi.lifeboat.io"
	pvName, vsName, vscName, class := uniq("pvc"), "velero-data-x7k2q", uniq("snapcontent"), uniq("class")
	claim := veleroItem(t, map[string]any{"apiVersion": "v1", "kind": "PersistentVolumeClaim",
		"metadata": map[string]any{"name": "data", "namespace": from, "uid": "c1",
			"labels":      map[string]any{csisnapshot.VolumeSnapshotNameLabel: vsName, "velero.io/backup-name": "b"},
			"annotations": map[string]any{csisnapshot.VolumeSnapshotNameLabel: vsName, csisnapshot.MustIncludeAdditionalItems: "true", "pv.kubernetes.io/bind-completed": "yes"}},
		"spec": map[string]any{"accessModes": []any{"ReadWriteOnce"}, "storageClassName": "lifeboat-csi", "volumeName": pvName,
			"resources": map[string]any{"requests": map[string]any{"storage": "1Gi"}}},
		"status": map[string]any{"phase": "Bound"},
	})
	pv := veleroItem(t, map[string]any{"apiVersion": "v1", "kind": "PersistentVolume",
		"metadata": map[string]any{"name": pvName, "uid": "p1"},
		"spec": map[string]any{"capacity": map[string]any{"storage": "1Gi"}, "accessModes": []any{"ReadWriteOnce"},
			"csi": map[string]any{"driver": driver, "volumeHandle": "vol-1"}, "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "lifeboat-csi",
			"claimRef": map[string]any{"kind": "PersistentVolumeClaim", "namespace": from, "name": "data", "uid": "c1"}},
	})
	vs := veleroItem(t, map[string]any{"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
		"metadata": map[string]any{"name": vsName, "namespace": from, "uid": "v1",
			"labels": map[string]any{"velero.io/backup-name": "b"},
			"annotations": map[string]any{csisnapshot.HandleAnnotation: "snap-123", csisnapshot.DriverAnnotation: driver,
				csisnapshot.ContentDeletionPolicyAnnot: "Delete", csisnapshot.RestoreSizeAnnotation: "1Gi"}},
		"spec":   map[string]any{"source": map[string]any{"persistentVolumeClaimName": "data"}, "volumeSnapshotClassName": class},
		"status": map[string]any{"boundVolumeSnapshotContentName": vscName, "readyToUse": true, "restoreSize": "1Gi"},
	})
	vsc := veleroItem(t, map[string]any{"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotContent",
		"metadata": map[string]any{"name": vscName, "uid": "x1", "labels": map[string]any{"velero.io/backup-name": "b"}},
		"spec": map[string]any{"deletionPolicy": "Delete", "driver": driver, "volumeSnapshotClassName": class,
			"source":            map[string]any{"volumeHandle": "vol-1"},
			"volumeSnapshotRef": map[string]any{"kind": "VolumeSnapshot", "apiVersion": "snapshot.storage.k8s.io/v1", "namespace": from, "name": vsName, "uid": "v1"}},
		"status": map[string]any{"snapshotHandle": "snap-123", "readyToUse": true, "restoreSize": 1 << 30},
	})
	cls := veleroItem(t, map[string]any{"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotClass",
		"metadata": map[string]any{"name": class, "labels": map[string]any{csisnapshot.ClassSelectorLabel: "true"}},
		"driver":   driver, "deletionPolicy": "Delete"})
	var buf bytes.Buffer
	if err := archivetest.Tarball(&buf, []archivetest.Entry{
		{Name: "metadata/version", Data: []byte("1.1.0\n")},
		{Name: "resources/persistentvolumeclaims/namespaces/" + from + "/data.json", Data: claim},
		{Name: "resources/persistentvolumes/cluster/" + pvName + ".json", Data: pv},
		{Name: "resources/volumesnapshots.snapshot.storage.k8s.io/namespaces/" + from + "/" + vsName + ".json", Data: vs},
		{Name: "resources/volumesnapshotcontents.snapshot.storage.k8s.io/cluster/" + vscName + ".json", Data: vsc},
		{Name: "resources/volumesnapshotclasses.snapshot.storage.k8s.io/cluster/" + class + ".json", Data: cls},
	}); err != nil {
		t.Fatal(err)
	}
	b := w.putBackup(uniq("csi"), buf.Bytes())
	if err := w.store.PutVolumeInfo(ctx(t), b.Name, []volumefiles.BackupVolumeInfo{{PVCName: "data", PVCNamespace: from, PVName: pvName,
		BackupMethod: volumefiles.CSISnapshot, PreserveLocalSnapshot: true, Result: volumefiles.ResultSucceeded,
		CSISnapshotInfo: &volumefiles.CSISnapshotInfo{SnapshotHandle: "snap-123", Driver: driver, VSCName: vscName, Size: 1 << 30}}}); err != nil {
		t.Fatal(err)
	}

	rs := &v1.Restore{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: uniq("rs"), UID: "6f1c0d2e-aaaa-4bbb-8ccc-1234567890ab"},
		Spec: v1.RestoreSpec{BackupName: b.Name, NamespaceMapping: map[string]string{from: to}}}
	out := NewEngine(newAccess(t), nil).Run(ctx(t), rs, b, w.store, nil)
	if out.Phase != v1.RestorePhaseCompleted {
		t.Fatalf("outcome %+v: %+v", out, w.results(rs))
	}
	newName := csisnapshot.RestoredName(string(rs.UID), vsName)
	gotVSC, err := w.dyn.Resource(vscGVR).Get(ctx(t), newName, metav1.GetOptions{})
	if err != nil {
		list := map[string][]string{}
		_ = w.store.GetGzipJSON(ctx(t), w.store.RestoreKey(rs.Name, rs.Name+"-resource-list.json.gz"), &list)
		t.Fatalf("restored content %s: %v; restored %v; results %+v", newName, err, list, w.results(rs))
	}
	for path, want := range map[string]string{
		"spec.deletionPolicy": "Retain", "spec.source.snapshotHandle": "snap-123", "spec.volumeSnapshotRef.namespace": to,
		"spec.volumeSnapshotRef.name": newName, "spec.volumeSnapshotRef.uid": "", "spec.source.volumeHandle": "", "spec.volumeSnapshotClassName": class,
	} {
		if got, _, _ := unstructured.NestedString(gotVSC.Object, strings.Split(path, ".")...); got != want {
			t.Errorf("restored content %s = %q, want %q", path, got, want)
		}
	}
	gotVS, err := w.dyn.Resource(vsGVR).Namespace(to).Get(ctx(t), newName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("restored snapshot %s/%s: %v", to, newName, err)
	}
	if src, _, _ := unstructured.NestedString(gotVS.Object, "spec", "source", "volumeSnapshotContentName"); src != newName {
		t.Errorf("restored snapshot source %q", src)
	}
	if c, found, _ := unstructured.NestedString(gotVS.Object, "spec", "volumeSnapshotClassName"); found {
		t.Errorf("restored snapshot keeps class %q", c)
	}
	if gotVS.GetAnnotations()[csisnapshot.ContentDeletionPolicyAnnot] != "Retain" {
		t.Errorf("restored snapshot annotations %v", gotVS.GetAnnotations())
	}
	pvc, err := w.cs.CoreV1().PersistentVolumeClaims(to).Get(ctx(t), "data", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pvc.Spec.VolumeName != "" || pvc.Spec.DataSource == nil || pvc.Spec.DataSource.Kind != "VolumeSnapshot" ||
		pvc.Spec.DataSource.Name != newName || *pvc.Spec.DataSource.APIGroup != csisnapshot.Group {
		t.Errorf("restored claim spec %+v (data source %+v)", pvc.Spec, pvc.Spec.DataSource)
	}
	if _, err := w.cs.CoreV1().PersistentVolumes().Get(ctx(t), pvName, metav1.GetOptions{}); err == nil {
		t.Errorf("the CSI-snapshotted volume was restored; it must be provisioned anew from the snapshot")
	}
	var infos []volumefiles.RestoreVolumeInfo
	if err := w.store.GetGzipJSON(ctx(t), w.store.RestoreKey(rs.Name, rs.Name+"-volumeinfo.json.gz"), &infos); err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].RestoreMethod != volumefiles.CSISnapshot || infos[0].CSISnapshotInfo == nil || infos[0].CSISnapshotInfo.SnapshotHandle != "snap-123" ||
		infos[0].PVCNamespace != to {
		t.Errorf("restore volume info %+v", infos)
	}
	// Cleanup: the restored content is Retain, so this leaves the
	// (imaginary) storage snapshot alone.
	_ = w.dyn.Resource(vsGVR).Namespace(to).Delete(ctx(t), newName, metav1.DeleteOptions{})
	_ = w.dyn.Resource(vscGVR).Delete(ctx(t), newName, metav1.DeleteOptions{})
	_ = w.dyn.Resource(classGVR).Delete(ctx(t), class, metav1.DeleteOptions{})
}

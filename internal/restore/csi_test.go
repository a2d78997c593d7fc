package restore

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
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

// csiFixture is a CSI backup laid out as Velero v1.18 writes it: a claim
// naming its VolumeSnapshot, the ready VolumeSnapshot with Velero's
// annotations, its content and class, the claim's PV and the volume
// information.
type csiFixture struct {
	b                                     *v1.Backup
	from, driver, pvName, vsName, vscName string
	class                                 string
}

// csiBackup stores the fixture for a claim of namespace from that asks for
// request and whose snapshot's restore size is size bytes; the claim and
// the snapshot are labelled app=shop, as Lifeboat's snapshots carry their
// claim's labels.
func csiBackup(t *testing.T, w *world, from, request string, size int64) *csiFixture {
	t.Helper()
	f := &csiFixture{from: from, driver: "hostpath.csi.lifeboat.io", pvName: uniq("pvc"), vsName: "velero-data-x7k2q", vscName: uniq("snapcontent"), class: uniq("class")}
	sizeQ := resource.NewQuantity(size, resource.BinarySI).String()
	claim := veleroItem(t, map[string]any{"apiVersion": "v1", "kind": "PersistentVolumeClaim",
		"metadata": map[string]any{"name": "data", "namespace": from, "uid": "c1",
			"labels":      map[string]any{csisnapshot.VolumeSnapshotNameLabel: f.vsName, "velero.io/backup-name": "b", "app": "shop"},
			"annotations": map[string]any{csisnapshot.VolumeSnapshotNameLabel: f.vsName, csisnapshot.MustIncludeAdditionalItems: "true", "pv.kubernetes.io/bind-completed": "yes"}},
		"spec": map[string]any{"accessModes": []any{"ReadWriteOnce"}, "storageClassName": "lifeboat-csi", "volumeName": f.pvName,
			"resources": map[string]any{"requests": map[string]any{"storage": request}}},
		"status": map[string]any{"phase": "Bound"},
	})
	pv := veleroItem(t, map[string]any{"apiVersion": "v1", "kind": "PersistentVolume",
		"metadata": map[string]any{"name": f.pvName, "uid": "p1"},
		"spec": map[string]any{"capacity": map[string]any{"storage": sizeQ}, "accessModes": []any{"ReadWriteOnce"},
			"csi": map[string]any{"driver": f.driver, "volumeHandle": "vol-1"}, "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "lifeboat-csi",
			"claimRef": map[string]any{"kind": "PersistentVolumeClaim", "namespace": from, "name": "data", "uid": "c1"}},
	})
	vs := veleroItem(t, map[string]any{"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
		"metadata": map[string]any{"name": f.vsName, "namespace": from, "uid": "v1",
			"labels": map[string]any{"velero.io/backup-name": "b", "app": "shop"},
			"annotations": map[string]any{csisnapshot.HandleAnnotation: "snap-123", csisnapshot.DriverAnnotation: f.driver,
				csisnapshot.ContentDeletionPolicyAnnot: "Delete", csisnapshot.RestoreSizeAnnotation: sizeQ}},
		"spec":   map[string]any{"source": map[string]any{"persistentVolumeClaimName": "data"}, "volumeSnapshotClassName": f.class},
		"status": map[string]any{"boundVolumeSnapshotContentName": f.vscName, "readyToUse": true, "restoreSize": sizeQ},
	})
	vsc := veleroItem(t, map[string]any{"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotContent",
		"metadata": map[string]any{"name": f.vscName, "uid": "x1", "labels": map[string]any{"velero.io/backup-name": "b"}},
		"spec": map[string]any{"deletionPolicy": "Delete", "driver": f.driver, "volumeSnapshotClassName": f.class,
			"source":            map[string]any{"volumeHandle": "vol-1"},
			"volumeSnapshotRef": map[string]any{"kind": "VolumeSnapshot", "apiVersion": "snapshot.storage.k8s.io/v1", "namespace": from, "name": f.vsName, "uid": "v1"}},
		"status": map[string]any{"snapshotHandle": "snap-123", "readyToUse": true, "restoreSize": size},
	})
	cls := veleroItem(t, map[string]any{"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotClass",
		"metadata": map[string]any{"name": f.class, "labels": map[string]any{csisnapshot.ClassSelectorLabel: "true"}},
		"driver":   f.driver, "deletionPolicy": "Delete"})
	cm := veleroItem(t, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "settings", "namespace": from}})
	var buf bytes.Buffer
	if err := archivetest.Tarball(&buf, []archivetest.Entry{
		{Name: "metadata/version", Data: []byte("1.1.0\n")},
		{Name: "resources/persistentvolumeclaims/namespaces/" + from + "/data.json", Data: claim},
		{Name: "resources/persistentvolumes/cluster/" + f.pvName + ".json", Data: pv},
		{Name: "resources/configmaps/namespaces/" + from + "/settings.json", Data: cm},
		{Name: "resources/volumesnapshots.snapshot.storage.k8s.io/namespaces/" + from + "/" + f.vsName + ".json", Data: vs},
		{Name: "resources/volumesnapshotcontents.snapshot.storage.k8s.io/cluster/" + f.vscName + ".json", Data: vsc},
		{Name: "resources/volumesnapshotclasses.snapshot.storage.k8s.io/cluster/" + f.class + ".json", Data: cls},
	}); err != nil {
		t.Fatal(err)
	}
	f.b = w.putBackup(uniq("csi"), buf.Bytes())
	if err := w.store.PutVolumeInfo(ctx(t), f.b.Name, []volumefiles.BackupVolumeInfo{{PVCName: "data", PVCNamespace: from, PVName: f.pvName,
		BackupMethod: volumefiles.CSISnapshot, PreserveLocalSnapshot: true, Result: volumefiles.ResultSucceeded,
		CSISnapshotInfo: &volumefiles.CSISnapshotInfo{SnapshotHandle: "snap-123", Driver: f.driver, VSCName: f.vscName, Size: size}}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.dyn.Resource(classGVR).Delete(context.Background(), f.class, metav1.DeleteOptions{}) })
	return f
}

var restoreUIDs atomic.Int64

// csiRestore runs a restore of the fixture with spec (into namespace to)
// under a UID of its own, so that restored snapshot names do not clash,
// and removes what it restored of the snapshot objects when the test ends
// (the contents are Retain: the imaginary storage snapshot stays alone).
func (f *csiFixture) restore(t *testing.T, w *world, to string, spec v1.RestoreSpec) (*v1.Restore, Outcome, string) {
	t.Helper()
	spec.BackupName = f.b.Name
	spec.NamespaceMapping = map[string]string{f.from: to}
	uid := fmt.Sprintf("6f1c0d2e-aaaa-4bbb-8ccc-%012d", restoreUIDs.Add(1))
	rs := &v1.Restore{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: uniq("rs"), UID: types.UID(uid)}, Spec: spec}
	if msgs := Validate(&rs.Spec); len(msgs) > 0 {
		t.Fatalf("invalid restore spec: %v", msgs)
	}
	out := NewEngine(newAccess(t), nil).Run(ctx(t), rs, f.b, w.store, nil)
	newName := csisnapshot.RestoredName(uid, f.vsName)
	t.Cleanup(func() {
		_ = w.dyn.Resource(vsGVR).Namespace(to).Delete(context.Background(), newName, metav1.DeleteOptions{})
		_ = w.dyn.Resource(vscGVR).Delete(context.Background(), newName, metav1.DeleteOptions{})
	})
	return rs, out, newName
}

// TestRestoreClaimFromCSISnapshot restores a CSI backup laid out as
// Velero v1.18 writes it into a mapped namespace: the content is
// re-created pre-bound to the stored handle with Retain, the snapshot
// points at it, both named from the restore's UID, the claim's data
// source is the restored snapshot and it has no volumeName, its request
// is the snapshot's restore size (larger than it asked for), and the PV
// is not restored.
func TestRestoreClaimFromCSISnapshot(t *testing.T) {
	installSnapshotCRDs(t)
	w := newWorld(t)
	from, to := uniq("csi-from"), uniq("csi-to")
	f := csiBackup(t, w, from, "1Mi", 3<<20)
	pvName, class := f.pvName, f.class

	rs, out, newName := f.restore(t, w, to, v1.RestoreSpec{})
	if out.Phase != v1.RestorePhaseCompleted {
		t.Fatalf("outcome %+v: %+v", out, w.results(rs))
	}
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
	if got := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; got.Value() != 3<<20 {
		t.Errorf("restored claim requests %s; want the snapshot's restore size 3Mi (it asked for 1Mi)", got.String())
	}
	if _, err := w.cs.CoreV1().PersistentVolumes().Get(ctx(t), pvName, metav1.GetOptions{}); err == nil {
		t.Errorf("the CSI-snapshotted volume was restored; it must be provisioned anew from the snapshot")
	}
	var infos []volumefiles.RestoreVolumeInfo
	if err := w.store.GetGzipJSON(ctx(t), w.store.RestoreKey(rs.Name, rs.Name+"-volumeinfo.json.gz"), &infos); err != nil {
		t.Fatal(err)
	}
	want := volumefiles.CSISnapshotInfo{SnapshotHandle: "snap-123", Size: 3 << 20, Driver: f.driver, VSCName: newName, VolumeSnapshot: to + "/" + newName}
	if len(infos) != 1 || infos[0].RestoreMethod != volumefiles.CSISnapshot || infos[0].CSISnapshotInfo == nil || *infos[0].CSISnapshotInfo != want ||
		infos[0].PVCNamespace != to || infos[0].PVCName != "data" {
		t.Errorf("restore volume info %+v, want one claim %s/data with %+v", infos, to, want)
	}
}

// TestClaimRequestKeepsWhatIsLargerThanTheSnapshot: a claim that asked
// for more than its snapshot holds keeps its request.
func TestClaimRequestKeepsWhatIsLargerThanTheSnapshot(t *testing.T) {
	installSnapshotCRDs(t)
	w := newWorld(t)
	from, to := uniq("csi-from"), uniq("csi-to")
	f := csiBackup(t, w, from, "1Gi", 3<<20)
	rs, out, _ := f.restore(t, w, to, v1.RestoreSpec{})
	if out.Phase != v1.RestorePhaseCompleted {
		t.Fatalf("outcome %+v: %+v", out, w.results(rs))
	}
	pvc, err := w.cs.CoreV1().PersistentVolumeClaims(to).Get(ctx(t), "data", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; got.String() != "1Gi" {
		t.Errorf("restored claim requests %s, want 1Gi as stored", got.String())
	}
}

// TestCSISnapshotObjectsFollowTheRestoresFilters: the stored
// VolumeSnapshot and content are restored, as in Velero, when the filters
// admit them or when a restored claim is made from them (Velero's claim
// action names the snapshot as a must-include additional item, and the
// snapshot names its content), and not otherwise. Excluding their type
// while restoring the claim restores them anyway, with a warning that
// names the claim and how to restore it without data.
func TestCSISnapshotObjectsFollowTheRestoresFilters(t *testing.T) {
	installSnapshotCRDs(t)
	w := newWorld(t)
	from := uniq("csi-from")
	f := csiBackup(t, w, from, "1Gi", 1<<20)
	for _, tc := range []struct {
		name  string
		spec  v1.RestoreSpec
		claim bool // restored, from its snapshot
		// snapshot: the VolumeSnapshot and content are restored.
		snapshot bool
		// emptyClaim: the claim is restored without a data source.
		emptyClaim bool
		warning    string
	}{
		{name: "claims only", spec: v1.RestoreSpec{IncludedResources: []string{"persistentvolumeclaims"}}, claim: true, snapshot: true},
		{name: "snapshots excluded", spec: v1.RestoreSpec{ExcludedResources: []string{"volumesnapshots.snapshot.storage.k8s.io", "volumesnapshotcontents"}},
			claim: true, snapshot: true,
			warning: "PersistentVolumeClaim %s/data: its CSI snapshot (VolumeSnapshot " + from + "/" + f.vsName + " and its content) is restored with it " +
				"although spec.excludedResources names volumesnapshots.snapshot.storage.k8s.io and volumesnapshotcontents.snapshot.storage.k8s.io"},
		{name: "cluster-scoped excluded", spec: v1.RestoreSpec{IncludeClusterResources: ptr.To(false)}, claim: true, snapshot: true},
		{name: "label selector of the claim", spec: v1.RestoreSpec{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "shop"}}},
			claim: true, snapshot: true},
		{name: "no claims", spec: v1.RestoreSpec{IncludedResources: []string{"configmaps"}}},
		{name: "label selector of neither", spec: v1.RestoreSpec{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}}}},
		{name: "snapshots only", spec: v1.RestoreSpec{IncludedResources: []string{"volumesnapshots.snapshot.storage.k8s.io"}}, snapshot: true},
		{name: "restorePVs false", spec: v1.RestoreSpec{RestorePVs: ptr.To(false)}, emptyClaim: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			to := uniq("csi-to")
			rs, out, newName := f.restore(t, w, to, tc.spec)
			if out.Phase != v1.RestorePhaseCompleted {
				t.Fatalf("outcome %+v: %+v", out, w.results(rs))
			}
			_, vsErr := w.dyn.Resource(vsGVR).Namespace(to).Get(ctx(t), newName, metav1.GetOptions{})
			_, vscErr := w.dyn.Resource(vscGVR).Get(ctx(t), newName, metav1.GetOptions{})
			if got := vsErr == nil && vscErr == nil; got != tc.snapshot || (vsErr == nil) != (vscErr == nil) {
				t.Errorf("VolumeSnapshot restored: %v, content restored: %v; want both %v", vsErr == nil, vscErr == nil, tc.snapshot)
			}
			pvc, err := w.cs.CoreV1().PersistentVolumeClaims(to).Get(ctx(t), "data", metav1.GetOptions{})
			switch {
			case tc.claim && (err != nil || pvc.Spec.DataSource == nil || pvc.Spec.DataSource.Name != newName):
				t.Errorf("claim %v (%v): want it restored from the snapshot %s", pvc, err, newName)
			case tc.emptyClaim && (err != nil || pvc.Spec.DataSource != nil || pvc.Spec.VolumeName != ""):
				t.Errorf("claim %v (%v): want it restored with no data source or volume", pvc, err)
			case !tc.claim && !tc.emptyClaim && err == nil:
				t.Errorf("claim restored although the filters leave it out")
			}
			res := w.results(rs)
			warnings := strings.Join(res.Warnings.Namespaces[to], "\n")
			if tc.warning != "" && !strings.Contains(warnings, fmt.Sprintf(tc.warning, to)) {
				t.Errorf("warnings %q lack %q", warnings, fmt.Sprintf(tc.warning, to))
			}
			if tc.warning == "" && strings.Contains(warnings, "CSI snapshot") {
				t.Errorf("unexpected warning %q", warnings)
			}
			if tc.warning != "" && !strings.Contains(warnings, "set restorePVs to false") {
				t.Errorf("warning %q does not say how to restore the claim without its data", warnings)
			}
		})
	}
}

package restore

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/archive/archivetest"
	"github.com/lifeboat-io/lifeboat/internal/storage"
)

// veleroItem renders an object the way Velero stores it: encoding/json of
// the unstructured object (keys sorted), server-set fields included.
func veleroItem(t *testing.T, obj map[string]any) []byte {
	t.Helper()
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestRestoresABackupLaidOutAsVeleroWritesIt builds a tarball from Velero's
// documented layout (metadata/version with a newline, the unversioned copy
// followed by the <version>-preferredversion copy, an item from an old
// backup without the preferred copy, server-set metadata and status in the
// items) and restores it.
func TestRestoresABackupLaidOutAsVeleroWritesIt(t *testing.T) {
	w := newWorld(t)
	ns := uniq("velero-made")
	meta := func(name string) map[string]any {
		return map[string]any{
			"name": name, "namespace": ns, "uid": "0b7c2f0e-1111-4e55-9a60-5f8d1a2b3c4d", "resourceVersion": "48213",
			"creationTimestamp": "2026-01-02T03:04:05Z", "labels": map[string]any{"app": "legacy"},
			"managedFields": []any{map[string]any{"manager": "kubectl", "operation": "Update", "apiVersion": "v1"}},
		}
	}
	nsObj := veleroItem(t, map[string]any{"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": ns, "uid": "5e0d", "resourceVersion": "1", "labels": map[string]any{"kubernetes.io/metadata.name": ns}},
		"spec":     map[string]any{"finalizers": []any{"kubernetes"}}, "status": map[string]any{"phase": "Active"}})
	cm := veleroItem(t, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("legacy-settings"), "data": map[string]any{"mode": "classic"}})
	secret := veleroItem(t, map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": meta("legacy-secret"), "type": "Opaque", "data": map[string]any{"k": "dmFsdWU="}})
	deploy := veleroItem(t, map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta("legacy-web"),
		"spec": map[string]any{
			"replicas": 2, "selector": map[string]any{"matchLabels": map[string]any{"app": "legacy"}},
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "legacy"}},
				"spec": map[string]any{"containers": []any{map[string]any{"name": "web", "image": "nginx:1.25"}}}},
		},
		"status": map[string]any{"replicas": 2, "readyReplicas": 2},
	})
	entries := []archivetest.Entry{
		{Name: "metadata/version", Data: []byte("1.1.0\n")},
		{Name: "resources/namespaces/cluster/" + ns + ".json", Data: nsObj},
		{Name: "resources/namespaces/v1-preferredversion/cluster/" + ns + ".json", Data: nsObj},
		{Name: "resources/configmaps/namespaces/" + ns + "/legacy-settings.json", Data: cm},
		{Name: "resources/configmaps/v1-preferredversion/namespaces/" + ns + "/legacy-settings.json", Data: cm},
		{Name: "resources/deployments.apps/namespaces/" + ns + "/legacy-web.json", Data: deploy},
		{Name: "resources/deployments.apps/v1-preferredversion/namespaces/" + ns + "/legacy-web.json", Data: deploy},
		// Velero before API group versions support wrote only this copy.
		{Name: "resources/secrets/namespaces/" + ns + "/legacy-secret.json", Data: secret},
	}
	var buf bytes.Buffer
	if err := archivetest.Tarball(&buf, entries); err != nil {
		t.Fatal(err)
	}
	b := w.putBackup(uniq("velero"), buf.Bytes())

	rs, out := w.restore(b, v1.RestoreSpec{})
	if out.Phase != v1.RestorePhaseCompleted || out.Progress.ItemsRestored != 4 {
		t.Fatalf("outcome %+v: %+v", out, w.results(rs))
	}
	cmGot, err := w.cs.CoreV1().ConfigMaps(ns).Get(ctx(t), "legacy-settings", metav1.GetOptions{})
	if err != nil || cmGot.Data["mode"] != "classic" || cmGot.Labels["app"] != "legacy" || cmGot.UID == "0b7c2f0e-1111-4e55-9a60-5f8d1a2b3c4d" {
		t.Errorf("configmap %+v, err %v", cmGot, err)
	}
	if s, err := w.cs.CoreV1().Secrets(ns).Get(ctx(t), "legacy-secret", metav1.GetOptions{}); err != nil || string(s.Data["k"]) != "value" {
		t.Errorf("secret from the old layout: %+v, err %v", s, err)
	}
	d, err := w.cs.AppsV1().Deployments(ns).Get(ctx(t), "legacy-web", metav1.GetOptions{})
	if err != nil || *d.Spec.Replicas != 2 || d.Status.ReadyReplicas != 0 {
		t.Errorf("deployment %+v, err %v (status must not be restored)", d, err)
	}
}

func TestRestorePVsDecision(t *testing.T) {
	w := newWorld(t)
	pvName := uniq("pv")
	pv := veleroItem(t, map[string]any{"apiVersion": "v1", "kind": "PersistentVolume",
		"metadata": map[string]any{"name": pvName, "uid": "1234"},
		"spec": map[string]any{
			"capacity": map[string]any{"storage": "1Gi"}, "accessModes": []any{"ReadWriteOnce"},
			"hostPath": map[string]any{"path": "/data/" + pvName}, "persistentVolumeReclaimPolicy": "Retain",
			"claimRef": map[string]any{"kind": "PersistentVolumeClaim", "namespace": "old-ns", "name": "data", "uid": "5678", "resourceVersion": "9"},
		},
		"status": map[string]any{"phase": "Bound"},
	})
	var buf bytes.Buffer
	if err := archivetest.Tarball(&buf, []archivetest.Entry{
		{Name: "metadata/version", Data: []byte("1.1.0\n")},
		{Name: "resources/persistentvolumes/cluster/" + pvName + ".json", Data: pv},
	}); err != nil {
		t.Fatal(err)
	}
	b := w.putBackup(uniq("pvs"), buf.Bytes())

	rs, out := w.restore(b, v1.RestoreSpec{RestorePVs: ptr.To(false)})
	if out.Phase != v1.RestorePhaseCompleted {
		t.Fatalf("outcome %+v", out)
	}
	if _, err := w.cs.CoreV1().PersistentVolumes().Get(ctx(t), pvName, metav1.GetOptions{}); err == nil {
		t.Errorf("restorePVs=false restored the volume")
	}
	list := map[string][]string{}
	if err := w.store.GetGzipJSON(ctx(t), w.store.RestoreKey(rs.Name, storage.RestoreResourceListFile(rs.Name)), &list); err != nil {
		t.Fatal(err)
	}
	if got := list["v1/PersistentVolume"]; len(got) != 1 || got[0] != pvName+"(skipped)" {
		t.Errorf("resource list records %v, want the volume skipped", got)
	}

	_, out = w.restore(b, v1.RestoreSpec{NamespaceMapping: map[string]string{"old-ns": "new-ns"}})
	if out.Phase != v1.RestorePhaseCompleted {
		t.Fatalf("outcome %+v", out)
	}
	got, err := w.cs.CoreV1().PersistentVolumes().Get(ctx(t), pvName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ref := got.Spec.ClaimRef; ref == nil || ref.Namespace != "new-ns" || ref.UID != "" {
		t.Errorf("claimRef %+v, want the mapped namespace and no stale UID", ref)
	}
}

func TestOwnerReferencesFollowRestoredOwners(t *testing.T) {
	w := newWorld(t)
	ns := uniq("owners")
	labels := map[string]any{"app": "owned"}
	podTemplate := map[string]any{"metadata": map[string]any{"labels": labels},
		"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "nginx:1.27"}}}}
	deploy := veleroItem(t, map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": ns, "uid": "old-deploy-uid"},
		"spec":     map[string]any{"selector": map[string]any{"matchLabels": labels}, "template": podTemplate}})
	owner := func(kind, name, uid string) []any {
		return []any{map[string]any{"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": uid, "controller": true}}
	}
	rset := veleroItem(t, map[string]any{"apiVersion": "apps/v1", "kind": "ReplicaSet",
		"metadata": map[string]any{"name": "web-1", "namespace": ns, "uid": "old-rs-uid", "ownerReferences": owner("Deployment", "web", "old-deploy-uid")},
		"spec":     map[string]any{"selector": map[string]any{"matchLabels": labels}, "template": podTemplate}})
	orphan := veleroItem(t, map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "orphan", "namespace": ns, "ownerReferences": owner("StatefulSet", "gone", "old-sts-uid")}})
	var buf bytes.Buffer
	if err := archivetest.Tarball(&buf, []archivetest.Entry{
		{Name: "metadata/version", Data: []byte("1.1.0\n")},
		{Name: "resources/deployments.apps/namespaces/" + ns + "/web.json", Data: deploy},
		{Name: "resources/replicasets.apps/namespaces/" + ns + "/web-1.json", Data: rset},
		{Name: "resources/configmaps/namespaces/" + ns + "/orphan.json", Data: orphan},
	}); err != nil {
		t.Fatal(err)
	}
	b := w.putBackup(uniq("owners"), buf.Bytes())
	rs, out := w.restore(b, v1.RestoreSpec{})
	if out.Phase != v1.RestorePhaseCompleted {
		t.Fatalf("outcome %+v: %+v", out, w.results(rs))
	}
	d, err := w.cs.AppsV1().Deployments(ns).Get(ctx(t), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// ReplicaSets are restored before Deployments; the reference is put
	// back once the Deployment exists, with its new UID.
	r, err := w.cs.AppsV1().ReplicaSets(ns).Get(ctx(t), "web-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if refs := r.OwnerReferences; len(refs) != 1 || refs[0].UID != d.UID || refs[0].Name != "web" {
		t.Errorf("replicaset owner references %+v, want the restored deployment (uid %s)", refs, d.UID)
	}
	cm, err := w.cs.CoreV1().ConfigMaps(ns).Get(ctx(t), "orphan", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cm.OwnerReferences) != 0 {
		t.Errorf("a reference to an owner that was not restored was kept: %+v", cm.OwnerReferences)
	}
}

// TestAVolumeWithoutDataToRestoreIsProvisionedAnew follows Velero's rule for a
// PV the backup holds no snapshot of: with reclaim policy Delete (what a
// provisioner's volumes have) the PV is not restored and its claim loses
// spec.volumeName, so the target cluster gives the claim a volume of its
// own, instead of a claim that waits forever for a volume bound elsewhere
// (the source's, when restoring into a mapped namespace of the same
// cluster); with Retain the PV is restored as it was, bound to the claim.
func TestAVolumeWithoutDataToRestoreIsProvisionedAnew(t *testing.T) {
	w := newWorld(t)
	from, to := uniq("vols-from"), uniq("vols-to")
	pvItem := func(name, claim, policy string) []byte {
		return veleroItem(t, map[string]any{"apiVersion": "v1", "kind": "PersistentVolume",
			"metadata": map[string]any{"name": name, "uid": "pv-uid-" + name,
				"annotations": map[string]any{"pv.kubernetes.io/bound-by-controller": "yes"}},
			"spec": map[string]any{
				"capacity": map[string]any{"storage": "1Gi"}, "accessModes": []any{"ReadWriteOnce"}, "storageClassName": "manual",
				"hostPath": map[string]any{"path": "/data/" + name}, "persistentVolumeReclaimPolicy": policy,
				"claimRef": map[string]any{"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": from, "name": claim, "uid": "claim-uid-" + claim},
			},
			"status": map[string]any{"phase": "Bound"},
		})
	}
	claimItem := func(name, volume string) []byte {
		return veleroItem(t, map[string]any{"apiVersion": "v1", "kind": "PersistentVolumeClaim",
			"metadata": map[string]any{"name": name, "namespace": from, "uid": "claim-uid-" + name,
				"annotations": map[string]any{"pv.kubernetes.io/bind-completed": "yes"}},
			"spec": map[string]any{"accessModes": []any{"ReadWriteOnce"}, "storageClassName": "manual", "volumeName": volume,
				"resources": map[string]any{"requests": map[string]any{"storage": "1Gi"}}},
			"status": map[string]any{"phase": "Bound"},
		})
	}
	deletePV, retainPV := uniq("pv-delete"), uniq("pv-retain")
	var buf bytes.Buffer
	if err := archivetest.Tarball(&buf, []archivetest.Entry{
		{Name: "metadata/version", Data: []byte("1.1.0\n")},
		{Name: "resources/persistentvolumes/cluster/" + deletePV + ".json", Data: pvItem(deletePV, "scratch", "Delete")},
		{Name: "resources/persistentvolumes/cluster/" + retainPV + ".json", Data: pvItem(retainPV, "keep", "Retain")},
		{Name: "resources/persistentvolumeclaims/namespaces/" + from + "/scratch.json", Data: claimItem("scratch", deletePV)},
		{Name: "resources/persistentvolumeclaims/namespaces/" + from + "/keep.json", Data: claimItem("keep", retainPV)},
	}); err != nil {
		t.Fatal(err)
	}
	b := w.putBackup(uniq("vols"), buf.Bytes())

	rs, out := w.restore(b, v1.RestoreSpec{NamespaceMapping: map[string]string{from: to}})
	if out.Phase != v1.RestorePhaseCompleted {
		t.Fatalf("outcome %+v: %+v", out, w.results(rs))
	}
	if _, err := w.cs.CoreV1().PersistentVolumes().Get(ctx(t), deletePV, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the PV with reclaim policy Delete and no snapshot was restored (err %v); want a new volume for its claim instead", err)
	}
	scratch, err := w.cs.CoreV1().PersistentVolumeClaims(to).Get(ctx(t), "scratch", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if scratch.Spec.VolumeName != "" {
		t.Errorf("claim scratch still names volume %q, which was not restored; want no volumeName (a new volume)", scratch.Spec.VolumeName)
	}
	kept, err := w.cs.CoreV1().PersistentVolumes().Get(ctx(t), retainPV, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the PV with reclaim policy Retain was not restored: %v", err)
	}
	if ref := kept.Spec.ClaimRef; ref == nil || ref.Namespace != to || ref.Name != "keep" || ref.UID != "" {
		t.Errorf("restored PV's claimRef %+v, want %s/keep without the old UID", ref, to)
	}
	if _, ok := kept.Annotations["pv.kubernetes.io/bound-by-controller"]; ok {
		t.Errorf("restored PV keeps the source's binding annotation: %v", kept.Annotations)
	}
	keep, err := w.cs.CoreV1().PersistentVolumeClaims(to).Get(ctx(t), "keep", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if keep.Spec.VolumeName != retainPV {
		t.Errorf("claim keep names volume %q, want the restored %s", keep.Spec.VolumeName, retainPV)
	}
	list := map[string][]string{}
	if err := w.store.GetGzipJSON(ctx(t), w.store.RestoreKey(rs.Name, storage.RestoreResourceListFile(rs.Name)), &list); err != nil {
		t.Fatal(err)
	}
	if got := list["v1/PersistentVolume"]; !slices.Contains(got, deletePV+"(skipped)") || !slices.Contains(got, retainPV+"(created)") {
		t.Errorf("resource list records %v, want %s skipped and %s created", got, deletePV, retainPV)
	}
}

package plugins

import (
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/testutil/testenv"
	"github.com/lifeboat-io/lifeboat/internal/volumefiles"
	"github.com/lifeboat-io/lifeboat/pkg/volumehelper"
)

// volumePolicy mixes all four actions; two custom actions belong to the two
// custom-volume plugins (told apart by the handler parameter, which each
// claims by default), a third to no plugin at all, a fourth to the plugin
// built with Velero's SDK (test/compat), which cannot claim a volume with
// Lifeboat's annotation: its selector takes the claims labelled for it.
const volumePolicy = `version: v1
volumePolicies:
- conditions: {storageClass: [bronze]}
  action: {type: skip}
- conditions: {csi: {driver: a.csi.example.io}}
  action: {type: custom, parameters: {handler: example.io/custom-volume, tier: 1}}
- conditions: {csi: {driver: b.csi.example.io}}
  action: {type: custom, parameters: {handler: example.io/custom-volume-b}}
- conditions: {pvcLabels: {owner: nobody}}
  action: {type: custom, parameters: {handler: example.io/not-installed}}
- conditions: {csi: {driver: v.csi.example.io}}
  action: {type: custom, parameters: {handler: velero-sdk}}
- conditions: {capacity: "10Gi,"}
  action: {type: snapshot}
`

// boundVolume creates a PV and a claim in ns bound to it (no controller
// binds them here, so the claim's status says Bound).
func boundVolume(t *testing.T, ns, name, class, size string, labels map[string]string, src corev1.PersistentVolumeSource) string {
	t.Helper()
	pvName := ns + "-" + name
	env.Create(t, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource:        src,
			StorageClassName:              class,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: ns, Name: name},
		},
	})
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &class,
			VolumeName:       pvName,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		},
	}
	env.Create(t, pvc)
	pvc.Status.Phase = corev1.ClaimBound
	if err := env.Client.Status().Update(testenv.Ctx(t), pvc); err != nil {
		t.Fatal(err)
	}
	return pvName
}

func TestVolumePoliciesWithCustomActionsAndSnapshots(t *testing.T) {
	ns := env.NewNamespace(t, "vols")
	bsl, dir := env.FilesystemLocation(t, env.Name("fs"))
	snapDir := t.TempDir()
	vsl := &v1.VolumeSnapshotLocation{
		ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: env.Name("files")},
		Spec:       v1.VolumeSnapshotLocationSpec{Provider: "example.io/filesnapshotter", Config: map[string]string{"dir": snapDir}},
	}
	env.Create(t, vsl)
	policyName := env.Name("policy")
	env.Create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: policyName}, Data: map[string]string{"policy.yaml": volumePolicy}})

	hostPath := func(p string) corev1.PersistentVolumeSource {
		return corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: p}}
	}
	csi := func(driver, handle string) corev1.PersistentVolumeSource {
		return corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: handle}}
	}
	pvs := map[string]string{
		"gold":   boundVolume(t, ns, "gold", "gold", "20Gi", nil, hostPath("/data/"+ns+"/gold")),
		"silver": boundVolume(t, ns, "silver", "silver", "1Gi", nil, hostPath("/data/"+ns+"/silver")),
		"bronze": boundVolume(t, ns, "bronze", "bronze", "50Gi", nil, hostPath("/data/"+ns+"/bronze")),
		"a":      boundVolume(t, ns, "a", "fast", "1Gi", nil, csi("a.csi.example.io", ns+"-vol-a")),
		"b":      boundVolume(t, ns, "b", "fast", "1Gi", nil, csi("b.csi.example.io", ns+"-vol-b")),
		"orphan": boundVolume(t, ns, "orphan", "fast", "1Gi", map[string]string{"owner": "nobody"}, csi("c.csi.example.io", ns+"-vol-c")),
		"velero": boundVolume(t, ns, "velero", "fast", "1Gi", map[string]string{"compat.example.io/custom-volume": "yes"}, csi("v.csi.example.io", ns+"-vol-v")),
	}
	env.Create(t, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", Annotations: map[string]string{volumehelper.VolumesToBackupAnnotation: "cache"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}},
			Volumes: []corev1.Volume{
				{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "gold", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "gold"}}},
			},
		},
	})

	name := env.Name("vols")
	mustLifeboat(t, "backup", "create", name, "--include-namespaces", ns, "--storage-location", bsl.Name,
		"--resource-policies-configmap", policyName, "--volume-snapshot-locations", vsl.Name, "--wait")
	b := env.WaitBackup(t, name, 2*time.Minute)
	if b.Status.Phase != v1.BackupPhaseCompleted || b.Status.Warnings != 2 || b.Status.Errors != 0 {
		out, _ := lifeboat(t, "backup", "logs", name)
		t.Fatalf("backup: phase %s, %d warnings, %d errors (failure %q, validation %v); want Completed with 2 warnings\n%s",
			b.Status.Phase, b.Status.Warnings, b.Status.Errors, b.Status.FailureReason, b.Status.ValidationErrors, out)
	}
	backupDir := filepath.Join(dir, "lifeboat", "backups", name)

	// Every volume got the action the policy gives it.
	var infos []volumefiles.BackupVolumeInfo
	readGzipJSONFile(t, filepath.Join(backupDir, name+"-volumeinfo.json.gz"), &infos)
	actions := map[string]string{}
	byPV := map[string]volumefiles.BackupVolumeInfo{}
	for _, in := range infos {
		key := "pvc " + in.PVCNamespace + "/" + in.PVCName
		if in.PVBInfo != nil {
			key = "pod " + in.PVBInfo.PodNamespace + "/" + in.PVBInfo.PodName + ":" + in.PVBInfo.VolumeName
		}
		actions[key] = in.Decision.Action
		byPV[in.PVName] = in
	}
	want := map[string]string{
		"pvc " + ns + "/gold": "snapshot", "pvc " + ns + "/silver": "snapshot", "pvc " + ns + "/bronze": "skip",
		"pvc " + ns + "/a": "custom", "pvc " + ns + "/b": "custom", "pvc " + ns + "/orphan": "custom", "pvc " + ns + "/velero": "custom",
		"pod " + ns + "/web:cache": "fs-backup",
	}
	for k, w := range want {
		if actions[k] != w {
			t.Errorf("%s: action %q, want %q (all: %v)", k, actions[k], w, actions)
		}
	}
	for pv, by := range map[string]string{pvs["a"]: "example.io/custom-volume", pvs["b"]: customVolumeB, pvs["orphan"]: "", pvs["velero"]: ""} {
		if got := byPV[pv].Decision.ClaimedBy; got != by {
			t.Errorf("%s claimed by %q, want %q", pv, got, by)
		}
	}
	// The Velero-SDK plugin's action ran on its claim: the volume is left
	// to it, not reported unhandled. The Lifeboat-SDK plugins ran on every
	// claim too, but they claimed others: on this one they declined.
	for pv, by := range map[string]string{pvs["velero"]: "compat.example.io/custom-volume", pvs["orphan"]: ""} {
		in := byPV[pv]
		if got := strings.Join(in.Decision.HandledBy, ","); got != by || in.Skipped != (by == "") {
			t.Errorf("%s: handled by %q (skipped %v: %s), want %q", pv, got, in.Skipped, in.SkippedReason, by)
		}
	}

	// Each custom plugin handled exactly its own volume.
	entries := readArchiveFile(t, filepath.Join(backupDir, name+".tar.gz"))
	for claim, by := range map[string]string{"a": "example.io/custom-volume", "b": customVolumeB, "orphan": "", "velero": "", "gold": "", "silver": "", "bronze": ""} {
		ann := storedItem(t, entries, "persistentvolumeclaims", ns, claim).GetAnnotations()
		if ann[volumehelper.ClaimedByAnnotation] != by {
			t.Errorf("stored claim %s: %s=%q, want %q", claim, volumehelper.ClaimedByAnnotation, ann[volumehelper.ClaimedByAnnotation], by)
		}
		if (by != "") != (ann[customVolumeKey] != "") {
			t.Errorf("stored claim %s: record %q, want one only when claimed", claim, ann[customVolumeKey])
		}
	}
	if ann := storedItem(t, entries, "persistentvolumeclaims", ns, "velero").GetAnnotations(); ann["compat.example.io/volume-handled-by"] != name {
		t.Errorf("the Velero-SDK plugin did not handle its claim: annotations %v", ann)
	}

	// The snapshots are the snapshotter's files, recorded in the backup.
	files, err := filepath.Glob(filepath.Join(snapDir, "snapshots", "*.json"))
	if err != nil || len(files) != 2 {
		t.Fatalf("snapshot files %v (%v), want 2 (gold and silver)", files, err)
	}
	var snaps []volumefiles.Snapshot
	readGzipJSONFile(t, filepath.Join(backupDir, name+"-volumesnapshots.json.gz"), &snaps)
	var snapped []string
	for _, s := range snaps {
		snapped = append(snapped, s.Spec.PersistentVolumeName)
		if s.Spec.Location != vsl.Name || s.Status.Phase != volumefiles.SnapshotPhaseCompleted {
			t.Errorf("snapshot %+v", s)
		}
		if _, err := os.Stat(filepath.Join(snapDir, "snapshots", s.Status.ProviderSnapshotID+".json")); err != nil {
			t.Errorf("snapshot %s has no file: %v", s.Status.ProviderSnapshotID, err)
		}
	}
	slices.Sort(snapped)
	if w := []string{pvs["gold"], pvs["silver"]}; !slices.Equal(snapped, w) {
		t.Errorf("snapshotted %v, want %v", snapped, w)
	}

	// The warnings say what was not done, per volume.
	logs := mustLifeboat(t, "backup", "describe", name, "--details")
	for _, w := range []string{
		"pvc " + ns + "/orphan", "custom (handler=example.io/not-installed)", "custom action not handled",
		"left to backup item action(s) compat.example.io/custom-volume",
		"pod " + ns + "/web:cache", "fs-backup reads a running pod's volumes",
		"volume policy 4", "fallback: snapshotVolumes (unset, so true)", "handled by plugin " + customVolumeB,
	} {
		if !strings.Contains(logs, w) {
			t.Errorf("backup describe --details lacks %q:\n%s", w, logs)
		}
	}

	// policy explain, for the same backup, predicts what the backup did.
	var rows []struct {
		Volume string `json:"volume"`
		Action string `json:"action"`
		Rule   *int   `json:"rule"`
	}
	if err := json.Unmarshal([]byte(mustLifeboat(t, "policy", "explain", "--backup", name, "-o", "json")), &rows); err != nil {
		t.Fatal(err)
	}
	explained := map[string]string{}
	for _, r := range rows {
		explained[r.Volume] = r.Action
	}
	for k, got := range actions {
		if explained[k] != got {
			t.Errorf("%s: policy explain says %q, the backup did %q", k, explained[k], got)
		}
	}

	// A restore makes a new volume from the snapshot for a PV that is gone.
	goldPV := &corev1.PersistentVolume{}
	if err := env.Client.Get(testenv.Ctx(t), client.ObjectKey{Name: pvs["gold"]}, goldPV); err != nil {
		t.Fatal(err)
	}
	// The API server adds the pv-protection finalizer, and no controller
	// runs here to take it off.
	goldPV.Finalizers = nil
	if err := env.Client.Update(testenv.Ctx(t), goldPV); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(testenv.Ctx(t), goldPV); err != nil {
		t.Fatal(err)
	}
	waitGone(t, goldPV)
	restoreName := env.Name("vols-restore")
	mustLifeboat(t, "restore", "create", restoreName, "--from-backup", name, "--include-resources", "persistentvolumes", "--wait")
	if rs := waitRestore(t, restoreName); rs.Status.Phase != v1.RestorePhaseCompleted {
		t.Fatalf("restore phase %s (%d errors)", rs.Status.Phase, rs.Status.Errors)
	}
	restored := &corev1.PersistentVolume{}
	if err := env.Client.Get(testenv.Ctx(t), client.ObjectKey{Name: pvs["gold"]}, restored); err != nil {
		t.Fatal(err)
	}
	var goldSnap string
	for _, s := range snaps {
		if s.Spec.PersistentVolumeName == pvs["gold"] {
			goldSnap = s.Status.ProviderSnapshotID
		}
	}
	if p := restored.Spec.HostPath; p == nil || p.Path != "restored-"+goldSnap+"-1" {
		t.Errorf("restored PV's volume %+v, want the one made from snapshot %s", restored.Spec.PersistentVolumeSource, goldSnap)
	}
	if _, err := os.Stat(filepath.Join(snapDir, "volumes", "restored-"+goldSnap+"-1.json")); err != nil {
		t.Errorf("the snapshotter made no volume from the snapshot: %v", err)
	}

	// The claimed-by annotation is the backup's bookkeeping: restored
	// claims come without it, and keep what the plugin itself recorded.
	target := env.Name("vols-target")
	claimsRestore := env.Name("vols-claims")
	mustLifeboat(t, "restore", "create", claimsRestore, "--from-backup", name, "--include-resources", "persistentvolumeclaims",
		"--namespace-mappings", ns+":"+target, "--wait")
	if rs := waitRestore(t, claimsRestore); rs.Status.Phase != v1.RestorePhaseCompleted {
		t.Fatalf("restore of the claims: phase %s (%d errors)", rs.Status.Phase, rs.Status.Errors)
	}
	t.Cleanup(func() {
		_ = env.Client.Delete(testenv.Ctx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: target}})
	})
	claimA := &corev1.PersistentVolumeClaim{}
	if err := env.Client.Get(testenv.Ctx(t), client.ObjectKey{Namespace: target, Name: "a"}, claimA); err != nil {
		t.Fatal(err)
	}
	if _, ok := claimA.Annotations[volumehelper.ClaimedByAnnotation]; ok || claimA.Annotations[customVolumeKey] == "" {
		t.Errorf("restored claim a: annotations %v; want %s gone and %s kept", claimA.Annotations, volumehelper.ClaimedByAnnotation, customVolumeKey)
	}
}

func readGzipJSONFile(t *testing.T, file string, into any) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if err := json.NewDecoder(gz).Decode(into); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

func waitGone(t *testing.T, obj client.Object) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if err := env.Client.Get(testenv.Ctx(t), client.ObjectKeyFromObject(obj), obj); err != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s still exists", obj.GetName())
}

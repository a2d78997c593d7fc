package velerocli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lifeboat-io/lifeboat/internal/testutil/testenv"
)

// TestDescribeShowsSnapshotsAndOperations: a backup with a natively
// snapshotted volume (through a VolumeSnapshotLocation made with `velero
// snapshot-location create`) and an asynchronous plugin operation, then a
// restore of it. Velero's describe decodes Lifeboat's volume information
// and item operations files and shows them, with nothing it cannot read.
func TestDescribeShowsSnapshotsAndOperations(t *testing.T) {
	defaultLocation(t)
	snapDir := t.TempDir()
	vsl := env.Name("files")
	out := velero(t, "snapshot-location", "create", vsl, "--provider", "example.io/filesnapshotter", "--config", "dir="+snapDir)
	mustContain(t, "snapshot-location create", out, `Snapshot volume location "`+vsl+`" configured successfully.`)

	ns := env.NewNamespace(t, "vols")
	pv := boundVolume(t, ns, "data", "/data/"+ns)
	env.Create(t, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "slow", Labels: map[string]string{"async": "ok"}},
	})

	backup := env.Name("vols")
	out = velero(t, "backup", "create", backup, "--include-namespaces", ns, "--volume-snapshot-locations", vsl, "--wait")
	mustContain(t, "backup create", out, "Backup completed with status: Completed.")
	snapshots, err := filepath.Glob(filepath.Join(snapDir, "snapshots", "snap-*.json"))
	if err != nil || len(snapshots) != 1 {
		t.Fatalf("want one snapshot file in %s, got %v (%v)", snapDir, snapshots, err)
	}
	snapID := filepath.Base(snapshots[0][:len(snapshots[0])-len(".json")])

	out = velero(t, "backup", "describe", backup)
	mustContain(t, "backup describe", out,
		"Backup Item Operations:  1 of 1 completed successfully, 0 failed (specify --details for more information)",
		"Velero-Native Snapshots:\n    "+pv+": specify --details for more information",
	)
	out = velero(t, "backup", "describe", backup, "--details")
	mustContain(t, "backup describe --details", out,
		// BackupItemOperations
		"Backup Item Operations:\n  Operation for configmaps "+ns+"/slow:",
		"Backup Item Action Plugin:  e2e.lifeboat.io/async",
		"Operation ID:               ok/"+ns+"/slow",
		"Phase:                      Completed",
		"Progress:                   2 of 2 complete (polls)",
		// BackupVolumeInfos
		"Velero-Native Snapshots:\n    "+pv+":",
		"Snapshot ID:        "+snapID,
		"Type:               file",
		"Result:             succeeded",
		"v1/PersistentVolume:\n    - "+pv,
		"v1/PersistentVolumeClaim:\n    - "+ns+"/data",
	)

	// The structured description reads the same files.
	out = velero(t, "backup", "describe", backup, "--details", "-o", "json")
	var described map[string]any
	if err := json.Unmarshal([]byte(out), &described); err != nil {
		t.Errorf("backup describe -o json is not JSON: %v\n%s", err, out)
	}
	mustContain(t, "backup describe --details -o json", out, snapID, `"v1/PersistentVolumeClaim"`)
	if m := regexp.MustCompile(`"error[A-Z][A-Za-z]*"`).FindString(out); m != "" {
		t.Errorf("backup describe -o json has %s:\n%s", m, out)
	}

	// Restore the volume from its snapshot: claim and volume gone first.
	deleteNow(t, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data"}})
	deleteNow(t, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pv}})
	restore := env.Name("vols-back")
	out = velero(t, "restore", "create", restore, "--from-backup", backup, "--wait")
	mustContain(t, "restore create", out, "Restore completed with status: Completed.")
	out = velero(t, "restore", "describe", restore, "--details")
	mustContain(t, "restore describe --details", out,
		"Restore PVs:  auto",
		"CSI Snapshot Restores: <none included>",
		"v1/PersistentVolume:\n    - "+pv+"(created)",
		"v1/PersistentVolumeClaim:\n    - "+ns+"/data(created)",
	)
	volumes, err := os.ReadDir(filepath.Join(snapDir, "volumes"))
	if err != nil || len(volumes) != 1 {
		t.Errorf("want one volume created from the snapshot in %s/volumes, got %v (%v)", snapDir, volumes, err)
	}
	checkDownloadRequests(t, backup, restore)
}

// deleteNow deletes obj and takes off the finalizers the API server's
// admission put on it (no controller here would remove them).
func deleteNow(t *testing.T, obj client.Object) {
	t.Helper()
	if err := env.Client.Delete(testenv.Ctx(t), obj); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(testenv.Ctx(t), client.ObjectKeyFromObject(obj), obj); err == nil && len(obj.GetFinalizers()) > 0 {
		obj.SetFinalizers(nil)
		if err := env.Client.Update(testenv.Ctx(t), obj); err != nil {
			t.Fatal(err)
		}
	}
	waitGone(t, obj, time.Minute)
}

// boundVolume creates a hostPath PV and a claim in ns bound to it (no
// controller binds them here, so the claim's status says Bound) and
// returns the PV's name.
func boundVolume(t *testing.T, ns, name, path string) string {
	t.Helper()
	pvName := ns + "-" + name
	class := "standard"
	env.Create(t, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path}},
			StorageClassName:              class,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: ns, Name: name},
		},
	})
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &class,
			VolumeName:       pvName,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	env.Create(t, pvc)
	pvc.Status.Phase = corev1.ClaimBound
	if err := env.Client.Status().Update(testenv.Ctx(t), pvc); err != nil {
		t.Fatal(err)
	}
	return pvName
}

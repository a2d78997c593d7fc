// Package csi runs CSI snapshot backups and restores end to end: the
// real server against an API server with the real CSI stack
// (internal/testutil/csistack: snapshot-controller, csi-snapshotter,
// csi-provisioner, kube-controller-manager's volume controllers and the
// project's host-path driver). It is a package of its own because the
// volume controllers would act on the claims and volumes other e2e tests
// make by hand.
package csi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/archive"
	"github.com/lifeboat-io/lifeboat/internal/csisnapshot"
	"github.com/lifeboat-io/lifeboat/internal/storage"
	"github.com/lifeboat-io/lifeboat/internal/storage/provider"
	"github.com/lifeboat-io/lifeboat/internal/testutil/clitest"
	"github.com/lifeboat-io/lifeboat/internal/testutil/csistack"
	"github.com/lifeboat-io/lifeboat/internal/testutil/testenv"
	"github.com/lifeboat-io/lifeboat/internal/volumefiles"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{CSI: true}, &env)
}

func poll(t *testing.T, what string, timeout time.Duration, check func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, check); err != nil {
		t.Fatalf("%s: not within %s: %v", what, timeout, err)
	}
}

// boundClaim creates a claim of the stack's storage class and waits until
// it is bound; it returns the volume's ID in the driver (its handle).
func boundClaim(t *testing.T, ns, name string) string {
	t.Helper()
	c := env.CSI.Client
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "shop"}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To(csistack.StorageClass),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}},
		},
	}
	if err := c.Create(testenv.Ctx(t), pvc); err != nil {
		t.Fatal(err)
	}
	var handle string
	poll(t, "claim "+ns+"/"+name+" bound", 2*time.Minute, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
			return false, err
		}
		if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "" {
			return false, nil
		}
		pv := &corev1.PersistentVolume{}
		if err := c.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil {
			return false, err
		}
		handle = pv.Spec.CSI.VolumeHandle
		return true, nil
	})
	return handle
}

// writeVolume writes a file into a volume as a pod would (no pod runs on
// the API server alone: the driver's volume is a directory).
func writeVolume(t *testing.T, volumeID, file, content string) {
	t.Helper()
	dir := filepath.Join(env.CSI.StateDir, "volumes", volumeID, "data")
	if err := os.WriteFile(filepath.Join(dir, file), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func archiveItems(t *testing.T, bucketDir, backup string) map[string]map[string]any {
	t.Helper()
	fs, err := provider.Open(testenv.Ctx(t), "lifeboat.io/filesystem", map[string]string{"path": filepath.Dir(bucketDir)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	store := storage.NewBackupStore(fs, filepath.Base(bucketDir), "lifeboat")
	rc, err := store.GetBackupContents(testenv.Ctx(t), backup)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	r, err := archive.NewReader(rc, archive.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for {
		e, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if e.Item == nil || e.PreferredVersionCopy {
			continue
		}
		var obj map[string]any
		if err := json.NewDecoder(bytes.NewReader(e.Data)).Decode(&obj); err != nil {
			t.Fatal(err)
		}
		out[e.Path] = obj
	}
}

func volumeInfo(t *testing.T, bucketDir, backup string) []volumefiles.BackupVolumeInfo {
	t.Helper()
	fs, err := provider.Open(testenv.Ctx(t), "lifeboat.io/filesystem", map[string]string{"path": filepath.Dir(bucketDir)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	infos, err := volumefiles.GetVolumeInfo(testenv.Ctx(t), storage.NewBackupStore(fs, filepath.Base(bucketDir), "lifeboat"), backup)
	if err != nil {
		t.Fatal(err)
	}
	return infos
}

// TestCSIBackupAndRestore: claims with data are backed up with CSI
// snapshots through the real snapshot controller and driver; the tarball
// holds the snapshots, their contents and the class as Velero stores
// them; the in-cluster snapshot objects are gone while the driver keeps
// the storage snapshots (holding the data); with the originals deleted, a
// restore into another namespace makes new volumes from the snapshots,
// holding the same data; deleting the backup deletes the storage
// snapshots.
func TestCSIBackupAndRestore(t *testing.T) {
	c := env.CSI.Client
	ns := env.NewNamespace(t, "shop")
	claims := []string{"data", "logs"}
	handles := map[string]string{}
	for _, name := range claims {
		handles[name] = boundClaim(t, ns, name)
		writeVolume(t, handles[name], name+".txt", "contents of "+name)
	}
	// data's snapshot is larger than the 1Mi its claim asks for (the
	// driver does not enforce sizes; a snapshot's size is the data's), as
	// a snapshot of a volume the provisioner made larger than asked is:
	// its restored claim must ask for the snapshot's restore size, or the
	// provisioner refuses to make the volume.
	writeVolume(t, handles["data"], "big.bin", strings.Repeat("x", 3<<20))
	snapsBefore, err := env.CSI.Snapshots()
	if err != nil {
		t.Fatal(err)
	}
	bsl, bucketDir := env.FilesystemLocation(t, env.Name("fs"))

	b := &v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: env.Name("csi")},
		Spec: v1.BackupSpec{IncludedNamespaces: []string{ns}, StorageLocation: bsl.Name}}
	env.Create(t, b)
	b = env.WaitBackup(t, b.Name, 3*time.Minute)
	if b.Status.Phase != v1.BackupPhaseCompleted || b.Status.CSIVolumeSnapshotsAttempted != 2 || b.Status.CSIVolumeSnapshotsCompleted != 2 {
		t.Fatalf("backup status %+v\nsnapshot-controller: %s\ncsi-snapshotter: %s", b.Status, env.CSI.Log("snapshot-controller", 20), env.CSI.Log("csi-snapshotter", 20))
	}

	// The tarball: each claim names its snapshot; each snapshot is stored
	// ready with the handle, its content and the class too.
	items := archiveItems(t, bucketDir, b.Name)
	snapOf := map[string]string{}            // claim -> driver snapshot ID
	sizeOf := map[string]resource.Quantity{} // claim -> its snapshot's restore size
	for _, name := range claims {
		pvc := items["resources/persistentvolumeclaims/namespaces/"+ns+"/"+name+".json"]
		vsName, _ := pvc["metadata"].(map[string]any)["annotations"].(map[string]any)[csisnapshot.VolumeSnapshotNameLabel].(string)
		vs := items["resources/volumesnapshots.snapshot.storage.k8s.io/namespaces/"+ns+"/"+vsName+".json"]
		if vs == nil {
			t.Fatalf("claim %s: VolumeSnapshot %q not in the backup", name, vsName)
		}
		ann := vs["metadata"].(map[string]any)["annotations"].(map[string]any)
		handle, _ := ann[csisnapshot.HandleAnnotation].(string)
		if handle == "" || ann[csisnapshot.DriverAnnotation] != csistack.DriverName {
			t.Fatalf("stored VolumeSnapshot annotations %v", ann)
		}
		status := vs["status"].(map[string]any)
		if status["readyToUse"] != true {
			t.Errorf("stored VolumeSnapshot status %v", status)
		}
		vscName := status["boundVolumeSnapshotContentName"].(string)
		if items["resources/volumesnapshotcontents.snapshot.storage.k8s.io/cluster/"+vscName+".json"] == nil {
			t.Errorf("content %s not in the backup", vscName)
		}
		snapOf[name] = handle
		size, err := resource.ParseQuantity(fmt.Sprint(ann[csisnapshot.RestoreSizeAnnotation]))
		if err != nil {
			t.Fatalf("stored VolumeSnapshot of %s: restore size annotation %v: %v", name, ann[csisnapshot.RestoreSizeAnnotation], err)
		}
		sizeOf[name] = size
	}
	if data, logs := sizeOf["data"], sizeOf["logs"]; data.Cmp(resource.MustParse("1Mi")) <= 0 || logs.Cmp(resource.MustParse("1Mi")) >= 0 {
		t.Fatalf("snapshot restore sizes %v: want data's above its claim's 1Mi and logs' below", sizeOf)
	}
	if items["resources/volumesnapshotclasses.snapshot.storage.k8s.io/cluster/"+csistack.SnapshotClass+".json"] == nil {
		t.Errorf("the VolumeSnapshotClass is not in the backup")
	}
	for _, in := range volumeInfo(t, bucketDir, b.Name) {
		if in.BackupMethod != volumefiles.CSISnapshot || in.CSISnapshotInfo == nil || in.CSISnapshotInfo.SnapshotHandle != snapOf[in.PVCName] {
			t.Errorf("volume info %+v (csi %+v)", in, in.CSISnapshotInfo)
		}
	}
	out := clitest.Must(t, env.Kubeconfig, "-n", env.Namespace, "backup", "describe", b.Name, "--details")
	for _, name := range claims {
		if !strings.Contains(out, "CSI snapshot "+snapOf[name]) {
			t.Errorf("describe --details does not name %s's snapshot %s:\n%s", name, snapOf[name], out)
		}
	}

	// In the cluster: no VolumeSnapshot or content left; in the driver:
	// the storage snapshots, holding the data.
	poll(t, "the backup's snapshot objects gone from the cluster", time.Minute, func(ctx context.Context) (bool, error) {
		vss := &snapshotv1.VolumeSnapshotList{}
		if err := c.List(ctx, vss, client.InNamespace(ns)); err != nil {
			return false, err
		}
		vscs := &snapshotv1.VolumeSnapshotContentList{}
		if err := c.List(ctx, vscs); err != nil {
			return false, err
		}
		left := len(vss.Items)
		for _, x := range vscs.Items {
			if x.Spec.VolumeSnapshotRef.Namespace == ns {
				left++
			}
		}
		return left == 0, nil
	})
	snaps, err := env.CSI.Snapshots()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range claims {
		if !slices.Contains(snaps, snapOf[name]) || slices.Contains(snapsBefore, snapOf[name]) {
			t.Fatalf("driver snapshots %v lack %s's %s", snaps, name, snapOf[name])
		}
		files, err := env.CSI.SnapshotFiles(snapOf[name])
		if err != nil || string(files[name+".txt"]) != "contents of "+name {
			t.Errorf("snapshot %s holds %v (%v)", snapOf[name], files, err)
		}
	}

	// Delete the originals, then restore into another namespace.
	for _, name := range claims {
		if err := c.Delete(testenv.Ctx(t), &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	poll(t, "original volumes deleted by the driver", 2*time.Minute, func(ctx context.Context) (bool, error) {
		vols, err := env.CSI.Volumes()
		if err != nil {
			return false, err
		}
		for _, name := range claims {
			if slices.Contains(vols, handles[name]) {
				return false, nil
			}
		}
		return true, nil
	})
	target := env.Name("shop-restored")
	rs := &v1.Restore{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: env.Name("rs")},
		Spec: v1.RestoreSpec{BackupName: b.Name, NamespaceMapping: map[string]string{ns: target}}}
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
	for _, name := range claims {
		var handle string
		poll(t, "restored claim "+name+" bound to a volume made from its snapshot", 2*time.Minute, func(ctx context.Context) (bool, error) {
			pvc := &corev1.PersistentVolumeClaim{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: target, Name: name}, pvc); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			if pvc.Spec.DataSource == nil || pvc.Spec.DataSource.Kind != "VolumeSnapshot" {
				t.Fatalf("restored claim %s has data source %+v", name, pvc.Spec.DataSource)
			}
			if pvc.Status.Phase != corev1.ClaimBound {
				return false, nil
			}
			pv := &corev1.PersistentVolume{}
			if err := c.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil {
				return false, err
			}
			handle = pv.Spec.CSI.VolumeHandle
			return true, nil
		})
		if handle == handles[name] {
			t.Errorf("restored claim %s reuses the original volume %s", name, handle)
		}
		// The request: the snapshot's restore size where that is larger
		// than the stored claim's 1Mi, else the 1Mi.
		pvc := &corev1.PersistentVolumeClaim{}
		if err := c.Get(testenv.Ctx(t), client.ObjectKey{Namespace: target, Name: name}, pvc); err != nil {
			t.Fatal(err)
		}
		want, size := resource.MustParse("1Mi"), sizeOf[name]
		if size.Cmp(want) > 0 {
			want = size
		}
		if got := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; got.Cmp(want) != 0 {
			t.Errorf("restored claim %s requests %s, want %s (its snapshot's restore size is %s)", name, got.String(), want.String(), size.String())
		}
		files, err := env.CSI.VolumeFiles(handle)
		if err != nil || string(files[name+".txt"]) != "contents of "+name {
			t.Errorf("restored volume %s of %s holds %v (%v)", handle, name, files, err)
		}
	}

	// describe --details lists the claims restored from CSI snapshots,
	// with the storage snapshot each came from.
	out = clitest.Must(t, env.Kubeconfig, "-n", env.Namespace, "restore", "describe", rs.Name, "--details")
	if !strings.Contains(out, "Volumes:  2 from CSI snapshots, 0 from native snapshots") {
		t.Errorf("restore describe --details does not count the CSI snapshot restores:\n%s", out)
	}
	for _, name := range claims {
		if !strings.Contains(out, "pvc "+target+"/"+name) || !strings.Contains(out, "CSI snapshot "+snapOf[name]) {
			t.Errorf("restore describe --details does not show %s restored from %s:\n%s", name, snapOf[name], out)
		}
	}

	// Deleting the backup deletes its storage snapshots (the built-in
	// DeleteItemAction, from the stored contents Lifeboat labelled).
	clitest.Must(t, env.Kubeconfig, "-n", env.Namespace, "backup", "delete", b.Name, "--confirm", "--wait")
	poll(t, "the backup's storage snapshots gone from the driver", time.Minute, func(ctx context.Context) (bool, error) {
		snaps, err := env.CSI.Snapshots()
		if err != nil {
			return false, err
		}
		for _, name := range claims {
			if slices.Contains(snaps, snapOf[name]) {
				return false, nil
			}
		}
		return true, nil
	})
}

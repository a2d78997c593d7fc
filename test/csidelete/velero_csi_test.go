package csidelete

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/deleteactions"
	"github.com/lifeboat-io/lifeboat/internal/deletion"
	"github.com/lifeboat-io/lifeboat/internal/storage"
	"github.com/lifeboat-io/lifeboat/internal/storage/filesystem"
	"github.com/lifeboat-io/lifeboat/internal/testutil/clitest"
	"github.com/lifeboat-io/lifeboat/internal/testutil/csistack"
	"github.com/lifeboat-io/lifeboat/internal/testutil/testenv"
	"github.com/lifeboat-io/lifeboat/internal/testutil/velerocsi"
)

var (
	claimsGVR  = schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}
	volumesGVR = schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumes"}
	vsGVR      = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshots"}
	vscGVR     = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshotcontents"}
	classGVR   = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshotclasses"}
)

func dyn(t *testing.T) dynamic.Interface {
	t.Helper()
	d, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func lifeboat(t *testing.T, args ...string) string {
	t.Helper()
	return clitest.Must(t, env.Kubeconfig, append([]string{"-n", env.Namespace}, args...)...)
}

// poll waits for cond, failing the test with what after timeout.
func poll(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// snapshotClaim makes a claim on the stack's storage class and takes a
// VolumeSnapshot of it as Velero's claim action does (generateName
// velero-<claim>-, the backup's label, the class Velero would choose),
// waits until it is ready, labels its content as Velero's VolumeSnapshot
// action does, and returns the objects as they are then: what Velero
// stores.
func snapshotClaim(t *testing.T, ns, claim, backup string) (velerocsi.Volume, string) {
	t.Helper()
	d := dyn(t)
	ctx := testenv.Ctx(t)
	pvc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "PersistentVolumeClaim",
		"metadata": map[string]any{"namespace": ns, "name": claim, "labels": map[string]any{"app": "shop"}},
		"spec": map[string]any{
			"storageClassName": csistack.StorageClass, "accessModes": []any{"ReadWriteOnce"},
			"resources": map[string]any{"requests": map[string]any{"storage": "1Mi"}},
		},
	}}
	if _, err := d.Resource(claimsGVR).Namespace(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, time.Minute, "claim "+claim+" to bind", func(ctx context.Context) (bool, error) {
		got, err := d.Resource(claimsGVR).Namespace(ns).Get(ctx, claim, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		phase, _, _ := unstructured.NestedString(got.Object, "status", "phase")
		return phase == "Bound", nil
	})
	vs := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
		"metadata": map[string]any{"namespace": ns, "generateName": "velero-" + claim + "-",
			"labels": map[string]any{"app": "shop", v1.BackupNameLabel: v1.LabelValue(backup)}},
		"spec": map[string]any{"source": map[string]any{"persistentVolumeClaimName": claim}, "volumeSnapshotClassName": csistack.SnapshotClass},
	}}
	created, err := d.Resource(vsGVR).Namespace(ns).Create(ctx, vs, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	name := created.GetName()
	var ready *unstructured.Unstructured
	poll(t, 2*time.Minute, "VolumeSnapshot "+name+" to be ready", func(ctx context.Context) (bool, error) {
		got, err := d.Resource(vsGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ok, _, _ := unstructured.NestedBool(got.Object, "status", "readyToUse")
		ready = got
		return ok, nil
	})
	contentName, _, _ := unstructured.NestedString(ready.Object, "status", "boundVolumeSnapshotContentName")
	if err := velerocsi.LabelContent(ctx, d, contentName, backup); err != nil {
		t.Fatal(err)
	}
	content, err := d.Resource(vscGVR).Get(ctx, contentName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	handle, _, _ := unstructured.NestedString(content.Object, "status", "snapshotHandle")
	if handle == "" {
		t.Fatalf("content %s has no snapshot handle: %v", contentName, content.Object["status"])
	}
	claimObj, err := d.Resource(claimsGVR).Namespace(ns).Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pvName, _, _ := unstructured.NestedString(claimObj.Object, "spec", "volumeName")
	pv, err := d.Resource(volumesGVR).Get(ctx, pvName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return velerocsi.Volume{Claim: claimObj, Volume: pv, Snapshot: ready, Content: content}, handle
}

type veleroBackup struct {
	name, location string
	handles        []string
}

// leftInCluster is what of a backup's snapshot objects is still in the
// cluster when it is deleted.
type leftInCluster int

const (
	// nothingLeft: Velero removed both at the end of the backup (content
	// set to Retain first): the usual case.
	nothingLeft leftInCluster = iota
	// bothLeft: the end of the backup never ran (the server died).
	bothLeft
	// contentLeft: the VolumeSnapshot went without its content (deleted by
	// hand, with the content at Retain): a content bound to a snapshot
	// that no longer exists.
	contentLeft
)

type fixture struct {
	claims         []string
	ttl            time.Duration
	started        time.Time
	withoutTarball bool
	left           leftInCluster
	// extra adds volumes to the stored backup, never in the cluster or the
	// driver (it gets the real ones).
	extra func([]velerocsi.Volume) []velerocsi.Volume
}

// writeVeleroBackup takes a snapshot of each claim on the stack, writes
// the backup into a new bucket as Velero v1.18.3 would, removes the
// VolumeSnapshots and contents from the cluster as Velero does when a
// backup ends (the storage snapshots stay; f.left says otherwise), and
// attaches the bucket as a storage location, so the sync brings the Backup
// in.
func writeVeleroBackup(t *testing.T, f fixture) veleroBackup {
	t.Helper()
	ctx := testenv.Ctx(t)
	if f.ttl == 0 {
		f.ttl = 720 * time.Hour
	}
	if f.started.IsZero() {
		f.started = time.Now().Add(-time.Minute)
	}
	ns := env.NewNamespace(t, "velero-csi")
	vb := veleroBackup{name: env.Name("velero-csi"), location: env.Name("velero-bucket")}
	var vols []velerocsi.Volume
	for _, c := range f.claims {
		vol, handle := snapshotClaim(t, ns, c, vb.name)
		vols = append(vols, vol)
		vb.handles = append(vb.handles, handle)
	}
	class, err := dyn(t).Resource(classGVR).Get(ctx, csistack.SnapshotClass, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(env.StoreRoot, vb.location), 0o755); err != nil {
		t.Fatal(err)
	}
	fs, err := filesystem.New(map[string]string{filesystem.PathKey: env.StoreRoot})
	if err != nil {
		t.Fatal(err)
	}
	store := storage.NewBackupStore(fs, vb.location, "velero")
	b := &v1.Backup{
		ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: vb.name, UID: types.UID(env.Name("velero-uid")),
			Labels: map[string]string{v1.StorageLocationLabel: vb.location}},
		Spec: v1.BackupSpec{IncludedNamespaces: []string{ns}, StorageLocation: vb.location, TTL: metav1.Duration{Duration: f.ttl}},
	}
	stored := vols
	if f.extra != nil {
		stored = append(slices.Clone(vols), f.extra(vols)...)
	}
	if _, err := velerocsi.Write(ctx, store, velerocsi.Fixture{Backup: b, Class: class, Volumes: stored, Started: f.started, WithoutTarball: f.withoutTarball}); err != nil {
		t.Fatal(err)
	}
	for _, vol := range vols {
		switch f.left {
		case nothingLeft:
			err = velerocsi.Finalize(ctx, dyn(t), vol.Snapshot)
		case contentLeft:
			err = deleteSnapshotKeepContent(ctx, vol)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	snaps, err := env.CSI.Snapshots()
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range vb.handles {
		if !slices.Contains(snaps, h) {
			t.Fatalf("snapshot %s is not in the driver before the deletion (driver has %v)", h, snaps)
		}
	}
	if f.left == nothingLeft {
		// What Velero leaves: the storage snapshots, and no snapshot object.
		assertNoSnapshotObjects(t, ns)
	}

	env.Create(t, &v1.BackupStorageLocation{
		ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: vb.location},
		Spec: v1.BackupStorageLocationSpec{
			Provider:    "lifeboat.io/filesystem",
			Config:      map[string]string{"path": env.StoreRoot},
			StorageType: v1.StorageType{ObjectStorage: &v1.ObjectStorageLocation{Bucket: vb.location, Prefix: "velero"}},
		},
	})
	return vb
}

// deleteSnapshotKeepContent sets the content to Retain and deletes only
// the VolumeSnapshot, waiting until it is gone.
func deleteSnapshotKeepContent(ctx context.Context, vol velerocsi.Volume) error {
	d, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		return err
	}
	if _, err := d.Resource(vscGVR).Patch(ctx, vol.Content.GetName(), types.MergePatchType, []byte(`{"spec":{"deletionPolicy":"Retain"}}`), metav1.PatchOptions{}); err != nil {
		return err
	}
	res := d.Resource(vsGVR).Namespace(vol.Snapshot.GetNamespace())
	if err := res.Delete(ctx, vol.Snapshot.GetName(), metav1.DeleteOptions{}); err != nil {
		return err
	}
	return wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := res.Get(ctx, vol.Snapshot.GetName(), metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// assertNoSnapshotObjects fails unless the cluster holds no
// VolumeSnapshotContent at all and no VolumeSnapshot in ns.
func assertNoSnapshotObjects(t *testing.T, ns string) {
	t.Helper()
	ctx := testenv.Ctx(t)
	vscs, err := dyn(t).Resource(vscGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range vscs.Items {
		t.Errorf("VolumeSnapshotContent %s is in the cluster (labels %v, finalizers %v, deleting %v)", c.GetName(), c.GetLabels(), c.GetFinalizers(), c.GetDeletionTimestamp() != nil)
	}
	vss, err := dyn(t).Resource(vsGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range vss.Items {
		t.Errorf("VolumeSnapshot %s/%s is in the cluster", s.GetNamespace(), s.GetName())
	}
}

// assertGone checks what deleting the backup must leave: no Backup, no key
// under its name, no snapshot in the driver, no snapshot object.
func assertGone(t *testing.T, vb veleroBackup) {
	t.Helper()
	poll(t, 2*time.Minute, "backup "+vb.name+" to be deleted", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: vb.name}, &v1.Backup{})
		return apierrors.IsNotFound(err), nil
	})
	snaps, err := env.CSI.Snapshots()
	if err != nil {
		t.Fatal(err)
	}
	if len(snaps) != 0 {
		t.Errorf("snapshots left in the driver: %v (the backup's were %v)\ncsi-snapshotter's log:\n%s", snaps, vb.handles, env.CSI.Log("csi-snapshotter", 30))
	}
	assertNoSnapshotObjects(t, "")
	dir := filepath.Join(env.StoreRoot, vb.location, "velero", "backups", vb.name)
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		t.Errorf("files left under %s: %v", dir, entries)
	}
}

func syncedBackup(t *testing.T, vb veleroBackup) *v1.Backup {
	t.Helper()
	b := env.WaitBackup(t, vb.name, time.Minute)
	if b.Status.Phase != v1.BackupPhaseCompleted || b.Status.CSIVolumeSnapshotsCompleted != len(vb.handles) {
		t.Fatalf("synced backup: phase %s, CSI snapshots %d", b.Status.Phase, b.Status.CSIVolumeSnapshotsCompleted)
	}
	return b
}

// The check: a Velero-layout CSI backup, nothing of it left in the
// cluster, deleted by `lifeboat backup delete`, leaves no snapshot in the
// driver.
func TestVeleroCSIBackupDeletedByCommandLeavesNoSnapshot(t *testing.T) {
	vb := writeVeleroBackup(t, fixture{claims: []string{"data", "logs"}})
	syncedBackup(t, vb)

	plan := lifeboat(t, "backup", "delete", vb.name, "--dry-run")
	// Two VolumeSnapshots and their two contents.
	if !strings.Contains(plan, deleteactions.CSISnapshotCleanupName+": 4 items") {
		t.Errorf("--dry-run does not list the two snapshots and contents for %s:\n%s", deleteactions.CSISnapshotCleanupName, plan)
	}
	out := lifeboat(t, "backup", "delete", vb.name, "--confirm", "--wait")
	assertGone(t, vb)
	if t.Failed() {
		t.Logf("lifeboat backup delete:\n%s", out)
	}
}

// The objects are still in the cluster: the backup's end never ran (both
// left), or its VolumeSnapshot was deleted by hand with the content at
// Retain (a content bound to a snapshot that is gone, which no controller
// would ever let go). Deleting the backup leaves no snapshot and no object.
func TestCSIBackupWithObjectsStillInTheClusterLeavesNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		left leftInCluster
	}{{"both left", bothLeft}, {"content left", contentLeft}} {
		t.Run(tc.name, func(t *testing.T) {
			vb := writeVeleroBackup(t, fixture{claims: []string{"data"}, left: tc.left})
			syncedBackup(t, vb)
			lifeboat(t, "backup", "delete", vb.name, "--confirm", "--wait")
			assertGone(t, vb)
		})
	}
}

// The same backup left to expire: garbage collection asks for the deletion.
func TestVeleroCSIBackupDeletedByTTLLeavesNoSnapshot(t *testing.T) {
	// Expired an hour ago: the sync brings it in, and GC collects it at once.
	vb := writeVeleroBackup(t, fixture{claims: []string{"data"}, ttl: time.Hour, started: time.Now().Add(-2 * time.Hour)})
	// The Backup may come and go between two looks: wait for the request
	// garbage collection makes, until it is done.
	var requests v1.DeleteBackupRequestList
	poll(t, 2*time.Minute, "the deletion of expired backup "+vb.name, func(ctx context.Context) (bool, error) {
		if err := env.Client.List(ctx, &requests, client.InNamespace(env.Namespace), client.MatchingLabels{v1.BackupNameLabel: v1.LabelValue(vb.name)}); err != nil {
			return false, err
		}
		return len(requests.Items) > 0 && requests.Items[0].Status.Phase == v1.DeleteBackupRequestPhaseProcessed, nil
	})
	if len(requests.Items) != 1 || len(requests.Items[0].Status.Errors) != 0 {
		t.Errorf("deletion requests %+v, want the one garbage collection made, without errors", requests.Items)
	}
	assertGone(t, vb)
}

// The tarball is lost; the volume information still names the snapshots,
// and they are deleted from it.
func TestVeleroCSIBackupWithoutTarballLeavesNoSnapshot(t *testing.T) {
	vb := writeVeleroBackup(t, fixture{claims: []string{"data"}, withoutTarball: true})
	syncedBackup(t, vb)
	out := lifeboat(t, "backup", "delete", vb.name, "--confirm", "--wait")
	assertGone(t, vb)
	requests := &v1.DeleteBackupRequestList{}
	if err := env.Client.List(testenv.Ctx(t), requests, client.InNamespace(env.Namespace), client.MatchingLabels{v1.BackupNameLabel: v1.LabelValue(vb.name)}); err != nil {
		t.Fatal(err)
	}
	if len(requests.Items) != 1 || requests.Items[0].Status.Report == nil {
		t.Fatalf("deletion requests %+v\n%s", requests.Items, out)
	}
	rep := requests.Items[0].Status.Report
	var got []string
	for _, a := range rep.Actions {
		got = append(got, fmt.Sprintf("%s:%d", a.Name, a.Items))
	}
	if !slices.Contains(got, deleteactions.CSISnapshotCleanupName+deletion.VolumeInfoSource+":1") {
		t.Errorf("report actions %v, want the CSI cleanup with one item from the volume information", got)
	}
	if !slices.ContainsFunc(rep.Warnings, func(w string) bool { return strings.Contains(w, "volume information") }) {
		t.Errorf("report warnings %v, want the missing tarball named", rep.Warnings)
	}
}

// unservedDriver has no csi-snapshotter: nothing deletes its snapshots.
const unservedDriver = "unserved.csi.lifeboat.io"

// ghostVolume is a copy of vol whose snapshot belongs to unservedDriver.
func ghostVolume(vol velerocsi.Volume) velerocsi.Volume {
	g := velerocsi.Volume{Claim: vol.Claim.DeepCopy(), Volume: vol.Volume.DeepCopy(), Snapshot: vol.Snapshot.DeepCopy(), Content: vol.Content.DeepCopy()}
	g.Claim.SetName("ghost")
	g.Volume.SetName("pv-ghost-" + vol.Volume.GetName())
	_ = unstructured.SetNestedField(g.Claim.Object, g.Volume.GetName(), "spec", "volumeName")
	g.Snapshot.SetName("velero-ghost-x1y2z")
	_ = unstructured.SetNestedField(g.Snapshot.Object, "ghost", "spec", "source", "persistentVolumeClaimName")
	g.Content.SetName("snapcontent-ghost-" + vol.Content.GetName())
	_ = unstructured.SetNestedField(g.Snapshot.Object, g.Content.GetName(), "status", "boundVolumeSnapshotContentName")
	_ = unstructured.SetNestedField(g.Content.Object, unservedDriver, "spec", "driver")
	_ = unstructured.SetNestedField(g.Content.Object, "snap-of-an-unserved-driver", "status", "snapshotHandle")
	_ = unstructured.SetNestedField(g.Content.Object, g.Snapshot.GetName(), "spec", "volumeSnapshotRef", "name")
	return g
}

// A snapshot that cannot be deleted (its driver's snapshotter does not
// run) fails the deletion like any DeleteItemAction error: the backup and
// its files stay, the error names the action, the content and the driver,
// the other snapshot is deleted all the same, and nothing is left in the
// cluster. The operator's consent (--skip-failed-actions) then lets the
// backup go, the skipped content recorded.
func TestVeleroCSISnapshotThatCannotBeDeletedKeepsTheBackup(t *testing.T) {
	vb := writeVeleroBackup(t, fixture{claims: []string{"data"},
		extra: func(vols []velerocsi.Volume) []velerocsi.Volume { return []velerocsi.Volume{ghostVolume(vols[0])} }})
	env.WaitBackup(t, vb.name, time.Minute)
	lifeboat(t, "backup", "delete", vb.name, "--confirm")

	var req v1.DeleteBackupRequest
	poll(t, 2*time.Minute, "the first deletion attempt to fail", func(ctx context.Context) (bool, error) {
		var list v1.DeleteBackupRequestList
		if err := env.Client.List(ctx, &list, client.InNamespace(env.Namespace), client.MatchingLabels{v1.BackupNameLabel: v1.LabelValue(vb.name)}); err != nil || len(list.Items) == 0 {
			return false, err
		}
		req = list.Items[0]
		return req.Status.Attempts >= 1 && len(req.Status.Errors) > 0, nil
	})
	msg := strings.Join(req.Status.Errors, "\n")
	t.Logf("the first attempt's errors:\n%s", msg)
	for _, want := range []string{deleteactions.CSISnapshotCleanupName, "snapcontent-ghost-", unservedDriver, "snap-of-an-unserved-driver", "is the driver's csi-snapshotter running?"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the deletion's errors do not name %q:\n%s", want, msg)
		}
	}
	var b v1.Backup
	if err := env.Client.Get(testenv.Ctx(t), client.ObjectKey{Namespace: env.Namespace, Name: vb.name}, &b); err != nil {
		t.Fatalf("the backup is gone after a failed deletion: %v", err)
	}
	if _, err := os.Stat(filepath.Join(env.StoreRoot, vb.location, "velero", "backups", vb.name, "velero-backup.json")); err != nil {
		t.Errorf("the backup's files are gone after a failed deletion: %v", err)
	}
	if snaps, err := env.CSI.Snapshots(); err != nil || len(snaps) != 0 {
		t.Errorf("the deletable snapshot was not deleted alongside the failure: driver has %v (%v)", snaps, err)
	}
	assertNoSnapshotObjects(t, "")

	lifeboat(t, "backup", "delete", vb.name, "--confirm", "--skip-failed-actions", "--wait")
	assertGone(t, vb)
	var list v1.DeleteBackupRequestList
	if err := env.Client.List(testenv.Ctx(t), &list, client.InNamespace(env.Namespace), client.MatchingLabels{v1.BackupNameLabel: v1.LabelValue(vb.name)}); err != nil {
		t.Fatal(err)
	}
	skipped := false
	for _, r := range list.Items {
		if r.Status.Report == nil {
			continue
		}
		for _, it := range r.Status.Report.SkippedItems {
			skipped = skipped || (it.Plugin == deleteactions.CSISnapshotCleanupName && strings.HasPrefix(it.Name, "snapcontent-ghost-"))
		}
	}
	if !skipped {
		t.Errorf("no request reports the ghost content skipped: %+v", list.Items)
	}
}

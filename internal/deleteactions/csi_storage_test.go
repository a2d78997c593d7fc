package deleteactions

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// fakeSnapshotter stands in for the csi-snapshotter sidecar and its
// driver, on the contents the action creates (labelled TempContentLabel),
// as external-snapshotter v8 treats an unbound pre-provisioned content:
// it records the handle in the status when the driver has the snapshot
// (else the sidecar's "can not find snapshot" error), and once the content
// is being deleted calls DeleteSnapshot if the status has the handle, then
// drops the finalizer. The real components run in the e2e tests
// (test/csidelete); this one lets the action's edge cases be
// forced.
type fakeSnapshotter struct {
	mu        sync.Mutex
	snapshots map[string]bool // handles the driver has
	failing   map[string]bool // handles whose DeleteSnapshot fails
	deleted   []string        // DeleteSnapshot calls that succeeded
	stopped   bool
}

func startFakeSnapshotter(t *testing.T, handles ...string) *fakeSnapshotter {
	t.Helper()
	f := &fakeSnapshotter{snapshots: map[string]bool{}, failing: map[string]bool{}}
	for _, h := range handles {
		f.snapshots[h] = true
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			f.sync(ctx)
			time.Sleep(20 * time.Millisecond)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return f
}

func (f *fakeSnapshotter) sync(ctx context.Context) {
	f.mu.Lock()
	stopped := f.stopped
	f.mu.Unlock()
	if stopped {
		return
	}
	list, err := dyn.Resource(vscGVR).List(ctx, metav1.ListOptions{LabelSelector: TempContentLabel})
	if err != nil {
		return
	}
	for i := range list.Items {
		vsc := &list.Items[i]
		handle, _, _ := unstructured.NestedString(vsc.Object, "spec", "source", "snapshotHandle")
		status, _, _ := unstructured.NestedMap(vsc.Object, "status")
		f.mu.Lock()
		switch {
		case vsc.GetDeletionTimestamp() != nil:
			if !hasFinalizer(vsc, ContentFinalizer) {
				break
			}
			if h, _ := status["snapshotHandle"].(string); h != "" {
				if f.failing[h] {
					break
				}
				delete(f.snapshots, h)
				f.deleted = append(f.deleted, h)
			}
			c := vsc.DeepCopy()
			c.SetFinalizers(nil)
			_, _ = dyn.Resource(vscGVR).Update(ctx, c, metav1.UpdateOptions{})
		case status == nil:
			c := vsc.DeepCopy()
			if f.snapshots[handle] {
				c.Object["status"] = map[string]any{"snapshotHandle": handle, "readyToUse": true}
			} else {
				c.Object["status"] = map[string]any{"error": map[string]any{"message": "Failed to check and update snapshot content: can not find snapshot for snapshotID " + handle}}
			}
			_, _ = dyn.Resource(vscGVR).Update(ctx, c, metav1.UpdateOptions{})
		}
		f.mu.Unlock()
	}
}

func (f *fakeSnapshotter) has(h string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.snapshots[h]
}

func (f *fakeSnapshotter) deletes(h string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, d := range f.deleted {
		if d == h {
			n++
		}
	}
	return n
}

func (f *fakeSnapshotter) set(fn func(f *fakeSnapshotter)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// storedContent is a VolumeSnapshotContent as Velero v1.18 stores it: made
// by the snapshot controller for a VolumeSnapshot (bound, with its UID),
// labelled with the backup's name by Velero's VolumeSnapshot action,
// Retain, the handle in its status.
func storedContent(name, handle string, b *v1.Backup) map[string]any {
	return map[string]any{
		"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotContent",
		"metadata": map[string]any{
			"name": name, "uid": "2a3f7c0e-0000-4000-8000-000000000001", "resourceVersion": "4711",
			"creationTimestamp": "2026-11-30T10:00:00Z",
			"labels":            map[string]any{v1.BackupNameLabel: v1.LabelValue(b.Name)},
			"finalizers":        []any{ContentFinalizer},
			"annotations":       map[string]any{"snapshot.storage.kubernetes.io/deletion-secret-name": "snap-secret", "snapshot.storage.kubernetes.io/deletion-secret-namespace": "csi"},
		},
		"spec": map[string]any{
			"deletionPolicy": "Retain", "driver": "hostpath.csi.k8s.io",
			"source":                  map[string]any{"volumeHandle": "vol-1"},
			"volumeSnapshotClassName": "csi-class",
			"volumeSnapshotRef": map[string]any{
				"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
				"namespace": "app", "name": "velero-data-abcde", "uid": "2a3f7c0e-0000-4000-8000-000000000002", "resourceVersion": "4700",
			},
		},
		"status": map[string]any{"snapshotHandle": handle, "readyToUse": true, "restoreSize": int64(1 << 20), "creationTime": int64(1764496800000000000)},
	}
}

func tempContents(t *testing.T) []unstructured.Unstructured {
	t.Helper()
	list, err := dyn.Resource(vscGVR).List(ctx(t), metav1.ListOptions{LabelSelector: TempContentLabel})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func csiClients(t *testing.T, wait time.Duration) *Clients {
	c := newClients(t, "velero")
	c.CSIWait = wait
	return c
}

// Velero's layout: the VolumeSnapshot and the content are gone from the
// cluster; only the stored content says which snapshot to delete.
func TestCSISnapshotCleanupDeletesTheStorageSnapshotOfAStoredContent(t *testing.T) {
	b := backupNamed("csi-" + uniqueName("b"))
	handle := uniqueName("snap-handle")
	other := uniqueName("other-handle")
	f := startFakeSnapshotter(t, handle, other)
	action := NewCSISnapshotCleanup(csiClients(t, 20*time.Second))

	item := storedContent(uniqueName("snapcontent"), handle, b)
	if err := execute(action, itemOf(item), b); err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if f.has(handle) {
		t.Error("the storage snapshot is still in the driver")
	}
	if !f.has(other) {
		t.Error("another snapshot was deleted")
	}
	if left := tempContents(t); len(left) != 0 {
		t.Errorf("%d contents made for the deletion left in the cluster", len(left))
	}
	// Repeated (a resumed deletion): the snapshot is gone in the driver,
	// the call succeeds and leaves nothing.
	if err := execute(action, itemOf(item), b); err != nil {
		t.Fatalf("Execute again: %v", err)
	}
	if n := f.deletes(handle); n != 1 {
		t.Errorf("DeleteSnapshot called %d times for %s, want 1", n, handle)
	}
	if left := tempContents(t); len(left) != 0 {
		t.Errorf("%d contents made for the deletion left after a repeat", len(left))
	}
}

// What the re-created content looks like: the rules the sidecar deletes
// by, and nothing of the stored object's server fields.
func TestTempContentIsAnUnboundDeletablePreProvisionedContent(t *testing.T) {
	b := backupNamed("nightly")
	stored := &unstructured.Unstructured{Object: storedContent("snapcontent-1", "h-1", b)}
	c := TempContent(stored, b, "h-1")
	if !strings.HasPrefix(c.GetName(), "lifeboat-delete-") || c.GetName() == stored.GetName() {
		t.Errorf("name %q, want a fresh lifeboat-delete- name", c.GetName())
	}
	if again := TempContent(stored, b, "h-1"); again.GetName() != c.GetName() {
		t.Error("the name differs between calls: a retry would not find the content an earlier attempt made")
	}
	if o := TempContent(stored, backupNamed("nightly"), "h-1"); o.GetName() == c.GetName() {
		t.Error("another backup (UID) gets the same name")
	}
	if c.GetUID() != "" || c.GetResourceVersion() != "" || c.GetCreationTimestamp() != (metav1.Time{}) {
		t.Errorf("server fields kept: uid %q resourceVersion %q", c.GetUID(), c.GetResourceVersion())
	}
	if _, ok := c.Object["status"]; ok {
		t.Error("status kept")
	}
	spec := c.Object["spec"].(map[string]any)
	if spec["deletionPolicy"] != "Delete" {
		t.Errorf("deletionPolicy %v", spec["deletionPolicy"])
	}
	if src := spec["source"].(map[string]any); len(src) != 1 || src["snapshotHandle"] != "h-1" {
		t.Errorf("source %v, want only snapshotHandle h-1", src)
	}
	if _, ok := spec["volumeSnapshotClassName"]; ok {
		t.Error("volumeSnapshotClassName kept")
	}
	ref := spec["volumeSnapshotRef"].(map[string]any)
	if ref["uid"] != nil || ref["name"] == "velero-data-abcde" || ref["namespace"] == "" {
		t.Errorf("volumeSnapshotRef %v: want a name and namespace of no snapshot and no uid", ref)
	}
	if spec["driver"] != "hostpath.csi.k8s.io" {
		t.Errorf("driver %v", spec["driver"])
	}
	if fs := c.GetFinalizers(); len(fs) != 1 || fs[0] != ContentFinalizer {
		t.Errorf("finalizers %v", fs)
	}
	if c.GetAnnotations()["snapshot.storage.kubernetes.io/deletion-secret-name"] != "snap-secret" {
		t.Error("the deletion secret annotations are lost: the driver would be called without its credentials")
	}
	if c.GetLabels()[v1.BackupNameLabel] != "nightly" || c.GetLabels()[TempContentLabel] == "" {
		t.Errorf("labels %v", c.GetLabels())
	}
}

// A stored content the backup did not label is not its own (Velero's rule).
func TestCSISnapshotCleanupLeavesOtherBackupsSnapshots(t *testing.T) {
	b := backupNamed("csi-" + uniqueName("b"))
	handle := uniqueName("snap-handle")
	f := startFakeSnapshotter(t, handle)
	item := storedContent(uniqueName("snapcontent"), handle, backupNamed("another-backup"))
	if err := execute(NewCSISnapshotCleanup(csiClients(t, 5*time.Second)), itemOf(item), b); err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if !f.has(handle) || len(tempContents(t)) != 0 {
		t.Error("another backup's snapshot was acted on")
	}
}

// The driver fails to delete: the action reports it (the backup is kept),
// and the next attempt, once the driver works, finishes the job.
func TestCSISnapshotCleanupReportsAFailedDeletionAndRetries(t *testing.T) {
	b := backupNamed("csi-" + uniqueName("b"))
	handle := uniqueName("snap-handle")
	f := startFakeSnapshotter(t, handle)
	f.set(func(f *fakeSnapshotter) { f.failing[handle] = true })
	action := NewCSISnapshotCleanup(csiClients(t, 2*time.Second))
	item := storedContent(uniqueName("snapcontent"), handle, b)
	err := execute(action, itemOf(item), b)
	if err == nil || !strings.Contains(err.Error(), handle) || !strings.Contains(err.Error(), "still there") {
		t.Fatalf("Execute with a failing driver: %v, want an error naming the snapshot", err)
	}
	if !f.has(handle) {
		t.Fatal("the snapshot is gone although the driver failed")
	}
	f.set(func(f *fakeSnapshotter) { delete(f.failing, handle) })
	if err := execute(action, itemOf(item), b); err != nil {
		t.Fatalf("Execute after the driver recovered: %v", err)
	}
	if f.has(handle) || len(tempContents(t)) != 0 {
		t.Error("the snapshot or the content made to delete it is left")
	}
}

// No snapshotter takes the content up: an error, and nothing left behind
// in the cluster for good.
func TestCSISnapshotCleanupWithoutASnapshotter(t *testing.T) {
	b := backupNamed("csi-" + uniqueName("b"))
	handle := uniqueName("snap-handle")
	f := startFakeSnapshotter(t, handle)
	f.set(func(f *fakeSnapshotter) { f.stopped = true })
	err := execute(NewCSISnapshotCleanup(csiClients(t, time.Second)), itemOf(storedContent(uniqueName("snapcontent"), handle, b)), b)
	if err == nil || !strings.Contains(err.Error(), "the csi-snapshotter of driver hostpath.csi.k8s.io did not take up") || !strings.Contains(err.Error(), handle) {
		t.Fatalf("Execute without a snapshotter: %v", err)
	}
	if left := tempContents(t); len(left) != 0 {
		t.Errorf("%d contents left behind", len(left))
	}
}

// The content is still in the cluster, bound to a VolumeSnapshot that is
// gone: no controller would ever let it go, so the action does, after the
// storage snapshot is deleted.
func TestCSISnapshotCleanupReleasesAnOrphanedContent(t *testing.T) {
	b := backupNamed("csi-" + uniqueName("b"))
	handle := uniqueName("snap-handle")
	f := startFakeSnapshotter(t, handle)
	name := uniqueName("snapcontent")
	live := storedContent(name, handle, b)
	md := live["metadata"].(map[string]any)
	delete(md, "uid")
	delete(md, "resourceVersion")
	delete(md, "creationTimestamp")
	delete(live, "status")
	create(t, vscGVR, live)
	if err := execute(NewCSISnapshotCleanup(csiClients(t, 20*time.Second)), itemOf(storedContent(name, handle, b)), b); err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if f.has(handle) {
		t.Error("the storage snapshot is still in the driver")
	}
	if obj, _ := getObj(t, vscGVR, "", name); obj != nil {
		t.Errorf("the orphaned content is still there (finalizers %v, deleting %v)", obj.GetFinalizers(), obj.GetDeletionTimestamp() != nil)
	}
}

// A content stored at v1beta1 (an old backup) is made again at the
// version the cluster serves.
func TestCSISnapshotCleanupOfAv1beta1Content(t *testing.T) {
	b := backupNamed("csi-" + uniqueName("b"))
	handle := uniqueName("snap-handle")
	f := startFakeSnapshotter(t, handle)
	item := storedContent(uniqueName("snapcontent"), handle, b)
	item["apiVersion"] = "snapshot.storage.k8s.io/v1beta1"
	if err := execute(NewCSISnapshotCleanup(csiClients(t, 20*time.Second)), itemOf(item), b); err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if f.has(handle) || len(tempContents(t)) != 0 {
		t.Error("the snapshot or the content made to delete it is left")
	}
}

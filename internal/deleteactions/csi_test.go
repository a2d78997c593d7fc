package deleteactions

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

const holdFinalizer = "test.lifeboat.io/hold"

func snapshot(namespace, name string, labels map[string]string, boundContent string) map[string]any {
	obj := map[string]any{
		"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
		"metadata": objMeta(namespace, name, labels),
		"spec":     map[string]any{"source": map[string]any{"persistentVolumeClaimName": "data"}},
	}
	if boundContent != "" {
		obj["status"] = map[string]any{"boundVolumeSnapshotContentName": boundContent, "readyToUse": true}
	}
	return obj
}

func content(name string, labels map[string]string, finalizers ...string) map[string]any {
	m := objMeta("", name, labels)
	if len(finalizers) > 0 {
		m["finalizers"] = toAny(finalizers)
	}
	return map[string]any{
		"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotContent",
		"metadata": m,
		"spec":     map[string]any{"deletionPolicy": "Retain", "driver": "hostpath.csi.k8s.io", "source": map[string]any{"snapshotHandle": name}},
	}
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func deletionPolicy(t *testing.T, name string) string {
	t.Helper()
	obj, _ := getObj(t, vscGVR, "", name)
	if obj == nil {
		t.Fatalf("VolumeSnapshotContent %s is gone", name)
	}
	p, _, _ := unstructured.NestedString(obj.Object, "spec", "deletionPolicy")
	return p
}

func release(t *testing.T, name string) {
	t.Helper()
	patch := []byte(`{"metadata":{"finalizers":null}}`)
	if _, err := dyn.Resource(vscGVR).Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !strings.Contains(err.Error(), "not found") {
		t.Errorf("removing the test finalizer of %s: %v", name, err)
	}
}

func TestCSISnapshotCleanupAppliesToSnapshotKinds(t *testing.T) {
	sel, err := NewCSISnapshotCleanup(nil).AppliesTo()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"volumesnapshots.snapshot.storage.k8s.io", "volumesnapshotcontents.snapshot.storage.k8s.io"}
	if !slices.Equal(sel.IncludedResources, want) || len(sel.IncludedNamespaces)+len(sel.ExcludedResources) != 0 || sel.LabelSelector != "" {
		t.Errorf("AppliesTo = %+v, want only IncludedResources %v", sel, want)
	}
}

func TestCSISnapshotCleanupDeletesOnlyTheBackupsSnapshots(t *testing.T) {
	ns := newNamespace(t, "csi")
	other := newNamespace(t, "csi-other")
	// Over 63 characters, so the label holds the hashed form.
	a := backupNamed("nightly-" + strings.Repeat("x", 70))
	b := backupNamed("backup-b")
	la := map[string]string{v1.BackupNameLabel: v1.LabelValue(a.Name)}
	lb := map[string]string{v1.BackupNameLabel: v1.LabelValue(b.Name)}
	restored := map[string]string{v1.BackupNameLabel: v1.LabelValue(a.Name), v1.RestoreNameLabel: "r1"}

	bound := uniqueName("snapcontent")
	create(t, vscGVR, content(bound, nil))
	create(t, vscGVR, content(uniqueName("unused"), nil))
	create(t, vsGVR, snapshot(ns, "snap", la, bound))
	create(t, vsGVR, snapshot(other, "snap", la, ""))
	create(t, vsGVR, snapshot(ns, "snap-b", lb, ""))
	create(t, vsGVR, snapshot(ns, "snap-restored", restored, ""))
	contentA := uniqueName("content-a")
	created := create(t, vscGVR, content(contentA, la, holdFinalizer))
	t.Cleanup(func() { release(t, contentA) })
	contentB := uniqueName("content-b")
	create(t, vscGVR, content(contentB, lb))

	action := NewCSISnapshotCleanup(newClients(t, "velero"))

	// The snapshot of backup A: its bound content switches to Delete, then
	// the snapshot goes.
	if err := execute(action, itemOf(snapshot(ns, "snap", la, bound)), a); err != nil {
		t.Fatalf("Execute on A's snapshot: %v", err)
	}
	if exists(t, vsGVR, ns, "snap") {
		t.Error("A's VolumeSnapshot is still there")
	}
	if p := deletionPolicy(t, bound); p != "Delete" {
		t.Errorf("bound content's deletionPolicy = %q, want Delete", p)
	}
	if !exists(t, vsGVR, other, "snap") {
		t.Error("a snapshot of the same name in another namespace was deleted")
	}

	// Not made by backup A: left alone.
	for _, name := range []string{"snap-b", "snap-restored"} {
		if err := execute(action, itemOf(snapshot(ns, name, nil, "")), a); err != nil {
			t.Fatalf("Execute on %s: %v", name, err)
		}
		if !exists(t, vsGVR, ns, name) {
			t.Errorf("VolumeSnapshot %s/%s was deleted by backup A's cleanup", ns, name)
		}
	}
	if err := execute(action, itemOf(content(contentB, nil)), a); err != nil {
		t.Fatalf("Execute on B's content: %v", err)
	}
	if !exists(t, vscGVR, "", contentB) || deletionPolicy(t, contentB) != "Retain" {
		t.Error("backup B's VolumeSnapshotContent was touched by backup A's cleanup")
	}

	// A content of backup A: deletionPolicy Delete before the delete. The
	// test finalizer keeps the object so both steps can be seen in order.
	wctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := dyn.Resource(vscGVR).Watch(wctx, metav1.ListOptions{FieldSelector: "metadata.name=" + contentA, ResourceVersion: created.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	// Stored as Velero stores it, labelled: the storage snapshot step runs
	// first (the fake driver no longer has the snapshot).
	startFakeSnapshotter(t)
	if err := execute(action, itemOf(content(contentA, la)), a); err != nil {
		t.Fatalf("Execute on A's content: %v", err)
	}
	var sawDeleteWhileLive bool
	for done := false; !done; {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch ended before the content was deleted")
			}
			if ev.Type != watch.Modified {
				continue
			}
			obj := ev.Object.(*unstructured.Unstructured)
			p, _, _ := unstructured.NestedString(obj.Object, "spec", "deletionPolicy")
			if obj.GetDeletionTimestamp() == nil {
				sawDeleteWhileLive = sawDeleteWhileLive || p == "Delete"
				continue
			}
			if p != "Delete" {
				t.Errorf("content deleted with deletionPolicy %q", p)
			}
			done = true
		case <-wctx.Done():
			t.Fatal("the content was not deleted")
		}
	}
	if !sawDeleteWhileLive {
		t.Error("deletionPolicy was not set to Delete before the content was deleted")
	}

	// Gone already: nothing to do, no error.
	if err := execute(action, itemOf(snapshot(ns, "never-existed", nil, "")), a); err != nil {
		t.Errorf("Execute on a missing snapshot: %v", err)
	}
	if err := execute(action, itemOf(content(uniqueName("never-existed"), nil)), a); err != nil {
		t.Errorf("Execute on a missing content: %v", err)
	}
}

// A snapshot whose bound content is gone still goes.
func TestCSISnapshotCleanupWithMissingBoundContent(t *testing.T) {
	ns := newNamespace(t, "csi")
	a := backupNamed("backup-a")
	la := map[string]string{v1.BackupNameLabel: v1.LabelValue(a.Name)}
	create(t, vsGVR, snapshot(ns, "snap", la, uniqueName("gone-content")))
	if err := execute(NewCSISnapshotCleanup(newClients(t, "velero")), itemOf(snapshot(ns, "snap", nil, "")), a); err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if exists(t, vsGVR, ns, "snap") {
		t.Error("the snapshot is still there")
	}
}

// A cluster without the snapshot CRDs: the mapper knows no snapshot kinds,
// so the action succeeds without touching anything.
func TestCSISnapshotCleanupWithoutSnapshotCRDs(t *testing.T) {
	ns := newNamespace(t, "csi")
	a := backupNamed("backup-a")
	la := map[string]string{v1.BackupNameLabel: v1.LabelValue(a.Name)}
	create(t, vsGVR, snapshot(ns, "snap", la, ""))
	c := newClients(t, "velero")
	c.Mapper = meta.NewDefaultRESTMapper(nil)
	var logs bytes.Buffer
	c.Log = slog.New(slog.NewTextHandler(&logs, nil))
	action := NewCSISnapshotCleanup(c)
	for range 2 {
		if err := execute(action, itemOf(snapshot(ns, "snap", nil, "")), a); err != nil {
			t.Fatalf("Execute without snapshot CRDs: %v", err)
		}
	}
	if !exists(t, vsGVR, ns, "snap") {
		t.Error("a snapshot was deleted although its kind was not found in discovery")
	}
	if n := strings.Count(logs.String(), "CRDs are not installed"); n != 1 {
		t.Errorf("%d log lines about the missing CRDs, want 1:\n%s", n, logs.String())
	}
}

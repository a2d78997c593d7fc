package main

import (
	"errors"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/framework"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/plugintest"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

const driver = "hostpath.csi.lifeboat.io"

func obj(apiVersion, kind, ns, name string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: fields}
	if u.Object == nil {
		u.Object = map[string]any{}
	}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// claim is a claim that asks for restore points.
func claim(ns, name, volume string) *unstructured.Unstructured {
	c := obj("v1", "PersistentVolumeClaim", ns, name, map[string]any{"spec": map[string]any{"volumeName": volume}})
	c.SetLabels(map[string]string{OptInLabel: "true"})
	return c
}

func csiVolume(name string) *unstructured.Unstructured {
	return obj("v1", "PersistentVolume", "", name, map[string]any{"spec": map[string]any{"csi": map[string]any{"driver": driver, "volumeHandle": "vol-" + name}}})
}

func class(name, drv string, labelled bool) *unstructured.Unstructured {
	c := obj("snapshot.storage.k8s.io/v1", "VolumeSnapshotClass", "", name, map[string]any{"driver": drv, "deletionPolicy": "Delete"})
	if labelled {
		c.SetLabels(map[string]string{ClassLabel: "true"})
	}
	return c
}

func fakeCluster(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		Snapshots: "VolumeSnapshotList", SnapshotClasses: "VolumeSnapshotClassList", Contents: "VolumeSnapshotContentList",
		Claims: "PersistentVolumeClaimList", Volumes: "PersistentVolumeList",
	}, objs...)
}

var backup = &v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: "nightly"}}

// Both plugins called as the server calls them (plugintest: the plugin
// protocol, in process), with a fake cluster behind them.
func TestRestorePointIsASnapshotTheCleanupDeletes(t *testing.T) {
	dyn := fakeCluster(csiVolume("pv-1"), class("csi", driver, true), class("other", "other.csi.example", true), class("unlabelled", driver, false))
	bia := plugintest.BackupItemAction(t, RestorePointName, &restorePoint{log: quiet, dyn: dyn})
	in := claim("shop", "data", "pv-1")
	out, extra, err := bia.Execute(in, backup)
	if err != nil || extra != nil {
		t.Fatalf("Execute: %v (additional items %v)", err, extra)
	}
	if !reflect.DeepEqual(out.UnstructuredContent(), claim("shop", "data", "pv-1").Object) {
		t.Errorf("the stored claim changed: %v", out.UnstructuredContent())
	}
	name := SnapshotName("nightly", "shop", "data")
	vs, err := dyn.Resource(Snapshots).Namespace("shop").Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("no restore point %s: %v", name, err)
	}
	if !reflect.DeepEqual(vs.Object, NewSnapshot("nightly", "shop", "data", "csi").Object) {
		t.Errorf("restore point %v", vs.Object)
	}
	if l := vs.GetLabels(); l[BackupNameLabel] != "nightly" || l[ExcludeFromBackupLabel] != "true" || l[RestorePointLabel] != "true" {
		t.Errorf("labels %v", l)
	}
	// A retried backup makes nothing twice and does not fail.
	if _, _, err := bia.Execute(in, backup); err != nil {
		t.Fatalf("Execute again: %v", err)
	}

	// The snapshot controller bound it to a content, made with the class's
	// policy; the cleanup makes it Delete and deletes the snapshot.
	content := obj("snapshot.storage.k8s.io/v1", "VolumeSnapshotContent", "", "snapcontent-1", map[string]any{"spec": map[string]any{"deletionPolicy": "Retain"}})
	if _, err := dyn.Resource(Contents).Create(t.Context(), content, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	vs.Object["status"] = map[string]any{"boundVolumeSnapshotContentName": "snapcontent-1"}
	if _, err := dyn.Resource(Snapshots).Namespace("shop").Update(t.Context(), vs, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	dia := plugintest.DeleteItemAction(t, CleanupName, &cleanup{log: quiet, dyn: dyn})
	if err := dia.Execute(&api.DeleteItemActionExecuteInput{Item: claim("shop", "data", "pv-1"), Backup: backup}); err != nil {
		t.Fatalf("cleanup: %v", err)
	}
	if _, err := dyn.Resource(Snapshots).Namespace("shop").Get(t.Context(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the restore point is still there: %v", err)
	}
	got, _ := dyn.Resource(Contents).Get(t.Context(), "snapcontent-1", metav1.GetOptions{})
	if p, _, _ := unstructured.NestedString(got.Object, "spec", "deletionPolicy"); p != "Delete" {
		t.Errorf("content deletionPolicy %q, want Delete", p)
	}
	// Retried: gone already is done.
	if err := dia.Execute(&api.DeleteItemActionExecuteInput{Item: claim("shop", "data", "pv-1"), Backup: backup}); err != nil {
		t.Errorf("cleanup again: %v", err)
	}
}

func TestRestorePointOnlyForBoundCSIClaimsThatAsk(t *testing.T) {
	nfs := obj("v1", "PersistentVolume", "", "pv-nfs", map[string]any{"spec": map[string]any{"nfs": map[string]any{"server": "x", "path": "/"}}})
	notAsked := claim("shop", "plain", "pv-1")
	notAsked.SetLabels(nil)
	dyn := fakeCluster(nfs, csiVolume("pv-1"), class("csi", driver, true))
	bia := plugintest.BackupItemAction(t, RestorePointName, &restorePoint{log: quiet, dyn: dyn})
	for _, c := range []*unstructured.Unstructured{claim("shop", "nfs", "pv-nfs"), claim("shop", "pending", ""), notAsked} {
		if _, _, err := bia.Execute(c, backup); err != nil {
			t.Fatalf("Execute on %s: %v", c.GetName(), err)
		}
	}
	list, err := dyn.Resource(Snapshots).Namespace("shop").List(t.Context(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 0 {
		t.Errorf("snapshots %v (%v), want none", list, err)
	}
}

func TestRestorePointClass(t *testing.T) {
	annotated := claim("shop", "data", "pv-1")
	annotated.SetAnnotations(map[string]string{ClassAnnotation: "chosen"})
	for _, tc := range []struct {
		name    string
		classes []runtime.Object
		claim   *unstructured.Unstructured
		want    string // class, or part of the error
		fails   bool
	}{
		{"none labelled", []runtime.Object{class("csi", driver, false)}, claim("shop", "data", "pv-1"), "no VolumeSnapshotClass of driver " + driver + " is labelled", true},
		{"two labelled", []runtime.Object{class("a", driver, true), class("b", driver, true)}, claim("shop", "data", "pv-1"), "[a b]", true},
		{"annotation", []runtime.Object{class("a", driver, true)}, annotated, "chosen", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dyn := fakeCluster(append(tc.classes, csiVolume("pv-1"))...)
			_, _, err := plugintest.BackupItemAction(t, RestorePointName, &restorePoint{log: quiet, dyn: dyn}).Execute(tc.claim, backup)
			if tc.fails {
				if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), ClassAnnotation) {
					t.Errorf("Execute: %v, want an error with %q naming %s", err, tc.want, ClassAnnotation)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			vs, err := dyn.Resource(Snapshots).Namespace("shop").Get(t.Context(), SnapshotName("nightly", "shop", "data"), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if c, _, _ := unstructured.NestedString(vs.Object, "spec", "volumeSnapshotClassName"); c != tc.want {
				t.Errorf("class %q, want %q", c, tc.want)
			}
		})
	}
}

// A snapshot of that name that is not this backup's restore point is not
// touched.
func TestCleanupLeavesOtherSnapshots(t *testing.T) {
	name := SnapshotName("nightly", "shop", "data")
	other := NewSnapshot("nightly", "shop", "data", "csi")
	other.SetLabels(map[string]string{BackupNameLabel: "weekly", RestorePointLabel: "true"})
	dyn := fakeCluster(other)
	dia := plugintest.DeleteItemAction(t, CleanupName, &cleanup{log: quiet, dyn: dyn})
	if err := dia.Execute(&api.DeleteItemActionExecuteInput{Item: claim("shop", "data", "pv-1"), Backup: backup}); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(Snapshots).Namespace("shop").Get(t.Context(), name, metav1.GetOptions{}); err != nil {
		t.Errorf("another backup's snapshot was deleted: %v", err)
	}
}

// The snapshot controller does not let the snapshot go (the driver fails
// to delete the storage snapshot): the cleanup says so, and the server
// keeps the backup and retries.
func TestCleanupReportsASnapshotThatDoesNotGo(t *testing.T) {
	defer func(d time.Duration) { deleteWait = d }(deleteWait)
	deleteWait = 300 * time.Millisecond
	dyn := fakeCluster(NewSnapshot("nightly", "shop", "data", "csi"))
	dyn.PrependReactor("delete", "volumesnapshots", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, nil // held by the controller's finalizer
	})
	dia := plugintest.DeleteItemAction(t, CleanupName, &cleanup{log: quiet, dyn: dyn})
	err := dia.Execute(&api.DeleteItemActionExecuteInput{Item: claim("shop", "data", "pv-1"), Backup: backup})
	var pe *framework.PluginError
	if !errors.As(err, &pe) || !strings.Contains(pe.Message(), "still there") || !strings.Contains(pe.Message(), SnapshotName("nightly", "shop", "data")) {
		t.Errorf("Execute: %v, want the plugin's error naming the snapshot still there", err)
	}
}

// The server passes the plugins only the claims that ask.
func TestAppliesToLabelledClaims(t *testing.T) {
	for _, a := range []interface {
		AppliesTo() (api.ResourceSelector, error)
	}{&restorePoint{}, &cleanup{}} {
		sel, err := a.AppliesTo()
		if err != nil || !slices.Equal(sel.IncludedResources, []string{"persistentvolumeclaims"}) || sel.LabelSelector != "example.io/restore-point=true" {
			t.Errorf("%T.AppliesTo() = %+v, %v", a, sel, err)
		}
	}
}

func TestServesItsNames(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	conn := plugintest.Serve(t, newServer())
	var got []string
	for _, id := range conn.Plugins() {
		got = append(got, string(id.Kind)+" "+id.Name)
	}
	if want := []string{"BackupItemAction " + RestorePointName, "DeleteItemAction " + CleanupName}; !slices.Equal(got, want) {
		t.Errorf("the binary serves %q, want %q", got, want)
	}
}

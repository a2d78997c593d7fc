package deletion

import (
	"slices"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/storage"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

// itemsAction keeps the items it gets and fails on the names in fail.
type itemsAction struct {
	sel   api.ResourceSelector
	mu    sync.Mutex
	items []*unstructured.Unstructured
	fail  map[string]bool
}

func (a *itemsAction) AppliesTo() (api.ResourceSelector, error) { return a.sel, nil }

func (a *itemsAction) Execute(in *api.DeleteItemActionExecuteInput) error {
	u := &unstructured.Unstructured{Object: in.Item.UnstructuredContent()}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.items = append(a.items, u)
	if a.fail[u.GetName()] {
		return errFake
	}
	return nil
}

func (a *itemsAction) names() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, u := range a.items {
		out = append(out, u.GetName())
	}
	return out
}

var errFake = &fakeErr{}

type fakeErr struct{}

func (*fakeErr) Error() string { return "the driver said no" }

// putVolumeInfo writes <backup>-volumeinfo.json.gz as Velero v1.18 does for
// CSI snapshots, with a native snapshot, a moved one and one never taken
// beside them.
func (w *world) putVolumeInfo() {
	w.t.Helper()
	info := []map[string]any{
		{"pvcName": "data", "pvcNamespace": "app", "pvName": "pvc-1", "backupMethod": "CSISnapshot", "snapshotDataMoved": false,
			"preserveLocalSnapshot": false, "skipped": false, "result": "succeeded",
			"csiSnapshotInfo": map[string]any{"snapshotHandle": "snap-1", "size": 1048576, "driver": "hostpath.csi.lifeboat.io", "vscName": "snapcontent-1", "operationID": "app/velero-data-x/2026-12-01T10:00:00Z", "ReadyToUse": true}},
		{"pvName": "pv-native", "backupMethod": "NativeSnapshot", "nativeSnapshotInfo": map[string]any{"snapshotHandle": "native-1"}},
		{"pvcName": "moved", "pvcNamespace": "app", "backupMethod": "CSISnapshot", "snapshotDataMoved": true,
			"csiSnapshotInfo": map[string]any{"snapshotHandle": "unknown", "driver": "hostpath.csi.lifeboat.io", "vscName": "unknown"}},
		{"pvcName": "logs", "pvcNamespace": "app", "pvName": "pvc-2", "backupMethod": "CSISnapshot",
			"csiSnapshotInfo": map[string]any{"snapshotHandle": "snap-2", "driver": "hostpath.csi.lifeboat.io", "vscName": "snapcontent-2"}},
		{"pvcName": "never", "pvcNamespace": "app", "backupMethod": "CSISnapshot", "result": "failed",
			"csiSnapshotInfo": map[string]any{"snapshotHandle": "", "driver": "hostpath.csi.lifeboat.io"}},
	}
	if err := w.store.PutVolumeInfo(w.t.Context(), w.backup.Name, info); err != nil {
		w.t.Fatal(err)
	}
}

const contentsGR = "volumesnapshotcontents.snapshot.storage.k8s.io"

// Velero's backup tarball is gone (a backup that failed before its upload,
// or removed by hand): the CSI snapshots the volume information names
// still reach the actions for contents, so their storage snapshots go.
func TestMissingTarballPassesTheVolumeInfosCSISnapshots(t *testing.T) {
	w := newWorld(t)
	w.putBackupFiles(nil)
	w.putVolumeInfo()
	contents := &itemsAction{sel: api.ResourceSelector{IncludedResources: []string{contentsGR}}, fail: map[string]bool{"snapcontent-2": true}}
	others := &itemsAction{sel: api.ResourceSelector{IncludedResources: []string{"configmaps"}}}
	w.plugins.addImpl("example.io/contents", contents)
	w.plugins.addImpl("example.io/configmaps", others)
	e := w.engine()

	plan, err := e.Plan(t.Context(), w.backup, w.store)
	if err != nil {
		t.Fatal(err)
	}
	var planned []string
	for _, a := range plan.Actions {
		for _, it := range a.Items {
			planned = append(planned, a.Name+" "+it.Resource+" "+it.Name)
		}
	}
	want := []string{"example.io/contents " + contentsGR + " snapcontent-1", "example.io/contents " + contentsGR + " snapcontent-2"}
	if !slices.Equal(planned, want) {
		t.Errorf("plan items %v, want %v", planned, want)
	}
	if len(plan.Warnings) != 1 || !strings.Contains(plan.Warnings[0], "volume information") {
		t.Errorf("plan warnings %v", plan.Warnings)
	}

	res := e.Run(t.Context(), Input{Backup: w.backup, Store: w.store})
	if res.Err == nil || !strings.Contains(strings.Join(res.Messages(), "\n"), "snapcontent-2: the driver said no") {
		t.Fatalf("run: %v %v, want the failure of snapcontent-2", res.Err, res.Messages())
	}
	if len(w.cluster.removedBackups()) != 0 || !slices.Contains(w.keys(), w.store.BackupKey("nightly", storage.BackupVolumeInfoFile("nightly"))) {
		t.Fatal("a failed snapshot deletion let the backup go")
	}
	if got := contents.names(); !slices.Equal(sorted(got), []string{"snapcontent-1", "snapcontent-2"}) {
		t.Errorf("contents action got %v", got)
	}
	if n := len(others.names()); n != 0 {
		t.Errorf("the configmaps action got %d items", n)
	}
	it := contents.items[slices.Index(contents.names(), "snapcontent-1")]
	h, _, _ := unstructured.NestedString(it.Object, "status", "snapshotHandle")
	d, _, _ := unstructured.NestedString(it.Object, "spec", "driver")
	if it.GetKind() != "VolumeSnapshotContent" || it.GetAPIVersion() != "snapshot.storage.k8s.io/v1" || h != "snap-1" || d != "hostpath.csi.lifeboat.io" ||
		it.GetLabels()[v1.BackupNameLabel] != "nightly" || it.GetAnnotations()[VolumeInfoAnnotation] != "nightly-volumeinfo.json.gz" {
		t.Errorf("rebuilt item %v", it.Object)
	}

	// The next attempt passes only what failed, under the same name.
	contents.mu.Lock()
	contents.items, contents.fail = nil, nil
	contents.mu.Unlock()
	res = e.Run(t.Context(), Input{Backup: w.backup, Store: w.store, State: res.State})
	if res.Err != nil {
		t.Fatalf("second attempt: %v", res.Err)
	}
	if got := contents.names(); !slices.Equal(got, []string{"snapcontent-2"}) {
		t.Errorf("second attempt passed %v, want only snapcontent-2", got)
	}
	var reported []string
	for _, a := range res.Report.Actions {
		if a.Items > 0 {
			reported = append(reported, a.Name)
		}
	}
	if !slices.Equal(reported, []string{"example.io/contents" + VolumeInfoSource}) {
		t.Errorf("report names %v", reported)
	}
	if len(w.keys()) != 0 {
		t.Errorf("keys left: %v", w.keys())
	}
}

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

// Volume information without CSI snapshots: the tarball's warning as before.
func TestMissingTarballWithoutCSISnapshots(t *testing.T) {
	w := newWorld(t)
	w.putBackupFiles(nil)
	if err := w.store.PutVolumeInfo(t.Context(), w.backup.Name, []map[string]any{{"pvName": "pv-1", "backupMethod": "NativeSnapshot"}}); err != nil {
		t.Fatal(err)
	}
	contents := &itemsAction{sel: api.ResourceSelector{IncludedResources: []string{contentsGR}}}
	w.plugins.addImpl("example.io/contents", contents)
	res := w.engine().Run(t.Context(), Input{Backup: w.backup, Store: w.store})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if len(res.Report.Warnings) != 1 || !strings.Contains(res.Report.Warnings[0], "DeleteItemActions were not called") || len(contents.names()) != 0 {
		t.Errorf("warnings %v, items %v", res.Report.Warnings, contents.names())
	}
}

package framework

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

const (
	nameA = "example.io/a"
	nameB = "example.io/b"
)

func annotationsOf(t *testing.T, item runtime.Unstructured) map[string]string {
	t.Helper()
	// Items come back still as JSON (api.RawItem); their content decodes
	// the way Kubernetes decodes unstructured objects.
	if item == nil {
		t.Fatal("no item")
	}
	return (&unstructured.Unstructured{Object: item.UnstructuredContent()}).GetAnnotations()
}

func checkSelector(t *testing.T, sel api.ResourceSelector, err error, id string) {
	t.Helper()
	if err != nil {
		t.Fatalf("AppliesTo: %v", err)
	}
	if want := selectorFor(id); !reflect.DeepEqual(sel, want) {
		t.Errorf("AppliesTo = %+v, want %+v", sel, want)
	}
}

func checkRefs(t *testing.T, what string, got []api.ResourceIdentifier, want ...api.ResourceIdentifier) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func TestObjectStore(t *testing.T) {
	a, b := newFakeObjectStore("a"), newFakeObjectStore("b")
	c := connect(t, NewServer().RegisterObjectStore(nameA, instance[api.ObjectStore](a)).RegisterObjectStore(nameB, instance[api.ObjectStore](b)))
	d := dispense(t, c, api.KindObjectStore)
	storeA := must[api.ObjectStore](t)(ObjectStoreClient(d, nameA, 10*time.Second))
	storeB := must[api.ObjectStore](t)(ObjectStoreClient(d, nameB, 10*time.Second))

	if err := storeA.Init(map[string]string{"bucket": "bkt", "region": "eu"}); err != nil {
		t.Fatal(err)
	}
	if a.config["region"] != "eu" || b.config != nil {
		t.Errorf("Init reached a with %v and b with %v; want only a", a.config, b.config)
	}
	for _, key := range []string{"backups/one/velero-backup.json", "backups/two/velero-backup.json", "restores/r/log"} {
		if err := storeA.PutObject("bkt", key, strings.NewReader("body of "+key)); err != nil {
			t.Fatalf("PutObject %s: %v", key, err)
		}
	}
	if ok, err := storeA.ObjectExists("bkt", "restores/r/log"); err != nil || !ok {
		t.Errorf("a.ObjectExists = %v, %v; want true", ok, err)
	}
	if ok, err := storeB.ObjectExists("bkt", "restores/r/log"); err != nil || ok {
		t.Errorf("b.ObjectExists = %v, %v; want false: the object went to a", ok, err)
	}
	rc, err := storeA.GetObject("bkt", "restores/r/log")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(rc)
	if err != nil || string(body) != "body of restores/r/log" {
		t.Errorf("GetObject read %q, %v", body, err)
	}
	if err := rc.Close(); err != nil {
		t.Error(err)
	}
	prefixes, err := storeA.ListCommonPrefixes("bkt", "backups/", "/")
	if want := []string{"backups/one/", "backups/two/"}; err != nil || !reflect.DeepEqual(prefixes, want) {
		t.Errorf("ListCommonPrefixes = %v, %v; want %v", prefixes, err, want)
	}
	keys, err := storeA.ListObjects("bkt", "backups/")
	if want := []string{"backups/one/velero-backup.json", "backups/two/velero-backup.json"}; err != nil || !reflect.DeepEqual(keys, want) {
		t.Errorf("ListObjects = %v, %v; want %v", keys, err, want)
	}
	if err := storeA.DeleteObject("bkt", "restores/r/log"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := storeA.ObjectExists("bkt", "restores/r/log"); ok {
		t.Error("DeleteObject left the object")
	}
	url, err := storeB.CreateSignedURL("bkt", "k", 10*time.Minute)
	if want := "https://b.example/bkt/k?ttl=10m0s"; err != nil || url != want {
		t.Errorf("CreateSignedURL = %q, %v; want %q", url, err, want)
	}
}

func TestVolumeSnapshotter(t *testing.T) {
	a, b := &fakeVolumeSnapshotter{id: "a"}, &fakeVolumeSnapshotter{id: "b"}
	c := connect(t, NewServer().
		RegisterVolumeSnapshotter(nameA, instance[api.VolumeSnapshotter](a)).
		RegisterVolumeSnapshotter(nameB, instance[api.VolumeSnapshotter](b)))
	d := dispense(t, c, api.KindVolumeSnapshotter)
	vsA := must[api.VolumeSnapshotter](t)(VolumeSnapshotterClient(d, nameA, time.Minute))
	vsB := must[api.VolumeSnapshotter](t)(VolumeSnapshotterClient(d, nameB, time.Minute))

	if err := vsB.Init(map[string]string{"region": "us"}); err != nil || b.config["region"] != "us" || a.config != nil {
		t.Errorf("Init: %v; configs a=%v b=%v", err, a.config, b.config)
	}
	iops := int64(500)
	if id, err := vsA.CreateVolumeFromSnapshot("snap-1", "io2", "zone-1", &iops); err != nil || id != "a:vol-from-snap-1-io2-zone-1-500" {
		t.Errorf("CreateVolumeFromSnapshot = %q, %v", id, err)
	}
	if id, err := vsB.CreateVolumeFromSnapshot("snap-1", "gp3", "zone-1", nil); err != nil || id != "b:vol-from-snap-1-gp3-zone-1-none" {
		t.Errorf("CreateVolumeFromSnapshot without iops = %q, %v", id, err)
	}
	if typ, got, err := vsA.GetVolumeInfo("vol-1", "zone-1"); err != nil || typ != "a:io2" || got == nil || *got != 3000 {
		t.Errorf("GetVolumeInfo = %q, %v, %v", typ, got, err)
	}
	if typ, got, err := vsA.GetVolumeInfo("no-iops", "zone-1"); err != nil || typ != "a:gp3" || got != nil {
		t.Errorf("GetVolumeInfo without iops = %q, %v, %v", typ, got, err)
	}
	if id, err := vsA.CreateSnapshot("vol-1", "zone-1", map[string]string{"velero.io/backup": "nightly"}); err != nil || id != "a:snap-of-vol-1-zone-1" {
		t.Errorf("CreateSnapshot = %q, %v", id, err)
	}
	if a.tags["velero.io/backup"] != "nightly" {
		t.Errorf("CreateSnapshot tags = %v", a.tags)
	}
	if err := vsA.DeleteSnapshot("snap-1"); err != nil {
		t.Errorf("DeleteSnapshot: %v", err)
	}
	if err := vsA.DeleteSnapshot("missing"); err == nil || !strings.Contains(err.Error(), "a: snapshot missing does not exist") {
		t.Errorf("DeleteSnapshot(missing) = %v", err)
	}
	pv := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "PersistentVolume",
		"metadata": map[string]any{"name": "pv-1"},
		"spec":     map[string]any{"csi": map[string]any{"volumeHandle": "h-1"}},
	}}
	if id, err := vsB.GetVolumeID(pv); err != nil || id != "b:h-1" {
		t.Errorf("GetVolumeID = %q, %v", id, err)
	}
	updated, err := vsA.SetVolumeID(pv, "h-2")
	if err != nil {
		t.Fatal(err)
	}
	if got, _, _ := unstructured.NestedString(updated.UnstructuredContent(), "spec", "csi", "volumeHandle"); got != "a:h-2" {
		t.Errorf("SetVolumeID gave volumeHandle %q", got)
	}
}

func TestBackupItemAction(t *testing.T) {
	c := connect(t, NewServer().
		RegisterBackupItemAction(nameA, instance[api.BackupItemAction](&fakeBIA{id: "a"})).
		RegisterBackupItemAction(nameB, instance[api.BackupItemAction](&fakeBIA{id: "b"})))
	d := dispense(t, c, api.KindBackupItemAction)
	for _, id := range []string{"a", "b"} {
		bia := must[api.BackupItemAction](t)(BackupItemActionClient(d, "example.io/"+id, time.Minute))
		sel, err := bia.AppliesTo()
		checkSelector(t, sel, err, id)
		updated, extra, err := bia.Execute(testItem("cm"), testBackup())
		if err != nil {
			t.Fatal(err)
		}
		if got := annotationsOf(t, updated); len(got) != 1 || got[id+"/backup"] != "nightly" {
			t.Errorf("%s: updated annotations = %v", id, got)
		}
		// Numbers must come back as Kubernetes decodes them.
		if replicas, _, err := unstructured.NestedInt64(updated.UnstructuredContent(), "spec", "replicas"); err != nil || replicas != 3 {
			t.Errorf("%s: spec.replicas = %v, %v; want int64 3", id, replicas, err)
		}
		checkRefs(t, id+": additional items", extra, ref("secrets", "default", id))
	}

	bia := must[api.BackupItemAction](t)(BackupItemActionClient(d, nameA, time.Minute))
	updated, extra, err := bia.Execute(testItem("unchanged"), testBackup())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(updated.UnstructuredContent(), testItem("unchanged").Object) || extra != nil {
		t.Errorf("a nil updated item came back as %v, %v; want the item unchanged", updated, extra)
	}
}

func TestBackupItemActionV2(t *testing.T) {
	a, b := &fakeBIAV2{id: "a"}, &fakeBIAV2{id: "b"}
	c := connect(t, NewServer().
		RegisterBackupItemActionV2(nameA, instance[api.BackupItemActionV2](a)).
		RegisterBackupItemActionV2(nameB, instance[api.BackupItemActionV2](b)))
	d := dispense(t, c, api.KindBackupItemActionV2)
	for _, id := range []string{"a", "b"} {
		name := "example.io/" + id
		bia := must[api.BackupItemActionV2](t)(BackupItemActionV2Client(d, name, time.Minute))
		if bia.Name() != name {
			t.Errorf("Name = %q, want %q", bia.Name(), name)
		}
		sel, err := bia.AppliesTo()
		checkSelector(t, sel, err, id)
		updated, extra, opID, post, err := bia.Execute(testItem("cm"), testBackup())
		if err != nil {
			t.Fatal(err)
		}
		if got := annotationsOf(t, updated); got[id+"/backup"] != "nightly" {
			t.Errorf("%s: updated annotations = %v", id, got)
		}
		checkRefs(t, id+": additional items", extra, ref("secrets", "default", id))
		checkRefs(t, id+": post-operation items", post, ref("volumesnapshots", "default", id))
		if opID != id+"-op" {
			t.Errorf("%s: operation ID = %q", id, opID)
		}
		progress, err := bia.Progress(opID, testBackup())
		want := api.OperationProgress{
			Completed: true, NCompleted: 7, NTotal: 9, OperationUnits: "GiB",
			Description: id + " " + id + "-op of nightly", Started: testTime, Updated: testTime.Add(time.Minute),
		}
		if err != nil || !reflect.DeepEqual(progress, want) {
			t.Errorf("%s: Progress = %+v, %v; want %+v", id, progress, err, want)
		}
		if err := bia.Cancel(opID, testBackup()); err != nil {
			t.Error(err)
		}
	}
	if !reflect.DeepEqual(a.cancelled, []string{"a-op@nightly"}) || !reflect.DeepEqual(b.cancelled, []string{"b-op@nightly"}) {
		t.Errorf("Cancel reached a with %v and b with %v", a.cancelled, b.cancelled)
	}
}

func TestRestoreItemAction(t *testing.T) {
	c := connect(t, NewServer().
		RegisterRestoreItemAction(nameA, instance[api.RestoreItemAction](&fakeRIA{id: "a"})).
		RegisterRestoreItemAction(nameB, instance[api.RestoreItemAction](&fakeRIA{id: "b"})))
	d := dispense(t, c, api.KindRestoreItemAction)
	for _, id := range []string{"a", "b"} {
		ria := must[api.RestoreItemAction](t)(RestoreItemActionClient(d, "example.io/"+id, time.Minute))
		sel, err := ria.AppliesTo()
		checkSelector(t, sel, err, id)
		out, err := ria.Execute(&api.RestoreItemActionExecuteInput{Item: testItem("cm"), ItemFromBackup: testItem("from-backup"), Restore: testRestore()})
		if err != nil {
			t.Fatal(err)
		}
		if got := annotationsOf(t, out.UpdatedItem); got[id+"/backup"] != "nightly-restore" {
			t.Errorf("%s: updated annotations = %v", id, got)
		}
		checkRefs(t, id+": additional items", out.AdditionalItems, ref("persistentvolumeclaims", "default", id))
		if out.SkipRestore != (id == "b") {
			t.Errorf("%s: SkipRestore = %v", id, out.SkipRestore)
		}
	}
}

func TestRestoreItemActionV2(t *testing.T) {
	c := connect(t, NewServer().
		RegisterRestoreItemActionV2(nameA, instance[api.RestoreItemActionV2](&fakeRIAV2{id: "a"})).
		RegisterRestoreItemActionV2(nameB, instance[api.RestoreItemActionV2](&fakeRIAV2{id: "b"})))
	d := dispense(t, c, api.KindRestoreItemActionV2)
	for _, id := range []string{"a", "b"} {
		name := "example.io/" + id
		ria := must[api.RestoreItemActionV2](t)(RestoreItemActionV2Client(d, name, time.Minute))
		if ria.Name() != name {
			t.Errorf("Name = %q", ria.Name())
		}
		sel, err := ria.AppliesTo()
		checkSelector(t, sel, err, id)
		out, err := ria.Execute(&api.RestoreItemActionExecuteInput{Item: testItem("cm"), ItemFromBackup: testItem("cm"), Restore: testRestore()})
		if err != nil {
			t.Fatal(err)
		}
		if got := annotationsOf(t, out.UpdatedItem); got[id+"/backup"] != "nightly-restore" {
			t.Errorf("%s: updated annotations = %v", id, got)
		}
		checkRefs(t, id+": additional items", out.AdditionalItems, ref("persistentvolumeclaims", "default", id))
		if out.OperationID != id+"-op" || !out.WaitForAdditionalItems || out.AdditionalItemsReadyTimeout != 90*time.Second || out.SkipRestore {
			t.Errorf("%s: output = %+v", id, out)
		}
		progress, err := ria.Progress("op-1", testRestore())
		if err != nil || progress.Description != id+" op-1 of nightly-restore" || progress.Err != "half done" || !progress.Started.IsZero() {
			t.Errorf("%s: Progress = %+v, %v", id, progress, err)
		}
		if err := ria.Cancel("op-1", testRestore()); err == nil || !strings.Contains(err.Error(), id+" cannot cancel op-1") {
			t.Errorf("%s: Cancel = %v", id, err)
		}
		ready, err := ria.AreAdditionalItemsReady([]api.ResourceIdentifier{ref("persistentvolumeclaims", "default", id)}, testRestore())
		if err != nil || !ready {
			t.Errorf("%s: AreAdditionalItemsReady = %v, %v", id, ready, err)
		}
	}
}

func TestDeleteItemAction(t *testing.T) {
	a, b := &fakeDIA{id: "a"}, &fakeDIA{id: "b"}
	c := connect(t, NewServer().
		RegisterDeleteItemAction(nameA, instance[api.DeleteItemAction](a)).
		RegisterDeleteItemAction(nameB, instance[api.DeleteItemAction](b)))
	d := dispense(t, c, api.KindDeleteItemAction)
	for _, id := range []string{"a", "b"} {
		dia := must[api.DeleteItemAction](t)(DeleteItemActionClient(d, "example.io/"+id, time.Minute))
		sel, err := dia.AppliesTo()
		checkSelector(t, sel, err, id)
		if err := dia.Execute(&api.DeleteItemActionExecuteInput{Item: testItem("cm-" + id), Backup: testBackup()}); err != nil {
			t.Fatal(err)
		}
	}
	if got := a.calls(); !reflect.DeepEqual(got, []string{"default/cm-a@nightly"}) {
		t.Errorf("a saw %v", got)
	}
	if got := b.calls(); !reflect.DeepEqual(got, []string{"default/cm-b@nightly"}) {
		t.Errorf("b saw %v", got)
	}
}

func TestItemBlockAction(t *testing.T) {
	c := connect(t, NewServer().
		RegisterItemBlockAction(nameA, instance[api.ItemBlockAction](&fakeIBA{id: "a"})).
		RegisterItemBlockAction(nameB, instance[api.ItemBlockAction](&fakeIBA{id: "b"})))
	d := dispense(t, c, api.KindItemBlockAction)
	for _, id := range []string{"a", "b"} {
		name := "example.io/" + id
		iba := must[api.ItemBlockAction](t)(ItemBlockActionClient(d, name, time.Minute))
		if iba.Name() != name {
			t.Errorf("Name = %q", iba.Name())
		}
		sel, err := iba.AppliesTo()
		checkSelector(t, sel, err, id)
		related, err := iba.GetRelatedItems(testItem("pod"), testBackup())
		if err != nil {
			t.Fatal(err)
		}
		checkRefs(t, id+": related items", related, ref("persistentvolumeclaims", "default", id+"-pod-nightly"))
	}
}

// A v1 action is found by a host asking for v2, both ways Velero's host and
// a simpler one might ask: through the v1 service, adapted on the host, and
// through the v2 service, adapted in the plugin.
func TestV1ActionsServedAsV2(t *testing.T) {
	c := connect(t, NewServer().
		RegisterBackupItemAction(nameA, instance[api.BackupItemAction](&fakeBIA{id: "a"})).
		RegisterRestoreItemAction(nameA, instance[api.RestoreItemAction](&fakeRIA{id: "a"})))

	for _, kind := range []api.Kind{api.KindBackupItemAction, api.KindBackupItemActionV2} {
		bia := must[api.BackupItemActionV2](t)(BackupItemActionV2Client(dispense(t, c, kind), nameA, time.Minute))
		if bia.Name() != nameA {
			t.Errorf("via %s: Name = %q", kind, bia.Name())
		}
		sel, err := bia.AppliesTo()
		checkSelector(t, sel, err, "a")
		updated, extra, opID, post, err := bia.Execute(testItem("cm"), testBackup())
		if err != nil || annotationsOf(t, updated)["a/backup"] != "nightly" || opID != "" || post != nil {
			t.Errorf("via %s: Execute = %v, %q, %v, %v", kind, updated, opID, post, err)
		}
		checkRefs(t, "additional items", extra, ref("secrets", "default", "a"))
		if _, err := bia.Progress("x", testBackup()); err == nil || !strings.Contains(err.Error(), ErrAsyncOperationsNotSupported.Error()) {
			t.Errorf("via %s: Progress = %v, want %v", kind, err, ErrAsyncOperationsNotSupported)
		}
		if err := bia.Cancel("x", testBackup()); err != nil {
			t.Errorf("via %s: Cancel = %v", kind, err)
		}
	}
	for _, kind := range []api.Kind{api.KindRestoreItemAction, api.KindRestoreItemActionV2} {
		ria := must[api.RestoreItemActionV2](t)(RestoreItemActionV2Client(dispense(t, c, kind), nameA, time.Minute))
		out, err := ria.Execute(&api.RestoreItemActionExecuteInput{Item: testItem("cm"), ItemFromBackup: testItem("from-backup"), Restore: testRestore()})
		if err != nil || annotationsOf(t, out.UpdatedItem)["a/backup"] != "nightly-restore" || out.OperationID != "" {
			t.Errorf("via %s: Execute = %+v, %v", kind, out, err)
		}
		if ready, err := ria.AreAdditionalItemsReady(nil, testRestore()); err != nil || !ready {
			t.Errorf("via %s: AreAdditionalItemsReady = %v, %v", kind, ready, err)
		}
		if _, err := ria.Progress("x", testRestore()); err == nil {
			t.Errorf("via %s: Progress succeeded", kind)
		}
	}
	if got := AdaptableTo(api.KindBackupItemAction); !reflect.DeepEqual(got, []api.Kind{api.KindBackupItemActionV2}) {
		t.Errorf("AdaptableTo(BackupItemAction) = %v", got)
	}
	if got := AdaptableTo(api.KindDeleteItemAction); got != nil {
		t.Errorf("AdaptableTo(DeleteItemAction) = %v", got)
	}
}

func TestListPlugins(t *testing.T) {
	s := NewServer().
		RegisterDeleteItemAction("example.io/z-cleanup", instance[api.DeleteItemAction](&fakeDIA{})).
		RegisterDeleteItemAction("example.io/a-cleanup", instance[api.DeleteItemAction](&fakeDIA{})).
		RegisterObjectStore("example.io/store", instance[api.ObjectStore](newFakeObjectStore("s"))).
		RegisterVolumeSnapshotter("example.io/snap", instance[api.VolumeSnapshotter](&fakeVolumeSnapshotter{})).
		RegisterBackupItemAction("example.io/bia", instance[api.BackupItemAction](&fakeBIA{})).
		RegisterBackupItemActionV2("example.io/bia2", instance[api.BackupItemActionV2](&fakeBIAV2{})).
		RegisterRestoreItemAction("example.io/ria", instance[api.RestoreItemAction](&fakeRIA{})).
		RegisterRestoreItemActionV2("example.io/ria2", instance[api.RestoreItemActionV2](&fakeRIAV2{})).
		RegisterItemBlockAction("example.io/iba", instance[api.ItemBlockAction](&fakeIBA{}))
	c := connect(t, s)
	ids, err := PluginListerClient(dispense(t, c, api.KindPluginLister)).ListPlugins(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, id := range ids {
		if id.Command == "" {
			t.Errorf("%s %s has no command", id.Kind, id.Name)
		}
		got = append(got, string(id.Kind)+" "+id.Name)
	}
	want := []string{
		"ObjectStore example.io/store",
		"VolumeSnapshotter example.io/snap",
		"BackupItemAction example.io/bia",
		"BackupItemActionV2 example.io/bia2",
		"RestoreItemAction example.io/ria",
		"RestoreItemActionV2 example.io/ria2",
		"DeleteItemAction example.io/a-cleanup",
		"DeleteItemAction example.io/z-cleanup",
		"ItemBlockAction example.io/iba",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ListPlugins =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	if _, err := PluginListerClient("not dispensed").ListPlugins(t.Context()); err == nil {
		t.Error("a Lister of a bad value listed plugins")
	}
}

func TestClientNeedsMatchingDispenser(t *testing.T) {
	c := connect(t, NewServer())
	d := dispense(t, c, api.KindObjectStore)
	if _, err := DeleteItemActionClient(d, nameA, 0); err == nil || !strings.Contains(err.Error(), "serves ObjectStore plugins") {
		t.Errorf("DeleteItemActionClient(ObjectStore dispenser) = %v", err)
	}
	if _, err := ObjectStoreClient(struct{}{}, nameA, 0); err == nil {
		t.Error("ObjectStoreClient accepted a value not dispensed by ClientPluginSet")
	}
	if _, err := ObjectStoreClient(d, nameA, 0); err != nil {
		t.Error(err)
	}
	var pe *PluginError
	_, err := must[api.DeleteItemAction](t)(DeleteItemActionClient(dispense(t, c, api.KindDeleteItemAction), nameA, 0)).AppliesTo()
	if !errors.As(err, &pe) {
		t.Fatalf("AppliesTo on an empty server = %v", err)
	}
}

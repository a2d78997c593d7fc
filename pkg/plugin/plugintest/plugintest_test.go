package plugintest_test

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/framework"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/plugintest"
)

const name = "example.io/test"

func item() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "settings", "namespace": "shop"},
		"data":     map[string]any{"size": "3"},
	}}
}

func backup() *v1.Backup {
	return &v1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "velero", UID: "b-1"}}
}

// pluginError checks that err is a plugin's failure as the server sees it.
func pluginError(t *testing.T, err error, method string, code codes.Code, msg string) {
	t.Helper()
	var pe *framework.PluginError
	if !errors.As(err, &pe) {
		t.Fatalf("%s: error %v (%T), want a *framework.PluginError", method, err, err)
	}
	if pe.Name != name || pe.Method != method || pe.Code() != code || !strings.Contains(pe.Message(), msg) {
		t.Errorf("%s: %s %s failed with %v %q; want %s %s, %v, a message containing %q",
			method, pe.Name, pe.Method, pe.Code(), pe.Message(), name, method, code, msg)
	}
}

type deleteAction struct {
	mu    sync.Mutex
	calls []*api.DeleteItemActionExecuteInput
	fail  error
}

func (d *deleteAction) AppliesTo() (api.ResourceSelector, error) {
	return api.ResourceSelector{IncludedResources: []string{"configmaps"}, LabelSelector: "app=shop"}, nil
}

func (d *deleteAction) Execute(in *api.DeleteItemActionExecuteInput) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, in)
	if in.Item.UnstructuredContent()["kind"] == "Secret" {
		panic("secrets are not expected")
	}
	return d.fail
}

// The plugin gets what crossed the wire, not the caller's objects: a copy
// decoded from JSON.
func TestDeleteItemActionCrossesTheWire(t *testing.T) {
	impl := &deleteAction{}
	dia := plugintest.DeleteItemAction(t, name, impl)

	sel, err := dia.AppliesTo()
	if err != nil || !reflect.DeepEqual(sel, api.ResourceSelector{IncludedResources: []string{"configmaps"}, LabelSelector: "app=shop"}) {
		t.Errorf("AppliesTo = %+v, %v", sel, err)
	}
	in, b := item(), backup()
	if err := dia.Execute(&api.DeleteItemActionExecuteInput{Item: in, Backup: b}); err != nil {
		t.Fatal(err)
	}
	if len(impl.calls) != 1 {
		t.Fatalf("the plugin got %d calls, want 1", len(impl.calls))
	}
	got := impl.calls[0]
	if got.Item == k8sruntime.Unstructured(in) || got.Backup == b {
		t.Error("the plugin got the caller's own objects; nothing crossed the wire")
	}
	if !reflect.DeepEqual(got.Item.UnstructuredContent(), in.Object) {
		t.Errorf("the plugin got item %v, want %v", got.Item.UnstructuredContent(), in.Object)
	}
	if got.Backup.Name != "nightly" || got.Backup.UID != "b-1" {
		t.Errorf("the plugin got backup %s (uid %s)", got.Backup.Name, got.Backup.UID)
	}

	impl.fail = errors.New("the receipt is locked")
	pluginError(t, dia.Execute(&api.DeleteItemActionExecuteInput{Item: item(), Backup: b}), "Execute", codes.Unknown, "the receipt is locked")

	secret := item()
	secret.SetKind("Secret")
	pluginError(t, dia.Execute(&api.DeleteItemActionExecuteInput{Item: secret, Backup: b}), "Execute", codes.Aborted, "secrets are not expected")
}

type backupAction struct{ stacks chan string }

func (a *backupAction) AppliesTo() (api.ResourceSelector, error) { return api.ResourceSelector{}, nil }

func (a *backupAction) Execute(item k8sruntime.Unstructured, b *v1.Backup) (k8sruntime.Unstructured, []api.ResourceIdentifier, error) {
	a.stacks <- string(debug.Stack())
	u := &unstructured.Unstructured{Object: item.UnstructuredContent()}
	u.SetAnnotations(map[string]string{"backed-up-by": b.Name})
	return u, []api.ResourceIdentifier{{GroupResource: schema.GroupResource{Resource: "persistentvolumes"}, Name: "pv-1"}}, nil
}

// A v1 BackupItemAction is reached as the server reaches it: Execute over
// Lifeboat's stream, and as a v2 action through the process's adapter.
func TestBackupItemActionV1AndAsV2(t *testing.T) {
	impl := &backupAction{stacks: make(chan string, 2)}
	conn := plugintest.Serve(t, framework.NewServer().RegisterBackupItemAction(name, func(*slog.Logger) (api.BackupItemAction, error) { return impl, nil }))

	bia := conn.BackupItemAction(name)
	out, extra, err := bia.Execute(item(), backup())
	if err != nil {
		t.Fatal(err)
	}
	if got := (&unstructured.Unstructured{Object: out.UnstructuredContent()}).GetAnnotations()["backed-up-by"]; got != "nightly" {
		t.Errorf("the returned item is annotated %q, want nightly", got)
	}
	if len(extra) != 1 || extra[0].Name != "pv-1" {
		t.Errorf("additional items %v", extra)
	}
	if stack := <-impl.stacks; !strings.Contains(stack, "backup_item_action_stream.go") {
		t.Errorf("Execute did not come over the BackupItemActionStream:\n%s", stack)
	}

	v2 := conn.BackupItemActionV2(name)
	if got := v2.Name(); got != name {
		t.Errorf("Name() = %q", got)
	}
	_, extra, opID, _, err := v2.Execute(item(), backup())
	if err != nil || opID != "" || len(extra) != 1 {
		t.Errorf("v2 Execute = %v, operation %q, %v", extra, opID, err)
	}
	<-impl.stacks
}

type backupActionV2 struct{}

func (backupActionV2) Name() string                             { return name }
func (backupActionV2) AppliesTo() (api.ResourceSelector, error) { return api.ResourceSelector{}, nil }
func (backupActionV2) Execute(item k8sruntime.Unstructured, _ *v1.Backup) (k8sruntime.Unstructured, []api.ResourceIdentifier, string, []api.ResourceIdentifier, error) {
	return item, nil, "op-1", []api.ResourceIdentifier{{GroupResource: schema.GroupResource{Resource: "configmaps"}, Namespace: "shop", Name: "settings"}}, nil
}
func (backupActionV2) Progress(op string, b *v1.Backup) (api.OperationProgress, error) {
	return api.OperationProgress{Completed: true, NCompleted: 3, NTotal: 3, Description: op + " of " + b.Name}, nil
}
func (backupActionV2) Cancel(op string, _ *v1.Backup) error { return errors.New("cannot cancel " + op) }

func TestBackupItemActionV2(t *testing.T) {
	bia := plugintest.BackupItemActionV2(t, name, backupActionV2{})
	_, _, op, post, err := bia.Execute(item(), backup())
	if err != nil || op != "op-1" || len(post) != 1 || post[0].Name != "settings" {
		t.Fatalf("Execute: operation %q, post-operation items %v, %v", op, post, err)
	}
	p, err := bia.Progress(op, backup())
	if err != nil || !p.Completed || p.NCompleted != 3 || p.Description != "op-1 of nightly" {
		t.Errorf("Progress = %+v, %v", p, err)
	}
	pluginError(t, bia.Cancel(op, backup()), "Cancel", codes.Unknown, "cannot cancel op-1")
}

type restoreAction struct{}

func (restoreAction) AppliesTo() (api.ResourceSelector, error) { return api.ResourceSelector{}, nil }
func (restoreAction) Execute(in *api.RestoreItemActionExecuteInput) (*api.RestoreItemActionExecuteOutput, error) {
	u := &unstructured.Unstructured{Object: in.Item.UnstructuredContent()}
	u.SetLabels(map[string]string{"restored-by": in.Restore.Name})
	return &api.RestoreItemActionExecuteOutput{UpdatedItem: u, SkipRestore: u.GetName() == "skip-me"}, nil
}

func TestRestoreItemAction(t *testing.T) {
	ria := plugintest.RestoreItemAction(t, name, restoreAction{})
	restore := &v1.Restore{ObjectMeta: metav1.ObjectMeta{Name: "r-1"}}
	out, err := ria.Execute(&api.RestoreItemActionExecuteInput{Item: item(), ItemFromBackup: item(), Restore: restore})
	if err != nil {
		t.Fatal(err)
	}
	if got := (&unstructured.Unstructured{Object: out.UpdatedItem.UnstructuredContent()}).GetLabels()["restored-by"]; got != "r-1" || out.SkipRestore {
		t.Errorf("label %q, skip %v", got, out.SkipRestore)
	}
	skip := item()
	skip.SetName("skip-me")
	if out, err := ria.Execute(&api.RestoreItemActionExecuteInput{Item: skip, ItemFromBackup: skip, Restore: restore}); err != nil || !out.SkipRestore {
		t.Errorf("Execute of skip-me = %+v, %v; want SkipRestore", out, err)
	}
}

type store struct{ objects map[string]string }

func (s *store) Init(config map[string]string) error {
	if config["bucket"] == "" {
		return errors.New("config key bucket is required")
	}
	s.objects = map[string]string{}
	return nil
}
func (s *store) PutObject(bucket, key string, body io.Reader) error {
	data, err := io.ReadAll(body)
	s.objects[bucket+"/"+key] = string(data)
	return err
}
func (s *store) ObjectExists(bucket, key string) (bool, error) {
	_, ok := s.objects[bucket+"/"+key]
	return ok, nil
}
func (s *store) GetObject(bucket, key string) (io.ReadCloser, error) {
	data, ok := s.objects[bucket+"/"+key]
	if !ok {
		return nil, errors.New("no such key " + key)
	}
	return io.NopCloser(strings.NewReader(data)), nil
}
func (s *store) ListCommonPrefixes(string, string, string) ([]string, error) { return nil, nil }
func (s *store) ListObjects(string, string) ([]string, error)                { return nil, nil }
func (s *store) DeleteObject(bucket, key string) error {
	delete(s.objects, bucket+"/"+key)
	return nil
}
func (s *store) CreateSignedURL(bucket, key string, ttl time.Duration) (string, error) {
	return "file:///" + bucket + "/" + key + "?ttl=" + ttl.String(), nil
}

func TestObjectStore(t *testing.T) {
	st := plugintest.ObjectStore(t, name, &store{})
	pluginError(t, st.Init(map[string]string{}), "Init", codes.Unknown, "config key bucket is required")
	if err := st.Init(map[string]string{"bucket": "b"}); err != nil {
		t.Fatal(err)
	}
	if err := st.PutObject("b", "backups/x/velero-backup.json", strings.NewReader("{}")); err != nil {
		t.Fatal(err)
	}
	rc, err := st.GetObject("b", "backups/x/velero-backup.json")
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(rc)
	if err != nil || string(data) != "{}" {
		t.Errorf("GetObject read %q, %v", data, err)
	}
	_ = rc.Close()
	if _, err := st.GetObject("b", "missing"); err == nil || !strings.Contains(err.Error(), "no such key missing") {
		t.Errorf("GetObject of a missing key: %v", err)
	}
	if url, err := st.CreateSignedURL("b", "k", time.Minute); err != nil || url != "file:///b/k?ttl=1m0s" {
		t.Errorf("CreateSignedURL = %q, %v", url, err)
	}
}

type snapshotter struct{ block chan struct{} }

func (s *snapshotter) Init(map[string]string) error { return nil }
func (s *snapshotter) CreateVolumeFromSnapshot(id, _, _ string, iops *int64) (string, error) {
	return "vol-from-" + id, nil
}
func (s *snapshotter) GetVolumeInfo(string, string) (string, *int64, error) { return "gp3", nil, nil }
func (s *snapshotter) CreateSnapshot(volumeID, _ string, tags map[string]string) (string, error) {
	return "snap-of-" + volumeID + "-for-" + tags["velero.io/backup"], nil
}
func (s *snapshotter) DeleteSnapshot(string) error {
	<-s.block
	return nil
}
func (s *snapshotter) GetVolumeID(pv k8sruntime.Unstructured) (string, error) {
	id, _, err := unstructured.NestedString(pv.UnstructuredContent(), "spec", "csi", "volumeHandle")
	return id, err
}
func (s *snapshotter) SetVolumeID(pv k8sruntime.Unstructured, id string) (k8sruntime.Unstructured, error) {
	u := &unstructured.Unstructured{Object: pv.UnstructuredContent()}
	return u, unstructured.SetNestedField(u.Object, id, "spec", "csi", "volumeHandle")
}

func TestVolumeSnapshotterAndTimeouts(t *testing.T) {
	impl := &snapshotter{block: make(chan struct{})}
	defer close(impl.block)
	conn := plugintest.Serve(t, framework.NewServer().RegisterVolumeSnapshotter(name, func(*slog.Logger) (api.VolumeSnapshotter, error) { return impl, nil }))
	vs := conn.VolumeSnapshotter(name)
	pv := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "PersistentVolume", "metadata": map[string]any{"name": "pv-1"},
		"spec": map[string]any{"csi": map[string]any{"driver": "d", "volumeHandle": "h-1"}},
	}}
	id, err := vs.GetVolumeID(pv)
	if err != nil || id != "h-1" {
		t.Fatalf("GetVolumeID = %q, %v", id, err)
	}
	snap, err := vs.CreateSnapshot(id, "", map[string]string{"velero.io/backup": "nightly"})
	if err != nil || snap != "snap-of-h-1-for-nightly" {
		t.Errorf("CreateSnapshot = %q, %v", snap, err)
	}

	// A hung call fails by the Conn's timeout, as a hung plugin fails a
	// server's call.
	start := time.Now()
	err = conn.WithTimeout(200 * time.Millisecond).VolumeSnapshotter(name).DeleteSnapshot(snap)
	pluginError(t, err, "DeleteSnapshot", codes.DeadlineExceeded, "")
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the hung call returned after %s", took)
	}
}

type blockAction struct{}

func (blockAction) Name() string                             { return name }
func (blockAction) AppliesTo() (api.ResourceSelector, error) { return api.ResourceSelector{}, nil }
func (blockAction) GetRelatedItems(item k8sruntime.Unstructured, _ *v1.Backup) ([]api.ResourceIdentifier, error) {
	return []api.ResourceIdentifier{{GroupResource: schema.GroupResource{Resource: "persistentvolumeclaims"}, Namespace: "shop", Name: "data"}}, nil
}

func TestServeListsWhatTheServerServes(t *testing.T) {
	s := framework.NewServer().
		RegisterItemBlockAction(name, func(*slog.Logger) (api.ItemBlockAction, error) { return blockAction{}, nil }).
		RegisterDeleteItemAction("example.io/other", func(*slog.Logger) (api.DeleteItemAction, error) { return &deleteAction{}, nil })
	conn := plugintest.Serve(t, s)
	var got []string
	for _, id := range conn.Plugins() {
		got = append(got, string(id.Kind)+" "+id.Name)
	}
	if want := []string{"DeleteItemAction example.io/other", "ItemBlockAction " + name}; !reflect.DeepEqual(got, want) {
		t.Errorf("Plugins() = %q, want %q", got, want)
	}
	items, err := conn.ItemBlockAction(name).GetRelatedItems(item(), backup())
	if err != nil || len(items) != 1 || items[0].Name != "data" {
		t.Errorf("GetRelatedItems = %v, %v", items, err)
	}
	// A name the process does not serve fails as it fails in the server.
	err = conn.DeleteItemAction(name).Execute(&api.DeleteItemActionExecuteInput{Item: item(), Backup: backup()})
	pluginError(t, err, "Execute", codes.NotFound, name)
}

// fatalRecorder is a testing.TB whose Fatal ends only the goroutine it runs
// on, so a test can see what Serve fails with.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (f *fatalRecorder) Helper() {}

func TestServeFailsOnABadRegistration(t *testing.T) {
	f := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		plugintest.Serve(f, framework.NewServer().RegisterDeleteItemAction("no-domain", func(*slog.Logger) (api.DeleteItemAction, error) { return &deleteAction{}, nil }))
	}()
	<-done
	if !strings.Contains(f.msg, "no-domain") {
		t.Errorf("Serve failed with %q, want the bad name named", f.msg)
	}
}

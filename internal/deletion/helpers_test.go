package deletion

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/archive/archivetest"
	"github.com/lifeboat-io/lifeboat/internal/storage"
	"github.com/lifeboat-io/lifeboat/internal/storage/filesystem"
	"github.com/lifeboat-io/lifeboat/internal/volumefiles"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

const bucket = "b"

// world is a backup in a filesystem store with fake plugins and a fake
// cluster around it.
type world struct {
	t       testing.TB
	backup  *v1.Backup
	objects *recordingStore
	store   *storage.BackupStore
	plugins *fakePlugins
	cluster *fakeCluster
}

func newWorld(t testing.TB) *world {
	t.Helper()
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, bucket), 0o700); err != nil {
		t.Fatal(err)
	}
	fs, err := filesystem.New(map[string]string{filesystem.PathKey: root})
	if err != nil {
		t.Fatal(err)
	}
	objects := &recordingStore{ObjectStore: fs}
	return &world{
		t:       t,
		backup:  &v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: "nightly", UID: types.UID("uid-1")}},
		objects: objects,
		store:   storage.NewBackupStore(objects, bucket, "lb"),
		plugins: &fakePlugins{actions: map[string]*fakeAction{}, snapshotters: map[string]*fakeSnapshotter{}},
		cluster: &fakeCluster{locations: map[string]v1.VolumeSnapshotLocationSpec{}},
	}
}

func (w *world) engine() *Engine {
	return &Engine{Plugins: w.plugins, Cluster: w.cluster, Workers: 4}
}

// item is an item of a test tarball.
type item struct {
	gr, ns, name string
	labels       map[string]string
}

func (it item) json(copyName string) []byte {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetName(it.name)
	u.SetNamespace(it.ns)
	u.SetLabels(it.labels)
	u.SetAnnotations(map[string]string{"copy": copyName})
	data, err := json.Marshal(u.Object)
	if err != nil {
		panic(err)
	}
	return data
}

func (it item) path(versionDir string) string {
	p := "resources/" + it.gr + "/"
	if versionDir != "" {
		p += versionDir + "/"
	}
	if it.ns == "" {
		return p + "cluster/" + it.name + ".json"
	}
	return p + "namespaces/" + it.ns + "/" + it.name + ".json"
}

// putTarball writes the backup's tarball in Velero's layout: each item's
// plain copy followed by its preferred-version copy, whose content differs
// (annotation copy=preferred) so a test can tell which one an action got.
// extra entries follow as given.
func (w *world) putTarball(items []item, extra ...archivetest.Entry) {
	w.t.Helper()
	entries := []archivetest.Entry{{Name: "metadata/version", Data: []byte("1.1.0\n")}}
	for _, it := range items {
		entries = append(entries,
			archivetest.Entry{Name: it.path(""), Data: it.json("plain")},
			archivetest.Entry{Name: it.path("v1-preferredversion"), Data: it.json("preferred")})
	}
	entries = append(entries, extra...)
	var buf bytes.Buffer
	if err := archivetest.Tarball(&buf, entries); err != nil {
		w.t.Fatal(err)
	}
	if err := w.store.PutBackupContents(w.t.Context(), w.backup.Name, &buf); err != nil {
		w.t.Fatal(err)
	}
}

// putBackupFiles writes the backup's other files, velero-backup.json included.
func (w *world) putBackupFiles(snaps []volumefiles.Snapshot) {
	w.t.Helper()
	ctx := w.t.Context()
	name := w.backup.Name
	for _, f := range []string{storage.BackupLogFile(name), storage.BackupResultsFile(name)} {
		if err := w.objects.PutObject(ctx, bucket, w.store.BackupKey(name, f), strings.NewReader("x")); err != nil {
			w.t.Fatal(err)
		}
	}
	if snaps != nil {
		if err := w.store.PutVolumeSnapshots(ctx, name, snaps); err != nil {
			w.t.Fatal(err)
		}
	}
	w.putMarker(string(w.backup.UID))
}

func (w *world) putRestore(name string) {
	w.t.Helper()
	if err := w.store.PutRestoreResults(w.t.Context(), name, map[string]any{}); err != nil {
		w.t.Fatal(err)
	}
	if err := w.objects.PutObject(w.t.Context(), bucket, w.store.RestoreKey(name, storage.RestoreLogFile(name)), strings.NewReader("x")); err != nil {
		w.t.Fatal(err)
	}
	w.cluster.mu.Lock()
	w.cluster.restores = append(w.cluster.restores, name)
	w.cluster.mu.Unlock()
}

func (w *world) keys() []string {
	w.t.Helper()
	keys, err := w.objects.ListObjects(w.t.Context(), bucket, "lb/")
	if err != nil {
		w.t.Fatal(err)
	}
	return keys
}

// recordingStore records deletions and can fail reads of chosen keys.
type recordingStore struct {
	storage.ObjectStore
	mu      sync.Mutex
	deleted []string
	getErr  map[string]error
}

func (s *recordingStore) DeleteObject(ctx context.Context, b, key string) error {
	s.mu.Lock()
	s.deleted = append(s.deleted, key)
	s.mu.Unlock()
	return s.ObjectStore.DeleteObject(ctx, b, key)
}

func (s *recordingStore) GetObject(ctx context.Context, b, key string) (io.ReadCloser, error) {
	s.mu.Lock()
	err := s.getErr[key]
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return s.ObjectStore.GetObject(ctx, b, key)
}

func (s *recordingStore) deletions() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.deleted)
}

// call is one Execute: which item, and which copy of it.
type call struct {
	action, ns, name, copy string
}

// fakeAction is an in-process DeleteItemAction.
type fakeAction struct {
	name     string
	selector api.ResourceSelector
	log      *callLog
	mu       sync.Mutex
	fail     map[string]bool // by ns/name
	// before, when set, runs before each call (to slow or block it).
	before func(ns, name string)
}

func (a *fakeAction) AppliesTo() (api.ResourceSelector, error) { return a.selector, nil }

func (a *fakeAction) Execute(in *api.DeleteItemActionExecuteInput) error {
	u, ok := in.Item.(*unstructured.Unstructured)
	if !ok {
		return fmt.Errorf("in-process action got %T, want *unstructured.Unstructured", in.Item)
	}
	if in.Backup == nil || in.Backup.Name != "nightly" {
		return fmt.Errorf("got backup %v", in.Backup)
	}
	if a.before != nil {
		a.before(u.GetNamespace(), u.GetName())
	}
	a.mu.Lock()
	failing := a.fail[qualified(u.GetNamespace(), u.GetName())]
	a.mu.Unlock()
	if a.log != nil {
		a.log.add(call{action: a.name, ns: u.GetNamespace(), name: u.GetName(), copy: u.GetAnnotations()["copy"]})
	}
	if failing {
		return fmt.Errorf("cannot clean up %s", u.GetName())
	}
	return nil
}

func (a *fakeAction) setFail(key string, on bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fail == nil {
		a.fail = map[string]bool{}
	}
	a.fail[key] = on
}

// remoteAction pretends to run in another process: it must get RawItems.
type remoteAction struct{ *fakeAction }

func (remoteAction) RemotePlugin() {}

func (a remoteAction) Execute(in *api.DeleteItemActionExecuteInput) error {
	raw, ok := in.Item.(*api.RawItem)
	if !ok {
		return fmt.Errorf("remote action got %T, want *api.RawItem", in.Item)
	}
	return a.fakeAction.Execute(&api.DeleteItemActionExecuteInput{Item: raw.Unstructured(), Backup: in.Backup})
}

type callLog struct {
	mu    sync.Mutex
	calls []call
}

func (l *callLog) add(c call) {
	l.mu.Lock()
	l.calls = append(l.calls, c)
	l.mu.Unlock()
}

func (l *callLog) all() []call {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

func (l *callLog) reset() {
	l.mu.Lock()
	l.calls = nil
	l.mu.Unlock()
}

type fakeSnapshotter struct {
	mu      sync.Mutex
	config  map[string]string
	deleted []string
	gone    map[string]bool
	failing map[string]bool
}

func (s *fakeSnapshotter) Init(config map[string]string) error {
	s.mu.Lock()
	s.config = config
	s.mu.Unlock()
	return nil
}

func (s *fakeSnapshotter) DeleteSnapshot(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.gone[id]:
		return status.Error(codes.NotFound, "snapshot "+id+" does not exist")
	case s.failing[id]:
		return errors.New("snapshot " + id + " is in use")
	}
	s.deleted = append(s.deleted, id)
	return nil
}

func (s *fakeSnapshotter) CreateVolumeFromSnapshot(string, string, string, *int64) (string, error) {
	return "", errors.New("not implemented")
}
func (s *fakeSnapshotter) GetVolumeInfo(string, string) (string, *int64, error) {
	return "", nil, errors.New("not implemented")
}
func (s *fakeSnapshotter) CreateSnapshot(string, string, map[string]string) (string, error) {
	return "", errors.New("not implemented")
}
func (s *fakeSnapshotter) GetVolumeID(runtime.Unstructured) (string, error) {
	return "", errors.New("not implemented")
}
func (s *fakeSnapshotter) SetVolumeID(pv runtime.Unstructured, _ string) (runtime.Unstructured, error) {
	return pv, errors.New("not implemented")
}

type fakePlugins struct {
	actions      map[string]*fakeAction
	impls        map[string]api.DeleteItemAction // other actions
	remote       map[string]bool
	snapshotters map[string]*fakeSnapshotter
}

func (p *fakePlugins) Names(kind api.Kind) []string {
	if kind != api.KindDeleteItemAction {
		return nil
	}
	var names []string
	for n := range p.actions {
		names = append(names, n)
	}
	for n := range p.impls {
		names = append(names, n)
	}
	return names
}

func (p *fakePlugins) DeleteItemAction(name string) (api.DeleteItemAction, error) {
	if impl, ok := p.impls[name]; ok {
		return impl, nil
	}
	a, ok := p.actions[name]
	if !ok {
		return nil, fmt.Errorf("no DeleteItemAction %q", name)
	}
	if p.remote[name] {
		return remoteAction{a}, nil
	}
	return a, nil
}

func (p *fakePlugins) VolumeSnapshotter(name string) (api.VolumeSnapshotter, error) {
	s, ok := p.snapshotters[name]
	if !ok {
		return nil, fmt.Errorf("no VolumeSnapshotter %q", name)
	}
	return s, nil
}

func (p *fakePlugins) addImpl(name string, impl api.DeleteItemAction) {
	if p.impls == nil {
		p.impls = map[string]api.DeleteItemAction{}
	}
	p.impls[name] = impl
}

func (p *fakePlugins) add(log *callLog, name string, sel api.ResourceSelector) *fakeAction {
	a := &fakeAction{name: name, selector: sel, log: log}
	p.actions[name] = a
	return a
}

type fakeCluster struct {
	mu             sync.Mutex
	locations      map[string]v1.VolumeSnapshotLocationSpec
	restores       []string
	deleteFails    map[string]bool
	deletedRestore []string
	removed        []string
}

func (c *fakeCluster) SnapshotLocation(_ context.Context, name string) (string, map[string]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.locations[name]
	if !ok {
		return "", nil, fmt.Errorf("VolumeSnapshotLocation %q not found", name)
	}
	return l.Provider, l.Config, nil
}

func (c *fakeCluster) Restores(context.Context, string) ([]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(slices.Values(c.restores)), nil
}

func (c *fakeCluster) DeleteRestore(_ context.Context, name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.deleteFails[name] {
		return fmt.Errorf("restore %s: forbidden", name)
	}
	c.deletedRestore = append(c.deletedRestore, name)
	c.restores = slices.DeleteFunc(c.restores, func(r string) bool { return r == name })
	return nil
}

func (c *fakeCluster) RemoveBackup(_ context.Context, b *v1.Backup) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removed = append(c.removed, b.Name)
	return nil
}

func (c *fakeCluster) removedBackups() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.removed)
}

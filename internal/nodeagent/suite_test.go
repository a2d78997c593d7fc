package nodeagent

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/cluster"
	"github.com/lifeboat-io/lifeboat/internal/localcluster"
	"github.com/lifeboat-io/lifeboat/internal/podvolume"
)

// The package's one local API server: the node agent runs against it as
// it does in a cluster; the kubelet's pod directory is a test directory.
var (
	cfg  *rest.Config
	kube client.Client
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	c, err := localcluster.Start(localcluster.Options{InstallCRDs: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cfg = c.Config
	scheme, err := cluster.NewScheme()
	if err == nil {
		kube, err = client.New(cfg, client.Options{Scheme: scheme})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := c.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}

var seq atomic.Int64

// fixture is one test's namespace, node name and kubelet pod directory.
type fixture struct {
	t        *testing.T
	ns, node string
	hostPods string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	n := seq.Add(1)
	f := &fixture{t: t, ns: fmt.Sprintf("na-%d-%d", time.Now().UnixNano()%1e6, n), node: fmt.Sprintf("node-%d", n), hostPods: t.TempDir()}
	f.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}})
	f.create(&v1.BackupStorageLocation{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "default"},
		Spec:       v1.BackupStorageLocationSpec{Provider: "aws", StorageType: v1.StorageType{ObjectStorage: &v1.ObjectStorageLocation{Bucket: "b"}}},
	})
	return f
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

func (f *fixture) create(obj client.Object) {
	f.t.Helper()
	if err := kube.Create(ctx(f.t), obj); err != nil {
		f.t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

// startAgent runs the node agent of f's node until the test ends (or the
// returned stop is called, which waits for it to return).
func (f *fixture) startAgent(newDP DataPathFactory) (stop func()) {
	f.t.Helper()
	opts := DefaultOptions()
	opts.Namespace, opts.NodeName, opts.HostPodsDir = f.ns, f.node, f.hostPods
	opts.MetricsAddress, opts.HealthAddress = "0", "0"
	opts.ProgressInterval = 50 * time.Millisecond
	opts.LogLevel = "error"
	c, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(c, cfg, opts, newDP) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					f.t.Errorf("node agent: %v", err)
				}
			case <-time.After(time.Minute):
				f.t.Error("node agent did not stop within a minute")
			}
		})
	}
	f.t.Cleanup(stop)
	return stop
}

func dataPath(dp podvolume.DataPath) DataPathFactory {
	return func(context.Context, Deps) (podvolume.DataPath, error) { return dp, nil }
}

// pod creates a pod of node with the given volumes (running, as far as the
// API says) and returns it with its UID.
func (f *fixture) pod(name, node string, init []corev1.Container, vols ...corev1.Volume) *corev1.Pod {
	f.t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
		Spec: corev1.PodSpec{
			NodeName:       node,
			InitContainers: init,
			Containers:     []corev1.Container{{Name: "app", Image: "busybox"}},
			Volumes:        vols,
		},
	}
	f.create(p)
	return p
}

func emptyDir(name string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
}

// volumeDir makes the kubelet's directory of an emptyDir volume of p.
func (f *fixture) volumeDir(p *corev1.Pod, volume string) string {
	f.t.Helper()
	dir := filepath.Join(f.hostPods, string(p.UID), "volumes", "kubernetes.io~empty-dir", volume)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		f.t.Fatal(err)
	}
	return dir
}

func (f *fixture) pvb(name string, p *corev1.Pod, node, volume string) *v1.PodVolumeBackup {
	f.t.Helper()
	pvb := &v1.PodVolumeBackup{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
		Spec: v1.PodVolumeBackupSpec{
			Node: node, Volume: volume, BackupStorageLocation: "default", UploaderType: "kopia",
			Pod:  corev1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID},
			Tags: map[string]string{"backup": "b1", "volume": volume},
			// As a Backup with uploaderConfig.parallelFilesUpload makes it.
			UploaderSettings: map[string]string{"ParallelFilesUpload": "3"},
		},
	}
	f.create(pvb)
	return pvb
}

// waitPVB waits until cond holds for the PodVolumeBackup, failing the test
// after a while with its last state.
func (f *fixture) waitPVB(name string, what string, cond func(*v1.PodVolumeBackup) bool) *v1.PodVolumeBackup {
	f.t.Helper()
	var pvb v1.PodVolumeBackup
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := kube.Get(ctx(f.t), client.ObjectKey{Namespace: f.ns, Name: name}, &pvb); err != nil {
			f.t.Fatal(err)
		}
		if cond(&pvb) {
			return &pvb
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("PodVolumeBackup %s: %s: never happened; status %+v", name, what, pvb.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (f *fixture) waitPVR(name string, what string, cond func(*v1.PodVolumeRestore) bool) *v1.PodVolumeRestore {
	f.t.Helper()
	var pvr v1.PodVolumeRestore
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := kube.Get(ctx(f.t), client.ObjectKey{Namespace: f.ns, Name: name}, &pvr); err != nil {
			f.t.Fatal(err)
		}
		if cond(&pvr) {
			return &pvr
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("PodVolumeRestore %s: %s: never happened; status %+v", name, what, pvr.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func phaseIs(p v1.PodVolumePhase) func(*v1.PodVolumeBackup) bool {
	return func(pvb *v1.PodVolumeBackup) bool { return pvb.Status.Phase == p }
}

// copyDataPath is a test data path: a snapshot is a copy of the volume's
// files in its own directory; restoring copies them back.
type copyDataPath struct {
	dir string
	mu  sync.Mutex
	n   int
	// requests seen, for the assertions
	backups  []podvolume.BackupRequest
	restores []podvolume.RestoreRequest
}

func (d *copyDataPath) Backup(ctx context.Context, req podvolume.BackupRequest) (podvolume.BackupResult, error) {
	d.mu.Lock()
	d.n++
	id := fmt.Sprintf("snap-%d", d.n)
	d.backups = append(d.backups, req)
	d.mu.Unlock()
	n, err := copyTree(ctx, req.Path, filepath.Join(d.dir, id), req.Progress)
	if err != nil {
		return podvolume.BackupResult{}, err
	}
	return podvolume.BackupResult{SnapshotID: id, TotalBytes: n, Empty: n == 0}, nil
}

func (d *copyDataPath) Restore(ctx context.Context, req podvolume.RestoreRequest) (int64, error) {
	d.mu.Lock()
	d.restores = append(d.restores, req)
	d.mu.Unlock()
	return copyTree(ctx, filepath.Join(d.dir, req.SnapshotID), req.Path, req.Progress)
}

func copyTree(ctx context.Context, from, to string, progress func(podvolume.Progress)) (int64, error) {
	var total, done int64
	_ = filepath.WalkDir(from, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				total += fi.Size()
			}
		}
		return nil
	})
	err := filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		rel, _ := filepath.Rel(from, path)
		target := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := os.WriteFile(target, data, 0o644); err != nil {
			return err
		}
		done += int64(len(data))
		if progress != nil {
			progress(podvolume.Progress{TotalBytes: total, BytesDone: done})
		}
		return nil
	})
	return done, err
}

// blockingDataPath reports some progress, then waits for its context (or
// release) and says how it ended.
type blockingDataPath struct {
	started chan struct{}
	release chan struct{}
	ended   chan error
}

func newBlocking() *blockingDataPath {
	return &blockingDataPath{started: make(chan struct{}, 4), release: make(chan struct{}), ended: make(chan error, 4)}
}

func (d *blockingDataPath) Backup(ctx context.Context, req podvolume.BackupRequest) (podvolume.BackupResult, error) {
	req.Progress(podvolume.Progress{TotalBytes: 1000, BytesDone: 300})
	d.started <- struct{}{}
	select {
	case <-ctx.Done():
		d.ended <- ctx.Err()
		return podvolume.BackupResult{}, ctx.Err()
	case <-d.release:
		d.ended <- nil
		return podvolume.BackupResult{SnapshotID: "s", TotalBytes: 1000}, nil
	}
}

func (d *blockingDataPath) Restore(ctx context.Context, req podvolume.RestoreRequest) (int64, error) {
	d.started <- struct{}{}
	<-ctx.Done()
	d.ended <- ctx.Err()
	return 0, ctx.Err()
}

// patchCancel sets spec.cancel, as Velero's server does to cancel.
func patchCancel(t *testing.T, obj client.Object) {
	t.Helper()
	if err := kube.Patch(ctx(t), obj, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"cancel":true}}`))); err != nil {
		t.Fatal(err)
	}
}

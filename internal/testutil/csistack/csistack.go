// Package csistack runs a real CSI stack against a test API server: the
// snapshot CRDs and classes, kube-controller-manager's volume controllers,
// the external-snapshotter's snapshot-controller and csi-snapshotter, the
// external-provisioner's csi-provisioner, and Lifeboat's test driver
// (test/csidriver), all as host processes. Volumes are directories of a
// state directory and snapshots real copies of them, so a test can check
// what a snapshot holds and that a deleted one is gone from the storage.
//
// Against an API server alone (internal/localcluster, testutil/testenv) it
// provisions, binds, snapshots, restores and deletes; no pod runs. With
// Options.Node, on the real node (internal/localnode), the driver also
// registers its Node service with the kubelet, so pods mount the volumes.
//
// What the real components require, found by this package's tests
// (velero_flows_test.go): a snapshot asked for before its claim binds is
// taken once it binds (the sidecars here retry every 0.5-5 s, not minutes);
// a content pre-bound to a snapshot handle becomes ready through the
// driver's ListSnapshots; and a content re-created with deletionPolicy
// Delete to remove a storage snapshot (Velero's deletion) removes it only
// if it carries the finalizer
// snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection
// (as Velero's stored item does) and is deleted after the sidecar has set
// its status.snapshotHandle; otherwise the object goes and the snapshot
// stays.
//
// The sidecars come from hack/csi-bins.sh and kube-controller-manager from
// hack/node-bins.sh (the Makefile sets LIFEBOAT_CSI_BINS and
// LIFEBOAT_NODE_BINS; unset, the scripts are asked, which costs nothing
// once they have built).
package csistack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The stack's names, fixed so that tests and fixtures can name them.
const (
	DriverName = "hostpath.csi.lifeboat.io"
	// StorageClass provisions with DriverName, reclaimPolicy Delete,
	// volumeBindingMode Immediate.
	StorageClass = "lifeboat-csi"
	// SnapshotClass is DriverName's VolumeSnapshotClass, deletionPolicy
	// Delete, labelled velero.io/csi-volumesnapshot-class=true (the class
	// Velero picks for the driver).
	SnapshotClass = "lifeboat-csi"
)

// Environment variables naming the binary directories.
const (
	CSIBinsEnv  = "LIFEBOAT_CSI_BINS"  // hack/csi-bins.sh: sidecars, snapshot-controller, crd/
	NodeBinsEnv = "LIFEBOAT_NODE_BINS" // hack/node-bins.sh: kube-controller-manager
)

// Options configure a stack.
type Options struct {
	// Kubeconfig is an admin kubeconfig of the API server to run against.
	Kubeconfig string
	// StateDir holds the driver's volumes/ and snapshots/; created if
	// missing. Empty: a temporary directory that Stop removes.
	StateDir string
	// Node also registers the driver's Node service with the real
	// kubelet (internal/localnode), so pods mount the volumes. Without it:
	// the controller side only (provision, bind, snapshot, delete; no
	// pods). kube-controller-manager is not started with Node: the node
	// runs a full one.
	Node bool
	// NodeName is the node ID the driver reports; empty: the host name.
	NodeName string
	// KubeletDir is the kubelet's root directory (Node only); empty:
	// /var/lib/kubelet.
	KubeletDir string
	// CSIBins and NodeBins hold the binaries; empty: the environment
	// variables, else the hack/ scripts' cache directories.
	CSIBins, NodeBins string
	// Log receives progress lines; nil discards them.
	Log io.Writer
	// StartTimeout bounds the start (default 2 minutes).
	StartTimeout time.Duration
}

// Stack is a running CSI stack.
type Stack struct {
	// StateDir is the driver's state directory.
	StateDir string
	// Client is an admin client whose scheme knows the core, storage,
	// apiextensions and snapshot.storage.k8s.io/v1 types.
	Client client.Client

	opts      Options
	dir       string   // sockets, logs, the driver binary
	lock      *os.File // held while the stack lives (leftovers.go)
	ownState  bool
	procs     []*proc
	driverLog string
}

// Start installs the snapshot CRDs (v1; the group snapshot ones too, which
// the snapshot-controller otherwise waits 30 s for), the CSIDriver object and the
// classes, then starts the driver, kube-controller-manager (PV binder,
// PV and PVC protection; not with Node), snapshot-controller,
// csi-provisioner and csi-snapshotter, and waits until the sidecars have
// reached the driver. On error everything started is stopped.
func Start(ctx context.Context, opts Options) (_ *Stack, err error) {
	begin := time.Now()
	if opts.Kubeconfig == "" {
		return nil, errors.New("csistack: Options.Kubeconfig is required")
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 2 * time.Minute
	}
	if opts.NodeName == "" {
		if opts.NodeName, err = os.Hostname(); err != nil {
			return nil, err
		}
	}
	if opts.KubeletDir == "" {
		opts.KubeletDir = "/var/lib/kubelet"
	}
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()

	if opts.CSIBins, err = binDir(opts.CSIBins, CSIBinsEnv, "csi-bins.sh"); err != nil {
		return nil, err
	}
	if !opts.Node {
		if opts.NodeBins, err = binDir(opts.NodeBins, NodeBinsEnv, "node-bins.sh"); err != nil {
			return nil, err
		}
	}
	s := &Stack{opts: opts, StateDir: opts.StateDir}
	// A short directory: unix socket paths are limited to 108 bytes.
	if s.dir, err = os.MkdirTemp("", dirPattern); err != nil {
		return nil, err
	}
	if s.lock, err = lockDir(s.dir); err != nil {
		_ = os.RemoveAll(s.dir)
		return nil, fmt.Errorf("locking %s: %w", s.dir, err)
	}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	s.removeDeadStacks()
	if s.StateDir == "" {
		s.StateDir, s.ownState = filepath.Join(s.dir, "state"), true
	}
	if s.Client, err = newClient(opts.Kubeconfig); err != nil {
		return nil, err
	}
	if err := s.installCRDs(ctx); err != nil {
		return nil, err
	}
	if err := s.installObjects(ctx); err != nil {
		return nil, err
	}
	s.logf("objects installed (%s)", time.Since(begin).Round(time.Millisecond))

	driver := filepath.Join(s.dir, "csidriver")
	if err := buildDriver(ctx, driver); err != nil {
		return nil, err
	}
	s.logf("driver built (%s)", time.Since(begin).Round(time.Millisecond))
	sock := filepath.Join(s.dir, "csi.sock")
	args := []string{"--endpoint", "unix://" + sock, "--state-dir", s.StateDir, "--node-id", opts.NodeName, "--driver-name", DriverName}
	if opts.Node {
		args = append(args, "--kubelet-registration-dir", filepath.Join(opts.KubeletDir, "plugins_registry"))
	}
	if err := s.start("csidriver", driver, args...); err != nil {
		return nil, err
	}
	s.driverLog = filepath.Join(s.dir, "csidriver.log")
	if err := s.waitFor(ctx, "the driver's socket", func() (bool, error) {
		_, err := os.Stat(sock)
		return err == nil, nil
	}); err != nil {
		return nil, err
	}

	kubeconfig := "--kubeconfig=" + opts.Kubeconfig
	// Common to the external-snapshotter's and external-provisioner's
	// binaries. Their default client limit (5 qps) would make a test of a
	// hundred claims measure the limit, not the stack; their default
	// retries back off to minutes (a snapshot asked for before its claim
	// binds would wait that long).
	sidecar := func(args ...string) []string {
		return append([]string{kubeconfig, "--leader-election=false", "--kube-api-qps=200", "--kube-api-burst=400",
			"--retry-interval-start=500ms", "--retry-interval-max=5s", "-v=3"}, args...)
	}
	if !opts.Node {
		if err := s.start("kube-controller-manager", filepath.Join(opts.NodeBins, "kube-controller-manager"), kubeconfig,
			"--controllers=persistentvolume-binder-controller,persistentvolume-protection-controller,persistentvolumeclaim-protection-controller",
			"--leader-elect=false", "--secure-port=0", "--use-service-account-credentials=false",
			"--kube-api-qps=200", "--kube-api-burst=400",
			// The binder looks at claims every 15 s by default; tests
			// should not wait that long for a retry.
			"--pvclaimbinder-sync-period=2s", "-v=2"); err != nil {
			return nil, err
		}
	}
	if err := s.start("snapshot-controller", filepath.Join(opts.CSIBins, "snapshot-controller"), sidecar()...); err != nil {
		return nil, err
	}
	for _, name := range []string{"csi-provisioner", "csi-snapshotter"} {
		if err := s.start(name, filepath.Join(opts.CSIBins, name), sidecar("--csi-address="+sock, "--extra-create-metadata")...); err != nil {
			return nil, err
		}
	}
	// Each sidecar asks the driver's name once it has connected: two
	// asks, and both are up.
	if err := s.waitFor(ctx, "the sidecars to reach the driver", func() (bool, error) {
		b, err := os.ReadFile(s.driverLog)
		return err == nil && strings.Count(string(b), "GetPluginInfo") >= 2, nil
	}); err != nil {
		return nil, err
	}
	if opts.Node {
		if err := s.waitFor(ctx, "the kubelet to register the driver", func() (bool, error) {
			var n storagev1.CSINode
			if err := s.Client.Get(ctx, client.ObjectKey{Name: opts.NodeName}, &n); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			for _, d := range n.Spec.Drivers {
				if d.Name == DriverName {
					return true, nil
				}
			}
			return false, nil
		}); err != nil {
			return nil, err
		}
	}
	s.logf("CSI stack ready in %s", time.Since(begin).Round(time.Millisecond))
	return s, nil
}

// Stop stops every process the stack started (by PID, driver last), and
// removes the sockets, the logs and a state directory it made. On the
// node it first unmounts what the driver mounted under the kubelet's
// directory, for pods a test did not delete.
func (s *Stack) Stop() {
	for i := len(s.procs) - 1; i >= 0; i-- {
		if s.procs[i].name == "csidriver" {
			continue
		}
		if err := s.procs[i].stop(10 * time.Second); err != nil {
			s.logf("%v", err)
		}
	}
	if s.opts.Node {
		s.unmountLeftovers()
	}
	for _, p := range s.procs {
		if p.name == "csidriver" {
			if err := p.stop(10 * time.Second); err != nil {
				s.logf("%v", err)
			}
		}
	}
	s.procs = nil
	if s.ownState && s.StateDir != "" {
		_ = os.RemoveAll(s.StateDir)
	}
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
	if s.lock != nil {
		_ = s.lock.Close()
		s.lock = nil
	}
}

// Snapshots returns the IDs of the snapshots in the driver's state.
func (s *Stack) Snapshots() ([]string, error) { return listIDs(filepath.Join(s.StateDir, "snapshots")) }

// Volumes returns the IDs of the volumes in the driver's state.
func (s *Stack) Volumes() ([]string, error) { return listIDs(filepath.Join(s.StateDir, "volumes")) }

// SnapshotFiles returns a snapshot's files by path relative to the
// volume's root.
func (s *Stack) SnapshotFiles(id string) (map[string][]byte, error) {
	return readFiles(filepath.Join(s.StateDir, "snapshots", id, "data"))
}

// VolumeFiles returns a volume's files by path relative to its root.
func (s *Stack) VolumeFiles(id string) (map[string][]byte, error) {
	return readFiles(filepath.Join(s.StateDir, "volumes", id, "data"))
}

// WriteVolumeFiles writes files (by path relative to the volume's root)
// into a volume, as a pod would: on the bare API server no pod runs, so
// this is how a test gives a claim data to back up.
func (s *Stack) WriteVolumeFiles(id string, files map[string][]byte) error {
	root := filepath.Join(s.StateDir, "volumes", id, "data")
	if _, err := os.Stat(root); err != nil {
		return fmt.Errorf("csistack: volume %q: %w", id, err)
	}
	for name, data := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if rel, err := filepath.Rel(root, p); err != nil || rel == "." || strings.HasPrefix(rel, "..") {
			return fmt.Errorf("csistack: file name %q is not a path inside the volume", name)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Log returns the end of a component's log ("csidriver",
// "kube-controller-manager", "snapshot-controller", "csi-provisioner",
// "csi-snapshotter"), for a failing test to print.
func (s *Stack) Log(component string, lines int) string {
	return tail(filepath.Join(s.dir, component+".log"), lines)
}

func listIDs(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}

func readFiles(root string) (map[string][]byte, error) {
	if _, err := os.Stat(root); err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		files[rel], err = os.ReadFile(path)
		return err
	})
	return files, err
}

func newClient(kubeconfig string) (client.Client, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("reading kubeconfig %s: %w", kubeconfig, err)
	}
	// client-go's default limit (5 qps) would pace a test's creates.
	cfg.QPS, cfg.Burst = 1000, 2000
	scheme := kruntime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(scheme))
	utilruntime.Must(snapshotv1.AddToScheme(scheme))
	return client.New(cfg, client.Options{Scheme: scheme})
}

// installCRDs creates (or updates) the snapshot.storage.k8s.io CRDs from
// the external-snapshotter client module's files and waits until they are
// served.
func (s *Stack) installCRDs(ctx context.Context) error {
	files, err := filepath.Glob(filepath.Join(s.opts.CSIBins, "crd", "*.yaml"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no snapshot CRDs in %s/crd: run hack/csi-bins.sh", s.opts.CSIBins)
	}
	decoder := serializer.NewCodecFactory(s.Client.Scheme()).UniversalDeserializer()
	var names []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if _, _, err := decoder.Decode(b, nil, &crd); err != nil {
			return fmt.Errorf("decoding %s: %w", f, err)
		}
		if err := createOrUpdate(ctx, s.Client, &crd); err != nil {
			return err
		}
		names = append(names, crd.Name)
	}
	return s.waitFor(ctx, "the snapshot CRDs established", func() (bool, error) {
		for _, name := range names {
			var got apiextensionsv1.CustomResourceDefinition
			if err := s.Client.Get(ctx, client.ObjectKey{Name: name}, &got); err != nil {
				return false, err
			}
			established := false
			for _, c := range got.Status.Conditions {
				established = established || c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue
			}
			if !established {
				return false, nil
			}
		}
		return true, nil
	})
}

// installObjects creates the CSIDriver object and the two classes.
func (s *Stack) installObjects(ctx context.Context) error {
	persistent := []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}
	objs := []client.Object{
		// No attach step (the driver has no ControllerPublish): without
		// attachRequired false the kubelet would wait for a
		// VolumeAttachment no one makes.
		&storagev1.CSIDriver{
			ObjectMeta: metav1.ObjectMeta{Name: DriverName},
			Spec: storagev1.CSIDriverSpec{
				AttachRequired:       ptr.To(false),
				PodInfoOnMount:       ptr.To(false),
				VolumeLifecycleModes: persistent,
			},
		},
		&storagev1.StorageClass{
			ObjectMeta:        metav1.ObjectMeta{Name: StorageClass},
			Provisioner:       DriverName,
			ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
			VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
		},
		&snapshotv1.VolumeSnapshotClass{
			ObjectMeta:     metav1.ObjectMeta{Name: SnapshotClass, Labels: map[string]string{"velero.io/csi-volumesnapshot-class": "true"}},
			Driver:         DriverName,
			DeletionPolicy: snapshotv1.VolumeSnapshotContentDelete,
		},
	}
	for _, o := range objs {
		if err := createOrUpdate(ctx, s.Client, o); err != nil {
			return err
		}
	}
	return nil
}

// createOrUpdate makes obj exist as given (a stack started again on the
// same API server finds its objects there).
func createOrUpdate(ctx context.Context, c client.Client, obj client.Object) error {
	err := c.Create(ctx, obj)
	if apierrors.IsAlreadyExists(err) {
		existing := obj.DeepCopyObject().(client.Object)
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), existing); err != nil {
			return err
		}
		obj.SetResourceVersion(existing.GetResourceVersion())
		err = c.Update(ctx, obj)
	}
	if err != nil {
		return fmt.Errorf("installing %T %s: %w", obj, obj.GetName(), err)
	}
	return nil
}

// binDir resolves a binary directory: the option, the environment
// variable, else the script's answer (a cache hit prints at once; a cold
// cache builds, which the Makefile does ahead of the tests).
func binDir(dir, env, script string) (string, error) {
	if dir != "" {
		return dir, nil
	}
	if dir = os.Getenv(env); dir != "" {
		return dir, nil
	}
	out, err := exec.Command(filepath.Join(repoRoot(), "hack", script)).Output()
	if err != nil {
		return "", fmt.Errorf("no %s: set it to the directory hack/%s prints (make does this); running the script: %w", env, script, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// repoRoot is the repository this file was compiled from.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// buildDriver builds test/csidriver (the Go build cache makes a repeat
// cheap).
func buildDriver(ctx context.Context, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./test/csidriver")
	cmd.Dir = repoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building test/csidriver: %w\n%s", err, b)
	}
	return nil
}

func (s *Stack) logf(format string, args ...any) {
	if s.opts.Log != nil {
		fmt.Fprintf(s.opts.Log, "csistack: "+format+"\n", args...)
	}
}

// waitFor polls check until it is true, ctx ends, or a started process
// exits (the error then carries the end of its log).
func (s *Stack) waitFor(ctx context.Context, what string, check func() (bool, error)) error {
	var last error
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		for _, p := range s.procs {
			if done, _ := p.exited(); done {
				return false, p.exitError()
			}
		}
		ok, err := check()
		last = err
		return ok, nil
	})
	if err != nil {
		return fmt.Errorf("csistack: waiting for %s: %w", what, errors.Join(err, last))
	}
	return nil
}

// proc is one process the stack started.
type proc struct {
	name, log string
	cmd       *exec.Cmd
	done      chan struct{}
	err       error
}

// start runs bin with its output in <dir>/<name>.log, in its own process
// group and with SIGKILL as its parent-death signal: a test binary killed
// outright must not leave sidecars behind.
func (s *Stack) start(name, bin string, args ...string) error {
	logPath := filepath.Join(s.dir, name+".log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = logf.Close()
		close(p.done)
	}()
	s.procs = append(s.procs, p)
	s.logf("started %s (pid %d)", name, cmd.Process.Pid)
	return nil
}

// exitError says that p exited, how, and what its log ends with.
func (p *proc) exitError() error {
	err := p.err
	if err == nil {
		err = errors.New("exit status 0")
	}
	return fmt.Errorf("csistack: %s exited (%w); the end of its log:\n%s", p.name, err, tail(p.log, 20))
}

func (p *proc) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// stop sends SIGTERM to the process group, then SIGKILL after grace.
func (p *proc) stop(grace time.Duration) error {
	if done, _ := p.exited(); done {
		return nil
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-p.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("csistack: %s (pid %d) did not exit after SIGKILL", p.name, p.cmd.Process.Pid)
	}
}

func tail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}

// PIDs returns the process IDs of the processes the stack runs.
func (s *Stack) PIDs() []int {
	var pids []int
	for _, p := range s.procs {
		pids = append(pids, p.cmd.Process.Pid)
	}
	return pids
}

// Healthy returns an error naming each process of the stack that has
// exited, with the end of its log: a test that times out waiting for a
// claim or a snapshot can say whether the stack was still there. (The
// sidecars exit when they lose the driver's connection, by design.)
func (s *Stack) Healthy() error {
	var errs []error
	for _, p := range s.procs {
		if done, _ := p.exited(); done {
			errs = append(errs, p.exitError())
		}
	}
	return errors.Join(errs...)
}

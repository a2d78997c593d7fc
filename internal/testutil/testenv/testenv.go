// Package testenv is the shared world of the end-to-end tests: one local
// kube-apiserver with Lifeboat's CRDs, one S3 server and one Lifeboat server
// (the real controllers, in process) per test package, started from
// TestMain. Tests create uniquely named namespaces and objects in it.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/install"
	"github.com/lifeboat-io/lifeboat/internal/localcluster"
	"github.com/lifeboat-io/lifeboat/internal/server"
	"github.com/lifeboat-io/lifeboat/internal/testutil/csistack"
	"github.com/lifeboat-io/lifeboat/internal/testutil/s3server"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

// Env is a running local cluster with a Lifeboat server.
type Env struct {
	Config     *rest.Config
	Client     client.Client
	Scheme     *runtime.Scheme
	Kubeconfig string
	// Namespace is where the server and its velero.io objects live.
	Namespace string
	// StoreRoot is the `path` of filesystem storage locations.
	StoreRoot string
	S3        *s3server.Server
	// CSI is the CSI stack (Options.CSI): its driver's state, and a
	// client that knows the snapshot types.
	CSI *csistack.Stack

	opts       Options
	cluster    *localcluster.Cluster
	stopServer context.CancelFunc
	serverDone chan error
	tmp        string
	seq        atomic.Int64
}

// Options choose what the environment runs.
type Options struct {
	// WithS3 starts an S3 server too.
	WithS3 bool
	// S3TLS makes that server speak HTTPS with a CA of its own; the
	// locations S3Location creates trust it through
	// spec.objectStorage.caCertRef.
	S3TLS bool
	// WithoutServer leaves the Lifeboat server out (tests that run it themselves).
	WithoutServer bool
	// PluginDir is the server's plugin dir; empty means none.
	PluginDir string
	// PluginTimeouts bound plugin calls per kind, as --plugin-timeout does.
	PluginTimeouts map[api.Kind]time.Duration
	// CSI starts the CSI stack (internal/testutil/csistack, controller
	// side: claims provisioned and bound, snapshots taken and deleted, no
	// pods) against the API server before the Lifeboat server starts.
	CSI bool
	// CSISnapshotWait is the server's server.Options.CSISnapshotWait.
	CSISnapshotWait time.Duration
}

// Start starts everything; call Stop when done (TestMain).
func Start(opts Options) (*Env, error) {
	e := &Env{Namespace: "velero", opts: opts}
	var err error
	if e.tmp, err = os.MkdirTemp("", "lifeboat-e2e-"); err != nil {
		return nil, err
	}
	e.StoreRoot = filepath.Join(e.tmp, "store")
	if e.cluster, err = localcluster.Start(localcluster.Options{InstallCRDs: true}); err != nil {
		e.Stop()
		return nil, err
	}
	e.Config = e.cluster.Config
	e.Kubeconfig = filepath.Join(e.tmp, "kubeconfig")
	if err := e.cluster.WriteKubeconfig(e.Kubeconfig); err != nil {
		e.Stop()
		return nil, err
	}
	e.Scheme = runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(e.Scheme); err != nil {
			e.Stop()
			return nil, err
		}
	}
	if e.Client, err = client.New(e.Config, client.Options{Scheme: e.Scheme}); err != nil {
		e.Stop()
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := e.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.Namespace}}); err != nil {
		e.Stop()
		return nil, fmt.Errorf("creating namespace %s: %w", e.Namespace, err)
	}
	if opts.WithS3 {
		var s3opts []s3server.Option
		if opts.S3TLS {
			s3opts = append(s3opts, s3server.WithTLS())
		}
		if e.S3, err = s3server.Launch(s3opts...); err != nil {
			e.Stop()
			return nil, err
		}
	}
	if opts.CSI {
		// Its own timeout (csistack.Options.StartTimeout): a cold start
		// builds the driver.
		if e.CSI, err = csistack.Start(context.Background(), csistack.Options{
			Kubeconfig: e.Kubeconfig,
			StateDir:   filepath.Join(e.tmp, "csi"),
		}); err != nil {
			e.Stop()
			return nil, err
		}
	}
	if !opts.WithoutServer {
		if err := e.StartServer(); err != nil {
			e.Stop()
			return nil, err
		}
	}
	return e, nil
}

// StartServer runs the Lifeboat server in this process.
func (e *Env) StartServer() error {
	opts := server.DefaultOptions()
	opts.Namespace = e.Namespace
	opts.MetricsAddress = "0"
	opts.HealthAddress = "0"
	opts.StoreValidationFrequency = 5 * time.Second
	opts.ItemOperationSyncFrequency = time.Second
	opts.LogLevel = "warn"
	opts.PluginDir = e.opts.PluginDir
	opts.PluginTimeouts = e.opts.PluginTimeouts
	opts.CSISnapshotWait = e.opts.CSISnapshotWait
	if opts.PluginDir == "" {
		opts.PluginDir = filepath.Join(e.tmp, "no-plugins")
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.stopServer = cancel
	e.serverDone = make(chan error, 1)
	cfg, err := e.ServerConfig(e.Namespace)
	if err != nil {
		cancel()
		return err
	}
	go func() {
		err := server.Run(ctx, cfg, opts)
		if !IsCleanExit(err) {
			// A test waiting on the server would otherwise only time out.
			fmt.Fprintln(os.Stderr, "lifeboat server exited:", err)
		}
		e.serverDone <- err
	}()
	return nil
}

// ServerConfig is the config a Lifeboat server serving namespace runs
// with in the tests: install's service account, with exactly the
// permissions install grants it (applied here, idempotently) plus
// testGrants, so that a call the server's RBAC does not allow fails the
// test that makes it, as it would fail in a cluster.
func (e *Env) ServerConfig(namespace string) (*rest.Config, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	objs := install.ServerIdentity(namespace, true)
	objs = append(objs, testGrants(namespace)...)
	for _, obj := range objs {
		u, err := install.Manifest(obj)
		if err != nil {
			return nil, err
		}
		if err := e.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("lifeboat-tests"), client.ForceOwnership); err != nil {
			return nil, fmt.Errorf("granting the server's service account in %s: %s %s: %w", namespace, u.GetKind(), u.GetName(), err)
		}
	}
	return install.ServiceAccountConfig(e.Config, namespace), nil
}

// testGrants are the permissions an operator adds for what the tests
// configure: the labelled-resource cleanup of ConfigMaps and of the cleanup
// example's receipts (an aggregated ClusterRole in a cluster; bound
// directly here, since no controller aggregates roles on the tests' API
// server).
func testGrants(namespace string) []client.Object {
	name := "lifeboat-tests-cleanup-" + namespace
	return []client.Object{
		&rbacv1.ClusterRole{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"delete"}},
				{APIGroups: []string{"example.lifeboat.io", "example.io"}, Resources: []string{"receipts"}, Verbs: []string{"delete"}},
			},
		},
		&rbacv1.ClusterRoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: install.ServerName, Namespace: namespace}},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		},
	}
}

// StopServer stops the in-process server and waits for it.
func (e *Env) StopServer() error {
	if e.stopServer == nil {
		return nil
	}
	e.stopServer()
	e.stopServer = nil
	return <-e.serverDone
}

// Stop stops the server, the S3 server and the cluster.
func (e *Env) Stop() {
	_ = e.StopServer()
	if e.S3 != nil {
		e.S3.Close()
	}
	if e.CSI != nil {
		e.CSI.Stop()
	}
	if e.cluster != nil {
		if err := e.cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping local cluster:", err)
		}
	}
	_ = os.RemoveAll(e.tmp)
}

// Main is a TestMain body: it starts the environment, runs the tests and
// stops it, exiting with the tests' code.
func Main(m *testing.M, opts Options, env **Env) {
	os.Exit(Run(m, opts, env))
}

// Run is Main without the exit, for a TestMain with its own cleanup.
func Run(m *testing.M, opts Options, env **Env) int {
	e, err := Start(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the test environment:", err)
		return 1
	}
	*env = e
	defer e.Stop()
	return m.Run()
}

// Name returns a unique DNS-1123 name starting with prefix.
func (e *Env) Name(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1_000_000, e.seq.Add(1))
}

// Ctx is a context bounded for one test step.
func Ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// NewNamespace creates a namespace with a unique name. The local cluster
// runs no namespace controller, so it is never deleted; unique names keep
// tests apart.
func (e *Env) NewNamespace(t testing.TB, prefix string) string {
	t.Helper()
	name := e.Name(prefix)
	if err := e.Client.Create(Ctx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	return name
}

// Create creates obj or fails the test.
func (e *Env) Create(t testing.TB, obj client.Object) {
	t.Helper()
	if err := e.Client.Create(Ctx(t), obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

// FilesystemLocation creates a BackupStorageLocation over a fresh directory
// and returns it with that directory (the bucket's path on disk).
func (e *Env) FilesystemLocation(t testing.TB, name string) (*v1.BackupStorageLocation, string) {
	t.Helper()
	bsl := &v1.BackupStorageLocation{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: name},
		Spec: v1.BackupStorageLocationSpec{
			Provider:    "lifeboat.io/filesystem",
			Config:      map[string]string{"path": e.StoreRoot},
			StorageType: v1.StorageType{ObjectStorage: &v1.ObjectStorageLocation{Bucket: name, Prefix: "lifeboat"}},
		},
	}
	if err := os.MkdirAll(filepath.Join(e.StoreRoot, name), 0o755); err != nil {
		t.Fatal(err)
	}
	e.Create(t, bsl)
	return bsl, filepath.Join(e.StoreRoot, name)
}

// S3Location creates a BackupStorageLocation over a fresh bucket of the
// test S3 server, with its credentials in a secret, and returns it with the
// bucket's name.
func (e *Env) S3Location(t testing.TB, name string) (*v1.BackupStorageLocation, string) {
	t.Helper()
	if e.S3 == nil {
		t.Fatal("the test environment was started without S3 (Options.WithS3)")
	}
	bucket := e.S3.NewBucket(t)
	return e.S3LocationOver(t, e.Namespace, name, bucket), bucket
}

// S3LocationOver creates a BackupStorageLocation called name in namespace
// over an existing bucket of the test S3 server (prefix "lifeboat"), with
// its credentials in a secret: two of them over one bucket are two
// clusters sharing it. Over a TLS server, the location trusts the server's
// CA through spec.objectStorage.caCertRef (a Secret key, as in Velero).
func (e *Env) S3LocationOver(t testing.TB, namespace, name, bucket string) *v1.BackupStorageLocation {
	t.Helper()
	if e.S3 == nil {
		t.Fatal("the test environment was started without S3 (Options.WithS3)")
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-credentials"},
		Data:       map[string][]byte{"cloud": e.S3.CredentialsFile()},
	}
	if e.S3.CACert != nil {
		secret.Data["ca.crt"] = e.S3.CACert
	}
	e.Create(t, secret)
	bsl := &v1.BackupStorageLocation{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: v1.BackupStorageLocationSpec{
			Provider: "aws",
			Config:   e.S3.BSLConfig(),
			Credential: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: secret.Name}, Key: "cloud",
			},
			StorageType: v1.StorageType{ObjectStorage: &v1.ObjectStorageLocation{Bucket: bucket, Prefix: "lifeboat"}},
		},
	}
	if e.S3.CACert != nil {
		bsl.Spec.ObjectStorage.CACertRef = &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: secret.Name}, Key: "ca.crt",
		}
	}
	e.Create(t, bsl)
	return bsl
}

// WaitBackup waits until the backup leaves New/InProgress and returns it.
func (e *Env) WaitBackup(t testing.TB, name string, timeout time.Duration) *v1.Backup {
	t.Helper()
	var b v1.Backup
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: name}, &b); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return b.Status.Phase != "" && b.Status.Phase != v1.BackupPhaseNew && b.Status.Phase != v1.BackupPhaseInProgress, nil
	})
	if err != nil {
		t.Fatalf("backup %s did not finish within %s (phase %q): %v", name, timeout, b.Status.Phase, err)
	}
	return &b
}

// WaitLocationPhase waits until the location reaches phase.
func (e *Env) WaitLocationPhase(t testing.TB, name string, phase v1.BackupStorageLocationPhase, timeout time.Duration) *v1.BackupStorageLocation {
	t.Helper()
	var bsl v1.BackupStorageLocation
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: name}, &bsl); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return bsl.Status.Phase == phase, nil
	})
	if err != nil {
		t.Fatalf("location %s did not become %s within %s (phase %q, message %q): %v", name, phase, timeout, bsl.Status.Phase, bsl.Status.Message, err)
	}
	return &bsl
}

// IsCleanExit tells a server that stopped because it was asked to.
func IsCleanExit(err error) bool {
	return err == nil || errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "context canceled")
}

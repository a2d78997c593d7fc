package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"

	"github.com/lifeboat-io/lifeboat/internal/archive"
	"github.com/lifeboat-io/lifeboat/internal/buildinfo"
	"github.com/lifeboat-io/lifeboat/internal/server"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

// withoutVeleroCRDs fails every velero.io call the way a real client does in
// a cluster without the CRDs: its RESTMapper finds no such kind. (The fake
// client does not consult its RESTMapper, hence the interceptor.)
func withoutVeleroCRDs() interceptor.Funcs {
	s, _ := NewScheme()
	check := func(obj runtime.Object) error {
		gvk, err := apiutil.GVKForObject(obj, s)
		if err == nil && gvk.Group == v1.SchemeGroupVersion.Group {
			return &meta.NoKindMatchError{GroupKind: gvk.GroupKind(), SearchedVersions: []string{"v1"}}
		}
		return nil
	}
	return interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := check(obj); err != nil {
				return err
			}
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := check(list); err != nil {
				return err
			}
			return c.List(ctx, list, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if err := check(obj); err != nil {
				return err
			}
			return c.Create(ctx, obj, opts...)
		},
	}
}

func TestMissingCRDs(t *testing.T) {
	c := newFakeBuilder(t).WithInterceptorFuncs(withoutVeleroCRDs()).Build()
	for _, args := range [][]string{
		{"backup", "get"},
		{"backup", "get", "web"},
		{"backup", "describe", "web"},
		{"backup", "create", "b"},
		{"backup", "create", "b", "--storage-location", "default"},
		{"backup", "logs", "web"},
	} {
		_, _, err := run(t, newTestFactory(c), args...)
		if err == nil || !strings.Contains(err.Error(), "the velero.io CRDs are not installed in this cluster; run `lifeboat install`") {
			t.Errorf("%v: error = %v, want the install hint", args, err)
		}
	}
}

// writeKubeconfig points a kubeconfig at server and returns its path.
func writeKubeconfig(t *testing.T, server string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: ` + server + `
    insecure-skip-tls-verify: true
contexts:
- name: ctx
  context:
    cluster: c
    user: u
current-context: ctx
users:
- name: u
  user:
    token: t
`
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func runReal(t *testing.T, args ...string) error {
	t.Helper()
	// The namespace must not come from the environment of whoever runs
	// the tests.
	t.Setenv("VELERO_NAMESPACE", "")
	cmd := NewRootCommand()
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs(args)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return cmd.ExecuteContext(ctx)
}

func TestUnreachableAPIServer(t *testing.T) {
	// Port 1 on loopback refuses connections at once.
	kubeconfig := writeKubeconfig(t, "https://127.0.0.1:1")
	for _, args := range [][]string{
		{"backup", "get"},
		{"backup", "create", "b"},
		{"install"},
	} {
		err := runReal(t, append(args, "--kubeconfig", kubeconfig)...)
		if err == nil {
			t.Fatalf("%v succeeded against a closed port", args)
		}
		for _, want := range []string{"cannot reach the Kubernetes API server at https://127.0.0.1:1", "--kubeconfig", "make cluster"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%v: error %q does not contain %q", args, err, want)
			}
		}
	}
}

func TestNoKubeconfig(t *testing.T) {
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "absent"))
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	err := runReal(t, "backup", "get")
	if err == nil || !strings.Contains(err.Error(), "make cluster") {
		t.Errorf("error = %v, want a hint on how to point at a cluster", err)
	}
}

func TestUnknownContext(t *testing.T) {
	kubeconfig := writeKubeconfig(t, "https://127.0.0.1:1")
	err := runReal(t, "backup", "get", "--kubeconfig", kubeconfig, "--context", "nope")
	if err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("error = %v, want it to name the context", err)
	}
}

func TestServerFlags(t *testing.T) {
	var got server.Options
	var gotHost string
	runServer = func(_ context.Context, cfg *rest.Config, opts server.Options) error {
		got, gotHost = opts, cfg.Host
		return nil
	}
	t.Cleanup(func() { runServer = server.Run })
	kubeconfig := writeKubeconfig(t, "https://127.0.0.1:1")

	if err := runReal(t, "server", "--kubeconfig", kubeconfig); err != nil {
		t.Fatal(err)
	}
	if want := server.DefaultOptions(); !reflect.DeepEqual(got, want) {
		t.Errorf("defaults:\n got %+v\nwant %+v", got, want)
	}
	if gotHost != "https://127.0.0.1:1" {
		t.Errorf("server got config for %q", gotHost)
	}

	err := runReal(t, "server", "--kubeconfig", kubeconfig, "-n", "backups",
		"--metrics-address", "0", "--health-address", ":9999", "--default-backup-storage-location", "s3",
		"--default-backup-ttl", "48h", "--store-validation-frequency", "5m", "--list-workers", "3", "--backup-sync-period", "30s",
		"--plugin-dir", "/opt/plugins", "--plugin-timeout", "DeleteItemAction=2m", "--item-operation-sync-frequency", "3s",
		"--fs-backup-timeout", "90m", "--fs-backup-compression", "zstd-fastest", "--client-qps", "25", "--client-burst", "50", "--log-level", "debug", "--log-format", "json",
		"--delete-item-action-workers", "4", "--deletion-max-attempts", "3", "--deletion-retry-base", "10s",
		"--plugin-max-message-size", "256Mi", "--plugin-idle-timeout", "1m",
		"--max-item-size", "1Mi", "--max-archive-size", "2G", "--max-archive-ratio", "50",
		"--leader-elect-lease-duration", "30s", "--leader-elect-renew-deadline", "20s", "--leader-elect-retry-period", "4s")
	if err != nil {
		t.Fatal(err)
	}
	want := server.Options{
		Namespace: "backups", MetricsAddress: "0", HealthAddress: ":9999", DefaultBackupStorageLocation: "s3",
		DefaultBackupTTL: 48 * time.Hour, StoreValidationFrequency: 5 * time.Minute, ListWorkers: 3,
		BackupSyncPeriod: 30 * time.Second, ClientQPS: 25, PluginDir: "/opt/plugins",
		PluginTimeouts:             map[api.Kind]time.Duration{api.KindDeleteItemAction: 2 * time.Minute},
		ItemOperationSyncFrequency: 3 * time.Second, FSBackupTimeout: 90 * time.Minute, FSBackupCompression: "zstd-fastest", ClientBurst: 50, LogLevel: "debug", LogFormat: "json",
		DeleteItemActionWorkers: 4, DeletionMaxAttempts: 3, DeletionRetryBase: 10 * time.Second,
		PluginMaxMessageSize: 256 << 20, PluginIdleTimeout: time.Minute,
		ArchiveLimits: archive.Limits{MaxEntryBytes: 1 << 20, MaxTotalBytes: 2e9, MaxRatio: 50},
		LeaderElect:   true, LeaseDuration: 30 * time.Second, RenewDeadline: 20 * time.Second, RetryPeriod: 4 * time.Second,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("flags:\n got %+v\nwant %+v", got, want)
	}
	if err := runReal(t, "server", "--kubeconfig", kubeconfig, "--leader-elect=false"); err != nil || got.LeaderElect {
		t.Errorf("--leader-elect=false: error %v, LeaderElect %v; want leader election off", err, got.LeaderElect)
	}

	for _, bad := range [][]string{
		{"--log-level", "loud"},
		{"--log-format", "xml"},
		{"--list-workers", "0"},
		{"--delete-item-action-workers", "0"},
		{"--deletion-max-attempts", "0"},
		{"--deletion-retry-base", "0s"},
		{"--default-backup-ttl", "soon"},
		{"--default-backup-ttl", "0s"},
		{"--default-backup-ttl", "-24h"},
		{"--item-operation-sync-frequency", "0s"},
		{"--fs-backup-timeout", "0s"},
		{"--fs-backup-compression", "zip"},
		{"--store-validation-frequency", "-1m"},
		{"--backup-sync-period", "-1m"},
		{"--client-burst", "0"},
		{"--client-qps", "-2"},
		{"--metrics-address", "8085"},
		{"--health-address", "localhost"},
		{"--default-backup-storage-location", ""},
		{"--plugin-dir", ""},
		{"--plugin-timeout", "DeleteItemAction=-1s"},
		{"--plugin-max-message-size", "1Mi"},
		{"--plugin-max-message-size", "2Gi"},
		{"--plugin-max-message-size", "lots"},
		{"--plugin-idle-timeout", "0s"},
		{"--max-item-size", "0"},
		{"--max-item-size", "lots"},
		{"--max-item-size", "1.5"},
		{"--max-item-size", "30Gi"},
		{"--max-archive-size", "-1Gi"},
		{"--max-archive-ratio", "0"},
		{"--leader-elect-lease-duration", "10s"},
		{"--leader-elect-renew-deadline", "2s"},
		{"--leader-elect-retry-period", "0s"},
	} {
		err := runReal(t, append([]string{"server", "--kubeconfig", kubeconfig}, bad...)...)
		if err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(bad[0], "--")) {
			t.Errorf("%v: error = %v, want it to name the flag", bad, err)
		}
	}
}

func TestVersion(t *testing.T) {
	out, _, err := run(t, newTestFactory(nil), "version", "--client-only")
	if err != nil {
		t.Fatal(err)
	}
	want := "Client:\n\tVersion: " + buildinfo.Version + "\n"
	if !strings.HasPrefix(out, want) || strings.Contains(out, "Server:") {
		t.Errorf("version --client-only printed %q", out)
	}

	// The server's version comes from its answer to a ServerStatusRequest.
	answered := false
	c := newFakeBuilder(t).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := c.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			if ssr, ok := obj.(*v1.ServerStatusRequest); ok {
				answered = true
				ssr.Status.Phase = v1.ServerStatusRequestPhaseProcessed
				ssr.Status.ServerVersion = "v9.9.9"
			}
			return nil
		},
	}).Build()
	out, _, err = run(t, newTestFactory(c), "version")
	if err != nil {
		t.Fatal(err)
	}
	if !answered || !strings.HasPrefix(out, want) || !strings.Contains(out, "Server:\n\tVersion: v9.9.9\n") {
		t.Errorf("version printed %q", out)
	}

	// No server: the client part, then the error, and a failing exit.
	out, _, err = run(t, newTestFactory(newFakeBuilder(t).Build()), "version", "--timeout", "50ms")
	if err == nil || !strings.HasPrefix(out, want) || !strings.Contains(out, "<error getting server version") {
		t.Errorf("version without a server: err %v, out %q", err, out)
	}
}

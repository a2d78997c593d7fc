// Package plugins runs the example plugins (examples/plugins, built with
// Lifeboat's SDK) and a plugin built with Velero's own SDK (test/compat)
// end to end: TestMain builds them once into one plugin dir, starts a local
// API server and a Lifeboat server with that dir, and the tests drive
// backups, restores and the plugin host against it.
package plugins

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lifeboat-io/lifeboat/internal/pluginhost"
	"github.com/lifeboat-io/lifeboat/internal/testutil/clitest"
	"github.com/lifeboat-io/lifeboat/internal/testutil/testenv"
)

var (
	env *testenv.Env
	// pluginDir is the server's plugin dir: the examples' binaries and the
	// Velero-SDK plugin.
	pluginDir string
	// compatStateDir is where the Velero-SDK plugin's DeleteItemAction
	// writes down its calls.
	compatStateDir string
	// cleanupCallLog is where the cleanup example's DeleteItemAction
	// writes down its calls (its CLEANUP_CALL_LOG).
	cleanupCallLog string
	// moduleRoot is the main module's directory.
	moduleRoot string
)

// examples are the example plugin binaries, by directory under
// examples/plugins (the binary gets the directory's name).
var examples = []string{"annotate", "cleanup", "custom-volume", "dirstore", "filesnapshotter", "restore-point"}

// customVolumeB is the name of a second build of the custom-volume example.
const customVolumeB = "example.io/custom-volume-b"

// compatBinary is the Velero-SDK plugin's file name in the plugin dir.
const compatBinary = "velero-sdk-plugin"

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("skipping plugin end-to-end tests in -short mode")
		os.Exit(0)
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "lifeboat-plugins-e2e-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(tmp)
	pluginDir = filepath.Join(tmp, "plugins")
	compatStateDir = filepath.Join(tmp, "compat-state")
	cleanupCallLog = filepath.Join(tmp, "cleanup-calls.log")
	for _, d := range []string{pluginDir, compatStateDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fail(err)
		}
	}
	if err := buildPlugins(); err != nil {
		return fail(err)
	}

	// The server starts after the environment is up, so that the plugin
	// processes it starts inherit KUBECONFIG (the cleanup and annotate
	// examples talk to the cluster) and the compat and cleanup plugins'
	// call logs.
	e, err := testenv.Start(testenv.Options{WithoutServer: true, PluginDir: pluginDir})
	if err != nil {
		return fail(fmt.Errorf("starting the test environment: %w", err))
	}
	env = e
	defer e.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := installReceiptCRD(ctx, e.Client); err != nil {
		return fail(err)
	}
	os.Setenv("KUBECONFIG", e.Kubeconfig)
	os.Setenv("COMPAT_PLUGIN_STATE_DIR", compatStateDir)
	os.Setenv("CLEANUP_CALL_LOG", cleanupCallLog)
	if err := e.StartServer(); err != nil {
		return fail(err)
	}
	defer closeHost()
	return m.Run()
}

func fail(err error) int {
	fmt.Fprintln(os.Stderr, "plugin e2e setup:", err)
	return 1
}

// buildPlugins builds the examples (one `go build` for all of them) and the
// Velero-SDK plugin (test/compat/build.sh, which caches the binary) at the
// same time, and puts them into pluginDir.
func buildPlugins() error {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return fmt.Errorf("go env GOMOD: %w", err)
	}
	moduleRoot = filepath.Dir(strings.TrimSpace(string(out)))

	start := time.Now()
	var wg sync.WaitGroup
	var exampleErr, compatErr error
	wg.Go(func() {
		args := []string{"build", "-o", pluginDir + "/"}
		for _, ex := range examples {
			args = append(args, "./examples/plugins/"+ex)
		}
		cmd := exec.Command("go", args...)
		cmd.Dir = moduleRoot
		if b, err := cmd.CombinedOutput(); err != nil {
			exampleErr = fmt.Errorf("building the example plugins: %w\n%s", err, b)
			return
		}
		// A second custom-action plugin, told apart by its parameters.
		cmd = exec.Command("go", "build", "-ldflags", "-X main.name="+customVolumeB, "-o", filepath.Join(pluginDir, "custom-volume-b"), "./examples/plugins/custom-volume")
		cmd.Dir = moduleRoot
		if b, err := cmd.CombinedOutput(); err != nil {
			exampleErr = fmt.Errorf("building the second custom-volume plugin: %w\n%s", err, b)
		}
	})
	wg.Go(func() {
		cmd := exec.Command(filepath.Join(moduleRoot, "test", "compat", "build.sh"))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		b, err := cmd.Output()
		if err != nil {
			compatErr = fmt.Errorf("building the Velero-SDK plugin (test/compat/build.sh): %w\n%s", err, stderr.Bytes())
			return
		}
		// Installing a plugin is copying its binary into the plugin dir.
		compatErr = copyFile(strings.TrimSpace(string(b)), filepath.Join(pluginDir, compatBinary))
	})
	wg.Wait()
	if err := errors.Join(exampleErr, compatErr); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "plugins built in %s\n", time.Since(start).Round(time.Millisecond))
	return nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// The tests' own plugin host over the same plugin dir: it calls plugins
// directly, apart from any backup or deletion (a DeleteItemAction twice on
// the same items, to check a retry), and runs the storage conformance suite
// over ObjectStores.
var (
	hostOnce sync.Once
	host     *pluginhost.Host
	hostErr  error
)

func testHost(t *testing.T) *pluginhost.Host {
	t.Helper()
	hostOnce.Do(func() {
		host = pluginhost.New(pluginhost.Options{Dir: pluginDir})
		hostErr = host.Discover(context.Background())
	})
	if hostErr != nil {
		t.Fatalf("plugin host over %s: %v", pluginDir, hostErr)
	}
	return host
}

func closeHost() {
	if host != nil {
		host.Close()
	}
}

// lifeboat runs the CLI as a user would, against the test cluster.
func lifeboat(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return lifeboatWithInput(t, nil, args...)
}

// lifeboatWithInput runs the CLI with stdin as its standard input.
func lifeboatWithInput(t *testing.T, stdin io.Reader, args ...string) (string, error) {
	t.Helper()
	return clitest.Run(env.Kubeconfig, stdin, append([]string{"-n", env.Namespace}, args...)...)
}

func mustLifeboat(t *testing.T, args ...string) string {
	t.Helper()
	return clitest.Must(t, env.Kubeconfig, append([]string{"-n", env.Namespace}, args...)...)
}

// Package velerocli drives a Lifeboat server with Velero's own CLI: the
// `velero` binary of Velero v1.18.3, built from the Go module proxy by
// test/compat/build.sh, run as a user would run it (a kubeconfig, -n the
// server's namespace) against a real API server, a real Lifeboat server and
// an S3 server that speaks only TLS with a CA of its own. The locations
// trust that CA through spec.objectStorage.caCertRef, so every log, result
// file and tarball the CLI reads through a DownloadRequest's signed URL
// works only because Velero's CLI found and honoured the same CA.
//
// Every command must exit 0, print nothing on stderr and show the right
// data; Velero's CLI prints some failures on stdout with exit 0 (for
// example "<error getting backup volume info: ...>" in describe), so the
// output is checked for those too.
package velerocli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lifeboat-io/lifeboat/internal/testutil/testenv"
)

var (
	env *testenv.Env
	// veleroBin is Velero's CLI, built by test/compat/build.sh velero.
	veleroBin string
	// home is the CLI's HOME: Velero reads its client config
	// (~/.config/velero/config.json) from there, so a developer's own
	// settings (a default namespace, features) cannot change the tests.
	home string
)

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("skipping Velero CLI end-to-end tests in -short mode")
		os.Exit(0)
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "lifeboat-velerocli-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(tmp)
	home = filepath.Join(tmp, "home")
	plugins := filepath.Join(tmp, "plugins")
	for _, d := range []string{home, plugins} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return fail(err)
		}
	}
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return fail(fmt.Errorf("go env GOMOD: %w", err))
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))

	start := time.Now()
	var buildErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		buildErr = buildPlugins(root, plugins)
	}()
	veleroBin, err = buildVelero(root)
	<-done
	if err := errors.Join(err, buildErr); err != nil {
		return fail(err)
	}
	fmt.Fprintf(os.Stderr, "velero CLI and plugins ready in %s: %s\n", time.Since(start).Round(time.Millisecond), veleroBin)
	return testenv.Run(m, testenv.Options{WithS3: true, S3TLS: true, PluginDir: plugins}, &env)
}

func fail(err error) int {
	fmt.Fprintln(os.Stderr, "velero CLI e2e setup:", err)
	return 1
}

// buildPlugins builds the plugins whose files `describe --details` shows:
// a VolumeSnapshotter (native snapshots in the volume information) and a
// BackupItemAction with asynchronous operations (the item operations).
func buildPlugins(root, dir string) error {
	cmd := exec.Command("go", "build", "-o", dir+"/", "./examples/plugins/filesnapshotter", "./test/e2e/testdata/asyncplugin")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building the test plugins: %w\n%s", err, b)
	}
	return nil
}

// buildVelero runs test/compat/build.sh velero (a cache hit costs nothing)
// and returns the binary's path.
func buildVelero(root string) (string, error) {
	cmd := exec.Command(filepath.Join(root, "test", "compat", "build.sh"), "velero")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("building Velero's CLI (test/compat/build.sh velero): %w\n%s", err, stderr.Bytes())
	}
	return strings.TrimSpace(string(b)), nil
}

// commandTimeout bounds one velero command; --wait ones included.
const commandTimeout = 3 * time.Minute

// runVelero runs `velero --kubeconfig K -n NS ARGS...` in dir (empty: a
// fresh temporary directory) and returns stdout and stderr.
func runVelero(t testing.TB, dir string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	full := append([]string{"--kubeconfig", env.Kubeconfig, "-n", env.Namespace}, args...)
	cmd := exec.CommandContext(ctx, veleroBin, full...)
	cmd.Dir = dir
	cmd.Env = []string{"HOME=" + home, "KUBECONFIG=" + env.Kubeconfig, "PATH=" + os.Getenv("PATH")}
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// velero runs a command that must succeed as it does in a normal run of
// Velero: exit 0, nothing on stderr but Velero's own info lines (no error,
// warning or klog line), and none of the failures Velero's CLI prints on
// stdout while exiting 0.
func velero(t testing.TB, args ...string) string {
	t.Helper()
	return veleroIn(t, "", args...)
}

// veleroIn is velero run in directory dir.
func veleroIn(t testing.TB, dir string, args ...string) string {
	t.Helper()
	start := time.Now()
	stdout, stderr, err := runVelero(t, dir, args...)
	// describe colours its output even off a terminal; the checks read
	// the text.
	stdout = ansi.ReplaceAllString(stdout, "")
	t.Logf("velero %s (%s):\n%s", strings.Join(args, " "), time.Since(start).Round(time.Millisecond), stdout)
	if err != nil {
		t.Fatalf("velero %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout, stderr)
	}
	for line := range strings.SplitSeq(strings.TrimSpace(stderr), "\n") {
		// Velero's client code logs a few informational lines itself
		// (`backup create --from-schedule` says which labels it copies);
		// they say nothing about the server.
		if line != "" && !strings.Contains(line, " level=info ") {
			t.Errorf("velero %s printed on stderr:\n%s", strings.Join(args, " "), stderr)
			break
		}
	}
	if bad := complaint.FindString(stdout); bad != "" {
		t.Errorf("velero %s printed %q:\n%s", strings.Join(args, " "), bad, stdout)
	}
	return stdout
}

var ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")

// complaint matches what Velero's CLI prints on stdout when something went
// wrong although it exits 0: "<error getting ...>" in describe and plugin
// get, "WARNING: Error getting cacert from BSL" and version's "# WARNING:
// the client version does not match the server version".
var complaint = regexp.MustCompile(`<error[^>]*>|WARNING:|Warning: |An error occurred`)

// mustContain fails the test for every want missing from out.
func mustContain(t testing.TB, what, out string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Errorf("%s: want %q in:\n%s", what, w, out)
		}
	}
}

// lineWith returns the first line of out that holds every one of parts, or
// "" (for table output: one row has them all).
func lineWith(out string, parts ...string) string {
	for line := range strings.SplitSeq(out, "\n") {
		ok := true
		for _, p := range parts {
			if !strings.Contains(line, p) {
				ok = false
				break
			}
		}
		if ok {
			return line
		}
	}
	return ""
}

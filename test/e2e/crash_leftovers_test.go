package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/cli"
)

// The crash-leftover tests. A server killed in the middle of a backup or a
// restore has no chance to remove what it was writing: the backup's
// half-written upload in the store, the restore's spool and the run logs on
// local disk. They run the built `lifeboat server` as a child process (see
// delete_kill_test.go), hold it at a known point with the hold plugin
// (testdata/holdplugin), SIGKILL it, start a new one, and check that
// nothing the killed server left is still there.

// uploadTempPrefix is how the filesystem store names an upload in flight.
const uploadTempPrefix = ".lifeboat-upload-"

// crashWorld is a delWorld whose server is a child process.
type crashWorld struct {
	*delWorld
	bin, pluginDir, logDir string
	// tmp is the child servers' TMPDIR: whatever they keep on local disk
	// by default goes there, and only there.
	tmp   string
	hold  string
	args  []string
	child []string
}

func newCrashWorld(t *testing.T, prefix string) *crashWorld {
	t.Helper()
	binDir, pluginDir := t.TempDir(), t.TempDir()
	w := &crashWorld{
		delWorld: &delWorld{t: t, ns: env.NewNamespace(t, prefix), app: env.NewNamespace(t, prefix+"app"), state: t.TempDir()},
		bin:      filepath.Join(binDir, "lifeboat"), pluginDir: pluginDir, logDir: t.TempDir(), tmp: t.TempDir(),
	}
	w.hold = w.state
	for _, b := range []struct{ out, pkg string }{{w.bin, "../../cmd/lifeboat"}, {filepath.Join(pluginDir, "holdplugin"), "./testdata/holdplugin"}} {
		if out, err := exec.Command("go", "build", "-o", b.out, b.pkg).CombinedOutput(); err != nil {
			t.Fatalf("building %s: %v\n%s", b.pkg, err, out)
		}
	}
	w.args = []string{"server", "--kubeconfig", env.Kubeconfig, "-n", w.ns,
		"--plugin-dir", pluginDir, "--metrics-address", "0", "--health-address", "0", "--log-level", "info",
		"--store-validation-frequency", "1s", "--backup-sync-period", "0", "--deletion-retry-base", "1s"}
	// Plugin processes inherit the server's environment.
	w.child = []string{"KUBECONFIG=" + env.Kubeconfig, "HOLD_PLUGIN_STATE_DIR=" + w.state, "TMPDIR=" + w.tmp}
	return w
}

func (w *crashWorld) start(logName string) *serverProcess {
	return startServerProcess(w.t, w.bin, w.args, w.child, filepath.Join(w.logDir, logName))
}

// waitHeld waits until the hold plugin has been reached (marker
// backup-held or restore-held) by server p.
func (w *crashWorld) waitHeld(p *serverProcess, marker string) {
	w.t.Helper()
	w.poll("the server to reach the hold plugin ("+marker+")", 2*time.Minute, func(context.Context) (bool, error) {
		if err := p.exited(); err != nil {
			return false, err
		}
		_, err := os.Stat(filepath.Join(w.state, marker))
		return err == nil, nil
	})
}

// localFiles lists what is under the servers' TMPDIR: regular files and
// directories (plugin processes leave their unix sockets there, which are
// theirs, not the server's).
func (w *crashWorld) localFiles() []string {
	w.t.Helper()
	var out []string
	err := filepath.WalkDir(w.tmp, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != w.tmp && (d.IsDir() || d.Type().IsRegular()) {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		w.t.Fatalf("listing %s: %v", w.tmp, err)
	}
	return out
}

// checkLocalLeftovers fails for every file the killed server had on local
// disk that is still there, and for every directory of it that is still
// there although nothing the new server made lives in it (a work directory
// the new server uses too may stay; what the killed one put in it may not).
func (w *crashWorld) checkLocalLeftovers(killed []string) {
	w.t.Helper()
	now := w.localFiles()
	for _, p := range killed {
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			w.t.Fatal(err)
		}
		if fi.Mode().IsRegular() {
			w.t.Errorf("the killed server's %s (%d bytes) is still there", p, fi.Size())
			continue
		}
		inUse := slices.ContainsFunc(now, func(q string) bool {
			return strings.HasPrefix(q, p+string(filepath.Separator)) && !slices.Contains(killed, q)
		})
		if !inUse {
			w.t.Errorf("the killed server's directory %s is still there", p)
		}
	}
}

// uploadsIn lists the filesystem store's uploads in flight under dir
// (relative to the location's prefix).
func (w *crashWorld) uploadsIn(dir string) []string {
	w.t.Helper()
	var out []string
	for _, k := range w.keys(dir) {
		if strings.HasPrefix(filepath.Base(k), uploadTempPrefix) {
			out = append(out, k)
		}
	}
	return out
}

func (w *crashWorld) holdConfigMaps() {
	w.t.Helper()
	w.configMaps("plain-1", "plain-2")
	env.Create(w.t, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.app, Name: "held", Labels: map[string]string{"hold": "yes"}},
		Data:       map[string]string{"k": "v"},
	})
}

// A server killed while it uploads a backup's tarball leaves the upload
// half-written in the store. The next server marks the backup Failed and
// removes the upload with it, and no run log of the killed server stays on
// local disk. The deletion of a backup also removes such leftovers, and its
// report counts them.
func TestKilledBackupLeavesNoUpload(t *testing.T) {
	w := newCrashWorld(t, "crashb")
	w.holdConfigMaps()
	first := w.start("server-1.log")
	w.createLocation()

	w.setFile("hold", "")
	b := &v1.Backup{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: env.Name("bk")},
		Spec:       v1.BackupSpec{StorageLocation: w.bsl.Name, IncludedNamespaces: []string{w.app}},
	}
	env.Create(t, b)
	w.waitHeld(first, "backup-held")
	// The tarball is streamed into the store while items are collected, so
	// its upload is in flight now.
	if ups := w.uploadsIn("backups/" + b.Name); len(ups) == 0 {
		t.Fatalf("no upload in flight under backups/%s/ while the backup is held (keys %v); the test must kill the server mid-upload", b.Name, w.keys("backups/"+b.Name))
	}
	killedFiles := w.localFiles()
	if len(killedFiles) == 0 {
		t.Fatalf("the server has nothing on local disk while a backup runs (its run log, at least, should be under %s)", w.tmp)
	}
	first.kill()
	w.removeFile("hold")
	if ups := w.uploadsIn("backups/" + b.Name); len(ups) == 0 {
		t.Fatalf("the kill left no upload under backups/%s/ (keys %v)", b.Name, w.keys("backups/"+b.Name))
	}

	second := w.start("server-2.log")
	w.poll("the backup left by the killed server to be Failed", time.Minute, func(ctx context.Context) (bool, error) {
		if err := second.exited(); err != nil {
			return false, err
		}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return false, err
		}
		return b.Status.Phase == v1.BackupPhaseFailed, nil
	})
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return len(w.uploadsIn("backups/"+b.Name)) == 0, nil
	})
	if err != nil {
		t.Errorf("the backup is Failed, but the killed server's upload is still there: %v", w.uploadsIn("backups/"+b.Name))
	}
	w.checkLocalLeftovers(killedFiles)

	// A leftover that survived until the deletion (a server killed before
	// it could be removed, or a store that was unreachable then) goes with
	// the backup, and the report says so.
	done := w.completedBackup(second)
	planted := filepath.Join(w.bucket, "lifeboat", "backups", done.Name, uploadTempPrefix+"planted")
	if err := os.WriteFile(planted, []byte("half of something"), 0o600); err != nil {
		t.Fatal(err)
	}
	dbr := w.request(done.Name)
	final := w.waitEnded(dbr)
	if final.Status.Phase != v1.DeleteBackupRequestPhaseProcessed || final.Status.Report == nil {
		t.Fatalf("deletion ended %s with errors %v", final.Status.Phase, final.Status.Errors)
	}
	if left := w.keys("backups/" + done.Name); len(left) != 0 {
		t.Errorf("after the deletion, backups/%s/ still holds %v", done.Name, left)
	}
	if n := final.Status.Report.UnfinishedUploadsRemoved; n != 1 {
		t.Errorf("report counts %d unfinished uploads removed, want 1 (the planted one)", n)
	}
	out := w.cli("delete-request", "describe", dbr.Name)
	if !regexp.MustCompile(`Unfinished uploads removed:\s+1\n`).MatchString(out) {
		t.Errorf("delete-request describe does not count the removed upload:\n%s", out)
	}
}

// completedBackup runs a backup of the app namespace on server p and waits
// for it to complete.
func (w *crashWorld) completedBackup(p *serverProcess) *v1.Backup {
	w.t.Helper()
	b := &v1.Backup{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: env.Name("bk")},
		Spec:       v1.BackupSpec{StorageLocation: w.bsl.Name, IncludedNamespaces: []string{w.app}},
	}
	env.Create(w.t, b)
	w.poll("backup "+b.Name, 2*time.Minute, func(ctx context.Context) (bool, error) {
		if err := p.exited(); err != nil {
			return false, err
		}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return b.Status.Phase.IsTerminal(), nil
	})
	if b.Status.Phase != v1.BackupPhaseCompleted {
		w.t.Fatalf("backup %s: phase %s (%s)", b.Name, b.Status.Phase, b.Status.FailureReason)
	}
	return b
}

// cli runs the CLI against the world's namespace.
func (w *crashWorld) cli(args ...string) string {
	w.t.Helper()
	cmd := cli.NewRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(append([]string{"--kubeconfig", env.Kubeconfig, "-n", w.ns}, args...))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cmd.ExecuteContext(ctx); err != nil {
		w.t.Fatalf("lifeboat %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// A server killed while it restores leaves the restore's spool (every item
// the restore accepted, up to the archive's unpacked-size limit) on local
// disk. The next server removes it when it starts, and marks the restore
// Failed.
func TestKilledRestoreLeavesNoSpool(t *testing.T) {
	w := newCrashWorld(t, "crashr")
	w.holdConfigMaps()
	first := w.start("server-1.log")
	w.createLocation()
	b := w.completedBackup(first)

	w.setFile("hold", "")
	target := env.Name("crashdst")
	r := &v1.Restore{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: env.Name("rs")},
		Spec:       v1.RestoreSpec{BackupName: b.Name, NamespaceMapping: map[string]string{w.app: target}},
	}
	env.Create(t, r)
	w.waitHeld(first, "restore-held")
	killedFiles := w.localFiles()
	// The spool holds the three ConfigMaps (and the namespace) the archive
	// gave, so there are files besides the run log.
	var regular int
	for _, p := range killedFiles {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			regular++
		}
	}
	if regular < 2 {
		t.Fatalf("while the restore is held, the server has %d files on local disk (%v); want its spool and run log", regular, killedFiles)
	}
	first.kill()
	w.removeFile("hold")

	second := w.start("server-2.log")
	w.poll("the restore left by the killed server to be Failed", time.Minute, func(ctx context.Context) (bool, error) {
		if err := second.exited(); err != nil {
			return false, err
		}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(r), r); err != nil {
			return false, err
		}
		return r.Status.Phase == v1.RestorePhaseFailed, nil
	})
	w.checkLocalLeftovers(killedFiles)
	if t.Failed() {
		t.Logf("the servers' TMPDIR now holds: %s", fmt.Sprint(w.localFiles()))
	}
}

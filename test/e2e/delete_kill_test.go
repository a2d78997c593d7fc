package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/deletion"
	"github.com/lifeboat-io/lifeboat/internal/storage"
	"github.com/lifeboat-io/lifeboat/internal/storage/filesystem"
	"github.com/lifeboat-io/lifeboat/internal/testutil/testenv"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

// The killed-server test. A clean stop (TestDeletionResumesAfterTheServerRestarts)
// writes a final checkpoint, so nothing is repeated; a SIGKILL writes
// nothing, so the calls finished since the last checkpoint write are passed
// again. The test measures exactly that and checks what is guaranteed: no
// item the persisted checkpoint records as done is passed again, every item
// is passed, and the repeats are bounded by the completions the checkpoint
// had not recorded yet.
const (
	// killItems is enough items that the deletion outlives several
	// checkpoint writes (every 500 ms or 1,000 calls) and the kill lands
	// between two of them with most of the work still to do.
	killItems = 3000
	// killWorkers is --delete-item-action-workers: how many calls can be
	// in flight at the kill.
	killWorkers = 8
	// killDelay slows each plugin call so the deletion takes seconds, long
	// enough to kill the server in the middle of it.
	killDelay = "10ms"
	// killAfterCalls: the server is killed once the plugin has recorded at
	// least this many calls (and a checkpoint has been written).
	killAfterCalls = 1000
)

// serverProcess is `lifeboat server` running as a child process, so the
// test can SIGKILL it as a crash, an OOM kill or a node failure would.
type serverProcess struct {
	t    *testing.T
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	// err is cmd.Wait's result, set before done is closed.
	err error
}

func startServerProcess(t *testing.T, bin string, args, extraEnv []string, logPath string) *serverProcess {
	t.Helper()
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatalf("creating the server log: %v", err)
	}
	cmd := exec.Command(bin, args...)
	// Later entries win, so these override whatever the test process has.
	cmd.Env = append(os.Environ(), extraEnv...)
	cmd.Stdout, cmd.Stderr = f, f
	// Should the test binary die, the server must not live on, deleting
	// from a cluster that is going away.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("starting %s: %v", bin, err)
	}
	p := &serverProcess{t: t, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	// Cleanups run last-registered first: the process is gone before its
	// log is shown.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log of server process %d (%s):\n%s", cmd.Process.Pid, logPath, p.logTail(60))
		}
	})
	t.Cleanup(p.kill)
	return p
}

func (p *serverProcess) pid() int { return p.cmd.Process.Pid }

// kill SIGKILLs the server and waits until it has been reaped.
func (p *serverProcess) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	if err := syscall.Kill(p.pid(), syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		p.t.Errorf("killing server process %d: %v", p.pid(), err)
	}
	<-p.done
}

// exited returns an error once the process has ended: a server that died
// on its own would otherwise only show as a timeout.
func (p *serverProcess) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("server process %d exited unexpectedly (%w); its log is %s", p.pid(), p.err, p.log)
	default:
		return nil
	}
}

func (p *serverProcess) logTail(lines int) string {
	data, err := os.ReadFile(p.log)
	if err != nil {
		return fmt.Sprintf("(reading the log: %v)", err)
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}

// procStat reads a process's command name, state and parent from
// /proc/<pid>/stat. The name is in parentheses and may hold spaces, so
// the fields after it are found from the last ')'.
func procStat(pid int) (comm string, state byte, ppid int, err error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return "", 0, 0, fmt.Errorf("reading /proc/%d/stat: %w", pid, err)
	}
	open, closing := bytes.IndexByte(data, '('), bytes.LastIndexByte(data, ')')
	if open < 0 || closing < open {
		return "", 0, 0, fmt.Errorf("/proc/%d/stat: unexpected format %q", pid, data)
	}
	fields := strings.Fields(string(data[closing+1:]))
	if len(fields) < 2 || len(fields[0]) != 1 {
		return "", 0, 0, fmt.Errorf("/proc/%d/stat: unexpected format %q", pid, data)
	}
	ppid, err = strconv.Atoi(fields[1])
	if err != nil {
		return "", 0, 0, fmt.Errorf("/proc/%d/stat: parent pid: %w", pid, err)
	}
	return string(data[open+1 : closing]), fields[0][0], ppid, nil
}

// childProcesses returns the pids of parent's children called comm.
func childProcesses(parent int, comm string) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		c, _, ppid, err := procStat(pid)
		if err != nil {
			// Gone since the listing.
			continue
		}
		if ppid == parent && c == comm {
			out = append(out, pid)
		}
	}
	return out, nil
}

// processDead reports whether pid has ended: gone, or a zombie nobody has
// reaped yet (nothing a zombie does can reach the call log any more).
func processDead(pid int) bool {
	_, state, _, err := procStat(pid)
	return errors.Is(err, os.ErrNotExist) || (err == nil && (state == 'Z' || state == 'X'))
}

// callLog reads the test plugin's calls in the order they were recorded,
// each as "<outcome> <ns>/<name>".
func (w *delWorld) callLog() []string {
	w.t.Helper()
	data, err := os.ReadFile(filepath.Join(w.state, "calls"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		w.t.Fatalf("reading the plugin's call log: %v", err)
	}
	var out []string
	for line := range strings.Lines(string(data)) {
		fields := strings.Fields(line)
		if len(fields) != 3 || !strings.HasSuffix(line, "\n") {
			w.t.Fatalf("call log: malformed line %q (the plugin writes whole lines)", line)
		}
		out = append(out, fields[0]+" "+fields[2])
	}
	return out
}

// countLines counts the recorded calls cheaply, for polling.
func (w *delWorld) countLines() (int, error) {
	data, err := os.ReadFile(filepath.Join(w.state, "calls"))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading the plugin's call log: %w", err)
	}
	return bytes.Count(data, []byte{'\n'}), nil
}

// createConfigMaps creates n ConfigMaps in ns, a few at a time: one by one
// would take most of the test's time.
func createConfigMaps(t *testing.T, ns string, n int) []string {
	t.Helper()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("cm-%04d", i)
	}
	g, ctx := errgroup.WithContext(testenv.Ctx(t))
	g.SetLimit(8)
	for _, name := range names {
		g.Go(func() error {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"k": name}}
			if err := env.Client.Create(ctx, cm); err != nil {
				return fmt.Errorf("creating ConfigMap %s/%s: %w", ns, name, err)
			}
			return nil
		})
	}
	// Registered before the wait, so that a partial set goes too.
	t.Cleanup(func() {
		// Thousands of ConfigMaps left in the shared cluster would slow
		// down every later test that lists or backs up all namespaces.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := env.Client.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(ns)); err != nil {
			t.Errorf("deleting the ConfigMaps of %s: %v", ns, err)
		}
	})
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	return names
}

// positionPlugins offers the deletion engine one DeleteItemAction with the
// test plugin's name and AppliesTo, so that the engine's own Plan numbers
// the tarball's items exactly as its Run does (same scan, same rule for
// preferred-version copies, same matching).
type positionPlugins struct{}

func (positionPlugins) Names(kind api.Kind) []string {
	if kind == api.KindDeleteItemAction {
		return []string{recordDeletes}
	}
	return nil
}

func (positionPlugins) DeleteItemAction(string) (api.DeleteItemAction, error) {
	return positionAction{}, nil
}

func (positionPlugins) VolumeSnapshotter(name string) (api.VolumeSnapshotter, error) {
	return nil, fmt.Errorf("VolumeSnapshotter %s: the position plan needs none", name)
}

type positionAction struct{}

// AppliesTo is what testdata/deleteplugin answers.
func (positionAction) AppliesTo() (api.ResourceSelector, error) {
	return api.ResourceSelector{IncludedResources: []string{"configmaps"}}, nil
}

func (positionAction) Execute(*api.DeleteItemActionExecuteInput) error {
	return errors.New("the position plan never runs an action")
}

// configMapPositions maps each ConfigMap of the app namespace in b's
// tarball to its position, the unit of the deletion's checkpoints.
func (w *delWorld) configMapPositions(b *v1.Backup) map[int64]string {
	w.t.Helper()
	fs, err := filesystem.New(map[string]string{filesystem.PathKey: env.StoreRoot})
	if err != nil {
		w.t.Fatalf("opening the store root: %v", err)
	}
	loc := w.bsl.Spec.ObjectStorage
	plan, err := (&deletion.Engine{Plugins: positionPlugins{}}).Plan(testenv.Ctx(w.t), b, storage.NewBackupStore(fs, loc.Bucket, loc.Prefix))
	if err != nil {
		w.t.Fatalf("planning the deletion of %s to number its items: %v", b.Name, err)
	}
	out := map[int64]string{}
	for _, a := range plan.Actions {
		for _, it := range a.Items {
			if it.Resource == "configmaps" && it.Namespace == w.app {
				out[it.Position] = it.Name
			}
		}
	}
	return out
}

// actionProgress is the checkpoint of the test plugin's action.
func actionProgress(d *v1.DeleteBackupRequest) (v1.DeletionProgress, bool) {
	if d.Status.Checkpoint == nil {
		return v1.DeletionProgress{}, false
	}
	for _, a := range d.Status.Checkpoint.Actions {
		if a.Name == recordDeletes {
			return a, true
		}
	}
	return v1.DeletionProgress{}, false
}

// doneItems names the ConfigMaps a checkpoint records as done: those below
// the watermark and those listed above it.
func doneItems(cp v1.DeletionProgress, positions map[int64]string) map[string]bool {
	listed := map[int64]bool{}
	for _, p := range cp.Done {
		listed[p] = true
	}
	out := map[string]bool{}
	for pos, name := range positions {
		if pos < cp.Watermark || listed[pos] {
			out[name] = true
		}
	}
	return out
}

// A server process SIGKILLed in the middle of deleting a backup of
// thousands of items leaves the request InProgress with its last persisted
// checkpoint; a new server process resumes from it and finishes. Exactly
// once is not possible across a kill (calls finished after the last
// checkpoint write are not recorded anywhere the server can read), so the
// test checks, with figures, what is guaranteed: nothing the checkpoint
// records as done is passed again, every item is passed, each at most
// twice, and the repeats are bounded by the completions not yet persisted
// plus the calls in flight.
func TestDeletionResumesAfterTheServerIsKilled(t *testing.T) {
	testStart := time.Now()
	binDir, logDir, pluginDir := t.TempDir(), t.TempDir(), t.TempDir()
	bin := filepath.Join(binDir, "lifeboat")
	// The real binary, built while the ConfigMaps are created. The cleanup
	// waits for the build so the temp dir is not removed under it.
	var buildErr error
	var buildTook time.Duration
	built := make(chan struct{})
	go func() {
		defer close(built)
		start := time.Now()
		defer func() { buildTook = time.Since(start) }()
		out, err := exec.Command("go", "build", "-o", bin, "../../cmd/lifeboat").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("building lifeboat: %w\n%s", err, out)
		}
	}()
	t.Cleanup(func() { <-built })
	// Only the record-deletes plugin: the cleanup example would create a
	// Receipt per ConfigMap at backup time and delete it again, thousands
	// of API calls that have nothing to do with what is measured here.
	if err := os.Symlink(filepath.Join(deletionPlugins(t), "deleteplugin"), filepath.Join(pluginDir, "deleteplugin")); err != nil {
		t.Fatalf("installing the test plugin: %v", err)
	}

	// A namespace of its own: the package's in-process servers watch
	// theirs only, so this process server is the only one to see the
	// location, the backup and the request.
	w := &delWorld{t: t, ns: env.NewNamespace(t, "kill"), app: env.NewNamespace(t, "killapp"), state: t.TempDir()}
	names := createConfigMaps(t, w.app, killItems)
	created := time.Since(testStart)
	<-built
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	args := []string{"server", "--kubeconfig", env.Kubeconfig, "-n", w.ns,
		"--plugin-dir", pluginDir, "--metrics-address", "0", "--health-address", "0", "--log-level", "info",
		"--store-validation-frequency", "1s", "--backup-sync-period", "0", "--deletion-retry-base", "1s",
		"--delete-item-action-workers", strconv.Itoa(killWorkers)}
	// The restarted server takes the lease over once the killed one's
	// expires: a short lease keeps that wait short.
	args = append(args, fastLeaseArgs()...)
	// Plugin processes inherit the server's environment.
	childEnv := []string{"KUBECONFIG=" + env.Kubeconfig, "DELETE_PLUGIN_STATE_DIR=" + w.state}
	first := startServerProcess(t, bin, args, childEnv, filepath.Join(logDir, "server-1.log"))
	w.createLocation()

	backupStart := time.Now()
	b := w.backup()
	backedUp := time.Since(backupStart)
	positions := w.configMapPositions(b)
	if len(positions) != killItems {
		t.Fatalf("the engine numbers %d ConfigMaps of %s in the tarball, want %d", len(positions), w.app, killItems)
	}

	w.setFile("delay", killDelay)
	dbr := w.request(b.Name)
	requested := time.Now()
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := first.exited(); err != nil {
			return false, err
		}
		n, err := w.countLines()
		if err != nil || n < killAfterCalls {
			return false, err
		}
		var cur v1.DeleteBackupRequest
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(dbr), &cur); err != nil {
			return false, fmt.Errorf("reading deletion request %s: %w", dbr.Name, err)
		}
		if p := cur.Status.Phase; p == v1.DeleteBackupRequestPhaseProcessed || p == v1.DeleteBackupRequestPhaseFailed {
			return false, fmt.Errorf("the deletion ended (%s) before the kill, after %d calls; slow the plugin down (delay %s)", cur.Status.Phase, n, killDelay)
		}
		cp, ok := actionProgress(&cur)
		return ok && cp.Succeeded > 0, nil
	})
	if err != nil {
		t.Fatalf("waiting for %d calls and a checkpoint: %v", killAfterCalls, err)
	}
	// The plugin processes are found before the kill, while their parent
	// is alive, to make sure afterwards that none of them records a call
	// after K was counted.
	plugins, err := childProcesses(first.pid(), "deleteplugin")
	if err != nil || len(plugins) == 0 {
		t.Fatalf("finding the server's plugin processes: %v (found %v)", err, plugins)
	}
	killedAfter := time.Since(requested)
	first.kill()
	err = wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		for _, pid := range plugins {
			if !processDead(pid) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("plugin processes %v outlived the killed server (the host starts them with Pdeathsig): %v", plugins, err)
	}

	// What the killed server left: K calls recorded, and the request's
	// status as last written.
	before := w.callLog()
	k := len(before)
	mid := w.waitRequest(dbr, "the state after the kill", 30*time.Second, func(*v1.DeleteBackupRequest) bool { return true })
	cpMid, ok := actionProgress(mid)
	if mid.Status.Phase != v1.DeleteBackupRequestPhaseInProgress || !ok || cpMid.Succeeded == 0 {
		t.Fatalf("after the kill: phase %s checkpoint %+v; want InProgress with a checkpoint of %s", mid.Status.Phase, mid.Status.Checkpoint, recordDeletes)
	}
	s := cpMid.Succeeded
	if k >= killItems {
		t.Fatalf("the kill came after all %d items were passed (%d calls); it must land in the middle", killItems, k)
	}
	// Counted before the attempt runs, so a deletion that kills the server
	// every time still ends after --deletion-max-attempts.
	if mid.Status.Attempts != 1 {
		t.Errorf("attempts %d after the kill, want 1 (the killed attempt counts)", mid.Status.Attempts)
	}
	var bMid v1.Backup
	if err := env.Client.Get(testenv.Ctx(t), client.ObjectKeyFromObject(b), &bMid); err != nil || bMid.Status.Phase != v1.BackupPhaseDeleting {
		t.Errorf("backup after the kill: phase %q (%v), want Deleting", bMid.Status.Phase, err)
	}
	if len(cpMid.Done) >= deletion.DefaultWindow {
		t.Errorf("the checkpoint lists %d done positions above the watermark; the window keeps it under %d", len(cpMid.Done), deletion.DefaultWindow)
	}
	beforeCount := map[string]int{}
	for _, c := range before {
		outcome, item, _ := strings.Cut(c, " ")
		if outcome != "ok" {
			t.Fatalf("call %q: no call can fail in this test", c)
		}
		beforeCount[item]++
	}
	doneMid := doneItems(cpMid, positions)
	if int64(len(doneMid)) != s {
		t.Errorf("the checkpoint marks %d ConfigMaps done (watermark %d, %d listed) but counts %d successful calls; one attempt, no failure: they must agree",
			len(doneMid), cpMid.Watermark, len(cpMid.Done), s)
	}
	for name := range doneMid {
		if beforeCount[w.app+"/"+name] != 1 {
			t.Errorf("%s is recorded as done but the plugin saw it %d times before the kill", name, beforeCount[w.app+"/"+name])
		}
	}
	for item, n := range beforeCount {
		if n > 1 {
			t.Errorf("%s passed %d times by one server in one attempt", item, n)
		}
	}

	// Read again just before the restart: a checkpoint write the killed
	// server had sent may still have landed after the first read. The new
	// server resumes from this one or (should a write land later still) a
	// later one; done positions only ever grow.
	w.removeFile("delay")
	resumeFrom := w.waitRequest(dbr, "the state before the restart", 30*time.Second, func(*v1.DeleteBackupRequest) bool { return true })
	cpResume, _ := actionProgress(resumeFrom)
	doneResume := doneItems(cpResume, positions)
	for name := range doneMid {
		if !doneResume[name] {
			t.Errorf("%s was recorded as done after the kill, and not any more before the restart", name)
		}
	}

	restarted := time.Now()
	startServerProcess(t, bin, args, childEnv, filepath.Join(logDir, "server-2.log"))
	final := w.waitEnded(dbr)
	resumed := time.Since(restarted)
	if final.Status.Phase != v1.DeleteBackupRequestPhaseProcessed || len(final.Status.Errors) != 0 {
		t.Fatalf("resumed request ended %s with errors %v", final.Status.Phase, final.Status.Errors)
	}
	if !w.backupGone(b) {
		t.Error("the Backup is still there")
	}
	if keys := w.keys("backups/" + b.Name); len(keys) != 0 {
		t.Errorf("keys left under backups/%s/: %v", b.Name, keys)
	}
	if final.Status.Attempts != 2 {
		t.Errorf("attempts %d, want 2: the killed one and the one that resumed", final.Status.Attempts)
	}

	all := w.callLog()
	after := all[k:]
	afterCount := map[string]int{}
	for _, c := range after {
		outcome, item, _ := strings.Cut(c, " ")
		if outcome != "ok" {
			t.Fatalf("call %q after the restart: no call can fail in this test", c)
		}
		afterCount[item]++
	}
	var repeatedDone, repeats, notRepeated int
	for _, name := range names {
		item := w.app + "/" + name
		nb, na := beforeCount[item], afterCount[item]
		switch {
		// The guarantee: what the persisted checkpoint records as done is
		// never passed again.
		case doneResume[name] && na > 0:
			repeatedDone++
			t.Errorf("%s is recorded as done in the checkpoint the new server resumed from, and was passed again %d times", name, na)
		case na > 1:
			t.Errorf("%s passed %d times by the resumed server", name, na)
		case nb+na == 0:
			t.Errorf("%s was never passed", name)
		}
		if nb+na > 1 {
			repeats++
		}
		// Passed before the kill but not recorded, and not passed again:
		// only a checkpoint write landing after the second read explains it.
		if nb > 0 && na == 0 && !doneResume[name] {
			notRepeated++
		}
	}
	// Each repeat was a call finished and not yet persisted at the kill (K
	// - S of them), or one in flight (at most one per worker).
	unpersisted := int64(k) - s
	if int64(repeats) > unpersisted+killWorkers {
		t.Errorf("%d items passed twice; at most %d finished unpersisted calls + %d in flight could be", repeats, unpersisted, killWorkers)
	}
	// The checkpoint counted each item once across the kill: the resumed
	// attempt added exactly what it passed to what it resumed from.
	reported, ok := actionReport(final.Status.Report, recordDeletes)
	if !ok || reported.Items != killItems {
		t.Errorf("report for %s: %+v, want %d items (each counted once across the kill)", recordDeletes, reported, killItems)
	}

	t.Logf("setup: binary built in %s, %d ConfigMaps created in %s (side by side), backed up in %s",
		buildTook.Round(time.Millisecond), killItems, created.Round(time.Millisecond), backedUp.Round(time.Millisecond))
	t.Logf("kill point: %s after the request, K=%d calls recorded by the plugin, S=%d persisted as done (watermark %d, %d done positions listed above it), %d workers",
		killedAfter.Round(time.Millisecond), k, s, cpMid.Watermark, len(cpMid.Done), killWorkers)
	if cpResume.Succeeded != s {
		t.Logf("a checkpoint write of the killed server landed after the first read: S=%d before the restart", cpResume.Succeeded)
	}
	t.Logf("resume: Processed %s after the new server started; it passed %d items (N-S=%d); R=%d items passed twice (K-S=%d, bound (K-S)+workers=%d); %d checkpointed items passed again; %d unpersisted items not repeated",
		resumed.Round(time.Millisecond), len(after), int64(killItems)-cpResume.Succeeded, repeats, unpersisted, unpersisted+killWorkers, repeatedDone, notRepeated)
	t.Logf("total: %d plugin calls for %d items, the report counts %d; the test took %s", len(all), killItems, reported.Items, time.Since(testStart).Round(time.Millisecond))
}

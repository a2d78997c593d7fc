package e2e

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/server"
	"github.com/lifeboat-io/lifeboat/internal/testutil/testenv"
)

// Two (and more) `lifeboat server` processes on one namespace, as a rolling
// update with surge or a server started by hand would leave them: one acts,
// the others stand by and take over when it stops or dies.

// Lease timings of the servers here: short, so that a takeover after a
// SIGKILL is seconds, and loose enough that a loaded test machine does
// not make a leader miss its renewals.
const (
	twoLease = 6 * time.Second
	twoRenew = 4 * time.Second
	twoRetry = 500 * time.Millisecond
)

// fastLeaseArgs are the server flags for those timings.
func fastLeaseArgs() []string {
	return []string{"--leader-elect-lease-duration", twoLease.String(), "--leader-elect-renew-deadline", twoRenew.String(),
		"--leader-elect-retry-period", twoRetry.String()}
}

// lifeboatBinary builds the lifeboat binary a test runs as processes, into
// the test's temp dir (the build cache makes a second build a link).
func lifeboatBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "lifeboat")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/lifeboat").CombinedOutput(); err != nil {
		t.Fatalf("building lifeboat: %v\n%s", err, out)
	}
	return bin
}

// fleet starts server processes on one namespace and tells them apart.
type fleet struct {
	t       *testing.T
	w       *delWorld
	bin     string
	plugins string
	logDir  string
	extra   []string
	n       int
}

// member is one server process of a fleet with its metrics address.
type member struct {
	*serverProcess
	name    string
	metrics string
}

func (f *fleet) start(extraArgs ...string) *member {
	f.t.Helper()
	f.n++
	name := fmt.Sprintf("server-%d", f.n)
	addr := freeAddress(f.t)
	args := append([]string{"server", "--kubeconfig", env.Kubeconfig, "-n", f.w.ns,
		"--plugin-dir", f.plugins, "--metrics-address", addr, "--health-address", "0", "--log-level", "info",
		"--store-validation-frequency", "1s", "--backup-sync-period", "0", "--deletion-retry-base", "1s",
		"--delete-item-action-workers", "2"}, f.extra...)
	args = append(args, extraArgs...)
	childEnv := []string{"KUBECONFIG=" + env.Kubeconfig, "DELETE_PLUGIN_STATE_DIR=" + f.w.state}
	p := startServerProcess(f.t, f.bin, args, childEnv, filepath.Join(f.logDir, name+".log"))
	return &member{serverProcess: p, name: name, metrics: addr}
}

// freeAddress returns a loopback address with a port nothing listens on.
func freeAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// leading reads lifeboat_leader from the server's metrics endpoint: 1 while
// it acts, 0 while it stands by. ok is false while the endpoint is not up.
func (m *member) leading(ctx context.Context) (leads, ok bool, err error) {
	if err := m.exited(); err != nil {
		return false, false, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+m.metrics+"/metrics", nil)
	if err != nil {
		return false, false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, false, nil
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		if v, found := strings.CutPrefix(sc.Text(), "lifeboat_leader "); found {
			return strings.TrimSpace(v) == "1", true, nil
		}
	}
	if err := sc.Err(); err != nil {
		return false, false, err
	}
	return false, false, fmt.Errorf("%s serves no lifeboat_leader metric", m.name)
}

// waitRole waits until the server's metrics say it leads (or stands by).
func (m *member) waitRole(t *testing.T, leader bool, timeout time.Duration) time.Time {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		leads, ok, err := m.leading(ctx)
		return ok && leads == leader, err
	})
	if err != nil {
		t.Fatalf("waiting for %s to report lifeboat_leader %v: %v", m.name, map[bool]int{true: 1, false: 0}[leader], err)
	}
	return time.Now()
}

// logLines returns the lines of the server's log that contain all of words.
func (m *member) logLines(t *testing.T, words ...string) []string {
	t.Helper()
	data, err := os.ReadFile(m.log)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for line := range strings.Lines(string(data)) {
		if !slices.ContainsFunc(words, func(w string) bool { return !strings.Contains(line, w) }) {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}

// actions counts what the server started, from its log: backups,
// restores and deletion attempts, by object.
func (m *member) actions(t *testing.T, ns string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, what := range []struct{ msg, key, kind string }{
		{`msg="backup started"`, "backup=", "backup"},
		{`msg="restore started"`, "restore=", "restore"},
		{`msg="backup deletion attempt"`, "request=", "deletion"},
	} {
		for _, line := range m.logLines(t, what.msg) {
			_, rest, ok := strings.Cut(line, " "+what.key+ns+"/")
			if !ok {
				t.Fatalf("%s: log line %q does not name its object in %s", m.name, line, ns)
			}
			name, _, _ := strings.Cut(rest, " ")
			out[what.kind+" "+name]++
		}
	}
	return out
}

// phaseLog records every phase the objects of a namespace go through, from
// watches: a second server repeating or undoing the first one's work shows
// as a phase sequence no single server writes (InProgress twice, Failed
// after InProgress from a server that did not run it, ...).
type phaseLog struct {
	mu     sync.Mutex
	phases map[string][]string
	errs   []error
}

func watchPhases(t *testing.T, ns string) *phaseLog {
	t.Helper()
	cl, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &phaseLog{phases: map[string][]string{}}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	for _, list := range []client.ObjectList{&v1.BackupList{}, &v1.RestoreList{}, &v1.DeleteBackupRequestList{}} {
		w, err := cl.Watch(ctx, list, client.InNamespace(ns))
		if err != nil {
			t.Fatalf("watching %T: %v", list, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer w.Stop()
			for ev := range w.ResultChan() {
				var key, phase string
				switch o := ev.Object.(type) {
				case *v1.Backup:
					key, phase = "backup "+o.Name, string(o.Status.Phase)
				case *v1.Restore:
					key, phase = "restore "+o.Name, string(o.Status.Phase)
				case *v1.DeleteBackupRequest:
					key, phase = "deletion "+o.Name, string(o.Status.Phase)
				case *metav1.Status:
					l.mu.Lock()
					l.errs = append(l.errs, fmt.Errorf("watch of %T ended: %s", list, o.Message))
					l.mu.Unlock()
					return
				default:
					continue
				}
				l.mu.Lock()
				if p := l.phases[key]; len(p) == 0 || p[len(p)-1] != phase {
					l.phases[key] = append(p, phase)
				}
				l.mu.Unlock()
			}
			if ctx.Err() == nil {
				l.mu.Lock()
				l.errs = append(l.errs, fmt.Errorf("watch of %T ended early", list))
				l.mu.Unlock()
			}
		}()
	}
	return l
}

// check fails the test unless key went through exactly want (empty
// phases, as a new object has, are left out).
func (l *phaseLog) check(t *testing.T, key string, want ...string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, err := range l.errs {
		t.Error(err)
	}
	got := slices.DeleteFunc(slices.Clone(l.phases[key]), func(p string) bool { return p == "" || p == "New" })
	if !slices.Equal(got, want) {
		t.Errorf("%s went through phases %v, want %v (one server, once)", key, got, want)
	}
}

// Two servers started together on one namespace: every backup, restore
// and deletion runs once, by the leader, and the standby writes nothing.
// The standby takes over when the leader stops (at once: the lease is
// released) and when it is killed (once the lease expires), and resumes a
// deletion the stopped leader left.
func TestTwoServersActOnceAndHandOver(t *testing.T) {
	bin := lifeboatBinary(t)
	w := &delWorld{t: t, ns: env.NewNamespace(t, "two"), app: env.NewNamespace(t, "twoapp"), state: t.TempDir()}
	pluginDir := t.TempDir()
	if err := os.Symlink(filepath.Join(deletionPlugins(t), "deleteplugin"), filepath.Join(pluginDir, "deleteplugin")); err != nil {
		t.Fatalf("installing the test plugin: %v", err)
	}
	f := &fleet{t: t, w: w, bin: bin, plugins: pluginDir, logDir: t.TempDir(), extra: fastLeaseArgs()}
	// More items than a deletion keeps in flight to a streaming action
	// (deletion.DefaultStreamWorkers, 64), so that the graceful handover below
	// stops a deletion with items still to pass.
	const items = 160
	var names []string
	for i := range items {
		names = append(names, fmt.Sprintf("cm-%02d", i))
	}
	w.configMaps(names...)
	phases := watchPhases(t, w.ns)

	// Both at once, as a rolling update with surge runs them.
	a, b := f.start(), f.start()
	w.createLocation()

	// A few backups at once, a restore and a deletion, while both run.
	var backups []*v1.Backup
	for range 3 {
		bk := &v1.Backup{
			ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: env.Name("bk")},
			Spec:       v1.BackupSpec{StorageLocation: w.bsl.Name, IncludedNamespaces: []string{w.app}},
		}
		env.Create(t, bk)
		backups = append(backups, bk)
	}
	for _, bk := range backups {
		w.poll("backup "+bk.Name, 2*time.Minute, func(ctx context.Context) (bool, error) {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(bk), bk); err != nil {
				return false, err
			}
			return bk.Status.Phase.IsTerminal(), nil
		})
	}
	rs := &v1.Restore{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: env.Name("rs")},
		Spec:       v1.RestoreSpec{BackupName: backups[0].Name, NamespaceMapping: map[string]string{w.app: env.Name("twocopy")}},
	}
	env.Create(t, rs)
	w.poll("restore "+rs.Name, 2*time.Minute, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(rs), rs); err != nil {
			return false, err
		}
		return rs.Status.Phase != "" && rs.Status.Phase != v1.RestorePhaseNew && rs.Status.Phase != v1.RestorePhaseInProgress, nil
	})
	del := w.waitEnded(w.request(backups[1].Name))

	phases.check(t, "backup "+backups[0].Name, "InProgress", "Completed")
	phases.check(t, "backup "+backups[2].Name, "InProgress", "Completed")
	// A deleted Backup goes Deleting, and then away.
	phases.check(t, "backup "+backups[1].Name, "InProgress", "Completed", "Deleting")
	phases.check(t, "restore "+rs.Name, "InProgress", "Completed")
	phases.check(t, "deletion "+del.Name, "InProgress", "Processed")
	if del.Status.Attempts != 1 || len(del.Status.Errors) != 0 {
		t.Errorf("deletion request %s: %d attempts, errors %v; want one attempt, no error", del.Name, del.Status.Attempts, del.Status.Errors)
	}
	for _, n := range names {
		if got := w.calls()["ok "+w.app+"/"+n]; got != 1 {
			t.Errorf("%s/%s passed %d times to the DeleteItemAction, want once", w.app, n, got)
		}
	}
	// Exactly one server did all of it, and the other nothing.
	want := map[string]int{"restore " + rs.Name: 1, "deletion " + del.Name: 1}
	for _, bk := range backups {
		want["backup "+bk.Name] = 1
	}
	actsA, actsB := a.actions(t, w.ns), b.actions(t, w.ns)
	leader, standby := a, b
	if len(actsA) == 0 {
		leader, standby = b, a
		actsA, actsB = actsB, actsA
	}
	if !maps.Equal(actsA, want) || len(actsB) != 0 {
		t.Errorf("server actions: %s %v, %s %v; want one server to have started each once: %v", leader.name, actsA, standby.name, actsB, want)
	}
	if t.Failed() {
		t.FailNow()
	}
	leader.waitRole(t, true, 10*time.Second)
	standby.waitRole(t, false, 10*time.Second)
	var lease coordinationv1.Lease
	if err := env.Client.Get(testenv.Ctx(t), client.ObjectKey{Namespace: w.ns, Name: server.LeaderElectionID}, &lease); err != nil {
		t.Fatalf("the leader's Lease %s/%s: %v", w.ns, server.LeaderElectionID, err)
	}

	// Graceful handover: the leader is stopped (SIGTERM, as Kubernetes
	// stops a pod) in the middle of a deletion. It writes its checkpoint
	// and releases the lease; the standby takes over at once and finishes
	// the deletion without passing any item twice.
	w.setFile("delay", "300ms")
	callsBefore := len(w.callLog())
	slow := w.request(backups[2].Name)
	w.poll("the deletion to be under way", time.Minute, func(context.Context) (bool, error) {
		return len(w.callLog()) >= callsBefore+5, leader.exited()
	})
	stopped := time.Now()
	if err := leader.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	tookOver := standby.waitRole(t, true, 2*twoLease)
	select {
	case <-leader.done:
	case <-time.After(time.Minute):
		t.Fatalf("%s did not exit within a minute of SIGTERM", leader.name)
	}
	if handover := tookOver.Sub(stopped); handover >= twoLease {
		t.Errorf("%s took over %s after %s was stopped; a released lease is taken within a retry period (%s), not a lease duration (%s)",
			standby.name, handover, leader.name, twoRetry, twoLease)
	}
	w.removeFile("delay")
	slow = w.waitEnded(slow)
	if slow.Status.Phase != v1.DeleteBackupRequestPhaseProcessed || len(slow.Status.Errors) != 0 {
		t.Fatalf("deletion request %s after the handover: %s %v", slow.Name, slow.Status.Phase, slow.Status.Errors)
	}
	if slow.Status.Attempts != 1 {
		t.Errorf("deletion request %s: %d attempts; the one a stop cut short does not count, so want 1", slow.Name, slow.Status.Attempts)
	}
	calls := w.calls()
	for _, n := range names {
		if got := calls["ok "+w.app+"/"+n]; got != 2 {
			t.Errorf("%s/%s passed %d times over both deletions, want once each (twice in all)", w.app, n, got)
		}
	}
	if got := standby.actions(t, w.ns)["deletion "+slow.Name]; got != 1 {
		t.Errorf("%s ran %d attempts of %s after taking over, want 1", standby.name, got, slow.Name)
	}

	// Takeover from a leader that dies: a new standby waits for the lease
	// to expire, then acts, and a backup made then runs once.
	third := f.start()
	third.waitRole(t, false, time.Minute)
	killed := time.Now()
	standby.kill()
	lead3 := third.waitRole(t, true, 4*twoLease)
	// The killed leader's last renewal was at most a retry period before
	// the kill; until then plus the lease duration it might still act.
	if took := lead3.Sub(killed); took < twoLease-2*twoRetry {
		t.Errorf("%s took over %s after %s was killed, before its lease (%s) could have expired", third.name, took, standby.name, twoLease)
	}
	after := &v1.Backup{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: env.Name("bk")},
		Spec:       v1.BackupSpec{StorageLocation: w.bsl.Name, IncludedNamespaces: []string{w.app}},
	}
	env.Create(t, after)
	w.poll("backup "+after.Name, 2*time.Minute, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(after), after); err != nil {
			return false, err
		}
		return after.Status.Phase.IsTerminal(), nil
	})
	phases.check(t, "backup "+after.Name, "InProgress", "Completed")
	if got := third.actions(t, w.ns); !maps.Equal(got, map[string]int{"backup " + after.Name: 1}) {
		t.Errorf("%s started %v, want only backup %s, once", third.name, got, after.Name)
	}
	t.Logf("graceful handover in %s; takeover after a kill in %s (lease %s, retry %s)",
		tookOver.Sub(stopped).Round(time.Millisecond), lead3.Sub(killed).Round(time.Millisecond), twoLease, twoRetry)
}

// A server with --leader-elect=false acts at once, takes no lease, and
// says it leads.
func TestServerWithoutLeaderElection(t *testing.T) {
	bin := lifeboatBinary(t)
	w := &delWorld{t: t, ns: env.NewNamespace(t, "nolease"), app: env.NewNamespace(t, "noleaseapp"), state: t.TempDir()}
	f := &fleet{t: t, w: w, bin: bin, plugins: t.TempDir(), logDir: t.TempDir()}
	w.configMaps("settings")
	s := f.start("--leader-elect=false")
	w.createLocation()
	bk := w.backup()
	if got := s.actions(t, w.ns); !maps.Equal(got, map[string]int{"backup " + bk.Name: 1}) {
		t.Errorf("the server started %v, want backup %s once", got, bk.Name)
	}
	s.waitRole(t, true, 10*time.Second)
	err := env.Client.Get(testenv.Ctx(t), client.ObjectKey{Namespace: w.ns, Name: server.LeaderElectionID}, &coordinationv1.Lease{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("Lease %s/%s: %v; want none with --leader-elect=false", w.ns, server.LeaderElectionID, err)
	}
}

package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestReapAllWaitsForExitedChildren(t *testing.T) {
	// ForkExec, not os/exec: nothing but reapAll may wait for this child.
	pid, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the child to exit and become a zombie", func() bool { return procState(pid) == "Z" })
	if got := reapAll(); !slices.Contains(got, pid) {
		t.Fatalf("reapAll() = %v, want it to include the exited child %d", got, pid)
	}
	if s := procState(pid); s != "" {
		t.Errorf("child %d is still in the process table (state %s) after reapAll", pid, s)
	}
	if got := reapAll(); len(got) != 0 {
		t.Errorf("second reapAll() = %v, want nothing left", got)
	}
}

func TestExitsZeroOnSIGTERM(t *testing.T) {
	bin := buildPause(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		cmd := exec.Command(bin)
		ready := readyLine(t, cmd)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitReady(t, ready)
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		if err := waitExit(cmd, 5*time.Second); err != nil {
			t.Errorf("after %v: %v, want exit status 0", sig, err)
		}
	}
}

func TestAsPIDOneReapsAdoptedOrphans(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a new PID namespace")
	}
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		t.Skip("needs nsenter (util-linux)")
	}
	bin := buildPause(t)
	cmd := exec.Command(bin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
	ready := readyLine(t, cmd)
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start a process in a new PID namespace here: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pause := cmd.Process.Pid
	waitReady(t, ready)

	// A shell in pause's PID namespace starts a short sleep and exits at
	// once: the sleep is orphaned and the kernel hands it to the
	// namespace's PID 1, as it would an orphan of a pod's container. (The
	// sleep must not hold nsenter's output open, or the test would wait
	// for it to end.)
	out, err := exec.Command(nsenter, "--target", strconv.Itoa(pause), "--pid", "--",
		"/bin/sh", "-c", "sleep 0.5 >/dev/null 2>&1 &").CombinedOutput()
	if err != nil {
		t.Fatalf("nsenter: %v: %s", err, out)
	}
	if kids := children(pause); len(kids) != 1 {
		t.Fatalf("pause has children %v right after the shell exited, want the adopted sleep", kids)
	}
	waitFor(t, "pause to reap the adopted child after it exits", func() bool { return len(children(pause)) == 0 })

	// As PID 1 a signal without a handler is ignored; pause's handler must
	// still end it.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := waitExit(cmd, 5*time.Second); err != nil {
		t.Errorf("as PID 1 after SIGTERM: %v, want exit status 0", err)
	}
}

func buildPause(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pause")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("building pause: %v: %s", err, out)
	}
	return bin
}

// readyLine hands back pause's first line of standard error, which it
// writes once its signal handlers are in place, so a test's signal does not
// race the program's start.
func readyLine(t *testing.T, cmd *exec.Cmd) <-chan string {
	t.Helper()
	w := &firstLine{ready: make(chan string, 1)}
	cmd.Stderr = w
	return w.ready
}

// firstLine is a writer that sends the first line written to it.
type firstLine struct {
	mu    sync.Mutex
	buf   []byte
	sent  bool
	ready chan string
}

func (w *firstLine) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.sent {
		w.buf = append(w.buf, p...)
		if i := bytes.IndexByte(w.buf, '\n'); i >= 0 {
			w.ready <- string(w.buf[:i])
			w.sent = true
		}
	}
	return len(p), nil
}

func waitReady(t *testing.T, ready <-chan string) {
	t.Helper()
	select {
	case line := <-ready:
		if !strings.Contains(line, "waiting for SIGINT or SIGTERM") {
			t.Fatalf("pause's first line is %q, want it to say it is waiting", line)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("pause did not say it was ready")
	}
}

func waitExit(cmd *exec.Cmd, timeout time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		return fmt.Errorf("did not exit in %v, killed: %w", timeout, <-done)
	}
}

// children lists the processes whose parent is pid, zombies included.
func children(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var kids []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, ok := procStatus(child, "PPid"); ok && ppid == strconv.Itoa(pid) {
			kids = append(kids, child)
		}
	}
	return kids
}

// procState is the one-letter state of pid ("Z" for a zombie), or "" when
// the process is gone.
func procState(pid int) string {
	s, _ := procStatus(pid, "State")
	state, _, _ := strings.Cut(s, " ")
	return state
}

func procStatus(pid int, field string) (string, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return "", false
	}
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte(field+":")); ok {
			return string(bytes.TrimSpace(v)), true
		}
	}
	return "", false
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// clockTicks is the kernel's USER_HZ, the unit of utime/stime in
// /proc/<pid>/stat. It is 100 on every Linux architecture Go supports.
const clockTicks = 100

// childAttr ties a child to this process: if the orchestrator dies, even by
// SIGKILL, the kernel kills the child, so no server keeps writing into a
// deleted work directory. (Pdeathsig fires when the creating OS thread
// exits; the Go runtime does not retire threads of unlocked goroutines.)
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// serverProcess is a running `lifeboat server`.
type serverProcess struct {
	cmd     *exec.Cmd
	logPath string
	logFile *os.File
	done    chan struct{}
	waitErr error
	once    sync.Once
}

// startServer starts `lifeboat server`; extra arguments come after the
// benchmark's own, so they can override them. env is added to the
// environment the server inherits (and passes on to plugin processes).
func startServer(bin, kubeconfig, logPath string, extra, env []string) (*serverProcess, error) {
	// Metrics and health endpoints are off: they are not what is measured,
	// and fixed ports would collide with anything else on the machine.
	args := []string{"server", "--kubeconfig", kubeconfig, "-n", serverNamespace,
		"--metrics-address", "0", "--health-address", "0", "--log-level", "warn"}
	return startLifeboat(bin, append(args, extra...), logPath, env)
}

// startLifeboat starts `lifeboat <args>` (a server or a node agent),
// logging to logPath, killed by the kernel if the orchestrator dies.
func startLifeboat(bin string, args []string, logPath string, env []string) (*serverProcess, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("creating log %s: %w", logPath, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = childAttr()
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s %s: %w", bin, args[0], err)
	}
	s := &serverProcess{cmd: cmd, logPath: logPath, logFile: logFile, done: make(chan struct{})}
	go func() {
		s.waitErr = cmd.Wait()
		close(s.done)
	}()
	return s, nil
}

func (s *serverProcess) pid() int { return s.cmd.Process.Pid }

// exited returns an error if the server is no longer running.
func (s *serverProcess) exited() error {
	select {
	case <-s.done:
		return fmt.Errorf("lifeboat server exited (%w); see %s:\n%s", s.waitErr, s.logPath, tail(s.logPath, 20))
	default:
		return nil
	}
}

// stop asks the server to shut down and kills it if it does not in time.
func (s *serverProcess) stop() error {
	var err error
	s.once.Do(func() {
		defer s.logFile.Close()
		select {
		case <-s.done:
			return
		default:
		}
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(30 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
			err = errors.New("did not stop within 30s of SIGTERM; killed")
		}
	})
	return err
}

// procStatus is what the benchmark reads from /proc/<pid>/status.
type procStatus struct {
	hwmKiB, rssKiB int64
}

// readProcStatus reads the peak (VmHWM) and current (VmRSS) resident set.
func readProcStatus(pid int) (procStatus, error) {
	path := fmt.Sprintf("/proc/%d/status", pid)
	data, err := os.ReadFile(path)
	if err != nil {
		return procStatus{}, fmt.Errorf("reading %s: %w", path, err)
	}
	var st procStatus
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		var dst *int64
		switch f[0] {
		case "VmHWM:":
			dst = &st.hwmKiB
		case "VmRSS:":
			dst = &st.rssKiB
		default:
			continue
		}
		if *dst, err = strconv.ParseInt(f[1], 10, 64); err != nil {
			return procStatus{}, fmt.Errorf("parsing %q in %s: %w", sc.Text(), path, err)
		}
	}
	if st.hwmKiB == 0 {
		return procStatus{}, fmt.Errorf("no VmHWM in %s", path)
	}
	return st, nil
}

// readProcCPU returns the user+system CPU time a process has used so far.
func readProcCPU(pid int) (time.Duration, error) {
	path := fmt.Sprintf("/proc/%d/stat", pid)
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("reading %s: %w", path, err)
	}
	// The command name (field 2) may hold spaces; fields after it are
	// counted from its closing parenthesis. utime and stime are fields 14
	// and 15, so the 12th and 13th after the parenthesis.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, fmt.Errorf("unexpected format of %s", path)
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("unexpected format of %s", path)
	}
	var ticks int64
	for _, s := range f[11:13] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parsing cpu time in %s: %w", path, err)
		}
		ticks += v
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// floorRunner runs the floor program as a child process.
type floorRunner struct {
	bin        string
	kubeconfig string
	namespaces []string
	dir        string
}

// run times one floor run from process start to exit, the same span as a
// Lifeboat backup's create-to-Completed.
func (f floorRunner) run(ctx context.Context, label string) (floorResult, error) {
	out := filepath.Join(f.dir, "floor-"+label+".tar.gz")
	defer os.Remove(out)
	ch, err := runChild(ctx, f.bin, "floor run "+label, 30*time.Minute,
		"--kubeconfig", f.kubeconfig, "--namespaces", strings.Join(f.namespaces, ","), "--out", out)
	if err != nil {
		return floorResult{}, err
	}
	res := floorResult{WallSeconds: ch.wall.Seconds(), CPUSeconds: ch.cpu.Seconds()}
	if _, err := fmt.Sscanf(ch.stdout, "items=%d bytes=%d seconds=%g peak_rss_kib=%d",
		&res.Items, &res.JSONBytes, &res.SelfSeconds, &res.PeakRSSKiB); err != nil {
		return floorResult{}, fmt.Errorf("floor run %s: parsing its output %q: %w", label, ch.stdout, err)
	}
	if fi, err := os.Stat(out); err == nil {
		res.ArchiveBytes = fi.Size()
	}
	return res, nil
}

// childRun is one run of a floor program.
type childRun struct {
	// stdout is what it printed, trimmed.
	stdout string
	// wall is from starting the process to its exit.
	wall time.Duration
	// cpu is the user and system time it used.
	cpu time.Duration
}

// runChild runs a floor program to its end and times it from process start
// to exit. Its peak RSS must come from the program itself (VmHWM), not from
// the child's ru_maxrss: see bench/internal/selfrss.
func runChild(ctx context.Context, bin, what string, timeout time.Duration, args ...string) (childRun, error) {
	return runChildEnv(ctx, nil, bin, what, timeout, args...)
}

// runChildEnv is runChild with env added to the inherited environment.
func runChildEnv(ctx context.Context, env []string, bin, what string, timeout time.Duration, args ...string) (childRun, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = childAttr()
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	if err != nil {
		return childRun{}, fmt.Errorf("%s: %w: %s", what, err, strings.TrimSpace(stderr.String()))
	}
	ps := cmd.ProcessState
	return childRun{stdout: strings.TrimSpace(stdout.String()), wall: wall, cpu: ps.UserTime() + ps.SystemTime()}, nil
}

// tail returns the last n lines of a file, for error messages.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

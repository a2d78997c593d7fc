package localnode

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// proc is one component the node started.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// start runs bin with its output in <logs>/<name>.log. The process gets
// its own process group (so a terminal's ^C reaches the test, which then
// stops the node in order) and SIGKILL when the starting thread dies: a
// test binary killed outright must not leave an API server running. What
// such a death leaves on the machine besides processes (mounts, the
// bridge, iptables chains) the next Start removes, from the state file.
func (n *Node) start(name, bin string, args ...string) error {
	logf, err := os.OpenFile(filepath.Join(n.dirs.logs, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("opening the log of %s: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Env = append(os.Environ(), "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = logf.Close()
		close(p.done)
	}()
	n.procs = append(n.procs, p)
	n.state.PIDs = append(n.state.PIDs, cmd.Process.Pid)
	n.logf("started %s (pid %d): %s %s", name, cmd.Process.Pid, bin, quoteArgs(args))
	return n.saveState()
}

// exited reports how p ended, if it has.
func (p *proc) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// stop sends SIGTERM, then SIGKILL after grace.
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
		return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", p.name, p.cmd.Process.Pid)
	}
}

// waitFor polls check until it returns true, the deadline passes, or a
// started component exits (its log then says why).
func (n *Node) waitFor(what string, timeout time.Duration, check func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		ok, err := check()
		if ok {
			return nil
		}
		last = err
		for _, p := range n.procs {
			if done, perr := p.exited(); done {
				if perr == nil {
					perr = errors.New("exit status 0")
				}
				return fmt.Errorf("waiting for %s: %s exited (%w); the end of its log:\n%s", what, p.name, perr, tail(filepath.Join(n.dirs.logs, p.name+".log"), 15))
			}
		}
		if time.Now().After(deadline) {
			return errors.Join(fmt.Errorf("waiting for %s: not within %s; the end of the kubelet's log:\n%s", what, timeout, tail(filepath.Join(n.dirs.logs, "kubelet.log"), 15)), last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// tail returns the last lines of a log, for an error that must say why
// without the log (teardown removes it).
func tail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}

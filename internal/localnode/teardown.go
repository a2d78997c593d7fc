package localnode

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// stateDir holds the running node's state file and the machine-wide lock:
// one real node per machine, since it owns the bridge, iptables chains,
// the kubelet's cgroups and ports.
const stateDir = "/run/lifeboat-node"

// sysctls the node's components change (the bridge plugin turns on
// forwarding; the kubelet sets its kernel tunables; kube-proxy may route
// localhost), restored at teardown.
var sysctls = []string{
	"net/ipv4/ip_forward",
	"net/ipv4/conf/all/route_localnet",
	"vm/overcommit_memory",
	"vm/panic_on_oom",
	"kernel/panic",
	"kernel/panic_on_oops",
	"kernel/keys/root_maxkeys",
	"kernel/keys/root_maxbytes",
}

// state is what teardown needs, written before anything is changed on the
// machine, so that a node whose test was killed is cleaned up by the next
// Start.
type state struct {
	Dir     string            `json:"dir"`
	PIDs    []int             `json:"pids"`
	Sysctls map[string]string `json:"sysctls"`
	// Before lists what existed in shared places before the node started
	// (nil: the place itself did not exist): what is there at teardown and
	// not in here is the node's.
	Before map[string][]string `json:"before"`
}

// sharedDirs are the places outside its own directory that the node's
// components write into (containerd's shim sockets and runc's state,
// network namespaces, CNI results, the kubelet's log links); a parent comes
// before its children.
var sharedDirs = []string{
	"/run/netns",
	"/run/containerd", "/run/containerd/s", "/run/containerd/runc", "/run/containerd/runc/k8s.io",
	"/var/lib/cni", "/var/lib/cni/results",
	"/var/log/containers",
}

func snapshotState(dir string) state {
	st := state{Dir: dir, Sysctls: map[string]string{}, Before: map[string][]string{}}
	for _, s := range sysctls {
		if b, err := os.ReadFile(filepath.Join("/proc/sys", s)); err == nil {
			st.Sysctls[s] = strings.TrimSpace(string(b))
		}
	}
	for _, d := range sharedDirs {
		st.Before[d] = listDir(d)
	}
	return st
}

// listDir names d's entries: nil when d does not exist, empty when it has
// none.
func listDir(d string) []string {
	entries, err := os.ReadDir(d)
	if err != nil {
		return nil
	}
	names := []string{}
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func (n *Node) saveState() error {
	b, err := json.Marshal(n.state)
	if err != nil {
		return err
	}
	tmp := filepath.Join(stateDir, "state.json.tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("writing the node's state: %w", err)
	}
	return os.Rename(tmp, filepath.Join(stateDir, "state.json"))
}

// recoverLeftovers tears down a node whose owner died before it could.
func recoverLeftovers(logf func(string, ...any)) error {
	b, err := os.ReadFile(filepath.Join(stateDir, "state.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("reading %s: %w", filepath.Join(stateDir, "state.json"), err)
	}
	logf("a node left behind by a process that died (%s); removing it first", st.Dir)
	for _, pid := range st.PIDs {
		// Only a process group the node started: a reused PID of an
		// unrelated process is left alone, since its group differs.
		if pgid, err := syscall.Getpgid(pid); err == nil && pgid == pid {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	}
	return teardownMachine(st, logf)
}

// teardownMachine undoes, after every component has stopped, what they did
// to the machine outside their processes: pod processes and cgroups,
// mounts, network namespaces, the bridge, iptables chains, sysctls, files in
// shared directories and the node's own directory.
func teardownMachine(st state, logf func(string, ...any)) error {
	var errs []error
	errs = append(errs, killPods(), killShims(filepath.Join(st.Dir, "containerd", "containerd.sock")))
	errs = append(errs, unmountUnder(st.Dir))
	for _, name := range newEntries(st, "/run/netns") {
		p := filepath.Join("/run/netns", name)
		_ = syscall.Unmount(p, syscall.MNT_DETACH)
		errs = append(errs, removeIfExists(p))
	}
	if err := run("ip", "link", "show", bridgeName); err == nil {
		errs = append(errs, run("ip", "link", "delete", bridgeName))
	}
	errs = append(errs, removeChains("iptables"), removeChains("ip6tables"))
	for s, v := range st.Sysctls {
		if cur, err := os.ReadFile(filepath.Join("/proc/sys", s)); err == nil && strings.TrimSpace(string(cur)) != v {
			if err := os.WriteFile(filepath.Join("/proc/sys", s), []byte(v), 0o644); err != nil {
				errs = append(errs, fmt.Errorf("restoring %s to %s: %w", s, v, err))
			}
		}
	}
	errs = append(errs, removeShared(st))
	errs = append(errs, removeCgroups())
	if st.Dir != "" {
		errs = append(errs, os.RemoveAll(st.Dir))
	}
	errs = append(errs, removeIfExists(filepath.Join(stateDir, "state.json")))
	if err := errors.Join(errs...); err != nil {
		logf("teardown: %v", err)
		return err
	}
	return nil
}

// newEntries names what d holds now and did not hold before the node.
func newEntries(st state, d string) []string {
	var out []string
	for _, name := range listDir(d) {
		if !slices.Contains(st.Before[d], name) {
			out = append(out, name)
		}
	}
	return out
}

// removeShared removes from the shared places what the node added there,
// and the places it made, children before parents.
func removeShared(st state) error {
	var errs []error
	for _, d := range slices.Backward(sharedDirs) {
		if st.Before[d] == nil {
			errs = append(errs, removeIfExists(d))
			continue
		}
		for _, name := range newEntries(st, d) {
			if !slices.Contains(sharedDirs, filepath.Join(d, name)) {
				errs = append(errs, removeIfExists(filepath.Join(d, name)))
			}
		}
	}
	return errors.Join(errs...)
}

func removeIfExists(p string) error {
	if err := os.RemoveAll(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// kubepodsDirs are the kubelet's cgroups (cgroupfs driver, cgroup v1 or
// v2): every hierarchy's kubepods tree.
func kubepodsDirs() []string {
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods")
	if _, err := os.Stat("/sys/fs/cgroup/kubepods"); err == nil {
		dirs = append(dirs, "/sys/fs/cgroup/kubepods")
	}
	return dirs
}

// killPods kills every process in the kubelet's cgroups: the containers
// outlive the kubelet and containerd otherwise.
func killPods() error {
	for range 50 {
		pids := map[int]bool{}
		for _, root := range kubepodsDirs() {
			_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
				if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
					return nil
				}
				b, _ := os.ReadFile(p)
				for _, f := range strings.Fields(string(b)) {
					if pid, err := strconv.Atoi(f); err == nil {
						pids[pid] = true
					}
				}
				return nil
			})
		}
		if len(pids) == 0 {
			return nil
		}
		for pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.New("pod processes still running after SIGKILL")
}

// removeCgroups removes the kubelet's cgroup trees, deepest first.
func removeCgroups() error {
	var errs []error
	for _, root := range kubepodsDirs() {
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			if err := syscall.Rmdir(d); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

// killShims kills the containerd shims of the node's containerd (they
// are started detached from it, and hold the container's mounts).
func killShims(socket string) error {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if bytes.Contains(cmdline, []byte("containerd-shim")) && bytes.Contains(cmdline, []byte(socket)) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	return nil
}

// unmountUnder unmounts every mount below dir, deepest first.
func unmountUnder(dir string) error {
	if dir == "" {
		return nil
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		p := unescapeMountPath(fields[4])
		if p == dir || strings.HasPrefix(p, dir+"/") {
			points = append(points, p)
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	var errs []error
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// removeChains removes the chains kube-proxy (KUBE-*) and the CNI plugins
// (CNI-*) made, and every rule that jumps to them, leaving all other rules
// as they were: each table is saved, filtered and restored whole.
func removeChains(tool string) error {
	if _, err := exec.LookPath(tool + "-save"); err != nil {
		return nil
	}
	var errs []error
	for _, table := range []string{"filter", "nat", "mangle"} {
		out, err := exec.Command(tool+"-save", "-t", table).Output()
		if err != nil {
			continue // no such table in this kernel or backend
		}
		kept, changed := filterRules(string(out))
		if !changed {
			continue
		}
		cmd := exec.Command(tool+"-restore", "-w")
		cmd.Stdin = strings.NewReader(kept)
		if b, err := cmd.CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("%s-restore of table %s: %w: %s", tool, table, err, b))
		}
	}
	return errors.Join(errs...)
}

// filterRules drops from iptables-save output the node's chains and the
// rules in or to them.
func filterRules(saved string) (string, bool) {
	ours := func(chain string) bool { return strings.HasPrefix(chain, "KUBE-") || strings.HasPrefix(chain, "CNI-") }
	var b strings.Builder
	changed := false
	for _, line := range strings.SplitAfter(saved, "\n") {
		f := strings.Fields(line)
		drop := false
		switch {
		case len(f) > 0 && strings.HasPrefix(f[0], ":"):
			drop = ours(strings.TrimPrefix(f[0], ":"))
		case len(f) > 1 && f[0] == "-A":
			drop = ours(f[1])
			for i := 2; i+1 < len(f) && !drop; i++ {
				if (f[i] == "-j" || f[i] == "-g") && ours(f[i+1]) {
					drop = true
				}
			}
		}
		if drop {
			changed = true
			continue
		}
		b.WriteString(line)
	}
	return b.String(), changed
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

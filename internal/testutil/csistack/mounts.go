package csistack

import (
	"bufio"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// unmountLeftovers unmounts the CSI mounts under the kubelet's directory
// (pods' publish targets, then the staging paths) that pods a test did not
// delete still hold: the driver is the node's only CSI driver in the
// tests, and its mounts must not outlive it.
func (s *Stack) unmountLeftovers() {
	points, err := mountPoints()
	if err != nil {
		s.logf("reading the mount table: %v", err)
		return
	}
	root := filepath.Clean(s.opts.KubeletDir) + "/"
	var ours []string
	for _, p := range points {
		if strings.HasPrefix(p, root) && (strings.Contains(p, "/kubernetes.io~csi/") || strings.Contains(p, "/plugins/kubernetes.io/csi/")) {
			ours = append(ours, p)
		}
	}
	// Deepest first, and pods' targets (under pods/) before staging paths.
	sort.Slice(ours, func(i, j int) bool {
		pi, pj := strings.Contains(ours[i], "/pods/"), strings.Contains(ours[j], "/pods/")
		if pi != pj {
			return pi
		}
		return len(ours[i]) > len(ours[j])
	})
	for _, p := range ours {
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil {
			s.logf("unmounting %s: %v", p, err)
		} else {
			s.logf("unmounted leftover %s", p)
		}
	}
}

func mountPoints() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) > 4 {
			points = append(points, unescape(fields[4]))
		}
	}
	return points, sc.Err()
}

// unescape undoes the kernel's octal escapes in mountinfo (\040: space).
func unescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

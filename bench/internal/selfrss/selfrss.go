// Package selfrss reads the peak resident set of the running process, for
// the benchmark's floor programs.
package selfrss

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// PeakKiB reads this process's VmHWM. A parent cannot get it from
// getrusage: Go starts children with vfork, and Linux carries the parent's
// peak RSS into the child's ru_maxrss at exec, so a small child would look
// as large as the benchmark that started it.
func PeakKiB() (int64, error) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("reading peak RSS: %w", err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kib int64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kib); err != nil {
				return 0, fmt.Errorf("parsing %q: %w", line, err)
			}
			return kib, nil
		}
	}
	return 0, errors.New("no VmHWM in /proc/self/status")
}

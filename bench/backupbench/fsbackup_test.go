package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/lifeboat-io/lifeboat/bench/internal/fstree"
)

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"": 0, "1Gi": 1 << 30, "256Mi": 256 << 20, "1048576": 1 << 20, " 2Gi ": 2 << 30} {
		if got, err := parseBytes("-fs-bytes", in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"-1Gi", "lots", "1GB!"} {
		if _, err := parseBytes("-fs-bytes", in); err == nil || !strings.Contains(err.Error(), "-fs-bytes") {
			t.Errorf("parseBytes(%q) = %v, want an error naming -fs-bytes", in, err)
		}
	}
}

// The ratio is of times, per run, then the median; the RSS column is the
// node agent's after the first run, so both volumes count the same
// backups.
func TestFSReport(t *testing.T) {
	side := func(wall float64, stored int64, rss int64) fsSideResult {
		return fsSideResult{WallSeconds: wall, Bytes: 1 << 30, StoredBytes: stored, PeakRSSKiB: rss}
	}
	main := fsVolumeResult{Label: "main", Bytes: 1 << 30, Tree: fstree.Stats{Files: 27191, Bytes: 1 << 30}, AgentPeakRSSKiB: 500 << 10, Runs: []fsRunResult{
		{Run: 1, Floor: side(10, 700<<20, 0), Lifeboat: side(12, 1000<<20, 0), Incremental: side(0.6, 9<<10, 300<<10)}, // 1.2
		{Run: 2, Floor: side(5, 700<<20, 0), Lifeboat: side(10, 1000<<20, 0), Incremental: side(0.7, 9<<10, 400<<10)},  // 2.0
		{Run: 3, Floor: side(10, 700<<20, 0), Lifeboat: side(9, 1000<<20, 0), Incremental: side(0.5, 9<<10, 450<<10)},  // 0.9
	}}
	_, l, r, inc, _, _ := main.medians()
	if l != 10 || r != 1.2 || inc != 0.6 {
		t.Errorf("medians: lifeboat %v, ratio %v, incremental %v; want 10, 1.2 (per run), 0.6", l, r, inc)
	}
	var b bytes.Buffer
	writeFSReport(&b, config{runs: 3, warmup: 1, fsTLS: true}, fsResult{TLS: true, Main: main})
	out := b.String()
	for _, want := range []string{"| 1024 | 27191 | 3 | 10.00 | 10.00 | 1.20 | 102 | 102 | 0.60 | 700 | 1000 | 300.0 |", "versitygw over HTTPS", "after all 3 run(s) 500.0 MiB"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

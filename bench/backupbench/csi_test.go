package main

import (
	"bytes"
	"strings"
	"testing"
)

func csiRun(floorBackup, lifeboatBackup, floorDelete, lifeboatDelete float64) csiRunResult {
	return csiRunResult{
		FloorBackup: csiSideResult{WallSeconds: floorBackup}, LifeboatBackup: csiSideResult{WallSeconds: lifeboatBackup},
		FloorDelete: csiSideResult{WallSeconds: floorDelete}, LifeboatDelete: csiSideResult{WallSeconds: lifeboatDelete},
	}
}

func TestCSIRatiosAreTimesPerRunThenMedian(t *testing.T) {
	s := csiSizeResult{N: 100, Runs: []csiRunResult{
		csiRun(1, 2, 2, 1), // backup 2.0, deletion 0.5
		csiRun(4, 4, 1, 1), // 1.0, 1.0
		csiRun(2, 6, 1, 3), // 3.0, 3.0
	}}
	fb, lb, br, fd, ld, dr := s.medians()
	// The ratio of the medians (4/2 = 2) is not the median of the ratios.
	if fb != 2 || lb != 4 || br != 2 {
		t.Errorf("backup medians = floor %v, lifeboat %v, ratio %v; want 2, 4, 2", fb, lb, br)
	}
	if fd != 1 || ld != 1 || dr != 1 {
		t.Errorf("deletion medians = floor %v, lifeboat %v, ratio %v; want 1, 1, 1", fd, ld, dr)
	}
	if got := (csiRunResult{}).BackupRatio(); got != 0 {
		t.Errorf("ratio without a floor time = %v, want 0", got)
	}
}

func TestCSIReportHasOneRowPerN(t *testing.T) {
	var buf bytes.Buffer
	writeCSIReport(&buf, config{runs: 1}, []csiSizeResult{{N: 100, ServerPeakRSSKiB: 81920, VolumeBytes: 65536, BindSeconds: 1.9,
		Runs: []csiRunResult{{Run: 1, FloorFirst: true,
			FloorBackup: csiSideResult{WallSeconds: 4}, LifeboatBackup: csiSideResult{WallSeconds: 5},
			FloorDelete: csiSideResult{WallSeconds: 2}, LifeboatDelete: csiSideResult{WallSeconds: 3, PeakRSSKiB: 81920}}}}})
	out := buf.String()
	for _, want := range []string{
		"| 100 | 4.00 | 5.00 | 1.25 | 2.00 | 3.00 | 1.50 | 80.0 |",
		"| 100 | 1 | floor | 4.00 |",
		"- N=100: 100 claims bound and 65536 bytes written into each volume in 1.9 s",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

func TestVolumeData(t *testing.T) {
	for _, n := range []int{0, 1, 100, 65536} {
		if got := len(volumeData(n)); got != n {
			t.Errorf("len(volumeData(%d)) = %d", n, got)
		}
	}
}

func TestCSIFlagsNeedTheFloor(t *testing.T) {
	c := config{runs: 1, namespaces: 1, workers: 1, restoreWorkers: 1, lifeboatBin: "/bin/sh"}
	err := c.validate("", "", "", "", "100", "")
	if err == nil || !strings.Contains(err.Error(), "-csifloor") {
		t.Errorf("validate without -csifloor = %v, want an error naming it", err)
	}
	c.csiFloorBin = "/bin/sh"
	if err := c.validate("", "", "", "", "100", ""); err != nil || len(c.csiSizes) != 1 || c.csiSizes[0] != 100 {
		t.Errorf("validate = %v, sizes %v", err, c.csiSizes)
	}
}

package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestVerifyReportHasOneRowPerN(t *testing.T) {
	var buf bytes.Buffer
	writeVerifyReport(&buf, config{runs: 3, namespaces: 20, restoreWorkers: 8}, []verifySizeResult{
		{N: 2000, ServerPeakRSSKiB: 81920, Runs: []verifyRunResult{
			{Run: 1, Floor: createFloorResult{Objects: 2020, WallSeconds: 1}, Lifeboat: verifyResult{WallSeconds: 3, ServerCPUSeconds: 1}},   // 3
			{Run: 2, Floor: createFloorResult{Objects: 2020, WallSeconds: 2}, Lifeboat: verifyResult{WallSeconds: 3, ServerCPUSeconds: 2}},   // 1.5
			{Run: 3, Floor: createFloorResult{Objects: 2020, WallSeconds: 4}, Lifeboat: verifyResult{WallSeconds: 4.4, ServerCPUSeconds: 3}}, // 1.1
		}},
	})
	out := buf.String()
	if !strings.Contains(out, "| 2000 | 2.000 | 3.000 | 1.50 | 2.00 | 80.0 |") {
		t.Errorf("summary row missing or wrong:\n%s", out)
	}
	if got := strings.Count(out, "\n| 2000 | "); got != 4 {
		t.Errorf("%d rows for N=2000, want the summary and 3 runs:\n%s", got, out)
	}
}

func TestVerifyRatioIsPerRun(t *testing.T) {
	s := verifySizeResult{Runs: []verifyRunResult{
		{Floor: createFloorResult{WallSeconds: 1}, Lifeboat: verifyResult{WallSeconds: 4}}, // 4
		{Floor: createFloorResult{WallSeconds: 4}, Lifeboat: verifyResult{WallSeconds: 4}}, // 1
		{Floor: createFloorResult{WallSeconds: 2}, Lifeboat: verifyResult{WallSeconds: 3}}, // 1.5
	}}
	f, l, r, _ := s.medians()
	// The ratio of the median times would be 4/2 = 2.
	if f != 2 || l != 4 || r != 1.5 {
		t.Errorf("medians = floor %v, lifeboat %v, ratio %v; want 2, 4, 1.5", f, l, r)
	}
}

func TestVerifyCheck(t *testing.T) {
	good := verifyResult{Token: "t", Reason: "Verified", Restore: "b-verify-1", RestorePhase: "Completed", RestoreDryRunFlag: true,
		HasCounts: true, WouldCreate: 2000, WouldSkip: 20}
	if err := good.check(2000, 20); err != nil {
		t.Fatalf("check of a good verification: %v", err)
	}
	for name, mutate := range map[string]func(*verifyResult){
		"not verified":      func(r *verifyResult) { r.Reason = "RestoreWouldFail" },
		"a real restore":    func(r *verifyResult) { r.RestoreDryRunFlag = false },
		"failed dry run":    func(r *verifyResult) { r.RestorePhase = "PartiallyFailed" },
		"no counts":         func(r *verifyResult) { r.HasCounts = false },
		"items short":       func(r *verifyResult) { r.WouldCreate = 1999 },
		"unchecked creates": func(r *verifyResult) { r.Unchecked = 2000 },
		"an item fails":     func(r *verifyResult) { r.WouldFail = 1 },
		"namespaces new":    func(r *verifyResult) { r.WouldSkip = 0 },
	} {
		r := good
		mutate(&r)
		if err := r.check(2000, 20); err == nil {
			t.Errorf("%s: check passed %+v", name, r)
		}
	}
}

func TestVerifyFlagsNeedTheCreateFloor(t *testing.T) {
	c := config{runs: 1, namespaces: 1, workers: 1, restoreWorkers: 1, lifeboatBin: "/bin/sh"}
	if err := c.validate("", "", "", "", "", "2000"); err == nil || !strings.Contains(err.Error(), "-createfloor") {
		t.Errorf("validate without -createfloor = %v, want an error naming it", err)
	}
	c.createFloorBin = "/bin/sh"
	if err := c.validate("", "", "", "", "", "2000,50000"); err != nil || len(c.verifySizes) != 2 || c.verifySizes[1] != 50000 {
		t.Errorf("validate = %v, sizes %v", err, c.verifySizes)
	}
}

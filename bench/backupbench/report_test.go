package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestRatioIsPerRunThenMedian(t *testing.T) {
	s := sizeResult{N: 100, Runs: []runResult{
		{Floor: floorResult{Items: 100, WallSeconds: 1}, Lifeboat: lifeboatResult{Items: 100, WallSeconds: 2}},   // 0.5
		{Floor: floorResult{Items: 100, WallSeconds: 2}, Lifeboat: lifeboatResult{Items: 100, WallSeconds: 2}},   // 1.0
		{Floor: floorResult{Items: 100, WallSeconds: 1}, Lifeboat: lifeboatResult{Items: 100, WallSeconds: 0.5}}, // 2.0
	}}
	f, l, r, _ := s.medians()
	// The ratio of the medians (0.5) is not the median of the ratios (1).
	if f != 100 || l != 50 || r != 1 {
		t.Errorf("medians = floor %v, lifeboat %v, ratio %v; want 100, 50, 1", f, l, r)
	}
}

func TestRequestCounts(t *testing.T) {
	before := requestCounts{"LIST": 10, "GET": 5}
	after := requestCounts{"LIST": 14, "GET": 7, "POST": 1}
	total, lists := after.since(before)
	if total != 7 || lists != 4 {
		t.Errorf("since = %d total, %d lists; want 7, 4", total, lists)
	}
	if got := label(`code="200",component="apiserver",verb="LIST",version="v1"`, "verb"); got != "LIST" {
		t.Errorf("label = %q, want LIST", got)
	}
}

func TestReportHasOneRowPerN(t *testing.T) {
	var buf bytes.Buffer
	writeReport(&buf, config{runs: 1, namespaces: 20}, []sizeResult{
		{N: 2000, ServerPeakRSSKiB: 51200, Runs: []runResult{{Run: 1,
			Floor:    floorResult{Items: 2000, WallSeconds: 0.2, PeakRSSKiB: 40960},
			Lifeboat: lifeboatResult{Items: 2020, WallSeconds: 0.2}}}},
	})
	out := buf.String()
	if !strings.Contains(out, "| 2000 | 10000 | 10100 | 1.01 | 40.0 | 50.0 |") {
		t.Errorf("summary row missing or wrong:\n%s", out)
	}
}

func TestRestoreReportHasOneRowPerN(t *testing.T) {
	var buf bytes.Buffer
	writeRestoreReport(&buf, config{runs: 1, namespaces: 20, restoreWorkers: 8}, []restoreSizeResult{
		{N: 10000, ServerPeakRSSKiB: 61440, Runs: []restoreRunResult{{Run: 1,
			Floor:    createFloorResult{Objects: 10020, WallSeconds: 5},
			Lifeboat: restoreResult{Items: 10020, WallSeconds: 10}}}},
	})
	out := buf.String()
	if !strings.Contains(out, "| 10000 | 2004 | 1002 | 0.50 | 60.0 |") {
		t.Errorf("summary row missing or wrong:\n%s", out)
	}
}

func TestRequestDeltaByVerb(t *testing.T) {
	before := requestCounts{"POST": 10, "PATCH": 1}
	after := requestCounts{"POST": 110, "PATCH": 3, "GET": 4}
	got := restoreCalls(after.delta(before))
	if got != (restoreAPICalls{APIRequests: 106, APICreates: 100, APIGets: 4, APIPatches: 2}) {
		t.Errorf("restoreCalls = %+v", got)
	}
}

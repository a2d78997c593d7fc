package deletion

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

func TestProgressWatermarkAndDoneSet(t *testing.T) {
	p := newProgress(v1.DeletionProgress{Name: "a"}, 10)
	for pos := range int64(5) {
		p.start(pos)
	}
	p.scannedTo(5)
	// Out of order: 1, 3 and 4 finish while 0 and 2 run.
	p.finish(1, true)
	p.finish(3, true)
	p.finish(4, true)
	if cp := p.checkpoint(); cp.Watermark != 0 || !slices.Equal(cp.Done, []int64{1, 3, 4}) {
		t.Errorf("checkpoint %+v, want watermark 0 and done [1 3 4]", cp)
	}
	p.finish(0, true)
	if cp := p.checkpoint(); cp.Watermark != 2 || !slices.Equal(cp.Done, []int64{3, 4}) {
		t.Errorf("checkpoint %+v, want watermark 2 and done [3 4]", cp)
	}
	p.finish(2, true)
	if cp := p.checkpoint(); cp.Watermark != 5 || len(cp.Done) != 0 || cp.Succeeded != 5 {
		t.Errorf("checkpoint %+v, want watermark 5, nothing listed, 5 succeeded", cp)
	}
	// Positions scanned that were not meant for this action are done too.
	p.scannedTo(9)
	if cp := p.checkpoint(); cp.Watermark != 9 {
		t.Errorf("watermark %d after scanning to 9, want 9", cp.Watermark)
	}
	if !p.complete() {
		t.Error("not complete")
	}
}

func TestProgressWindowWaitsForInflightAndDefersPastAFailure(t *testing.T) {
	p := newProgress(v1.DeletionProgress{}, 4)
	p.start(0)
	p.scannedTo(1)
	for pos := int64(1); pos < 4; pos++ {
		if p.admit(pos) != admitStart {
			t.Fatalf("position %d not admitted within the window", pos)
		}
		p.start(pos)
		p.scannedTo(pos + 1)
		p.finish(pos, true)
	}
	if got := p.admit(4); got != admitWait {
		t.Errorf("admit(4) with 0 in flight = %v, want wait", got)
	}
	p.finish(0, false)
	if got := p.admit(4); got != admitDefer {
		t.Errorf("admit(4) after 0 failed = %v, want defer (the watermark cannot pass 0 in this attempt)", got)
	}
	p.skip()
	if p.complete() {
		t.Error("complete after a failure")
	}
	cp := p.checkpoint()
	if cp.Watermark != 0 || !slices.Equal(cp.Done, []int64{1, 2, 3}) {
		t.Errorf("checkpoint %+v", cp)
	}
	// Resumed: 1-3 are done, 0 is not.
	q := newProgress(cp, 4)
	if q.isDone(0) || !q.isDone(1) || !q.isDone(3) || q.isDone(4) {
		t.Errorf("resumed isDone: 0=%v 1=%v 3=%v 4=%v", q.isDone(0), q.isDone(1), q.isDone(3), q.isDone(4))
	}
	q.start(0)
	q.scannedTo(4)
	q.finish(0, true)
	if cp := q.checkpoint(); cp.Watermark != 4 || len(cp.Done) != 0 {
		t.Errorf("after the retry: %+v, want watermark 4", cp)
	}
}

func TestAbandonedItemsHoldTheWatermark(t *testing.T) {
	p := newProgress(v1.DeletionProgress{}, 100)
	p.start(0)
	p.start(1)
	p.scannedTo(2)
	p.finish(1, true)
	p.abandon(0)
	if cp := p.checkpoint(); cp.Watermark != 0 || !slices.Equal(cp.Done, []int64{1}) {
		t.Errorf("checkpoint %+v: an abandoned item must not count as done", cp)
	}
}

// The status of a request stays far below etcd's 1.5 MB limit at its
// worst: many actions each with a full done list at positions past
// 100,000, and every bounded list full with long messages.
func TestWorstCaseStatusIsSmall(t *testing.T) {
	long := strings.Repeat("x", maxMessage*3)
	var st v1.DeleteBackupRequestStatus
	cp := &v1.DeletionCheckpoint{CompletedSteps: Steps[:2]}
	for a := range 10 {
		p := v1.DeletionProgress{Name: fmt.Sprintf("example.io/action-%d", a), Watermark: 100_000, Succeeded: 100_000}
		for i := range int64(DefaultWindow - 1) {
			p.Done = append(p.Done, 100_001+i)
		}
		cp.Actions = append(cp.Actions, p)
	}
	st.Checkpoint = cp
	r := &run{log: slog.New(slog.DiscardHandler)}
	for i := range 1000 {
		r.warn(fmt.Sprint(i, long))
		_ = r.fail(v1.DeletionError{Plugin: "example.io/action-1", Resource: "configmaps", Namespace: "ns", Name: "name", Message: long})
		r.leftBehind("key " + long)
	}
	res := Result{Errors: r.errs, ErrorCount: r.nerrs}
	st.Errors = res.Messages()
	st.ErrorDetails = res.Errors
	st.Report = &v1.DeletionReport{LeftBehind: r.left, Warnings: r.state.Warnings}
	st.Conditions = []metav1.Condition{{Type: "Processed", Message: long}}
	data, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > 512<<10 {
		t.Errorf("worst-case status is %d bytes; want well under etcd's 1.5 MB", len(data))
	}
	if len(st.Errors) != MaxErrors+1 || len(st.ErrorDetails) != MaxErrors {
		t.Errorf("%d errors, %d details: want %d and a summary line", len(st.Errors), len(st.ErrorDetails), MaxErrors)
	}
	t.Logf("worst-case status: %d bytes", len(data))
}

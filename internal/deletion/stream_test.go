package deletion

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

// streamingAction is a remote action whose calls go over a plugin's stream
// once its process has answered one, as pluginhost's are for plugins built
// with Lifeboat's SDK.
type streamingAction struct {
	remoteAction
	answered atomic.Bool
}

func (a *streamingAction) Execute(in *api.DeleteItemActionExecuteInput) error {
	defer a.answered.Store(true)
	return a.remoteAction.Execute(in)
}

func (a *streamingAction) Streaming() bool { return a.answered.Load() }

// inFlight tracks the most calls running at once.
type inFlight struct {
	n, peak atomic.Int64
}

func (f *inFlight) enter() {
	n := f.n.Add(1)
	for {
		p := f.peak.Load()
		if n <= p || f.peak.CompareAndSwap(p, n) {
			return
		}
	}
}

func (f *inFlight) leave() { f.n.Add(-1) }

func manyItems(n int) []item {
	items := make([]item, n)
	for i := range items {
		items[i] = item{gr: "configmaps", ns: "shop", name: fmt.Sprintf("cm-%05d", i)}
	}
	return items
}

// TestStreamingActionsKeepMoreCallsInFlight: an action whose calls go over a
// stream has up to StreamWorkers calls in flight, while one taking unary
// calls (a plugin built with Velero's SDK) stays within Workers.
func TestStreamingActionsKeepMoreCallsInFlight(t *testing.T) {
	w := newWorld(t)
	items := manyItems(1500)
	w.putTarball(items)
	w.putBackupFiles(nil)
	log := &callLog{}
	var streamed, unary inFlight
	s := &streamingAction{remoteAction: remoteAction{&fakeAction{name: "example.io/streamed", log: log}}}
	s.before = func(string, string) { streamed.enter(); time.Sleep(2 * time.Millisecond); streamed.leave() }
	w.plugins.addImpl("example.io/streamed", s)
	u := w.plugins.add(log, "example.io/unary", api.ResourceSelector{})
	w.plugins.remote = map[string]bool{"example.io/unary": true}
	u.before = func(string, string) { unary.enter(); time.Sleep(time.Millisecond); unary.leave() }

	e := w.engine() // Workers: 4
	e.StreamWorkers = 32
	res := e.Run(t.Context(), Input{Backup: w.backup, Store: w.store})
	if res.Err != nil {
		t.Fatalf("run: %v (%v)", res.Err, res.Messages())
	}
	if got := len(log.all()); got != 2*len(items) {
		t.Errorf("%d calls, want %d", got, 2*len(items))
	}
	if p := streamed.peak.Load(); p <= 4 || p > 32 {
		t.Errorf("the streaming action had at most %d calls in flight, want more than Workers (4) and at most StreamWorkers (32)", p)
	}
	if p := unary.peak.Load(); p > 4 {
		t.Errorf("the unary action had %d calls in flight, more than Workers (4)", p)
	}
}

// TestStreamingCheckpointsRecordOnlyFinishedCalls: with many calls in flight
// over a stream, a checkpoint taken mid-way records no item whose call had
// not returned, so an attempt resumed from it (as after a SIGKILL) passes
// every item the first had not finished, and none the checkpoint records.
func TestStreamingCheckpointsRecordOnlyFinishedCalls(t *testing.T) {
	w := newWorld(t)
	items := manyItems(3000)
	w.putTarball(items)
	w.putBackupFiles(nil)
	log := &callLog{}
	s := &streamingAction{remoteAction: remoteAction{&fakeAction{name: "example.io/streamed", log: log}}}
	s.before = func(_, name string) {
		// Uneven call times: results come back out of order.
		time.Sleep(time.Duration(len(name)%3) * time.Millisecond)
	}
	w.plugins.addImpl("example.io/streamed", s)

	e := w.engine()
	e.StreamWorkers = 64
	e.CheckpointInterval = 5 * time.Millisecond
	var mu sync.Mutex
	var mid State
	var finishedAtMid map[string]bool
	res := e.Run(t.Context(), Input{Backup: w.backup, Store: w.store, OnState: func(st State) {
		mu.Lock()
		defer mu.Unlock()
		if finishedAtMid != nil {
			return
		}
		calls := log.all()
		if len(calls) < 1000 || len(calls) > 2500 {
			return
		}
		// What had finished by now: a superset of what the state may
		// record, since calls go on finishing meanwhile.
		mid, finishedAtMid = cloneState(st), map[string]bool{}
		for _, c := range calls {
			finishedAtMid[c.name] = true
		}
	}})
	if res.Err != nil {
		t.Fatalf("run: %v (%v)", res.Err, res.Messages())
	}
	if finishedAtMid == nil {
		t.Fatal("no checkpoint was handed over mid-way")
	}

	// The resumed attempt starts from the mid-way checkpoint, with the
	// backup's files back where the first attempt found them.
	w.putTarball(items)
	w.putBackupFiles(nil)
	log.reset()
	res2 := w.engine().Run(context.Background(), Input{Backup: w.backup, Store: w.store, State: mid})
	if res2.Err != nil {
		t.Fatalf("resume: %v", res2.Err)
	}
	again := map[string]int{}
	for _, c := range log.all() {
		again[c.name]++
	}
	var repeated int
	for _, it := range items {
		switch {
		case again[it.name] > 1:
			t.Errorf("%s passed %d times by the resumed attempt", it.name, again[it.name])
		case again[it.name] == 0 && !finishedAtMid[it.name]:
			t.Errorf("%s was recorded done by the checkpoint before its call returned, and never passed", it.name)
		case again[it.name] == 1 && finishedAtMid[it.name]:
			repeated++
		}
	}
	// Repeats are the calls finished after the checkpoint's last write:
	// at most a window's worth, never most of the work.
	if repeated > int(DefaultWindow) {
		t.Errorf("%d items passed again; the checkpoint recorded too little", repeated)
	}
	t.Logf("mid-way checkpoint: %d finished, %d passed again on resume", len(finishedAtMid), repeated)
}

package nodeagent

import (
	"context"
	"sync"
)

// transfers are the transfers this process runs, by object ("pvb/<name>",
// "pvr/<name>"), at most limit at once. They live only in memory: a
// transfer is a goroutine of this process, and a restarted node agent
// finds none (see markLost).
type transfers struct {
	mu      sync.Mutex
	limit   int
	running map[string]*transfer
	wg      sync.WaitGroup
}

// transfer is one running (or about to run) transfer.
type transfer struct {
	mu        sync.Mutex
	cancel    context.CancelFunc
	cancelled bool
}

func newTransfers(limit int) *transfers {
	return &transfers{limit: limit, running: map[string]*transfer{}}
}

// reserve takes a slot for key; false when key already has one or every
// slot is taken (the caller tries again later).
func (ts *transfers) reserve(key string) (*transfer, bool) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if _, ok := ts.running[key]; ok || len(ts.running) >= ts.limit {
		return nil, false
	}
	t := &transfer{}
	ts.running[key] = t
	ts.wg.Add(1)
	return t, true
}

// get is key's transfer, or nil when this process runs none for it.
func (ts *transfers) get(key string) *transfer {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.running[key]
}

// release frees key's slot.
func (ts *transfers) release(key string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if _, ok := ts.running[key]; ok {
		delete(ts.running, key)
		ts.wg.Done()
	}
}

// cancel stops key's transfer, if this process runs one.
func (ts *transfers) cancel(key string) bool {
	if t := ts.get(key); t != nil {
		t.requestCancel()
		return true
	}
	return false
}

// wait blocks until every transfer has released its slot.
func (ts *transfers) wait() { ts.wg.Wait() }

// start gives the transfer its context, already cancelled if a cancel
// came first.
func (t *transfer) start(parent context.Context) context.Context {
	t.mu.Lock()
	defer t.mu.Unlock()
	ctx, cancel := context.WithCancel(parent)
	t.cancel = cancel
	if t.cancelled {
		cancel()
	}
	return ctx
}

// requestCancel cancels the transfer's context (now, or when it starts).
func (t *transfer) requestCancel() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cancelled = true
	if t.cancel != nil {
		t.cancel()
	}
}

func (t *transfer) wasCancelled() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cancelled
}

// done releases the transfer's context.
func (t *transfer) done() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cancel != nil {
		t.cancel()
	}
}

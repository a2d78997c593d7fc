package framework

import (
	"bytes"
	"context"
	"errors"
	"io"
	"runtime"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lifeboat-io/lifeboat/pkg/plugin/generated"
	pluginv1 "github.com/lifeboat-io/lifeboat/pkg/plugin/generated/lifeboat/plugin/v1"
)

// Some calls also travel over Lifeboat's own streaming services
// (pkg/plugin/proto/lifeboat/plugin/v1): BackupItemAction and
// DeleteItemAction Execute. A unary call per item costs a gRPC stream on
// both sides, which at thousands of items is more than most actions' own
// work. The services are additions: this SDK's plugins still serve
// Velero's unary calls (Velero hosts them that way), and this SDK's host
// falls back to those calls for a plugin process that does not serve a
// stream. Every such service has the same shape, a stream of batches of
// calls with ids one way and batches of results the other, and the code
// here serves and calls any of them; what differs is in a callStreamSpec.

// batchBytes is what one stream message carries at most, unless it holds a
// single larger item: gRPC reads a message into a buffer from a pool whose
// sizes go from 32 KiB straight to 1 MiB, zeroed on every use, so a 40 KiB
// message would cost more than the items in it.
const batchBytes = 32 << 10

// perCallBytes is what a call or result adds to a message besides its
// item, counted generously.
const perCallBytes = 128

// maxStreamItemBytes is the largest item the host sends over a stream; a
// larger one takes the unary call, as one item to a message gains nothing.
// maxResultBytes is the largest item a plugin sends back: a larger one
// fails its call alone. Sent, it could exceed the host's limit on messages
// from plugins (--plugin-max-message-size, which may not go below 4 MiB),
// and the host would break the stream for every call on it.
const (
	maxStreamItemBytes = 1 << 20
	maxResultBytes     = 4<<20 - 64<<10
)

// maxStreamWorkers bounds the calls of one stream that run at once in the
// plugin: as many as Lifeboat's engines keep in flight. Calls beyond it
// wait (and, through the stream's flow control, hold the host back) rather
// than each getting a goroutine.
const maxStreamWorkers = 64

// batcher collects what a stream sends into messages: it waits for one
// value, then takes whatever else is already queued, without waiting for
// more, while the message stays within batchBytes. Under load many items
// share one message (and its frame, flush and system call) while a lone
// item goes at once.
type batcher[T any] struct {
	size  func(T) int
	batch []T
	// next is a value taken from the queue that did not fit: the first of
	// the next batch.
	next    T
	hasNext bool
}

// gather returns the next batch, or nil once done is closed (or in is
// closed and drained; done may be nil).
func (b *batcher[T]) gather(in <-chan T, done <-chan struct{}) []T {
	clear(b.batch)
	b.batch = b.batch[:0]
	var n int
	if b.hasNext {
		var zero T
		b.batch, n = append(b.batch, b.next), b.size(b.next)
		b.next, b.hasNext = zero, false
	} else {
		select {
		case v, ok := <-in:
			if !ok {
				return nil
			}
			b.batch, n = append(b.batch, v), b.size(v)
		case <-done:
			return nil
		}
	}
	// The goroutines the last message woke (callers on the host, workers
	// in the plugin) are about to queue more: letting them run first puts
	// several items in a message instead of one, which saves a system call
	// and a wake-up on both sides for each item it adds.
	runtime.Gosched()
	for {
		select {
		case v, ok := <-in:
			if !ok {
				return b.batch
			}
			if n+b.size(v) > batchBytes {
				b.next, b.hasNext = v, true
				return b.batch
			}
			b.batch, n = append(b.batch, v), n+b.size(v)
		default:
			return b.batch
		}
	}
}

// workerPool runs jobs on goroutines that outlive one job: a goroutine's
// stack grows while it decodes and encodes an item, and a fresh goroutine
// per item would pay for that growth every time. Only one goroutine calls
// run.
type workerPool struct {
	jobs    chan func()
	max     int
	started int
	wg      sync.WaitGroup
}

func newWorkerPool(max int) *workerPool {
	return &workerPool{jobs: make(chan func()), max: max}
}

// run hands job to an idle worker, or to a new one while there are fewer
// than max, or else waits for one to be free.
func (p *workerPool) run(job func()) {
	select {
	case p.jobs <- job:
		return
	default:
	}
	if p.started < p.max {
		p.started++
		p.wg.Go(func() {
			job()
			for j := range p.jobs {
				j()
			}
		})
		return
	}
	p.jobs <- job
}

// close waits for every job handed to run to finish.
func (p *workerPool) close() {
	close(p.jobs)
	p.wg.Wait()
}

// callStreamSpec describes one streaming service: C is a call, R a result,
// Q and P the messages that carry batches of them.
type callStreamSpec[C, R, Q, P any] struct {
	open func(ctx context.Context, conn grpc.ClientConnInterface) (grpc.BidiStreamingClient[Q, P], error)

	// The host's side.
	setID     func(C, uint64)
	setBackup func(C, []byte)
	callSize  func(C) int
	request   func([]C) *Q
	results   func(*P) []R
	resultID  func(R) uint64
	resultErr func(R) *pluginv1.CallError

	// The plugin's side.
	calls      func(*Q) []C
	backup     func(C) []byte
	response   func([]R) *P
	resultSize func(R) int
}

// serveCallStream is the plugin side of a stream: it runs each call it
// receives through execute, at most maxStreamWorkers at once, and sends
// the results back in batches until the host closes its side.
func serveCallStream[C, R, Q, P any](spec *callStreamSpec[C, R, Q, P], stream grpc.BidiStreamingServer[Q, P], execute func(call C, backup []byte) R) error {
	ctx := stream.Context()
	results := make(chan R, maxStreamWorkers)
	sent := make(chan error, 1)
	go func() { sent <- sendResults(spec, stream, results) }()
	pool := newWorkerPool(maxStreamWorkers)
	var backup []byte
	var recvErr error
	for {
		req, err := stream.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				recvErr = err
			}
			break
		}
		for _, call := range spec.calls(req) {
			if b := spec.backup(call); len(b) > 0 {
				backup = b
			}
			b := backup
			pool.run(func() {
				r := execute(call, b)
				select {
				case results <- r:
				case <-ctx.Done():
				}
			})
		}
	}
	// The host has sent its last call (or is gone): finish what is in
	// flight, send it, and end the stream.
	pool.close()
	close(results)
	sendErr := <-sent
	if recvErr != nil {
		return recvErr
	}
	return sendErr
}

// sendResults sends results in batches until results is closed. After a
// failed send it keeps draining results, so that no worker blocks, and
// returns that error.
func sendResults[C, R, Q, P any](spec *callStreamSpec[C, R, Q, P], stream grpc.BidiStreamingServer[Q, P], results <-chan R) error {
	b := batcher[R]{size: spec.resultSize}
	var sendErr error
	for batch := b.gather(results, nil); batch != nil; batch = b.gather(results, nil) {
		if sendErr == nil {
			sendErr = stream.Send(spec.response(batch))
		}
	}
	return sendErr
}

// callErrorToProto carries what the status of a failed unary call carries.
func callErrorToProto(err error) *pluginv1.CallError {
	st := status.Convert(err)
	ce := &pluginv1.CallError{Code: int32(st.Code()), Message: st.Message()}
	for _, detail := range st.Details() {
		if stack, ok := detail.(*generated.Stack); ok {
			ce.Stack = stack.GetFrames()
			break
		}
	}
	return ce
}

// callErrorFromProto is the status error a unary call would have failed
// with, so that base.fail makes the same *PluginError of it.
func callErrorFromProto(ce *pluginv1.CallError) error {
	return withStack(status.New(codes.Code(ce.GetCode()), ce.GetMessage()), ce.GetStack())
}

// errNoStream says a plugin process does not serve a stream (or the call
// is too large for one): the caller uses the unary call instead.
var errNoStream = errors.New("the plugin process does not serve Lifeboat's stream for this call")

// connStreams holds the streams of one service for the connections
// dispensed through one ClientPluginSet (a host makes one set per plugin
// process).
type connStreams[C, R, Q, P any] struct {
	spec   *callStreamSpec[C, R, Q, P]
	mu     sync.Mutex
	byConn map[grpc.ClientConnInterface]*callStreams[C, R, Q, P]
}

func (s *connStreams[C, R, Q, P]) forConn(conn grpc.ClientConnInterface) *callStreams[C, R, Q, P] {
	s.mu.Lock()
	defer s.mu.Unlock()
	cs, ok := s.byConn[conn]
	if !ok {
		if s.byConn == nil {
			s.byConn = map[grpc.ClientConnInterface]*callStreams[C, R, Q, P]{}
		}
		cs = &callStreams[C, R, Q, P]{spec: s.spec, conn: conn}
		s.byConn[conn] = cs
	}
	return cs
}

// callStreams is the host side of one service for one plugin process: the
// open stream, if any, and whether the process serves the service at all.
type callStreams[C, R, Q, P any] struct {
	spec *callStreamSpec[C, R, Q, P]
	conn grpc.ClientConnInterface

	mu          sync.Mutex
	unsupported bool
	// served is set once a stream of the process answered a call.
	served bool
	cur    *callStream[C, R, Q, P]
}

// call makes one call over the stream. errNoStream means the call is to be
// made unary (the process does not serve the stream, or the item is
// large); any other error is the call's, as a unary call's would be.
func (cs *callStreams[C, R, Q, P]) call(req C, item, backup []byte, timeout time.Duration) (R, error) {
	if len(item) > maxStreamItemBytes {
		// Too large to share a message; a stream would gain nothing.
		var zero R
		return zero, errNoStream
	}
	s, err := cs.stream()
	if err != nil {
		var zero R
		return zero, err
	}
	return s.call(req, backup, timeout)
}

// streaming reports whether calls go over a stream: the process has
// answered one. Before its first answer, and for a process that does not
// serve the service, it is false.
func (cs *callStreams[C, R, Q, P]) streaming() bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.served && !cs.unsupported
}

// stream returns the open stream, opening one if there is none or the last
// one broke (a new process, or a stream the process ended).
func (cs *callStreams[C, R, Q, P]) stream() (*callStream[C, R, Q, P], error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.unsupported {
		return nil, errNoStream
	}
	if cs.cur != nil && !cs.cur.broken() {
		return cs.cur, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	rpc, err := cs.spec.open(ctx, cs.conn)
	if err != nil {
		cancel()
		if status.Code(err) == codes.Unimplemented {
			cs.unsupported = true
			return nil, errNoStream
		}
		return nil, err
	}
	s := &callStream[C, R, Q, P]{
		owner:   cs,
		rpc:     rpc,
		cancel:  cancel,
		queue:   make(chan *pendingCall[C, R], 256),
		pending: map[uint64]*pendingCall[C, R]{},
		done:    make(chan struct{}),
	}
	go s.send()
	go s.receive()
	cs.cur = s
	return s, nil
}

// callStream is one open stream: calls waiting to be sent, and calls
// waiting for their results.
type callStream[C, R, Q, P any] struct {
	owner  *callStreams[C, R, Q, P]
	rpc    grpc.BidiStreamingClient[Q, P]
	cancel context.CancelFunc
	queue  chan *pendingCall[C, R]

	mu       sync.Mutex
	nextID   uint64
	pending  map[uint64]*pendingCall[C, R]
	answered bool
	err      error
	done     chan struct{} // closed once err is set
}

type pendingCall[C, R any] struct {
	req    C
	backup []byte
	result chan R
}

func (s *callStream[C, R, Q, P]) broken() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

func (s *callStream[C, R, Q, P]) call(req C, backup []byte, timeout time.Duration) (R, error) {
	var zero R
	pc := &pendingCall[C, R]{req: req, backup: backup, result: make(chan R, 1)}
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return zero, err
	}
	s.nextID++
	id := s.nextID
	s.owner.spec.setID(req, id)
	s.pending[id] = pc
	s.mu.Unlock()

	var expired <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	select {
	case s.queue <- pc:
	case <-s.done:
		return s.brokenResult(pc)
	case <-expired:
		s.forget(id)
		return zero, deadlineExceeded
	}
	select {
	case r := <-pc.result:
		return r, nil
	case <-s.done:
		return s.brokenResult(pc)
	case <-expired:
		// The result may still come; nobody waits for it any more. The
		// host restarts a process that let a call time out.
		s.forget(id)
		return zero, deadlineExceeded
	}
}

// deadlineExceeded is what a unary call past its deadline fails with.
var deadlineExceeded = status.Error(codes.DeadlineExceeded, context.DeadlineExceeded.Error())

// brokenResult is the result of a call whose stream broke: it may have
// been delivered just before.
func (s *callStream[C, R, Q, P]) brokenResult(pc *pendingCall[C, R]) (R, error) {
	select {
	case r := <-pc.result:
		return r, nil
	default:
		var zero R
		return zero, s.err
	}
}

func (s *callStream[C, R, Q, P]) forget(id uint64) {
	s.mu.Lock()
	delete(s.pending, id)
	s.mu.Unlock()
}

// send sends queued calls in batches until the stream breaks. The Backup
// travels with the first call and again only when it changes.
func (s *callStream[C, R, Q, P]) send() {
	spec := s.owner.spec
	var lastBackup []byte
	// The Backup is not counted: it travels once per stream.
	b := batcher[*pendingCall[C, R]]{size: func(pc *pendingCall[C, R]) int { return spec.callSize(pc.req) + perCallBytes }}
	calls := make([]C, 0, 64)
	for batch := b.gather(s.queue, s.done); batch != nil; batch = b.gather(s.queue, s.done) {
		calls = calls[:0]
		for _, pc := range batch {
			if !bytes.Equal(pc.backup, lastBackup) {
				spec.setBackup(pc.req, pc.backup)
				lastBackup = pc.backup
			}
			calls = append(calls, pc.req)
		}
		err := s.rpc.Send(spec.request(calls))
		clear(calls)
		if err != nil {
			// io.EOF means the stream ended; receive reads why.
			if !errors.Is(err, io.EOF) {
				s.fail(err)
			}
			return
		}
	}
}

// receive hands results to their calls until the stream ends.
func (s *callStream[C, R, Q, P]) receive() {
	spec := s.owner.spec
	for {
		resp, err := s.rpc.Recv()
		if err != nil {
			s.fail(err)
			return
		}
		s.mu.Lock()
		if !s.answered {
			s.answered = true
			s.owner.mu.Lock()
			s.owner.served = true
			s.owner.mu.Unlock()
		}
		for _, r := range spec.results(resp) {
			id := spec.resultID(r)
			if pc, ok := s.pending[id]; ok {
				delete(s.pending, id)
				pc.result <- r
			}
		}
		s.mu.Unlock()
	}
}

// fail breaks the stream for err: every call waiting on it fails with err,
// and the next call opens a new stream. A stream the process refused before
// answering anything means the process does not serve it, for good.
func (s *callStream[C, R, Q, P]) fail(err error) {
	if errors.Is(err, io.EOF) {
		err = status.Error(codes.Unavailable, "the plugin process ended the stream")
	}
	s.mu.Lock()
	if s.err == nil {
		if status.Code(err) == codes.Unimplemented && !s.answered {
			s.owner.mu.Lock()
			s.owner.unsupported = true
			s.owner.mu.Unlock()
			err = errNoStream
		}
		s.err = err
		s.pending = nil
		close(s.done)
	}
	s.mu.Unlock()
	s.cancel()
}

// callOver makes a call over streams for a client: errNoStream (unwrapped)
// means there is no stream to use and the caller makes the unary call; any
// other error is the call's, reported as the unary call would report it.
func callOver[C, R, Q, P any](c base, streams *callStreams[C, R, Q, P], req C, item, backup []byte) (R, error) {
	var zero R
	if streams == nil {
		return zero, errNoStream
	}
	r, err := streams.call(req, item, backup, c.timeout)
	if err != nil {
		if errors.Is(err, errNoStream) {
			return zero, errNoStream
		}
		return zero, c.fail("Execute", err)
	}
	if ce := streams.spec.resultErr(r); ce != nil {
		return zero, c.fail("Execute", callErrorFromProto(ce))
	}
	return r, nil
}

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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/generated"
	pluginv1 "github.com/lifeboat-io/lifeboat/pkg/plugin/generated/lifeboat/plugin/v1"
)

// BackupItemAction Execute calls also travel over Lifeboat's own streaming
// service (pkg/plugin/proto/lifeboat/plugin/v1): a unary call per item costs
// a gRPC stream on both sides, which at thousands of items per backup is
// more than most actions' own work. The service is an addition: this SDK's
// plugins still serve Velero's unary calls (Velero hosts them that way), and
// this SDK's host falls back to those calls for a plugin process that does
// not serve the stream.

// batchBytes is what one stream message carries at most, unless it holds a
// single larger item: gRPC reads a message into a buffer from a pool whose
// sizes go from 32 KiB straight to 1 MiB, zeroed on every use, so a 40 KiB
// message would cost more than the items in it.
const batchBytes = 32 << 10

// perCallBytes is what a call or result adds to a message besides its
// item, counted generously.
const perCallBytes = 128

// maxStreamItemBytes is the largest item the host sends over the stream;
// a larger one takes the unary call, as one item to a message gains
// nothing. maxResultBytes is the largest item a plugin sends back: a larger
// one fails its call alone. Sent, it could exceed the host's limit on
// messages from plugins (--plugin-max-message-size, which may not go below
// 4 MiB), and the host would break the stream for every call on it.
const (
	maxStreamItemBytes = 1 << 20
	maxResultBytes     = 4<<20 - 64<<10
)

// maxStreamWorkers bounds the calls of one stream that run at once in the
// plugin: as many as Lifeboat's backup engine keeps in flight for a page.
// Calls beyond it wait (and, through the stream's flow control, hold the
// host back) rather than each getting a goroutine.
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

// backupItemActionStreamServer is the plugin side of the stream.
type backupItemActionStreamServer struct {
	pluginv1.UnimplementedBackupItemActionStreamServer
	v1, v2 *mux
}

func (s *backupItemActionStreamServer) ExecuteStream(stream pluginv1.BackupItemActionStream_ExecuteStreamServer) error {
	ctx := stream.Context()
	results := make(chan *pluginv1.BackupItemResult, maxStreamWorkers)
	sent := make(chan error, 1)
	go func() { sent <- sendResults(stream, results) }()
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
		for _, call := range req.GetCalls() {
			if b := call.GetBackup(); len(b) > 0 {
				backup = b
			}
			b := backup
			pool.run(func() {
				r := s.execute(call, b)
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

// execute runs one call as the unary Execute would, through serve (so a
// panic or an error is reported the same way), and returns its result.
func (s *backupItemActionStreamServer) execute(call *pluginv1.BackupItemExecute, backupJSON []byte) *pluginv1.BackupItemResult {
	res := &pluginv1.BackupItemResult{Id: call.GetId()}
	var err error
	switch kind := api.Kind(call.GetKind()); kind {
	case api.KindBackupItemAction:
		_, err = serve(s.v1, call.GetPlugin(), "Execute", func(impl api.BackupItemAction) (struct{}, error) {
			item, backup, err := requestItemAndBackup(call.GetItem(), backupJSON)
			if err != nil {
				return struct{}{}, err
			}
			updated, additional, err := impl.Execute(item, backup)
			if err != nil {
				return struct{}{}, err
			}
			if updated != nil {
				if res.Item, err = encodeItem("updated item", updated); err != nil {
					return struct{}{}, err
				}
			}
			res.AdditionalItems = idsToProto(additional)
			return struct{}{}, nil
		})
	case api.KindBackupItemActionV2:
		_, err = serve(s.v2, call.GetPlugin(), "Execute", func(impl api.BackupItemActionV2) (struct{}, error) {
			item, backup, err := requestItemAndBackup(call.GetItem(), backupJSON)
			if err != nil {
				return struct{}{}, err
			}
			updated, additional, operationID, postOperation, err := impl.Execute(item, backup)
			if err != nil {
				return struct{}{}, err
			}
			if updated != nil {
				if res.Item, err = encodeItem("updated item", updated); err != nil {
					return struct{}{}, err
				}
			}
			res.AdditionalItems = idsToProto(additional)
			res.OperationID = operationID
			res.PostOperationItems = idsToProto(postOperation)
			return struct{}{}, nil
		})
	default:
		err = status.Errorf(codes.InvalidArgument, "the stream serves BackupItemAction and BackupItemActionV2 calls, not %q", kind)
	}
	if err == nil && len(res.Item) > maxResultBytes {
		err = status.Errorf(codes.ResourceExhausted, "the updated item is %d bytes, more than a plugin may return (%d)", len(res.Item), maxResultBytes)
	}
	if err != nil {
		return &pluginv1.BackupItemResult{Id: call.GetId(), Error: callErrorToProto(err)}
	}
	return res
}

// sendResults sends results in batches until results is closed. After a
// failed send it keeps draining results, so that no worker blocks, and
// returns that error.
func sendResults(stream pluginv1.BackupItemActionStream_ExecuteStreamServer, results <-chan *pluginv1.BackupItemResult) error {
	b := batcher[*pluginv1.BackupItemResult]{size: func(r *pluginv1.BackupItemResult) int { return len(r.GetItem()) + perCallBytes }}
	var sendErr error
	for batch := b.gather(results, nil); batch != nil; batch = b.gather(results, nil) {
		if sendErr == nil {
			sendErr = stream.Send(&pluginv1.ExecuteStreamResponse{Results: batch})
		}
	}
	return sendErr
}

func requestItemAndBackup(itemJSON, backupJSON []byte) (*unstructured.Unstructured, *v1.Backup, error) {
	item, err := requestItem("item", itemJSON)
	if err != nil {
		return nil, nil, err
	}
	backup, err := requestBackup(backupJSON)
	if err != nil {
		return nil, nil, err
	}
	return item, backup, nil
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

// errNoStream says a plugin process does not serve the stream: the caller
// uses the unary call instead.
var errNoStream = errors.New("the plugin process does not serve Lifeboat's BackupItemAction stream")

// streamSet holds the streams of the connections dispensed through one
// ClientPluginSet (a host makes one set per plugin process).
type streamSet struct {
	mu     sync.Mutex
	byConn map[grpc.ClientConnInterface]*executeStreams
}

func (s *streamSet) forConn(conn grpc.ClientConnInterface) *executeStreams {
	s.mu.Lock()
	defer s.mu.Unlock()
	es, ok := s.byConn[conn]
	if !ok {
		if s.byConn == nil {
			s.byConn = map[grpc.ClientConnInterface]*executeStreams{}
		}
		es = &executeStreams{rpc: pluginv1.NewBackupItemActionStreamClient(conn)}
		s.byConn[conn] = es
	}
	return es
}

// executeStreams is the host side of the stream for one plugin process:
// the open stream, if any, and whether the process serves streams at all.
type executeStreams struct {
	rpc pluginv1.BackupItemActionStreamClient

	mu          sync.Mutex
	unsupported bool
	cur         *executeStream
}

// execute makes one Execute call over the stream. errNoStream means the
// call is to be made unary (the process does not serve the stream, or the
// item is large); any other error is the call's, as a unary call's would
// be.
func (es *executeStreams) execute(kind api.Kind, name string, item, backup []byte, timeout time.Duration) (*pluginv1.BackupItemResult, error) {
	if len(item) > maxStreamItemBytes {
		// Too large to share a message; a stream would gain nothing.
		return nil, errNoStream
	}
	s, err := es.stream()
	if err != nil {
		return nil, err
	}
	return s.call(&pluginv1.BackupItemExecute{Kind: string(kind), Plugin: name, Item: item}, backup, timeout)
}

// stream returns the open stream, opening one if there is none or the last
// one broke (a new process, or a stream the process ended).
func (es *executeStreams) stream() (*executeStream, error) {
	es.mu.Lock()
	defer es.mu.Unlock()
	if es.unsupported {
		return nil, errNoStream
	}
	if es.cur != nil && !es.cur.broken() {
		return es.cur, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	rpc, err := es.rpc.ExecuteStream(ctx)
	if err != nil {
		cancel()
		if status.Code(err) == codes.Unimplemented {
			es.unsupported = true
			return nil, errNoStream
		}
		return nil, err
	}
	s := &executeStream{
		owner:   es,
		rpc:     rpc,
		cancel:  cancel,
		queue:   make(chan *pendingCall, 256),
		pending: map[uint64]*pendingCall{},
		done:    make(chan struct{}),
	}
	go s.send()
	go s.receive()
	es.cur = s
	return s, nil
}

// executeStream is one open stream: calls waiting to be sent, and calls
// waiting for their results.
type executeStream struct {
	owner  *executeStreams
	rpc    pluginv1.BackupItemActionStream_ExecuteStreamClient
	cancel context.CancelFunc
	queue  chan *pendingCall

	mu       sync.Mutex
	nextID   uint64
	pending  map[uint64]*pendingCall
	answered bool
	err      error
	done     chan struct{} // closed once err is set
}

type pendingCall struct {
	req    *pluginv1.BackupItemExecute
	backup []byte
	result chan *pluginv1.BackupItemResult
}

func (s *executeStream) broken() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

func (s *executeStream) call(req *pluginv1.BackupItemExecute, backup []byte, timeout time.Duration) (*pluginv1.BackupItemResult, error) {
	pc := &pendingCall{req: req, backup: backup, result: make(chan *pluginv1.BackupItemResult, 1)}
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return nil, err
	}
	s.nextID++
	id := s.nextID
	req.Id = id
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
		return nil, deadlineExceeded
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
		return nil, deadlineExceeded
	}
}

// deadlineExceeded is what a unary call past its deadline fails with.
var deadlineExceeded = status.Error(codes.DeadlineExceeded, context.DeadlineExceeded.Error())

// brokenResult is the result of a call whose stream broke: it may have
// been delivered just before.
func (s *executeStream) brokenResult(pc *pendingCall) (*pluginv1.BackupItemResult, error) {
	select {
	case r := <-pc.result:
		return r, nil
	default:
		return nil, s.err
	}
}

func (s *executeStream) forget(id uint64) {
	s.mu.Lock()
	delete(s.pending, id)
	s.mu.Unlock()
}

// send sends queued calls in batches until the stream breaks. The Backup
// travels with the first call and again only when it changes.
func (s *executeStream) send() {
	var lastBackup []byte
	// The Backup is not counted: it travels once per stream.
	b := batcher[*pendingCall]{size: func(pc *pendingCall) int { return len(pc.req.Item) + perCallBytes }}
	calls := make([]*pluginv1.BackupItemExecute, 0, 64)
	for batch := b.gather(s.queue, s.done); batch != nil; batch = b.gather(s.queue, s.done) {
		calls = calls[:0]
		for _, pc := range batch {
			if !bytes.Equal(pc.backup, lastBackup) {
				pc.req.Backup, lastBackup = pc.backup, pc.backup
			}
			calls = append(calls, pc.req)
		}
		err := s.rpc.Send(&pluginv1.ExecuteStreamRequest{Calls: calls})
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
func (s *executeStream) receive() {
	for {
		resp, err := s.rpc.Recv()
		if err != nil {
			s.fail(err)
			return
		}
		s.mu.Lock()
		s.answered = true
		for _, r := range resp.GetResults() {
			if pc, ok := s.pending[r.GetId()]; ok {
				delete(s.pending, r.GetId())
				pc.result <- r
			}
		}
		s.mu.Unlock()
	}
}

// fail breaks the stream for err: every call waiting on it fails with err,
// and the next call opens a new stream. A stream the process refused before
// answering anything means the process does not serve it, for good.
func (s *executeStream) fail(err error) {
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

package framework

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// chunkSize is how much of an object one stream message carries. Velero
// uses 16 KiB; larger chunks cost far fewer messages and stay well under
// gRPC's default 4 MiB message limit.
const chunkSize = 1 << 20

// chunkReader reads a stream of chunks as one body. next returns io.EOF,
// unwrapped, at the end.
type chunkReader struct {
	next    func() ([]byte, error)
	pending []byte
	err     error
}

func (r *chunkReader) Read(p []byte) (int, error) {
	for len(r.pending) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		r.pending, r.err = r.next()
	}
	n := copy(p, r.pending)
	r.pending = r.pending[n:]
	return n, nil
}

// errStalled is the cause a watchdog cancels its stream with.
var errStalled = errors.New("stream stalled")

// watchdog bounds each wait on a stream instead of the whole stream: an
// object may take far longer to move than any single call should, but no
// chunk should take longer than the call timeout. It runs only while the
// client waits on the plugin, so a slow consumer never trips it.
type watchdog struct {
	timeout time.Duration
	timer   *time.Timer
}

func newWatchdog(timeout time.Duration, cancel context.CancelCauseFunc) *watchdog {
	w := &watchdog{timeout: timeout}
	if timeout > 0 {
		w.timer = time.AfterFunc(timeout, func() { cancel(errStalled) })
		w.timer.Stop()
	}
	return w
}

func (w *watchdog) arm() {
	if w.timer != nil {
		w.timer.Reset(w.timeout)
	}
}

func (w *watchdog) disarm() {
	if w.timer != nil {
		w.timer.Stop()
	}
}

// streamFail is base.fail for streams: a stream the watchdog cancelled
// reports DeadlineExceeded, as a unary call that timed out would, rather
// than the Canceled gRPC sees.
func (b base) streamFail(ctx context.Context, w *watchdog, method string, err error) error {
	if errors.Is(context.Cause(ctx), errStalled) {
		err = status.Error(codes.DeadlineExceeded, fmt.Sprintf("the plugin made no progress for %s", w.timeout))
	}
	return b.fail(method, err)
}

// objectReader is the body of GetObject on the host: it pulls chunks from
// the stream as the caller reads.
type objectReader struct {
	chunkReader
	cancel context.CancelCauseFunc
	w      *watchdog
}

func (r *objectReader) Close() error {
	r.w.disarm()
	r.cancel(context.Canceled)
	return nil
}

var _ io.ReadCloser = (*objectReader)(nil)

package framework

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/generated"
)

// streamDIA records the items it is given (with the backup's name, so that
// a call that got another's Backup shows) and is steered by item names.
type streamDIA struct {
	release chan struct{}
	mu      sync.Mutex
	seen    map[string]int
}

func (d *streamDIA) AppliesTo() (api.ResourceSelector, error) { return api.ResourceSelector{}, nil }

func (d *streamDIA) Execute(in *api.DeleteItemActionExecuteInput) error {
	name := in.Item.(*unstructured.Unstructured).GetName()
	switch {
	case name == "fail":
		return Errorf("cannot clean up %s", name)
	case name == "plain-error":
		return errors.New("a plain error")
	case name == "panic":
		panic("boom")
	case name == "hang":
		<-d.release
	case strings.HasPrefix(name, "slow-"):
		time.Sleep(time.Duration(len(name)-4) * time.Millisecond)
	}
	d.mu.Lock()
	d.seen[name+"@"+in.Backup.Name]++
	d.mu.Unlock()
	return nil
}

func (d *streamDIA) count(key string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.seen[key]
}

func streamDIAServer(t testing.TB) (*Server, *streamDIA) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	d := &streamDIA{release: release, seen: map[string]int{}}
	return NewServer().RegisterDeleteItemAction(nameA, instance[api.DeleteItemAction](d)), d
}

// deleteResult is what one Execute returned, in a comparable form.
type deleteResult struct {
	err             string
	code            codes.Code
	stack           []StackFrame // the innermost frame
	deadlineExceeds bool
}

func deleteResultOf(err error) deleteResult {
	if err == nil {
		return deleteResult{}
	}
	r := deleteResult{err: err.Error(), deadlineExceeds: errors.Is(err, context.DeadlineExceeded)}
	var pe *PluginError
	if errors.As(err, &pe) {
		// Below the plugin's own frames the stacks differ: the stream's
		// worker calls the action, not a unary handler.
		r.code, r.stack = pe.Code(), pe.Stack()[:min(1, len(pe.Stack()))]
	}
	return r
}

// deleteExecutor makes one Execute call of plugin name, over the stream
// unless unary.
func deleteExecutor(t *testing.T, c *host, name string, timeout time.Duration, unary bool) func(item string) deleteResult {
	t.Helper()
	d := dispense(t, c, api.KindDeleteItemAction)
	backup := testBackup()
	return func(item string) deleteResult {
		a := must[api.DeleteItemAction](t)(DeleteItemActionClient(d, name, timeout))
		if unary {
			a.(*deleteItemActionClient).streams = nil
		}
		return deleteResultOf(a.Execute(&api.DeleteItemActionExecuteInput{Item: testItem(item), Backup: backup}))
	}
}

// TestDeleteStreamMatchesUnary makes many calls at once over the stream and
// checks each against the same call made unary: the host must not be able
// to tell them apart, errors (text, code, stack) included.
func TestDeleteStreamMatchesUnary(t *testing.T) {
	var unary unaryExecutes
	s, dia := streamDIAServer(t)
	c := connect(t, s, unary.option())
	streamed, unaryCall := deleteExecutor(t, c, nameA, time.Minute, false), deleteExecutor(t, c, nameA, time.Minute, true)

	items := []string{"fail", "plain-error", "panic"}
	for i := range 500 {
		items = append(items, fmt.Sprintf("cm-%03d", i))
		if i%10 == 0 {
			// Results come back out of order.
			items = append(items, "slow-"+strings.Repeat("x", i%7))
		}
	}
	got := make([]deleteResult, len(items))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 128)
	for i, item := range items {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			got[i] = streamed(item)
		})
	}
	wg.Wait()
	if n := unary.n.Load(); n != 0 {
		t.Fatalf("%d unary Execute calls; the stream should carry them all", n)
	}
	for i, item := range items {
		if want := unaryCall(item); fmt.Sprint(got[i]) != fmt.Sprint(want) {
			t.Errorf("%s:\nstream %+v\nunary  %+v", item, got[i], want)
		}
	}
	// Every item reached the action once per way, with the Backup.
	if n := dia.count("cm-123@" + testBackup().Name); n != 2 {
		t.Errorf("cm-123 was passed %d times, want 2 (stream and unary)", n)
	}
	// Spot checks of what the comparison above takes for granted.
	if r := streamed("fail"); r.code != codes.Unknown || len(r.stack) != 1 ||
		!regexpMatch(`^DeleteItemAction example\.io/a: Execute: cannot clean up fail \(at delete_item_action_stream_test\.go:\d+\)$`, r.err) {
		t.Errorf("fail: %+v", r)
	}
	if r := streamed("plain-error"); r.code != codes.Unknown ||
		!regexpMatch(`^DeleteItemAction example\.io/a: Execute: a plain error \(at delete_item_action_stream_test\.go:\d+\)$`, r.err) {
		t.Errorf("plain-error: %+v", r)
	}
	if r := streamed("panic"); r.code != codes.Aborted ||
		!regexpMatch(`^DeleteItemAction example\.io/a: Execute: panic: boom \(at delete_item_action_stream_test\.go:\d+\)$`, r.err) {
		t.Errorf("panic: %+v", r)
	}
	if r, w := deleteExecutor(t, c, "example.io/nope", time.Minute, false)("cm"), deleteExecutor(t, c, "example.io/nope", time.Minute, true)("cm"); r.code != codes.NotFound ||
		!strings.Contains(r.err, `"example.io/nope"`) || fmt.Sprint(r) != fmt.Sprint(w) {
		t.Errorf("unknown plugin: stream %+v, unary %+v", r, w)
	}
	if n := unary.n.Load(); n != int64(len(items))+1 {
		t.Errorf("%d unary Execute calls, want %d (the unary half only)", n, len(items)+1)
	}
	a := must[api.DeleteItemAction](t)(DeleteItemActionClient(dispense(t, c, api.KindDeleteItemAction), nameA, time.Minute))
	if !a.(*deleteItemActionClient).Streaming() {
		t.Error("Streaming() is false after the process answered on the stream")
	}
}

// TestDeleteStreamFallsBackToUnary: a plugin process built with Velero's
// SDK serves no stream; its calls go unary, with the same results, and the
// process is not asked for the stream again.
func TestDeleteStreamFallsBackToUnary(t *testing.T) {
	s, dia := streamDIAServer(t)
	s.log = slog.New(slog.DiscardHandler)
	var unary unaryExecutes
	var asked atomic.Int64
	c := connectGRPC(t, func(srv *grpc.Server) {
		// Velero's service only, as Velero's SDK registers it.
		generated.RegisterDeleteItemActionServer(srv, &deleteItemActionServer{m: s.muxes[api.KindDeleteItemAction]})
	}, unary.option(), grpc.UnknownServiceHandler(func(any, grpc.ServerStream) error {
		asked.Add(1)
		return status.Error(codes.Unimplemented, "unknown service")
	}))
	execute := deleteExecutor(t, c, nameA, time.Minute, false)
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			if r := execute(fmt.Sprintf("cm-%d", i)); r.err != "" {
				t.Errorf("cm-%d: %+v", i, r)
			}
		})
	}
	wg.Wait()
	if r := execute("fail"); r.code != codes.Unknown ||
		!regexpMatch(`^DeleteItemAction example\.io/a: Execute: cannot clean up fail \(at delete_item_action_stream_test\.go:\d+\)$`, r.err) {
		t.Errorf("fail: %+v", r)
	}
	if n := unary.n.Load(); n != 41 {
		t.Errorf("%d unary Execute calls, want 41", n)
	}
	if n := dia.count("cm-7@" + testBackup().Name); n != 1 {
		t.Errorf("cm-7 was passed %d times, want 1", n)
	}
	if n := asked.Load(); n < 1 || n > 40 {
		t.Errorf("the stream was asked for %d times", n)
	}
	before := asked.Load()
	if r := execute("cm-last"); r.err != "" {
		t.Errorf("cm-last: %+v", r)
	}
	if n := asked.Load(); n != before {
		t.Error("the stream was asked for again after the process refused it")
	}
	a := must[api.DeleteItemAction](t)(DeleteItemActionClient(dispense(t, c, api.KindDeleteItemAction), nameA, time.Minute))
	if a.(*deleteItemActionClient).Streaming() {
		t.Error("Streaming() is true for a process without the stream")
	}
}

// TestDeleteStreamTimeout: a call that hangs fails alone, as a unary call
// would, while the calls around it complete and the stream goes on serving.
func TestDeleteStreamTimeout(t *testing.T) {
	s, _ := streamDIAServer(t)
	c := connect(t, s)
	execute := deleteExecutor(t, c, nameA, 300*time.Millisecond, false)
	var wg sync.WaitGroup
	var hung deleteResult
	wg.Go(func() { hung = execute("hang") })
	results := make([]deleteResult, 100)
	for i := range results {
		wg.Go(func() { results[i] = execute(fmt.Sprintf("cm-%d", i)) })
	}
	start := time.Now()
	wg.Wait()
	if hung.code != codes.DeadlineExceeded || !hung.deadlineExceeds ||
		hung.err != "DeleteItemAction example.io/a: Execute: context deadline exceeded" {
		t.Errorf("hung call: %+v", hung)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the calls took %v", d)
	}
	for i, r := range results {
		if r.err != "" {
			t.Errorf("cm-%d: %+v", i, r)
		}
	}
	if r := execute("after"); r.err != "" {
		t.Errorf("after the timeout: %+v", r)
	}
}

// TestDeleteStreamBroken: when the plugin's side goes away with calls in
// flight, each fails at once as a unary call to a dead process would
// (Unavailable, so the host restarts the process), none hangs, and the
// process is not taken for one without the stream.
func TestDeleteStreamBroken(t *testing.T) {
	s, _ := streamDIAServer(t)
	s.log = slog.New(slog.DiscardHandler)
	var unary unaryExecutes
	var srv *grpc.Server
	var streams atomic.Int64
	c := connectGRPC(t, func(g *grpc.Server) {
		srv = g
		for _, p := range s.PluginSet() {
			if err := p.(plugin.GRPCPlugin).GRPCServer(nil, g); err != nil {
				t.Fatal(err)
			}
		}
	}, unary.option(), grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		streams.Add(1)
		return handler(srv, ss)
	}))
	execute := deleteExecutor(t, c, nameA, time.Minute, false)
	if r := execute("first"); r.err != "" {
		t.Fatalf("first: %+v", r)
	}
	results := make(chan deleteResult, 20)
	for range 20 {
		go func() { results <- execute("hang") }()
	}
	time.Sleep(200 * time.Millisecond)
	// The plugin side ends every stream, as a process that dies does.
	go srv.Stop()
	for range 20 {
		select {
		case r := <-results:
			if r.code != codes.Unavailable {
				t.Errorf("a call in flight on a broken stream: %+v, want Unavailable", r)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a call in flight on a broken stream hung")
		}
	}
	if n := unary.n.Load(); n != 0 {
		t.Errorf("%d unary calls; a broken stream is not a process without streams", n)
	}
	if n := streams.Load(); n != 1 {
		t.Errorf("%d streams opened, want 1", n)
	}
	if r := execute("after"); r.code != codes.Unavailable {
		t.Errorf("a call after the break: %+v, want Unavailable", r)
	}
	if cs := dispense(t, c, api.KindDeleteItemAction).(*dispenser).deleteStreams; cs.unsupported {
		t.Error("a broken stream marked the process as one without streams")
	}
}

package framework

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/generated"
	biav2 "github.com/lifeboat-io/lifeboat/pkg/plugin/generated/backupitemaction/v2"
)

// streamBIA annotates each item with the backup's and the item's name and
// names one additional item per item, so that a result that reached the
// wrong call shows. Some item names steer it instead.
type streamBIA struct {
	// release ends the calls for "hang".
	release chan struct{}
}

func (b *streamBIA) AppliesTo() (api.ResourceSelector, error) { return api.ResourceSelector{}, nil }

func (b *streamBIA) Execute(item runtime.Unstructured, backup *v1.Backup) (runtime.Unstructured, []api.ResourceIdentifier, error) {
	u := item.(*unstructured.Unstructured)
	switch name := u.GetName(); {
	case name == "unchanged":
		return nil, nil, nil
	case name == "fail":
		return nil, nil, Errorf("cannot annotate %s", name)
	case name == "panic":
		panic("boom")
	case name == "hang":
		<-b.release
	case strings.HasPrefix(name, "slow-"):
		time.Sleep(time.Duration(len(name)-4) * time.Millisecond)
	}
	annotations := u.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations["stream/backup"] = backup.Name
	annotations["stream/item"] = u.GetName()
	u.SetAnnotations(annotations)
	return u, []api.ResourceIdentifier{ref("secrets", u.GetNamespace(), u.GetName())}, nil
}

// streamBIAV2 is streamBIA with an operation per item.
type streamBIAV2 struct{ streamBIA }

func (b *streamBIAV2) Name() string { return "ignored" }

func (b *streamBIAV2) Execute(item runtime.Unstructured, backup *v1.Backup) (runtime.Unstructured, []api.ResourceIdentifier, string, []api.ResourceIdentifier, error) {
	name := item.(*unstructured.Unstructured).GetName()
	updated, additional, err := b.streamBIA.Execute(item, backup)
	if err != nil || updated == nil {
		return updated, additional, "", nil, err
	}
	return updated, additional, name + "-op", []api.ResourceIdentifier{ref("volumesnapshots", "default", name)}, nil
}

func (b *streamBIAV2) Progress(string, *v1.Backup) (api.OperationProgress, error) {
	return api.OperationProgress{}, nil
}

func (b *streamBIAV2) Cancel(string, *v1.Backup) error { return nil }

// unaryExecutes counts the unary Execute calls a server answers.
type unaryExecutes struct{ n atomic.Int64 }

func (c *unaryExecutes) option() grpc.ServerOption {
	return grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if strings.HasSuffix(info.FullMethod, "/Execute") {
			c.n.Add(1)
		}
		return handler(ctx, req)
	})
}

// streamTestServer serves streamBIA as v1 plugin nameA and streamBIAV2 as
// v2 plugin nameB. Hung calls end with the test.
func streamTestServer(t testing.TB) *Server {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	return NewServer().
		RegisterBackupItemAction(nameA, instance[api.BackupItemAction](&streamBIA{release: release})).
		RegisterBackupItemActionV2(nameB, instance[api.BackupItemActionV2](&streamBIAV2{streamBIA{release: release}}))
}

// executeResult is what one Execute returned, in a comparable form.
type executeResult struct {
	item            string
	additional      []api.ResourceIdentifier
	operationID     string
	postOperation   []api.ResourceIdentifier
	err             string
	code            codes.Code
	stack           []StackFrame // the innermost frame
	deadlineExceeds bool
}

func resultOf(t *testing.T, updated runtime.Unstructured, additional []api.ResourceIdentifier, opID string, post []api.ResourceIdentifier, err error) executeResult {
	t.Helper()
	if err != nil {
		r := executeResult{err: err.Error(), deadlineExceeds: errors.Is(err, context.DeadlineExceeded)}
		var pe *PluginError
		if errors.As(err, &pe) {
			// Below the plugin's own frames the stacks differ: the
			// stream's worker calls the action, not a unary handler.
			r.code, r.stack = pe.Code(), pe.Stack()[:min(1, len(pe.Stack()))]
		}
		return r
	}
	data, jerr := itemJSON(updated)
	if jerr != nil {
		t.Fatal(jerr)
	}
	return executeResult{item: string(data), additional: additional, operationID: opID, postOperation: post}
}

func itemJSON(item runtime.Unstructured) ([]byte, error) {
	return encodeItem("item", item)
}

// executors returns, for each way a host reaches a BackupItemAction (v1,
// v2, v1 through the v2 kind), a function making one Execute call, over
// the stream unless unary.
func executors(t *testing.T, c *host, timeout time.Duration, unary bool) map[string]func(item string) executeResult {
	t.Helper()
	noStream := func(client any) {
		if !unary {
			return
		}
		switch c := client.(type) {
		case *backupItemActionClient:
			c.streams = nil
		case *backupItemActionV2Client:
			c.streams = nil
		case *adaptedBackupItemAction:
			c.v1.(*backupItemActionClient).streams = nil
		}
	}
	v1d, v2d := dispense(t, c, api.KindBackupItemAction), dispense(t, c, api.KindBackupItemActionV2)
	return map[string]func(string) executeResult{
		"v1": func(item string) executeResult {
			a := must[api.BackupItemAction](t)(BackupItemActionClient(v1d, nameA, timeout))
			noStream(a)
			updated, extra, err := a.Execute(testItem(item), testBackup())
			return resultOf(t, updated, extra, "", nil, err)
		},
		"v2": func(item string) executeResult {
			a := must[api.BackupItemActionV2](t)(BackupItemActionV2Client(v2d, nameB, timeout))
			noStream(a)
			updated, extra, opID, post, err := a.Execute(testItem(item), testBackup())
			return resultOf(t, updated, extra, opID, post, err)
		},
		"v1 as v2": func(item string) executeResult {
			a := must[api.BackupItemActionV2](t)(BackupItemActionV2Client(v1d, nameA, timeout))
			noStream(a)
			updated, extra, opID, post, err := a.Execute(testItem(item), testBackup())
			return resultOf(t, updated, extra, opID, post, err)
		},
	}
}

// TestExecuteStreamMatchesUnary runs many calls at once over the stream and
// checks each against the same call made unary: results, errors and all.
func TestExecuteStreamMatchesUnary(t *testing.T) {
	var unary unaryExecutes
	c := connect(t, streamTestServer(t), unary.option())
	streamed, unaryCalls := executors(t, c, time.Minute, false), executors(t, c, time.Minute, true)

	items := []string{"unchanged", "fail", "panic"}
	for i := range 300 {
		items = append(items, fmt.Sprintf("cm-%03d", i))
		if i%10 == 0 {
			// Results come back out of order.
			items = append(items, "slow-"+strings.Repeat("x", i%7))
		}
	}
	for way, execute := range streamed {
		t.Run(way, func(t *testing.T) {
			got := make([]executeResult, len(items))
			var wg sync.WaitGroup
			sem := make(chan struct{}, 64)
			for i, item := range items {
				sem <- struct{}{}
				wg.Go(func() {
					defer func() { <-sem }()
					got[i] = execute(item)
				})
			}
			wg.Wait()
			if n := unary.n.Load(); n != 0 {
				t.Fatalf("%d unary Execute calls; the stream should carry them all", n)
			}
			for i, item := range items {
				want := unaryCalls[way](item)
				if !reflect.DeepEqual(got[i], want) {
					t.Errorf("%s:\nstream %+v\nunary  %+v", item, got[i], want)
				}
			}
			unary.n.Store(0)
		})
	}
	// Spot checks of what the comparison above takes for granted.
	if r := streamed["v2"]("cm-007"); r.operationID != "cm-007-op" || !strings.Contains(r.item, `"stream/item":"cm-007"`) {
		t.Errorf("v2 cm-007: %+v", r)
	}
	if r := streamed["v1"]("fail"); r.code != codes.Unknown ||
		!regexpMatch(`^BackupItemAction example\.io/a: Execute: cannot annotate fail \(at backup_item_action_stream_test\.go:\d+\)$`, r.err) {
		t.Errorf("v1 fail: %+v", r)
	}
	if r := streamed["v2"]("panic"); r.code != codes.Aborted ||
		!regexpMatch(`^BackupItemActionV2 example\.io/b: Execute: panic: boom \(at backup_item_action_stream_test\.go:\d+\)$`, r.err) {
		t.Errorf("v2 panic: %+v", r)
	}
}

func TestExecuteStreamUnknownPlugin(t *testing.T) {
	c := connect(t, streamTestServer(t))
	d := dispense(t, c, api.KindBackupItemAction)
	a := must[api.BackupItemAction](t)(BackupItemActionClient(d, "example.io/nope", time.Minute))
	_, _, err := a.Execute(testItem("cm"), testBackup())
	if pe := pluginError(t, err); pe.Code() != codes.NotFound || !strings.Contains(err.Error(), `"example.io/nope"`) {
		t.Errorf("code %v, error %q; want NotFound naming the plugin", pe.Code(), err)
	}
	if es := d.(*dispenser).streams; es.unsupported || es.cur == nil {
		t.Errorf("the call did not go over the stream (unsupported %v)", es.unsupported)
	}
}

// TestExecuteStreamTimeout: a call that hangs fails alone, as a unary call
// would, while the calls around it complete.
func TestExecuteStreamTimeout(t *testing.T) {
	c := connect(t, streamTestServer(t))
	execute := executors(t, c, 300*time.Millisecond, false)["v1"]
	var wg sync.WaitGroup
	var hung executeResult
	wg.Go(func() { hung = execute("hang") })
	results := make([]executeResult, 50)
	for i := range results {
		wg.Go(func() { results[i] = execute(fmt.Sprintf("cm-%d", i)) })
	}
	start := time.Now()
	wg.Wait()
	if hung.code != codes.DeadlineExceeded || !hung.deadlineExceeds ||
		hung.err != "BackupItemAction example.io/a: Execute: context deadline exceeded" {
		t.Errorf("hung call: %+v", hung)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the calls took %v", d)
	}
	for i, r := range results {
		if r.err != "" || !strings.Contains(r.item, fmt.Sprintf(`"stream/item":"cm-%d"`, i)) {
			t.Errorf("cm-%d: %+v", i, r)
		}
	}
	// The stream still serves.
	if r := execute("after"); r.err != "" {
		t.Errorf("after the timeout: %+v", r)
	}
}

// TestExecuteFallsBackToUnary: a plugin process without Lifeboat's stream
// (built with Velero's SDK or an older Lifeboat SDK) gets unary calls, and
// is asked for the stream no more than the calls that raced to open it.
func TestExecuteFallsBackToUnary(t *testing.T) {
	s := streamTestServer(t)
	s.log = slog.New(slog.DiscardHandler)
	var unary unaryExecutes
	var asked atomic.Int64
	c := connectGRPC(t, func(srv *grpc.Server) {
		// Velero's services only, as Velero's SDK registers them.
		generated.RegisterBackupItemActionServer(srv, &backupItemActionServer{m: s.muxes[api.KindBackupItemAction]})
		biav2.RegisterBackupItemActionServer(srv, &backupItemActionV2Server{m: s.muxes[api.KindBackupItemActionV2]})
	}, unary.option(), grpc.UnknownServiceHandler(func(any, grpc.ServerStream) error {
		asked.Add(1)
		return status.Error(codes.Unimplemented, "unknown service")
	}))
	for way, execute := range executors(t, c, time.Minute, false) {
		t.Run(way, func(t *testing.T) {
			unary.n.Store(0)
			var wg sync.WaitGroup
			for i := range 40 {
				wg.Go(func() {
					if r := execute(fmt.Sprintf("cm-%d", i)); r.err != "" || !strings.Contains(r.item, fmt.Sprintf(`"stream/item":"cm-%d"`, i)) {
						t.Errorf("cm-%d: %+v", i, r)
					}
				})
			}
			wg.Wait()
			if r := execute("fail"); r.code != codes.Unknown || !strings.Contains(r.err, "Execute: cannot annotate fail (at backup_item_action_stream_test.go:") {
				t.Errorf("fail: %+v", r)
			}
			if n := unary.n.Load(); n != 41 {
				t.Errorf("%d unary Execute calls, want 41", n)
			}
		})
	}
	if n := asked.Load(); n < 1 || n > 40 {
		t.Errorf("the stream was asked for %d times", n)
	}
	// Once known, the process is not asked again.
	before := asked.Load()
	if r := executors(t, c, time.Minute, false)["v1"]("cm-last"); r.err != "" {
		t.Errorf("cm-last: %+v", r)
	}
	if n := asked.Load(); n != before {
		t.Errorf("the stream was asked for again after the process refused it")
	}
}

// TestExecuteStreamLargeItemsGoUnary: an item too large to share a message
// takes the unary call; its result is the same.
func TestExecuteStreamLargeItemsGoUnary(t *testing.T) {
	var unary unaryExecutes
	c := connect(t, streamTestServer(t), unary.option())
	d := dispense(t, c, api.KindBackupItemAction)
	a := must[api.BackupItemAction](t)(BackupItemActionClient(d, nameA, time.Minute))
	item := testItem("big")
	item.Object["data"] = map[string]any{"blob": strings.Repeat("x", maxStreamItemBytes)}
	updated, _, err := a.Execute(item, testBackup())
	if err != nil || annotationsOf(t, updated)["stream/item"] != "big" {
		t.Fatalf("Execute = %v", err)
	}
	if unary.n.Load() != 1 {
		t.Errorf("%d unary Execute calls, want 1", unary.n.Load())
	}
}

// TestBatcher: what is queued goes in as few messages as batchBytes
// allows, in order, and nothing is lost at a message's edge.
func TestBatcher(t *testing.T) {
	in := make(chan int, 100)
	sizes := []int{10, batchBytes - 20, 5, 6, batchBytes + 1, 1, 2}
	for i := range sizes {
		in <- i
	}
	close(in)
	b := batcher[int]{size: func(i int) int { return sizes[i] }}
	var got [][]int
	for batch := b.gather(in, nil); batch != nil; batch = b.gather(in, nil) {
		got = append(got, append([]int(nil), batch...))
	}
	want := [][]int{{0, 1, 2}, {3}, {4}, {5, 6}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("batches %v, want %v", got, want)
	}
}

// BenchmarkBackupItemActionExecute is one Execute call per item from 64
// callers at once, as the backup engine makes them, over the stream and
// unary (in process, so the JSON on both sides and the gRPC work are
// measured without a second process's scheduling).
func BenchmarkBackupItemActionExecute(b *testing.B) {
	c := connect(b, streamTestServer(b))
	d := dispense(b, c, api.KindBackupItemAction)
	item := testItem("cm")
	item.Object["data"] = map[string]any{"config": strings.Repeat("key=value ", 100)}
	data, err := itemJSON(item)
	if err != nil {
		b.Fatal(err)
	}
	backup := testBackup()
	for _, way := range []string{"stream", "unary"} {
		b.Run(way, func(b *testing.B) {
			b.SetParallelism(32) // 64 callers on 2 cores
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					a := must[api.BackupItemAction](b)(BackupItemActionClient(d, nameA, time.Minute))
					if way == "unary" {
						a.(*backupItemActionClient).streams = nil
					}
					if _, _, err := a.Execute(api.NewRawItem(data), backup); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

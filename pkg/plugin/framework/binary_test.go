package framework

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"

	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

// syncBuffer collects the plugin's log as go-plugin forwards it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestOutOfProcess builds testdata/plugin and runs it the way a host does:
// a separate process, started with go-plugin and flags it does not know.
func TestOutOfProcess(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool to build the plugin with")
	}
	bin := filepath.Join(t.TempDir(), "lifeboat-test-plugin")
	build := exec.Command(goTool, "build", "-o", bin, "./testdata/plugin")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the plugin: %v\n%s", err, out)
	}

	start := func(t *testing.T) (plugin.ClientProtocol, *syncBuffer) {
		var logs syncBuffer
		client := plugin.NewClient(&plugin.ClientConfig{
			HandshakeConfig:  Handshake,
			Plugins:          ClientPluginSet(),
			AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
			Cmd: exec.Command(bin, "--some-server-flag=x", "--uploader-type", "kopia", "-v",
				"--log-level", "debug", "--features", "EnableCSI,EnableAPIGroupVersions"),
			Logger:       hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Debug}),
			StartTimeout: time.Minute,
		})
		t.Cleanup(client.Kill)
		rpc, err := client.Client()
		if err != nil {
			t.Fatalf("starting the plugin: %v\n%s", err, logs.String())
		}
		return rpc, &logs
	}
	dispenseKind := func(t *testing.T, rpc plugin.ClientProtocol, kind api.Kind) any {
		raw, err := rpc.Dispense(string(kind))
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}

	rpc, logs := start(t)
	ids, err := PluginListerClient(dispenseKind(t, rpc, api.KindPluginLister)).ListPlugins(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := []PluginIdentifier{
		{Command: bin, Kind: api.KindBackupItemAction, Name: "example.io/annotate"},
		{Command: bin, Kind: api.KindDeleteItemAction, Name: "example.io/cleanup"},
	}
	if !reflect.DeepEqual(ids, want) {
		t.Errorf("ListPlugins = %+v, want %+v", ids, want)
	}

	dia := must[api.DeleteItemAction](t)(DeleteItemActionClient(dispenseKind(t, rpc, api.KindDeleteItemAction), "example.io/cleanup", 30*time.Second))
	sel, err := dia.AppliesTo()
	if err != nil || !reflect.DeepEqual(sel.IncludedResources, []string{"configmaps"}) {
		t.Errorf("AppliesTo = %+v, %v", sel, err)
	}
	if err := execute(dia, "cm"); err != nil {
		t.Errorf("Execute: %v", err)
	}
	// A plugin built with this SDK serves the stream, and the call took it.
	if !dia.(*deleteItemActionClient).Streaming() {
		t.Error("the DeleteItemAction call did not go over Lifeboat's stream")
	}
	err = execute(dia, "fail")
	if pe := pluginError(t, err); pe.Code() != codes.Unknown ||
		!regexpMatch(`^DeleteItemAction example\.io/cleanup: Execute: cannot clean up fail of backup nightly \(at main\.go:\d+\)$`, err.Error()) {
		t.Errorf("Execute(fail) = %q", err)
	}
	if err := execute(dia, "features"); err == nil || !strings.Contains(err.Error(), "features: EnableCSI,EnableAPIGroupVersions") {
		t.Errorf("the plugin did not get --features: %v", err)
	}

	bia := must[api.BackupItemActionV2](t)(BackupItemActionV2Client(dispenseKind(t, rpc, api.KindBackupItemAction), "example.io/annotate", 30*time.Second))
	updated, _, _, _, err := bia.Execute(testItem("cm"), testBackup())
	if err != nil || annotationsOf(t, updated)["example.io/backup"] != "nightly" {
		t.Errorf("BackupItemAction adapted to v2: %v, %v", updated, err)
	}

	// --log-level debug reached the plugin, and its lines reach the host
	// structured (go-plugin re-logs them with their attributes).
	waitFor(t, func() bool { return strings.Contains(logs.String(), "cleaning up") }, "the plugin's log line")
	if l := logs.String(); !strings.Contains(l, "[INFO]  lifeboat-test-plugin: cleaning up:") || !strings.Contains(l, "item=cm") ||
		!strings.Contains(l, "[DEBUG] lifeboat-test-plugin: serving plugins:") {
		t.Errorf("plugin log as the host got it:\n%s", l)
	}

	// A process that dies mid-call is Unavailable to the host.
	err = execute(dia, "exit")
	if pe := pluginError(t, err); pe.Code() != codes.Unavailable {
		t.Errorf("Execute in a process that exits = %v (code %v), want Unavailable", err, pe.Code())
	}

	t.Run("stream", func(t *testing.T) {
		rpc, _ := start(t)
		d := dispenseKind(t, rpc, api.KindBackupItemAction)
		bia := must[api.BackupItemAction](t)(BackupItemActionClient(d, "example.io/annotate", 500*time.Millisecond))
		var wg sync.WaitGroup
		errs := make([]error, 200)
		var hung error
		wg.Go(func() { _, _, hung = bia.Execute(testItem("hang"), testBackup()) })
		for i := range errs {
			wg.Go(func() {
				name := fmt.Sprintf("cm-%d", i)
				updated, _, err := bia.Execute(testItem(name), testBackup())
				if err == nil && annotationsOf(t, updated)["example.io/item"] != name {
					err = fmt.Errorf("%s came back as %v", name, updated)
				}
				errs[i] = err
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Error(err)
		}
		if pe := pluginError(t, hung); pe.Code() != codes.DeadlineExceeded {
			t.Errorf("a call that hangs = %v, want DeadlineExceeded", hung)
		}
		_, _, err := bia.Execute(testItem("fail"), testBackup())
		if pe := pluginError(t, err); pe.Code() != codes.Unknown ||
			!regexpMatch(`^BackupItemAction example\.io/annotate: Execute: cannot annotate fail of backup nightly \(at main\.go:\d+\)$`, err.Error()) {
			t.Errorf("Execute(fail) = %q", err)
		}
		if es := d.(*dispenser).streams; es.unsupported || es.cur == nil {
			t.Errorf("the calls did not go over the stream (unsupported %v)", es.unsupported)
		}

		// A process that dies fails the calls in flight as a dead process
		// fails unary calls, so that a host restarts it and tries again.
		errs = make([]error, 20)
		for i := range errs {
			wg.Go(func() {
				name := fmt.Sprintf("cm-%d", i)
				if i == 10 {
					name = "exit"
				}
				_, _, errs[i] = bia.Execute(testItem(name), testBackup())
			})
		}
		wg.Wait()
		if pe := pluginError(t, errs[10]); pe.Code() != codes.Unavailable {
			t.Errorf("Execute in a process that exits = %v (code %v), want Unavailable", errs[10], pe.Code())
		}
		for i, err := range errs {
			if err == nil {
				continue
			}
			if pe := pluginError(t, err); pe.Code() != codes.Unavailable && pe.Code() != codes.Canceled {
				t.Errorf("call %d in a process that exits = %v, want Unavailable", i, err)
			}
		}
	})
}

func regexpMatch(pattern, s string) bool {
	return regexp.MustCompile(pattern).MatchString(s)
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10s for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

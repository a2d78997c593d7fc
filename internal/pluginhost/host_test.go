package pluginhost

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

// built is testdata/plugin, compiled once for all tests.
var built struct {
	once sync.Once
	dir  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// buildPlugin puts testdata/plugin at dir/name, a file of its own (tests
// count processes by their binary).
func buildPlugin(t *testing.T, dir, name string) string {
	t.Helper()
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "pluginhost-test-"); built.err != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", filepath.Join(built.dir, "plugin"), "./testdata/plugin")
		if b, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("%w\n%s", err, b)
		}
	})
	if built.err != nil {
		t.Fatalf("building test plugin: %v", built.err)
	}
	data, err := os.ReadFile(filepath.Join(built.dir, "plugin"))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return out
}

func item(name string) *api.DeleteItemActionExecuteInput {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetName(name)
	return &api.DeleteItemActionExecuteInput{Item: u, Backup: &v1.Backup{}}
}

func calls(t *testing.T, state, name string) int {
	data, err := os.ReadFile(filepath.Join(state, name))
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return len(data)
}

func TestHost(t *testing.T) {
	dir := t.TempDir()
	state := t.TempDir()
	t.Setenv("TEST_STATE_DIR", state)
	bin := buildPlugin(t, filepath.Join(dir, "nested"), "steer")
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("not a plugin"), 0o644); err != nil {
		t.Fatal(err)
	}

	h := New(Options{Dir: dir, Timeouts: map[api.Kind]time.Duration{api.KindDeleteItemAction: 2 * time.Second}})
	defer h.Close()
	if err := h.RegisterBuiltIn(api.KindDeleteItemAction, "lifeboat.io/builtin", func() (any, error) { return builtinDIA{}, nil }); err != nil {
		t.Fatal(err)
	}
	if err := h.Discover(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := h.List()
	var listed []string
	for _, e := range got {
		listed = append(listed, fmt.Sprintf("%s %s %s", e.Kind, e.Name, e.Binary))
	}
	want := []string{
		"DeleteItemAction lifeboat.io/builtin " + BuiltIn,
		"BackupItemAction hosttest.io/steer " + bin,
		"BackupItemActionV2 hosttest.io/steer-v2 " + bin,
		"DeleteItemAction hosttest.io/steer " + bin,
		"ObjectStore hosttest.io/store " + bin,
		"VolumeSnapshotter hosttest.io/steer " + bin,
	}
	if strings.Join(listed, "\n") != strings.Join(want, "\n") {
		t.Fatalf("List():\n%s\nwant:\n%s", strings.Join(listed, "\n"), strings.Join(want, "\n"))
	}

	dia, err := h.DeleteItemAction("hosttest.io/steer")
	if err != nil {
		t.Fatal(err)
	}
	if err := dia.Execute(item("ok")); err != nil {
		t.Fatalf("ok item: %v", err)
	}
	// The plugin is built with Lifeboat's SDK: the call went over its stream.
	if s, ok := dia.(interface{ Streaming() bool }); !ok || !s.Streaming() {
		t.Error("the DeleteItemAction's calls do not go over Lifeboat's stream")
	}

	t.Run("a crash is retried once in a new process", func(t *testing.T) {
		if err := dia.Execute(item("crash-once")); err != nil {
			t.Fatalf("crash-once: %v", err)
		}
		if n := calls(t, state, "crash-once"); n != 2 {
			t.Errorf("crash-once called %d times, want 2", n)
		}
		if err := dia.Execute(item("crash-always")); err == nil || !strings.Contains(err.Error(), "crashed twice") {
			t.Errorf("crash-always: %v", err)
		}
	})

	t.Run("a hung plugin times out and is restarted", func(t *testing.T) {
		start := time.Now()
		err := dia.Execute(item("hang"))
		if err == nil || !strings.Contains(err.Error(), "did not answer within 2s") {
			t.Fatalf("hang: %v", err)
		}
		if time.Since(start) > 10*time.Second {
			t.Errorf("hang took %s", time.Since(start))
		}
		if err := dia.Execute(item("ok-after-hang")); err != nil {
			t.Errorf("call after a hang: %v", err)
		}
	})

	t.Run("a plugin's error names it and is not retried", func(t *testing.T) {
		err := dia.Execute(item("fail"))
		if err == nil || !strings.Contains(err.Error(), "hosttest.io/steer") || !strings.Contains(err.Error(), "refusing fail") {
			t.Errorf("fail: %v", err)
		}
		if n := calls(t, state, "fail"); n != 1 {
			t.Errorf("fail called %d times, want 1", n)
		}
	})

	if _, err := h.DeleteItemAction("nobody.io/missing"); !IsNotFound(err) {
		t.Errorf("missing plugin: %v", err)
	}
	if b, err := h.DeleteItemAction("lifeboat.io/builtin"); err != nil || b.Execute(item("x")) != nil {
		t.Errorf("built-in: %v", err)
	}
}

// TestCallsInFlightOnACrashedProcess: every call in flight on a process
// that dies fails at once (many at a time, on the BackupItemAction stream);
// each is tried again on one new process, which none of them kills again.
func TestCallsInFlightOnACrashedProcess(t *testing.T) {
	dir := t.TempDir()
	state := t.TempDir()
	t.Setenv("TEST_STATE_DIR", state)
	buildPlugin(t, dir, "steer")
	h := New(Options{Dir: dir, Timeouts: map[api.Kind]time.Duration{api.KindBackupItemAction: 3 * time.Second}})
	defer h.Close()
	if err := h.Discover(context.Background()); err != nil {
		t.Fatal(err)
	}
	bia, err := h.BackupItemAction("hosttest.io/steer")
	if err != nil {
		t.Fatal(err)
	}
	for round, special := range []string{"crash-once", "hang"} {
		errs := make([]error, 40)
		var wg sync.WaitGroup
		for i := range errs {
			wg.Go(func() {
				name := fmt.Sprintf("ok-%d-%d", round, i)
				if i == 20 {
					name = special
				}
				_, _, errs[i] = bia.Execute(item(name).Item, &v1.Backup{})
			})
		}
		wg.Wait()
		for i, err := range errs {
			switch {
			case i == 20 && special == "hang":
				if err == nil || !strings.Contains(err.Error(), "did not answer within 3s") {
					t.Errorf("hang: %v", err)
				}
			case err != nil:
				t.Errorf("%s round, call %d: %v", special, i, err)
			}
		}
	}
	if n := calls(t, state, "crash-once"); n != 2 {
		t.Errorf("crash-once called %d times, want 2", n)
	}
}

func TestDuplicatePluginsNameBothBinaries(t *testing.T) {
	dir := t.TempDir()
	a := buildPlugin(t, filepath.Join(dir, "a"), "steer")
	b := filepath.Join(dir, "b", "steer-copy")
	if err := os.MkdirAll(filepath.Dir(b), 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b, data, 0o755); err != nil {
		t.Fatal(err)
	}
	h := New(Options{Dir: dir})
	defer h.Close()
	err = h.Discover(context.Background())
	if err == nil || !strings.Contains(err.Error(), a) || !strings.Contains(err.Error(), b) {
		t.Fatalf("Discover = %v, want an error naming both binaries", err)
	}
}

type builtinDIA struct{}

func (builtinDIA) AppliesTo() (api.ResourceSelector, error)        { return api.ResourceSelector{}, nil }
func (builtinDIA) Execute(*api.DeleteItemActionExecuteInput) error { return nil }

package pluginhost

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

// startHost builds the test plugin into a fresh plugin dir and discovers
// it, with state files under the returned dir.
func startHost(t *testing.T, opts Options) (*Host, string, string) {
	t.Helper()
	dir := t.TempDir()
	state := t.TempDir()
	t.Setenv("TEST_STATE_DIR", state)
	bin := buildPlugin(t, dir, "steer")
	opts.Dir = dir
	h := New(opts)
	t.Cleanup(h.Close)
	if err := h.Discover(context.Background()); err != nil {
		t.Fatal(err)
	}
	return h, state, bin
}

func openStore(t *testing.T, h *Host, name string) api.ObjectStore {
	t.Helper()
	s, err := h.ObjectStore("hosttest.io/store")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Init(map[string]string{"name": name}); err != nil {
		t.Fatal(err)
	}
	return s
}

// within runs call and fails the test if it has not returned after limit:
// a bounded call must end by itself.
func within(t *testing.T, limit time.Duration, what string, call func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- call() }()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		t.Fatalf("%s still running after %s", what, limit)
		return nil
	}
}

func pid(t *testing.T, s api.ObjectStore) string {
	t.Helper()
	keys, err := s.ListObjects("b", "pid")
	if err != nil || len(keys) != 1 {
		t.Fatalf("asking the plugin for its pid: %v %v", keys, err)
	}
	return keys[0]
}

// children counts the live processes of bin started by this test binary.
func children(t *testing.T, bin string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	self := strconv.Itoa(os.Getpid())
	n := 0
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces, so split after it.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) < 2 || fields[0] == "Z" || fields[1] != self {
			continue
		}
		if exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err == nil && exe == bin {
			n++
		}
	}
	return n
}

// waitChildren waits until bin has want live processes, failing the test
// if that takes longer than limit.
func waitChildren(t *testing.T, bin string, want int, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		got := children(t, bin)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d plugin processes after %s, want %d", got, limit, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestObjectStoreCallsAreBounded: object store calls time out and restart
// a hung plugin like any other kind's, streams included; a stream is bound
// by its progress, not its length.
func TestObjectStoreCallsAreBounded(t *testing.T) {
	if d := New(Options{}).timeout(api.KindObjectStore); d <= 0 {
		t.Errorf("object store calls have no bound by default (%s)", d)
	}
	h, state, _ := startHost(t, Options{Timeouts: map[api.Kind]time.Duration{api.KindObjectStore: 2 * time.Second}})
	s := openStore(t, h, "a")

	t.Run("a hung call times out and the plugin restarts", func(t *testing.T) {
		before := pid(t, s)
		err := within(t, 30*time.Second, "ListObjects of a hung plugin", func() error {
			_, err := s.ListObjects("b", "hang-list")
			return err
		})
		if err == nil || !strings.Contains(err.Error(), "hosttest.io/store") || !strings.Contains(err.Error(), "did not answer within 2s") {
			t.Fatalf("hung ListObjects: %v", err)
		}
		if after := pid(t, s); after == before {
			t.Errorf("the hung process %s still serves calls", before)
		}
		// The new process got the config again.
		if keys, err := s.ListObjects("b", "config"); err != nil || len(keys) != 1 || keys[0] != "a" {
			t.Errorf("after the restart: %v %v", keys, err)
		}
	})

	t.Run("a stalled upload fails and the plugin restarts", func(t *testing.T) {
		before := pid(t, s)
		err := within(t, 30*time.Second, "PutObject to a stalled plugin", func() error {
			return s.PutObject("b", "stall", bytes.NewReader(make([]byte, 64<<20)))
		})
		if err == nil || !strings.Contains(err.Error(), "PutObject") || !strings.Contains(err.Error(), "hosttest.io/store") {
			t.Fatalf("stalled PutObject: %v", err)
		}
		if after := pid(t, s); after == before {
			t.Errorf("the stalled process %s still serves calls", before)
		}
	})

	t.Run("a stalled download fails and the plugin restarts", func(t *testing.T) {
		before := pid(t, s)
		rc, err := s.GetObject("b", "stall")
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		err = within(t, 30*time.Second, "reading a stalled GetObject", func() error {
			_, err := io.ReadAll(rc)
			return err
		})
		if err == nil || !strings.Contains(err.Error(), "GetObject") || !strings.Contains(err.Error(), "hosttest.io/store") {
			t.Fatalf("stalled GetObject: %v", err)
		}
		if after := pid(t, s); after == before {
			t.Errorf("the stalled process %s still serves calls", before)
		}
	})

	t.Run("a download closed early ends quietly", func(t *testing.T) {
		before := pid(t, s)
		rc, err := s.GetObject("b", "slow")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(rc, make([]byte, 1<<10)); err != nil {
			t.Fatal(err)
		}
		_ = rc.Close()
		if n, err := rc.Read(make([]byte, 1<<10)); err == nil {
			t.Errorf("Read after Close = %d, nil", n)
		}
		if after := pid(t, s); after != before {
			t.Errorf("closing a download restarted the plugin (%s, then %s)", before, after)
		}
	})

	t.Run("transfers that keep moving are not cut off", func(t *testing.T) {
		start := time.Now()
		rc, err := s.GetObject("b", "slow")
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(rc)
		_ = rc.Close()
		if err != nil || len(data) != 8<<20 {
			t.Fatalf("slow GetObject: %d bytes, %v", len(data), err)
		}
		if took := time.Since(start); took < 2*time.Second {
			t.Fatalf("the slow download took %s, less than the timeout: the test proves nothing", took)
		}

		// A slow producer on the server's side.
		start = time.Now()
		body := &trickle{chunks: 12, every: 250 * time.Millisecond}
		if err := s.PutObject("b", "slow", body); err != nil {
			t.Fatalf("slow PutObject: %v", err)
		}
		if took := time.Since(start); took < 2*time.Second {
			t.Fatalf("the slow upload took %s, less than the timeout: the test proves nothing", took)
		}
		if got, _ := os.ReadFile(filepath.Join(state, "put-slow")); string(got) != strconv.Itoa(12<<16) {
			t.Errorf("the plugin stored %s bytes, want %d", got, 12<<16)
		}

		// A slow consumer on the server's side.
		rc, err = s.GetObject("b", "a-key")
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second)
		data, err = io.ReadAll(rc)
		_ = rc.Close()
		if err != nil || string(data) != "a-key" {
			t.Errorf("slowly read GetObject: %q, %v", data, err)
		}
	})
}

// trickle is a body that yields 64 KiB every so often.
type trickle struct {
	chunks int
	every  time.Duration
}

func (r *trickle) Read(b []byte) (int, error) {
	if r.chunks == 0 {
		return 0, io.EOF
	}
	time.Sleep(r.every)
	r.chunks--
	return copy(b, make([]byte, min(len(b), 64<<10))), nil
}

// TestMessagesFromPluginsAreBounded: a plugin that answers with more than
// the host accepts gets a clear error, and the host does not read the
// answer into memory.
func TestMessagesFromPluginsAreBounded(t *testing.T) {
	h, _, _ := startHost(t, Options{MaxMessageSize: 4 << 20, Timeouts: map[api.Kind]time.Duration{api.KindObjectStore: 20 * time.Second}})
	s := openStore(t, h, "a")

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	err := within(t, 30*time.Second, "ListObjects with a 32 MiB answer", func() error {
		_, err := s.ListObjects("b", "huge")
		return err
	})
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Fatal("a 32 MiB answer was accepted under a 4 MiB limit")
	}
	for _, want := range []string{"hosttest.io/store", "ListObjects", "--plugin-max-message-size", strconv.Itoa(4 << 20)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 12<<20 {
		t.Errorf("the host allocated %d MiB while refusing a 32 MiB answer", grew>>20)
	}
	// The process is fine; its next answer is taken.
	if keys, err := s.ListObjects("b", "config"); err != nil || len(keys) != 1 || keys[0] != "a" {
		t.Errorf("the call after: %v %v", keys, err)
	}
}

// TestIdleProcessesAreReaped: a process per Init config ends when it has
// been idle for a while, unless a call (or a download) is still using it;
// the next call starts and initialises a new one.
func TestIdleProcessesAreReaped(t *testing.T) {
	h, _, bin := startHost(t, Options{IdleTimeout: 2 * time.Second})
	// The process Discover started serves every plugin without a config.
	waitChildren(t, bin, 1, 10*time.Second)
	a, b := openStore(t, h, "a"), openStore(t, h, "b")
	if got := children(t, bin); got != 3 {
		t.Fatalf("%d plugin processes with two configs, want 3", got)
	}
	waitChildren(t, bin, 1, 15*time.Second)

	if keys, err := a.ListObjects("bucket", "config"); err != nil || len(keys) != 1 || keys[0] != "a" {
		t.Fatalf("a call after its process was reaped: %v %v", keys, err)
	}
	if got := children(t, bin); got != 2 {
		t.Fatalf("%d plugin processes after a call, want 2", got)
	}

	rc, err := b.GetObject("bucket", "slow")
	if err != nil {
		t.Fatal(err)
	}
	waitChildren(t, bin, 2, 15*time.Second) // a goes; b is reading
	time.Sleep(5 * time.Second)
	if got := children(t, bin); got != 2 {
		t.Fatalf("%d plugin processes while a download is open, want 2", got)
	}
	data, err := io.ReadAll(rc)
	_ = rc.Close()
	if err != nil || len(data) != 8<<20 {
		t.Fatalf("the download held open: %d bytes, %v", len(data), err)
	}
	waitChildren(t, bin, 1, 15*time.Second)
}

// TestCallsThatMayHaveTakenEffectAreNotRepeated: a crash during a call
// that creates something reports the crash instead of creating it twice;
// a call that only reads is tried again.
func TestCallsThatMayHaveTakenEffectAreNotRepeated(t *testing.T) {
	h, state, _ := startHost(t, Options{})
	vs, err := h.VolumeSnapshotter("hosttest.io/steer")
	if err != nil {
		t.Fatal(err)
	}
	if err := vs.Init(map[string]string{}); err != nil {
		t.Fatal(err)
	}
	bia, err := h.BackupItemActionV2("hosttest.io/steer-v2")
	if err != nil {
		t.Fatal(err)
	}

	notRepeated := map[string]func() error{
		"CreateSnapshot": func() error { _, err := vs.CreateSnapshot("crash-once-snapshot", "az", nil); return err },
		"CreateVolumeFromSnapshot": func() error {
			_, err := vs.CreateVolumeFromSnapshot("crash-once-volume", "gp3", "az", nil)
			return err
		},
		"Execute": func() error {
			_, _, _, _, err := bia.Execute(item("crash-once-execute").Item, &v1.Backup{})
			return err
		},
	}
	files := map[string]string{"CreateSnapshot": "crash-once-snapshot", "CreateVolumeFromSnapshot": "crash-once-volume", "Execute": "crash-once-execute"}
	for method, call := range notRepeated {
		err := call()
		if err == nil || !strings.Contains(err.Error(), "hosttest.io/steer") || !strings.Contains(err.Error(), method) || !strings.Contains(err.Error(), "not repeated") {
			t.Errorf("%s that crashed: %v", method, err)
		}
		if n := calls(t, state, files[method]); n != 1 {
			t.Errorf("%s was made %d times, want 1", method, n)
		}
	}

	repeated := map[string]func() error{
		"crash-once-info":     func() error { _, _, err := vs.GetVolumeInfo("crash-once-info", "az"); return err },
		"crash-once-delete":   func() error { return vs.DeleteSnapshot("crash-once-delete") },
		"crash-once-progress": func() error { _, err := bia.Progress("crash-once-progress", &v1.Backup{}); return err },
	}
	for file, call := range repeated {
		if err := call(); err != nil {
			t.Errorf("%s: %v", file, err)
		}
		if n := calls(t, state, file); n != 2 {
			t.Errorf("%s was made %d times, want 2", file, n)
		}
	}
}

// TestEveryMethodHasARetryRule: a method added to a plugin kind must be
// classified, not fall to a default.
func TestEveryMethodHasARetryRule(t *testing.T) {
	kinds := map[api.Kind]reflect.Type{
		api.KindObjectStore:         reflect.TypeFor[api.ObjectStore](),
		api.KindVolumeSnapshotter:   reflect.TypeFor[api.VolumeSnapshotter](),
		api.KindBackupItemAction:    reflect.TypeFor[api.BackupItemAction](),
		api.KindBackupItemActionV2:  reflect.TypeFor[api.BackupItemActionV2](),
		api.KindRestoreItemAction:   reflect.TypeFor[api.RestoreItemAction](),
		api.KindRestoreItemActionV2: reflect.TypeFor[api.RestoreItemActionV2](),
		api.KindDeleteItemAction:    reflect.TypeFor[api.DeleteItemAction](),
		api.KindItemBlockAction:     reflect.TypeFor[api.ItemBlockAction](),
	}
	for kind, typ := range kinds {
		for i := range typ.NumMethod() {
			m := typ.Method(i).Name
			if m == "Name" { // answered by the host, not the plugin
				continue
			}
			if _, ok := retryAfterCrash[kind][m]; !ok {
				t.Errorf("%s.%s has no entry in retryAfterCrash", kind, m)
			}
		}
	}
	for kind, methods := range retryAfterCrash {
		typ, ok := kinds[kind]
		if !ok {
			t.Errorf("retryAfterCrash names kind %s, which has no interface here", kind)
			continue
		}
		for m := range methods {
			if _, ok := typ.MethodByName(m); !ok {
				t.Errorf("retryAfterCrash names %s.%s, which does not exist", kind, m)
			}
		}
	}
}

// Command plugin is a plugin binary for the plugin host's tests. Its
// plugins steer by item name, volume or snapshot ID, or object key, so a
// test can make them crash once, hang, fail, stall a stream or send too much;
// they count calls in files under $TEST_STATE_DIR so the test can see what
// happened across process restarts.
package main

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/framework"
)

func main() {
	framework.NewServer().
		RegisterDeleteItemAction("hosttest.io/steer", func(*slog.Logger) (api.DeleteItemAction, error) { return steer{}, nil }).
		RegisterBackupItemAction("hosttest.io/steer", func(*slog.Logger) (api.BackupItemAction, error) { return backupSteer{}, nil }).
		RegisterBackupItemActionV2("hosttest.io/steer-v2", func(*slog.Logger) (api.BackupItemActionV2, error) { return backupSteerV2{}, nil }).
		RegisterVolumeSnapshotter("hosttest.io/steer", func(*slog.Logger) (api.VolumeSnapshotter, error) { return &snapshotSteer{}, nil }).
		RegisterObjectStore("hosttest.io/store", func(*slog.Logger) (api.ObjectStore, error) { return &store{}, nil }).
		Serve()
}

type steer struct{}

func (steer) AppliesTo() (api.ResourceSelector, error) { return api.ResourceSelector{}, nil }

func (steer) Execute(in *api.DeleteItemActionExecuteInput) error {
	return act(in.Item.(*unstructured.Unstructured).GetName())
}

// backupSteer is steer as a BackupItemAction: it returns the item as it
// came.
type backupSteer struct{}

func (backupSteer) AppliesTo() (api.ResourceSelector, error) { return api.ResourceSelector{}, nil }

func (backupSteer) Execute(item runtime.Unstructured, _ *v1.Backup) (runtime.Unstructured, []api.ResourceIdentifier, error) {
	return item, nil, act(item.(*unstructured.Unstructured).GetName())
}

// backupSteerV2 is steer as a v2 BackupItemAction that starts an
// operation per item.
type backupSteerV2 struct{}

func (backupSteerV2) Name() string                             { return "hosttest.io/steer-v2" }
func (backupSteerV2) AppliesTo() (api.ResourceSelector, error) { return api.ResourceSelector{}, nil }

func (backupSteerV2) Execute(item runtime.Unstructured, _ *v1.Backup) (runtime.Unstructured, []api.ResourceIdentifier, string, []api.ResourceIdentifier, error) {
	name := item.(*unstructured.Unstructured).GetName()
	return item, nil, "op-" + name, nil, act(name)
}

func (backupSteerV2) Progress(opID string, _ *v1.Backup) (api.OperationProgress, error) {
	return api.OperationProgress{Completed: true}, act(opID)
}

func (backupSteerV2) Cancel(opID string, _ *v1.Backup) error { return act(opID) }

// snapshotSteer steers by volume or snapshot ID.
type snapshotSteer struct{}

func (*snapshotSteer) Init(map[string]string) error { return nil }

func (*snapshotSteer) CreateVolumeFromSnapshot(snapshotID, _, _ string, _ *int64) (string, error) {
	return "vol-" + snapshotID, act(snapshotID)
}

func (*snapshotSteer) GetVolumeInfo(volumeID, _ string) (string, *int64, error) {
	return "gp3", nil, act(volumeID)
}

func (*snapshotSteer) CreateSnapshot(volumeID, _ string, _ map[string]string) (string, error) {
	return "snap-" + volumeID, act(volumeID)
}

func (*snapshotSteer) DeleteSnapshot(snapshotID string) error { return act(snapshotID) }

func (*snapshotSteer) GetVolumeID(runtime.Unstructured) (string, error) { return "", nil }

func (*snapshotSteer) SetVolumeID(pv runtime.Unstructured, _ string) (runtime.Unstructured, error) {
	return pv, nil
}

// store is an ObjectStore steered by key (or prefix). It refuses calls
// before Init, so a test sees that a new process was initialised again.
type store struct {
	mu     sync.Mutex
	config map[string]string
}

func (s *store) Init(config map[string]string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.config = config
	return nil
}

func (s *store) name() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.config == nil {
		return "", framework.Errorf("not initialized")
	}
	return s.config["name"], nil
}

// PutObject records how many bytes it got under put-<key>; "stall" takes
// one chunk and then nothing more.
func (s *store) PutObject(_, key string, body io.Reader) error {
	if _, err := s.name(); err != nil {
		return err
	}
	if key == "stall" {
		_, _ = body.Read(make([]byte, 1<<20))
		time.Sleep(time.Hour)
	}
	n, err := io.Copy(io.Discard, body)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(os.Getenv("TEST_STATE_DIR"), "put-"+key), []byte(strconv.FormatInt(n, 10)), 0o600)
}

func (s *store) ObjectExists(_, key string) (bool, error) {
	if _, err := s.name(); err != nil {
		return false, err
	}
	return true, act(key)
}

// GetObject serves "slow" as 1 MiB chunks 400 ms apart, "stall" as one
// chunk and then nothing, and anything else as the key itself.
func (s *store) GetObject(_, key string) (io.ReadCloser, error) {
	if _, err := s.name(); err != nil {
		return nil, err
	}
	switch key {
	case "slow":
		return io.NopCloser(&paced{chunks: 8, every: 400 * time.Millisecond}), nil
	case "stall":
		return io.NopCloser(&paced{chunks: 1 << 20, every: time.Hour, first: true}), nil
	}
	return io.NopCloser(strings.NewReader(key)), nil
}

// ListObjects answers "config" with the name in the config it was
// initialised with, "pid" with its process ID, "huge" with 32 MiB of keys,
// and otherwise steers by prefix.
func (s *store) ListObjects(_, prefix string) ([]string, error) {
	name, err := s.name()
	if err != nil {
		return nil, err
	}
	switch prefix {
	case "config":
		return []string{name}, nil
	case "pid":
		return []string{strconv.Itoa(os.Getpid())}, nil
	case "huge":
		keys := make([]string, 32<<10)
		key := strings.Repeat("k", 1<<10)
		for i := range keys {
			keys[i] = key
		}
		return keys, nil
	}
	return nil, act(prefix)
}

func (s *store) ListCommonPrefixes(_, prefix, _ string) ([]string, error) { return nil, act(prefix) }
func (s *store) DeleteObject(_, key string) error                         { return act(key) }
func (s *store) CreateSignedURL(_, key string, _ time.Duration) (string, error) {
	return "https://example.invalid/" + key, act(key)
}

// paced yields chunks of 1 MiB, one per every (the first at once when
// first is set).
type paced struct {
	chunks int
	every  time.Duration
	first  bool
	left   []byte
}

func (p *paced) Read(b []byte) (int, error) {
	if len(p.left) == 0 {
		if p.chunks == 0 {
			return 0, io.EOF
		}
		if !p.first {
			time.Sleep(p.every)
		}
		p.first = false
		p.chunks--
		p.left = make([]byte, 1<<20)
	}
	n := copy(b, p.left)
	p.left = p.left[n:]
	return n, nil
}

// act counts a call under name and does what the name's prefix says.
func act(name string) error {
	state := os.Getenv("TEST_STATE_DIR")
	calls := filepath.Join(state, name)
	f, err := os.OpenFile(calls, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, _ = f.WriteString("x")
	_ = f.Close()
	data, _ := os.ReadFile(calls)
	switch {
	case strings.HasPrefix(name, "crash-once"):
		if len(data) == 1 {
			os.Exit(2)
		}
	case strings.HasPrefix(name, "crash-always"):
		os.Exit(2)
	case strings.HasPrefix(name, "hang"):
		time.Sleep(time.Hour)
	case strings.HasPrefix(name, "fail"):
		return framework.Errorf("refusing %s", name)
	}
	return nil
}

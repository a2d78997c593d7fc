package pluginstore

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

// blockingStore serves every object as a body that gives nothing until it
// is closed, as a plugin's stream does while the plugin is busy.
type blockingStore struct{ api.ObjectStore }

func (blockingStore) Init(map[string]string) error { return nil }

func (blockingStore) GetObject(string, string) (io.ReadCloser, error) {
	r, _ := io.Pipe() // nothing is ever written
	return r, nil
}

// TestDownloadEndsWithItsContext: a cancelled operation does not stay
// blocked in the read of a plugin's download.
func TestDownloadEndsWithItsContext(t *testing.T) {
	st, err := New(blockingStore{}, "test.io/blocking", nil, "b", "", "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rc, err := st.GetObject(ctx, "b", "k")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	done := make(chan error, 1)
	go func() {
		_, err := rc.Read(make([]byte, 16))
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Read after cancel = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Read still blocked 10s after its context was cancelled")
	}
	if _, err := rc.Read(make([]byte, 16)); !errors.Is(err, context.Canceled) {
		t.Errorf("a later Read = %v, want context.Canceled", err)
	}
	if err := rc.Close(); err != nil {
		t.Errorf("Close after cancel: %v", err)
	}
}

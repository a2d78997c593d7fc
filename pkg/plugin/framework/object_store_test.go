package framework

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

func objectStore(t *testing.T, fake *fakeObjectStore, timeout time.Duration) api.ObjectStore {
	t.Helper()
	c := connect(t, NewServer().RegisterObjectStore("example.io/store", instance[api.ObjectStore](fake)))
	return must[api.ObjectStore](t)(ObjectStoreClient(dispense(t, c, api.KindObjectStore), "example.io/store", timeout))
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func TestObjectRoundTripsInChunks(t *testing.T) {
	fake := newFakeObjectStore("s")
	store := objectStore(t, fake, 10*time.Second)
	for _, size := range []int{0, 1, chunkSize - 1, chunkSize, 5*chunkSize + 12345} {
		body := randomBytes(size)
		key := "backups/b/" + strings.Repeat("x", size%7)
		if err := store.PutObject("bkt", key, bytes.NewReader(body)); err != nil {
			t.Fatalf("PutObject of %d bytes: %v", size, err)
		}
		if got := fake.objects["bkt/"+key]; !bytes.Equal(got, body) {
			t.Fatalf("the plugin stored %d bytes, want the %d sent", len(got), size)
		}
		rc, err := store.GetObject("bkt", key)
		if err != nil {
			t.Fatalf("GetObject of %d bytes: %v", size, err)
		}
		got, err := io.ReadAll(rc)
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("GetObject read %d bytes (%v), want %d", len(got), err, size)
		}
		if err := rc.Close(); err != nil {
			t.Error(err)
		}
	}
}

// The body reaches the plugin while the host is still producing it: the
// second half is only written once the plugin has received the first.
func TestPutObjectStreams(t *testing.T) {
	fake := newFakeObjectStore("s")
	fake.received = make(chan int, 1)
	store := objectStore(t, fake, 10*time.Second)
	first, second := randomBytes(3*chunkSize), randomBytes(2*chunkSize+7)
	pr, pw := io.Pipe()
	go func() {
		if _, err := pw.Write(first); err != nil {
			return
		}
		deadline := time.After(10 * time.Second)
		for {
			select {
			case n := <-fake.received:
				if n < chunkSize {
					continue
				}
				_, _ = pw.Write(second)
				_ = pw.Close()
				return
			case <-deadline:
				pw.CloseWithError(errors.New("the plugin received nothing while the body was still being written"))
				return
			}
		}
	}()
	if err := store.PutObject("bkt", "big", pr); err != nil {
		t.Fatal(err)
	}
	if got := fake.objects["bkt/big"]; !bytes.Equal(got, append(first, second...)) {
		t.Errorf("stored %d bytes, want %d", len(got), len(first)+len(second))
	}
}

// gatedReader gives head, then waits for open before giving tail.
type gatedReader struct {
	head, tail []byte
	open       chan struct{}
}

func (g *gatedReader) Read(p []byte) (int, error) {
	if len(g.head) > 0 {
		n := copy(p, g.head)
		g.head = g.head[n:]
		return n, nil
	}
	<-g.open
	if len(g.tail) == 0 {
		return 0, io.EOF
	}
	n := copy(p, g.tail)
	g.tail = g.tail[n:]
	return n, nil
}

// GetObject hands the caller data before the plugin has produced all of it.
func TestGetObjectStreams(t *testing.T) {
	head, tail := randomBytes(2*chunkSize), randomBytes(chunkSize+3)
	open := make(chan struct{})
	fake := newFakeObjectStore("s")
	fake.getBody = func() io.Reader { return &gatedReader{head: head, tail: tail, open: open} }
	store := objectStore(t, fake, 10*time.Second)

	rc, err := store.GetObject("bkt", "big")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got := make([]byte, len(head))
	if _, err := io.ReadFull(rc, got); err != nil || !bytes.Equal(got, head) {
		t.Fatalf("reading the first part: %v", err)
	}
	close(open)
	rest, err := io.ReadAll(rc)
	if err != nil || !bytes.Equal(rest, tail) {
		t.Fatalf("reading the rest: %d bytes, %v", len(rest), err)
	}
}

func TestGetObjectMissingFailsAtOnce(t *testing.T) {
	store := objectStore(t, newFakeObjectStore("s"), 10*time.Second)
	rc, err := store.GetObject("bkt", "nope")
	if err == nil {
		rc.Close()
		t.Fatal("GetObject of a missing object succeeded")
	}
	if pe := pluginError(t, err); pe.Code() != codes.Unknown || !strings.Contains(err.Error(), "ObjectStore example.io/store: GetObject: s: object bkt/nope not found") {
		t.Errorf("error = %v (code %v)", err, pe.Code())
	}
}

// A body that fails half way must not leave a short object behind.
func TestPutObjectBrokenBody(t *testing.T) {
	fake := newFakeObjectStore("s")
	fake.received = make(chan int, 1)
	store := objectStore(t, fake, 10*time.Second)
	// The body fails only once the plugin is reading it, so that the
	// plugin's side of the call has surely started.
	body := io.MultiReader(bytes.NewReader(randomBytes(chunkSize+10)), &failAfter{signal: fake.received, err: errors.New("disk gone")})
	err := store.PutObject("bkt", "half", body)
	if err == nil || !strings.Contains(err.Error(), "reading the body of bkt/half: disk gone") {
		t.Fatalf("PutObject = %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		fake.mu.Lock()
		putErr, stored := fake.putErr, fake.objects["bkt/half"] != nil
		fake.mu.Unlock()
		if stored {
			t.Fatal("the plugin stored a truncated object")
		}
		if putErr != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the plugin never saw the upload fail")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// failAfter fails once signal has fired.
type failAfter struct {
	signal <-chan int
	err    error
}

func (r *failAfter) Read([]byte) (int, error) {
	select {
	case <-r.signal:
	case <-time.After(5 * time.Second):
	}
	return 0, r.err
}

// The timeout bounds each wait on the plugin, not the transfer: a slow
// reader on the host is fine, a plugin that stops sending is not.
func TestGetObjectStallTimesOut(t *testing.T) {
	fake := newFakeObjectStore("s")
	stuck := make(chan struct{})
	defer close(stuck)
	fake.getBody = func() io.Reader {
		return &gatedReader{head: randomBytes(chunkSize), tail: []byte("never"), open: stuck}
	}
	store := objectStore(t, fake, 200*time.Millisecond)
	rc, err := store.GetObject("bkt", "slow")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	buf := make([]byte, chunkSize/2)
	if _, err := io.ReadFull(rc, buf); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // a slow consumer, longer than the timeout
	if _, err := io.ReadFull(rc, buf); err != nil {
		t.Fatalf("a slow reader tripped the timeout: %v", err)
	}
	_, err = rc.Read(buf)
	if pe := pluginError(t, err); pe.Code() != codes.DeadlineExceeded || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a stalled plugin gave %v (code %v), want DeadlineExceeded", err, pe.Code())
	}
}

func TestPutObjectStallTimesOut(t *testing.T) {
	fake := newFakeObjectStore("s")
	block := make(chan struct{})
	defer close(block)
	c := connect(t, NewServer().RegisterObjectStore("example.io/store", instance[api.ObjectStore](&blockingStore{fakeObjectStore: fake, block: block})))
	store := must[api.ObjectStore](t)(ObjectStoreClient(dispense(t, c, api.KindObjectStore), "example.io/store", 200*time.Millisecond))
	start := time.Now()
	err := store.PutObject("bkt", "k", bytes.NewReader(randomBytes(64*chunkSize)))
	if pe := pluginError(t, err); pe.Code() != codes.DeadlineExceeded {
		t.Errorf("PutObject to a plugin that stopped reading = %v (code %v)", err, pe.Code())
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("PutObject took %s to give up", d)
	}
}

// blockingStore never reads the body it is given.
type blockingStore struct {
	*fakeObjectStore
	block chan struct{}
}

func (b *blockingStore) PutObject(string, string, io.Reader) error {
	<-b.block
	return nil
}

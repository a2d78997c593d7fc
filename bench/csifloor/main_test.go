package main

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestTrackerWaitsForStateAndForGone(t *testing.T) {
	tr := &tracker{objs: map[string]client.Object{}, seen: map[string]bool{}, changed: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	// Not seen yet: a wait for "gone" must not end at once.
	quick, qcancel := context.WithTimeout(ctx, 50*time.Millisecond)
	if _, err := tr.wait(quick, "ns/a", nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait for an object never seen to be gone = %v, want a timeout", err)
	}
	qcancel()

	w := watch.NewFake()
	go tr.follow(w, "1")
	vs := &snapshotv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", ResourceVersion: "2"}}
	w.Add(vs.DeepCopy())
	ready := vs.DeepCopy()
	ready.ResourceVersion = "3"
	ready.Status = &snapshotv1.VolumeSnapshotStatus{ReadyToUse: ptr.To(true)}
	go w.Modify(ready)
	got, err := tr.wait(ctx, "ns/a", func(o client.Object) bool {
		s := o.(*snapshotv1.VolumeSnapshot)
		return s.Status != nil && s.Status.ReadyToUse != nil && *s.Status.ReadyToUse
	})
	if err != nil || got.GetResourceVersion() != "3" {
		t.Fatalf("wait for ready = %v, %v", got, err)
	}
	go w.Delete(ready.DeepCopy())
	if _, err := tr.wait(ctx, "ns/a", nil); err != nil {
		t.Fatalf("wait for gone: %v", err)
	}
}

func TestEachRunsAllAtOnceAndCallsAreBounded(t *testing.T) {
	inFlight = make(chan struct{}, 3)
	var running, peak, calling, peakCalls atomic.Int32
	raise := func(p *atomic.Int32, n int32) {
		for {
			v := p.Load()
			if n <= v || p.CompareAndSwap(v, n) {
				return
			}
		}
	}
	release := make(chan struct{})
	go func() {
		// Every item must be in progress at once before any finishes.
		for running.Load() < 20 {
			time.Sleep(time.Millisecond)
		}
		close(release)
	}()
	err := each(context.Background(), 20, func(ctx context.Context, i int) error {
		raise(&peak, running.Add(1))
		<-release
		err := call(ctx, func(context.Context) error {
			raise(&peakCalls, calling.Add(1))
			defer calling.Add(-1)
			time.Sleep(5 * time.Millisecond)
			return nil
		})
		if i == 7 {
			return errors.New("seven")
		}
		return err
	})
	if err == nil || err.Error() != "seven" {
		t.Errorf("each = %v, want the error of item 7", err)
	}
	if peak.Load() != 20 || peakCalls.Load() > 3 {
		t.Errorf("%d items in progress at once (want 20), %d calls (want at most 3)", peak.Load(), peakCalls.Load())
	}
}

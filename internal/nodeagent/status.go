package nodeagent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"

	"github.com/lifeboat-io/lifeboat/internal/podvolume"
)

// writeTimeout bounds one status write, including its retries on conflict.
const writeTimeout = 30 * time.Second

// update reads the object afresh (uncached: the cache may lag behind the
// node agent's own last write), lets mutate change it, and writes it,
// again on a conflict. mutate returns false to write nothing (the object
// moved on, e.g. to a final phase, meanwhile). The PodVolumeBackup and
// PodVolumeRestore CRDs have no status subresource (as Velero's), so one
// Update writes spec, labels and status alike.
func update[T client.Object](ctx context.Context, c client.Client, r client.Reader, key types.NamespacedName, obj T, mutate func(T) bool) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	changed := false
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		changed = false
		if err := r.Get(ctx, key, obj); err != nil {
			return err
		}
		if !mutate(obj) {
			return nil
		}
		if err := c.Update(ctx, obj); err != nil {
			return err
		}
		changed = true
		return nil
	})
	return changed, err
}

func final(p v1.PodVolumePhase) bool {
	return p == v1.PodVolumePhaseCompleted || p == v1.PodVolumePhaseFailed || p == v1.PodVolumePhaseCanceled
}

func isNew(p v1.PodVolumePhase) bool { return p == "" || p == v1.PodVolumePhaseNew }

// progressWriter writes a transfer's latest progress to its object's
// status.progress at most once per interval, so that a data path that
// reports often costs the API server one small patch a second.
type progressWriter struct {
	c        client.Client
	obj      client.Object
	interval time.Duration
	log      *slog.Logger

	mu      sync.Mutex
	latest  podvolume.Progress
	written podvolume.Progress
	stopCh  chan struct{}
	stopped sync.WaitGroup
}

func startProgress(c client.Client, obj client.Object, interval time.Duration, log *slog.Logger) *progressWriter {
	w := &progressWriter{c: c, obj: obj, interval: interval, log: log, stopCh: make(chan struct{})}
	w.stopped.Add(1)
	go w.loop()
	return w
}

// set is the data path's Progress callback.
func (w *progressWriter) set(p podvolume.Progress) {
	w.mu.Lock()
	w.latest = p
	w.mu.Unlock()
}

func (w *progressWriter) loop() {
	defer w.stopped.Done()
	tick := time.NewTicker(w.interval)
	defer tick.Stop()
	for {
		select {
		case <-w.stopCh:
			return
		case <-tick.C:
			w.flush()
		}
	}
}

func (w *progressWriter) flush() {
	w.mu.Lock()
	p := w.latest
	same := p == w.written
	w.mu.Unlock()
	if same {
		return
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"progress": v1.DataMoveOperationProgress{TotalBytes: p.TotalBytes, BytesDone: p.BytesDone}}})
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	target := w.obj.DeepCopyObject().(client.Object)
	if err := w.c.Patch(ctx, target, client.RawPatch(types.MergePatchType, patch)); err != nil {
		w.log.Warn("writing progress", "error", err)
		return
	}
	w.mu.Lock()
	w.written = p
	w.mu.Unlock()
}

// stop ends the writes; the final status write comes after it, so no
// progress patch can land after a final phase.
func (w *progressWriter) stop() {
	close(w.stopCh)
	w.stopped.Wait()
}

// lastProgress is the latest progress the data path reported.
func (w *progressWriter) last() podvolume.Progress {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.latest
}

func objectKey(namespace, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: namespace, Name: name}
}

func podRef(ns, name string) string { return fmt.Sprintf("%s/%s", ns, name) }

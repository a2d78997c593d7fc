// Package snapshotcheck asks whether the storage snapshots a backup
// recorded still exist, without changing them. A CSI snapshot is found the
// way Kubernetes finds a pre-provisioned one: a VolumeSnapshotContent
// naming its handle, with deletionPolicy Retain, which the driver's
// csi-snapshotter looks up (ListSnapshots) and marks found or not found;
// the content is deleted afterwards, the snapshot left as it was.
// Velero's VolumeSnapshotter API has no call that looks a snapshot up, so
// native snapshots are not checked.
package snapshotcheck

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/lifeboat-io/lifeboat/internal/csisnapshot"
)

// State is what a check found of one snapshot.
type State string

// The states of a snapshot.
const (
	Present State = "present"
	Missing State = "missing"
	// Unknown: the driver's csi-snapshotter did not answer in time, or
	// the content could not be made; Message says which.
	Unknown State = "unknown"
)

// Result is the check of one snapshot.
type Result struct {
	// Content is the stored VolumeSnapshotContent's name.
	Content string
	Driver  string
	Handle  string
	State   State
	Message string
}

// ProbeLabel marks the contents a check makes, so that leftovers of an
// interrupted check can be found (and are harmless: Retain).
const ProbeLabel = "lifeboat.io/snapshot-check"

var contents = schema.GroupVersionResource{Group: csisnapshot.Group, Version: "v1", Resource: "volumesnapshotcontents"}

// ErrNoCSI says the cluster serves no VolumeSnapshotContents.
var ErrNoCSI = errors.New("the cluster serves no VolumeSnapshotContents (no CSI snapshot CRDs)")

// CSI is a check of CSI snapshots against one cluster.
type CSI struct {
	Dynamic dynamic.Interface
	// Wait bounds the wait for each snapshot's answer; zero is a minute.
	Wait time.Duration
	// Poll is the first pause between reads; zero is 20 ms, doubling to
	// 500 ms.
	Poll time.Duration
}

// maxConcurrent bounds the contents made at once.
const maxConcurrent = 8

// Check looks up each stored content's snapshot; key makes the probes'
// names unique to the check (the backup's UID, say), so a retried check
// finds its own. The error is for a cluster that cannot be asked at all.
func (c *CSI) Check(ctx context.Context, key string, stored []unstructured.Unstructured) ([]Result, error) {
	out := make([]Result, len(stored))
	sem := make(chan struct{}, maxConcurrent)
	var wg sync.WaitGroup
	var noCSI error
	var mu sync.Mutex
	for i := range stored {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			r, err := c.one(ctx, key, &stored[i])
			if err != nil {
				mu.Lock()
				noCSI = err
				mu.Unlock()
			}
			out[i] = r
		}()
	}
	wg.Wait()
	if noCSI != nil {
		return nil, noCSI
	}
	return out, nil
}

func (c *CSI) one(ctx context.Context, key string, stored *unstructured.Unstructured) (Result, error) {
	driver, _, _ := unstructured.NestedString(stored.Object, "spec", "driver")
	r := Result{Content: stored.GetName(), Driver: driver, Handle: csisnapshot.ContentHandle(stored)}
	if r.Handle == "" || driver == "" {
		r.State, r.Message = Missing, "the backup recorded no snapshot handle or driver for it: the snapshot was never taken"
		return r, nil
	}
	sum := sha256.Sum256([]byte(key + "\x00" + driver + "\x00" + r.Handle))
	digest := hex.EncodeToString(sum[:16])
	probe := csisnapshot.PreProvisionedContent(stored, "lifeboat-check-"+digest, r.Handle, "Retain", digest)
	probe.SetAPIVersion(contents.GroupVersion().String())
	probe.SetKind("VolumeSnapshotContent")
	probe.SetLabels(map[string]string{ProbeLabel: digest})
	res := c.Dynamic.Resource(contents)

	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	_, err := res.Create(cctx, probe, metav1.CreateOptions{})
	cancel()
	switch {
	case apierrors.IsNotFound(err):
		return r, ErrNoCSI
	case err != nil && !apierrors.IsAlreadyExists(err):
		r.State, r.Message = Unknown, fmt.Sprintf("creating VolumeSnapshotContent %s to look the snapshot up: %v", probe.GetName(), err)
		return r, nil
	}
	defer c.remove(ctx, res, probe.GetName())

	wait := c.Wait
	if wait <= 0 {
		wait = time.Minute
	}
	delay := c.Poll
	if delay <= 0 {
		delay = 20 * time.Millisecond
	}
	deadline := time.Now().Add(wait)
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		got, err := res.Get(cctx, probe.GetName(), metav1.GetOptions{})
		cancel()
		if err != nil {
			r.State, r.Message = Unknown, fmt.Sprintf("reading VolumeSnapshotContent %s: %v", probe.GetName(), err)
			return r, nil
		}
		if h, _, _ := unstructured.NestedString(got.Object, "status", "snapshotHandle"); h != "" {
			r.State = Present
			if ready, found, _ := unstructured.NestedBool(got.Object, "status", "readyToUse"); found && !ready {
				r.Message = "the driver has it, not ready to use"
			}
			return r, nil
		}
		if csisnapshot.SnapshotNotFound(got) {
			msg, _, _ := unstructured.NestedString(got.Object, "status", "error", "message")
			r.State, r.Message = Missing, "the driver does not have it: "+msg
			return r, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			r.State = Unknown
			r.Message = fmt.Sprintf("the csi-snapshotter of driver %s did not look it up within %s (is it running?)", driver, wait)
			return r, nil
		}
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
		delay = min(2*delay, 500*time.Millisecond)
	}
}

// remove deletes a probe, even when the check's context ended. Retain
// leaves the snapshot alone.
func (c *CSI) remove(ctx context.Context, res dynamic.ResourceInterface, name string) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	_ = res.Delete(cctx, name, metav1.DeleteOptions{})
}

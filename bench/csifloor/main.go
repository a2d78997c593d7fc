// Command csifloor is the CSI benchmark's yardstick: the least that taking
// and deleting CSI snapshots of a set of claims can cost on a given
// machine, API server and CSI stack. Nothing of Lifeboat is in it: it talks
// to the snapshot controllers through the API with a plain
// controller-runtime client, as any program would, and leaves the cluster
// as Lifeboat's backup and deletion leave it, so the two can be compared.
//
//	csifloor backup -kubeconfig K -namespaces a,b -class C -handles out.json
//
// creates one VolumeSnapshot of the class for each claim of the
// namespaces, all at once (at most -workers API calls in flight), waits until every
// one is readyToUse, then does what a backup does at its end: each
// content's deletionPolicy set to Retain, the VolumeSnapshot and the
// content deleted, and waits until both are gone. The storage snapshots
// stay; their handles and driver are written to -handles. It prints
// `snapshots=<n> ready_seconds=<s> seconds=<s> peak_rss_kib=<k>`.
//
//	csifloor delete -kubeconfig K -handles out.json [-state-dir D]
//
// has each storage snapshot of -handles deleted, as a backup deletion must
// with nothing left in the cluster: a VolumeSnapshotContent pre-bound to
// the handle, deletionPolicy Delete, with the snapshotter's
// bound-protection finalizer, deleted once the sidecar has set its
// status.snapshotHandle; it waits until every content is gone (the sidecar
// removes the finalizer after the driver's DeleteSnapshot) and, with
// -state-dir (the test driver's), until the driver holds none of the
// snapshots. It prints `snapshots=<n> seconds=<s> peak_rss_kib=<k>`.
//
// seconds covers the work, not process start and client setup.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lifeboat-io/lifeboat/bench/internal/selfrss"
)

// What the external-snapshotter (v8) requires on a content made to delete
// a storage snapshot.
const contentFinalizer = "snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection"

// runLabel marks what one floor run creates, so its watches see nothing
// else.
const runLabel = "bench.lifeboat.io/csifloor"

// callTimeout bounds one API call; the local API server answers in
// milliseconds.
const callTimeout = 30 * time.Second

// Snapshot is one storage snapshot the backup floor leaves behind.
type Snapshot struct {
	Handle string `json:"handle"`
	Driver string `json:"driver"`
	Claim  string `json:"claim"`
}

type options struct {
	kubeconfig string
	namespaces []string
	class      string
	handles    string
	stateDir   string
	workers    int
	run        string
	timeout    time.Duration
}

func main() {
	if len(os.Args) < 2 || (os.Args[1] != "backup" && os.Args[1] != "delete") {
		fmt.Fprintln(os.Stderr, "usage: csifloor backup|delete [flags] (see the package doc)")
		os.Exit(2)
	}
	mode := os.Args[1]
	var o options
	var namespaces string
	fl := flag.NewFlagSet("csifloor "+mode, flag.ExitOnError)
	fl.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster")
	fl.StringVar(&namespaces, "namespaces", "", "backup: comma-separated namespaces whose claims are snapshotted")
	fl.StringVar(&o.class, "class", "", "backup: the VolumeSnapshotClass")
	fl.StringVar(&o.handles, "handles", "", "backup: where to write the snapshots' handles; delete: where to read them")
	fl.StringVar(&o.stateDir, "state-dir", "", "delete: the test driver's state directory, to wait until its snapshots are gone")
	fl.IntVar(&o.workers, "workers", 16, "API calls in flight at most (waits for the controllers take no slot)")
	fl.StringVar(&o.run, "run", "floor", "value of the "+runLabel+" label, and part of created names")
	fl.DurationVar(&o.timeout, "timeout", 10*time.Minute, "how long the whole run may take")
	_ = fl.Parse(os.Args[2:])
	for ns := range strings.SplitSeq(namespaces, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			o.namespaces = append(o.namespaces, ns)
		}
	}
	if o.kubeconfig == "" || o.handles == "" || o.workers < 1 || (mode == "backup" && (len(o.namespaces) == 0 || o.class == "")) {
		fmt.Fprintln(os.Stderr, "csifloor: -kubeconfig and -handles are required, -namespaces and -class too for backup, and -workers must be at least 1")
		os.Exit(2)
	}
	inFlight = make(chan struct{}, o.workers)
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	c, err := newClient(o.kubeconfig)
	if err == nil {
		if mode == "backup" {
			err = backup(ctx, c, o)
		} else {
			err = del(ctx, c, o)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "csifloor:", err)
		os.Exit(1)
	}
}

func newClient(kubeconfig string) (client.WithWatch, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig %s: %w", kubeconfig, err)
	}
	// No client-side limit, as `lifeboat server` by default
	// (--client-qps -1): both sides are bounded by the API server alone.
	cfg.QPS, cfg.Burst = -1, 0
	scheme := kruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := snapshotv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return client.NewWithWatch(cfg, client.Options{Scheme: scheme})
}

func backup(ctx context.Context, c client.WithWatch, o options) error {
	start := time.Now()
	var claims []corev1.PersistentVolumeClaim
	for _, ns := range o.namespaces {
		l := &corev1.PersistentVolumeClaimList{}
		if err := call(ctx, func(ctx context.Context) error { return c.List(ctx, l, client.InNamespace(ns)) }); err != nil {
			return fmt.Errorf("listing claims in %s: %w", ns, err)
		}
		claims = append(claims, l.Items...)
	}
	if len(claims) == 0 {
		return fmt.Errorf("no claims in %v", o.namespaces)
	}
	// The watches are open before the first create, so no change is missed.
	snaps, err := track(ctx, c, &snapshotv1.VolumeSnapshotList{}, client.MatchingLabels{runLabel: o.run})
	if err != nil {
		return err
	}
	contents, err := track(ctx, c, &snapshotv1.VolumeSnapshotContentList{})
	if err != nil {
		return err
	}
	out := make([]Snapshot, len(claims))
	var readyAt time.Time
	var readyMu sync.Mutex
	err = each(ctx, len(claims), func(ctx context.Context, i int) error {
		pvc := claims[i]
		vs := &snapshotv1.VolumeSnapshot{
			ObjectMeta: metav1.ObjectMeta{Namespace: pvc.Namespace, Name: fmt.Sprintf("%s-%s", o.run, pvc.Name), Labels: map[string]string{runLabel: o.run}},
			Spec: snapshotv1.VolumeSnapshotSpec{
				Source:                  snapshotv1.VolumeSnapshotSource{PersistentVolumeClaimName: &pvc.Name},
				VolumeSnapshotClassName: &o.class,
			},
		}
		if err := call(ctx, func(ctx context.Context) error { return c.Create(ctx, vs) }); err != nil {
			return fmt.Errorf("creating VolumeSnapshot %s/%s: %w", vs.Namespace, vs.Name, err)
		}
		key := vs.Namespace + "/" + vs.Name
		got, err := snaps.wait(ctx, key, func(o client.Object) bool {
			s, _ := o.(*snapshotv1.VolumeSnapshot)
			return s != nil && s.Status != nil && s.Status.ReadyToUse != nil && *s.Status.ReadyToUse &&
				s.Status.BoundVolumeSnapshotContentName != nil
		})
		if err != nil {
			return fmt.Errorf("VolumeSnapshot %s ready: %w", key, err)
		}
		readyMu.Lock()
		readyAt = time.Now()
		readyMu.Unlock()
		content := *got.(*snapshotv1.VolumeSnapshot).Status.BoundVolumeSnapshotContentName
		// Retain first: deleting the content must leave the storage
		// snapshot, which from now on belongs to the "backup".
		vsc := &snapshotv1.VolumeSnapshotContent{ObjectMeta: metav1.ObjectMeta{Name: content}}
		if err := call(ctx, func(ctx context.Context) error {
			return c.Patch(ctx, vsc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"deletionPolicy":"Retain"}}`)))
		}); err != nil {
			return fmt.Errorf("setting VolumeSnapshotContent %s to Retain: %w", content, err)
		}
		if vsc.Status == nil || vsc.Status.SnapshotHandle == nil {
			return fmt.Errorf("VolumeSnapshotContent %s of ready VolumeSnapshot %s has no snapshot handle", content, key)
		}
		out[i] = Snapshot{Handle: *vsc.Status.SnapshotHandle, Driver: vsc.Spec.Driver, Claim: pvc.Namespace + "/" + pvc.Name}
		for _, obj := range []client.Object{vs, vsc} {
			if err := call(ctx, func(ctx context.Context) error { return client.IgnoreNotFound(c.Delete(ctx, obj)) }); err != nil {
				return fmt.Errorf("deleting %T %s: %w", obj, obj.GetName(), err)
			}
		}
		if _, err := snaps.wait(ctx, key, nil); err != nil {
			return fmt.Errorf("VolumeSnapshot %s gone: %w", key, err)
		}
		if _, err := contents.wait(ctx, content, nil); err != nil {
			return fmt.Errorf("VolumeSnapshotContent %s gone: %w", content, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	data, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(o.handles, data, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", o.handles, err)
	}
	hwm, err := selfrss.PeakKiB()
	if err != nil {
		return err
	}
	fmt.Printf("snapshots=%d ready_seconds=%.6f seconds=%.6f peak_rss_kib=%d\n", len(out), readyAt.Sub(start).Seconds(), elapsed.Seconds(), hwm)
	return nil
}

func del(ctx context.Context, c client.WithWatch, o options) error {
	data, err := os.ReadFile(o.handles)
	if err != nil {
		return err
	}
	var snaps []Snapshot
	if err := json.Unmarshal(data, &snaps); err != nil {
		return fmt.Errorf("reading %s: %w", o.handles, err)
	}
	start := time.Now()
	contents, err := track(ctx, c, &snapshotv1.VolumeSnapshotContentList{}, client.MatchingLabels{runLabel: o.run})
	if err != nil {
		return err
	}
	err = each(ctx, len(snaps), func(ctx context.Context, i int) error {
		s := snaps[i]
		handle := s.Handle
		// The reference must name a VolumeSnapshot; one that does not
		// exist and has no UID leaves the content unbound, and the
		// sidecar deletes an unbound content's snapshot.
		vsc := &snapshotv1.VolumeSnapshotContent{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-delete-%d", o.run, i), Labels: map[string]string{runLabel: o.run},
				Finalizers: []string{contentFinalizer}},
			Spec: snapshotv1.VolumeSnapshotContentSpec{
				DeletionPolicy:    snapshotv1.VolumeSnapshotContentDelete,
				Driver:            s.Driver,
				Source:            snapshotv1.VolumeSnapshotContentSource{SnapshotHandle: &handle},
				VolumeSnapshotRef: corev1.ObjectReference{APIVersion: "snapshot.storage.k8s.io/v1", Kind: "VolumeSnapshot", Namespace: "csifloor-none", Name: fmt.Sprintf("%s-%d", o.run, i)},
			},
		}
		if err := call(ctx, func(ctx context.Context) error { return c.Create(ctx, vsc) }); err != nil {
			return fmt.Errorf("creating VolumeSnapshotContent %s for snapshot %s: %w", vsc.Name, handle, err)
		}
		// Deleted before the sidecar has recorded the handle, the content
		// would go without a DeleteSnapshot call.
		if _, err := contents.wait(ctx, vsc.Name, func(o client.Object) bool {
			v, _ := o.(*snapshotv1.VolumeSnapshotContent)
			return v != nil && v.Status != nil && v.Status.SnapshotHandle != nil
		}); err != nil {
			return fmt.Errorf("VolumeSnapshotContent %s taken up: %w", vsc.Name, err)
		}
		if err := call(ctx, func(ctx context.Context) error { return c.Delete(ctx, vsc) }); err != nil {
			return fmt.Errorf("deleting VolumeSnapshotContent %s: %w", vsc.Name, err)
		}
		if _, err := contents.wait(ctx, vsc.Name, nil); err != nil {
			return fmt.Errorf("VolumeSnapshotContent %s gone: %w", vsc.Name, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if o.stateDir != "" {
		if err := driverForgot(ctx, o.stateDir, snaps); err != nil {
			return err
		}
	}
	elapsed := time.Since(start)
	hwm, err := selfrss.PeakKiB()
	if err != nil {
		return err
	}
	fmt.Printf("snapshots=%d seconds=%.6f peak_rss_kib=%d\n", len(snaps), elapsed.Seconds(), hwm)
	return nil
}

// driverForgot waits until the test driver's state holds none of snaps
// (snapshots/<handle>): a content goes only after the driver's
// DeleteSnapshot returned, so this is normally true at the first look.
func driverForgot(ctx context.Context, stateDir string, snaps []Snapshot) error {
	for {
		left := 0
		for _, s := range snaps {
			if _, err := os.Stat(filepath.Join(stateDir, "snapshots", s.Handle)); err == nil {
				left++
			}
		}
		if left == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the driver still holds %d of the %d snapshots: %w", left, len(snaps), ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// each runs f for 0..n-1, all at once, and returns the first error. What
// bounds the work is inFlight: f's API calls wait for a slot, its waits
// for the controllers take none, so every snapshot is in progress from
// the start, as a backup's are.
func each(ctx context.Context, n int, f func(context.Context, int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if err := f(ctx, i); err != nil {
				errs <- err
				cancel()
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// inFlight bounds the API calls in flight (-workers).
var inFlight = make(chan struct{}, 16)

func call(ctx context.Context, f func(context.Context) error) error {
	select {
	case inFlight <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-inFlight }()
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return f(ctx)
}

// tracker keeps the latest state of the objects one watch sees, so that
// many goroutines can wait on their own object without a GET each.
type tracker struct {
	mu   sync.Mutex
	objs map[string]client.Object
	// seen: every key ever listed or watched, so that a wait for an
	// object to be gone does not end before its creation was seen.
	seen    map[string]bool
	changed chan struct{} // closed and replaced on every change
}

// track lists and then watches list's kind (with opts) until ctx ends.
func track(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) (*tracker, error) {
	t := &tracker{objs: map[string]client.Object{}, seen: map[string]bool{}, changed: make(chan struct{})}
	rv, err := t.relist(ctx, c, list, opts)
	if err != nil {
		return nil, err
	}
	go func() {
		for ctx.Err() == nil {
			w, err := c.Watch(ctx, list, append(opts, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}})...)
			if err == nil {
				rv = t.follow(w, rv)
				w.Stop()
			}
			if ctx.Err() != nil {
				return
			}
			// The watch ended (or could not start, e.g. its version is too
			// old): list again, so nothing in between is missed.
			if rv, err = t.relist(ctx, c, list, opts); err != nil {
				time.Sleep(100 * time.Millisecond)
			}
		}
	}()
	return t, nil
}

func (t *tracker) relist(ctx context.Context, c client.WithWatch, list client.ObjectList, opts []client.ListOption) (string, error) {
	l := list.DeepCopyObject().(client.ObjectList)
	if err := call(ctx, func(ctx context.Context) error { return c.List(ctx, l, opts...) }); err != nil {
		return "", fmt.Errorf("listing %T: %w", list, err)
	}
	objs := map[string]client.Object{}
	items, err := metaItems(l)
	if err != nil {
		return "", err
	}
	for _, o := range items {
		objs[key(o)] = o
	}
	t.mu.Lock()
	t.objs = objs
	for k := range objs {
		t.seen[k] = true
	}
	t.notifyLocked()
	t.mu.Unlock()
	return l.GetResourceVersion(), nil
}

func metaItems(l client.ObjectList) ([]client.Object, error) {
	var out []client.Object
	switch l := l.(type) {
	case *snapshotv1.VolumeSnapshotList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *snapshotv1.VolumeSnapshotContentList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	default:
		return nil, fmt.Errorf("cannot track %T", l)
	}
	return out, nil
}

// follow applies a watch's events until it ends and returns the last
// resourceVersion seen.
func (t *tracker) follow(w watch.Interface, rv string) string {
	for ev := range w.ResultChan() {
		o, ok := ev.Object.(client.Object)
		if !ok || ev.Type == watch.Error {
			return rv
		}
		rv = o.GetResourceVersion()
		if ev.Type == watch.Bookmark {
			continue
		}
		t.mu.Lock()
		if ev.Type == watch.Deleted {
			delete(t.objs, key(o))
		} else {
			t.objs[key(o)] = o
		}
		t.seen[key(o)] = true
		t.notifyLocked()
		t.mu.Unlock()
	}
	return rv
}

func (t *tracker) notifyLocked() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// wait returns the object of key once done says so; done nil waits until
// the object, seen before, is gone.
func (t *tracker) wait(ctx context.Context, k string, done func(client.Object) bool) (client.Object, error) {
	for {
		t.mu.Lock()
		o, ok := t.objs[k]
		seen := t.seen[k]
		changed := t.changed
		t.mu.Unlock()
		if (done == nil && seen && !ok) || (done != nil && ok && done(o)) {
			return o, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func key(o client.Object) string {
	if o.GetNamespace() == "" {
		return o.GetName()
	}
	return o.GetNamespace() + "/" + o.GetName()
}

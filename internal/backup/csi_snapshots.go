package backup

// CSI snapshots, as Velero v1.18 takes them: a claim whose volume is
// decided `snapshot`, is a CSI volume and is not taken by a
// VolumeSnapshotLocation's VolumeSnapshotter gets a VolumeSnapshot when
// its item is stored (within its pod's group when the pod has hooks, so a
// freeze lasts only until the snapshot is cut); the backup waits for every
// snapshot to be ready before it ends, stores the VolumeSnapshot (with
// Velero's annotations), its content and its class, then leaves the
// storage snapshot to the backup alone: the content is set to Retain and
// both objects are removed from the cluster.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/archive"
	"github.com/lifeboat-io/lifeboat/internal/csisnapshot"
	"github.com/lifeboat-io/lifeboat/internal/hooks"
	"github.com/lifeboat-io/lifeboat/internal/volumefiles"
	"github.com/lifeboat-io/lifeboat/pkg/policy"
	"github.com/lifeboat-io/lifeboat/pkg/volumehelper"
)

// csiCallTimeout bounds each API call the CSI steps make.
const csiCallTimeout = 30 * time.Second

// csiSnap is one claim's CSI snapshot.
type csiSnap struct {
	pvc     *corev1.PersistentVolumeClaim
	pv      *corev1.PersistentVolume
	name    string // the VolumeSnapshot's
	class   string
	created time.Time
	// Set when the snapshot is ready: the objects as stored.
	vs  *snapshotv1.VolumeSnapshot
	vsc *snapshotv1.VolumeSnapshotContent
	// The items to store, read once it is ready (prepareCSI), or why they
	// could not be.
	vsItem, vscItem rawItem
	prepErr         error
	// err is why the snapshot is not in the backup (recorded once);
	// skipped: it was not attempted (no class, and only the default chose
	// it), which is no failure.
	err     error
	skipped bool
}

func (s *csiSnap) claim() string { return s.pvc.Namespace + "/" + s.pvc.Name }

// csiState is a backup's CSI snapshots and what deciding them needs.
type csiState struct {
	mu    sync.Mutex
	snaps []*csiSnap
	// byClaim: namespace/name of a claim -> its snapshot.
	byClaim map[string]*csiSnap
	// checked: the claims whose snapshot was decided (taken or not), so
	// a claim is looked at once, whether its page created the snapshots
	// ahead of storing (snapshotPage) or writeItem does.
	checked map[string]bool
	// volumeStep: claims whose snapshot is the native one, taken after
	// the archive; a pod mounting one keeps its post hooks until then.
	volumeStep map[string]bool
	// classesStored are the VolumeSnapshotClasses in the archive;
	// classes are those the snapshots used, for
	// <backup>-csi-volumesnapshotclasses.json.gz.
	classesStored map[string]bool
	classes       []snapshotv1.VolumeSnapshotClass

	helperOnce sync.Once
	helper     volumehelper.VolumeHelper
	helperErr  error
	locsOnce   sync.Once
	locs       []*snapshotLocation
	locsErr    error

	// hookedClaims: namespace -> claim name -> the pods with backup hooks
	// that mount it; such a claim is stored (and snapshotted) with the pod.
	hookedClaims map[string]map[string]bool
	// held are the claims waiting for their pod, in the order listed.
	held []heldClaim
}

type heldClaim struct {
	rt resourceType
	it rawItem
}

func newCSIState() *csiState {
	return &csiState{byClaim: map[string]*csiSnap{}, checked: map[string]bool{}, volumeStep: map[string]bool{},
		classesStored: map[string]bool{}, hookedClaims: map[string]map[string]bool{}}
}

// volumeHelper is the backup's one VolumeHelper, made on first use.
func (r *run) volumeHelper(ctx context.Context) (volumehelper.VolumeHelper, error) {
	c := r.csi
	c.helperOnce.Do(func() {
		if r.e.Client == nil {
			c.helperErr = errors.New("volume decisions need a Kubernetes client; the engine has none")
			return
		}
		c.helper, c.helperErr = volumehelper.NewVolumeHelperForBackup(ctx, r.b, r.e.Client, r.e.Log)
		if c.helperErr != nil {
			c.helperErr = fmt.Errorf("preparing volume decisions: %w", c.helperErr)
		}
	})
	return c.helper, c.helperErr
}

// openLocations opens the backup's VolumeSnapshotLocations once.
func (r *run) openLocations(ctx context.Context) ([]*snapshotLocation, error) {
	c := r.csi
	c.locsOnce.Do(func() { c.locs, c.locsErr = r.snapshotLocations(ctx) })
	return c.locs, c.locsErr
}

// snapshotAPIServed reports whether the cluster serves the snapshot kinds.
func (r *run) snapshotAPIServed() bool {
	_, vs := r.typesByGR[csisnapshot.VolumeSnapshots]
	_, vsc := r.typesByGR[csisnapshot.VolumeSnapshotContents]
	return vs && vsc
}

// claimsToHold says which claims of a page to keep back: those mounted by
// a pod with backup hooks are stored (item actions, snapshot) between
// that pod's pre and post hooks (Velero's item block), not when claims
// are listed, which is before pods.
func (r *run) claimsToHold(ctx context.Context, items []rawItem) map[int]bool {
	var out map[int]bool
	for i, it := range items {
		if r.stored != nil && r.stored[pvcResource.String()+"/"+it.Namespace+"/"+it.Name] {
			continue
		}
		if !r.hookedClaimsOf(ctx, it.Namespace)[it.Name] {
			continue
		}
		if out == nil {
			out = map[int]bool{}
		}
		out[i] = true
	}
	return out
}

// hookedClaimsOf lists the namespace's pods once and names the claims
// that pods with backup hooks mount.
func (r *run) hookedClaimsOf(ctx context.Context, ns string) map[string]bool {
	c := r.csi
	if got, ok := c.hookedClaims[ns]; ok {
		return got
	}
	out := map[string]bool{}
	c.hookedClaims[ns] = out
	if r.e.Client == nil || r.hookRules == nil {
		return out
	}
	pods := &corev1.PodList{}
	lctx, cancel := context.WithTimeout(ctx, csiCallTimeout)
	defer cancel()
	if err := r.e.Client.List(lctx, pods, crclient.InNamespace(ns)); err != nil {
		// Not fatal: the claims are then stored as listed, and the pods'
		// post hooks wait for the end of the backup.
		r.log.Warn("listing pods to group claims with their hooked pods", "namespace", ns, "error", err)
		return out
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		meta := hooks.PodMeta{Namespace: pod.Namespace, Name: pod.Name, Labels: pod.Labels, Annotations: pod.Annotations}
		pre, _ := r.hookRules.ForPod(meta, hooks.PhasePre)
		post, _ := r.hookRules.ForPod(meta, hooks.PhasePost)
		if len(pre)+len(post) == 0 {
			continue
		}
		for _, claim := range podClaims(pod) {
			out[claim] = true
		}
	}
	return out
}

// podClaims names the claims a pod mounts, its generic ephemeral
// volumes' included.
func podClaims(pod *corev1.Pod) []string {
	var out []string
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			out = append(out, v.PersistentVolumeClaim.ClaimName)
		case v.Ephemeral != nil:
			out = append(out, pod.Name+"-"+v.Name)
		}
	}
	return out
}

// writeHeldClaims stores the held claims of pod (all of them when pod is
// nil: their pods were not stored).
func (r *run) writeHeldClaims(ctx context.Context, aw *archive.Writer, pod *corev1.Pod) error {
	var keep []heldClaim
	var mine []heldClaim
	want := map[string]bool{}
	if pod != nil {
		for _, c := range podClaims(pod) {
			want[c] = true
		}
	}
	for _, h := range r.csi.held {
		if pod == nil || (h.it.Namespace == pod.Namespace && want[h.it.Name]) {
			mine = append(mine, h)
		} else {
			keep = append(keep, h)
		}
	}
	r.csi.held = keep
	for _, h := range mine {
		if err := r.writeItem(ctx, aw, h.rt, h.it, nil, 0); err != nil {
			return err
		}
	}
	return nil
}

// podVolumesDone waits until the CSI snapshots of pod's claims are cut
// (their content has a handle), and reports whether the pod's post hooks
// may run now: not when a claim's snapshot is the native one, taken after
// the archive.
func (r *run) podVolumesDone(ctx context.Context, pod *corev1.Pod) bool {
	done := true
	for _, claim := range podClaims(pod) {
		key := pod.Namespace + "/" + claim
		r.csi.mu.Lock()
		s, native := r.csi.byClaim[key], r.csi.volumeStep[key]
		r.csi.mu.Unlock()
		if native {
			done = false
		}
		if s != nil && s.err == nil {
			if err := r.waitCSI(ctx, s, false); err != nil {
				r.csiFailed(ctx, s, err)
			}
		}
	}
	return done
}

// snapshotPage creates the CSI snapshots of a page of claims before the
// page is stored, several claims at a time (volumeWorkers): each takes a
// few API calls (the claim's volume, its class, the snapshot's create),
// and made one claim after another they kept a backup of a hundred claims
// waiting on the API server for seconds while the snapshot controllers
// sat idle. Storing each claim (writeItem, csiAtClaim) then finds its
// snapshot and names it. skip says which items are not stored now (held
// with their pod, or filtered out); items stored already and those an
// action skipped or failed on are left alone too.
func (r *run) snapshotPage(ctx context.Context, rt resourceType, items []rawItem, pre []*actionResult, skip func(int) bool) {
	gr := rt.GroupResource().String()
	work := make(chan []byte)
	var wg sync.WaitGroup
	for range min(volumeWorkers, len(items)) {
		wg.Go(func() {
			for data := range work {
				pvc := &corev1.PersistentVolumeClaim{}
				if err := json.Unmarshal(data, pvc); err == nil && pvc.Spec.VolumeName != "" {
					r.claimSnapshot(ctx, pvc)
				}
			}
		})
	}
	for i, it := range items {
		if skip(i) || r.stored[gr+"/"+it.Namespace+"/"+it.Name] {
			continue
		}
		data := it.JSON
		if p := pre[i]; p != nil {
			if p.err != nil || p.skip {
				continue
			}
			data = p.data
		}
		select {
		case work <- data:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
}

// csiAtClaim takes the CSI snapshot of a stored claim's volume when its
// decision says so (unless its page took it already), and returns the
// claim's JSON with Velero's labels and annotations naming the
// VolumeSnapshot. Problems are recorded; the claim is stored either way.
func (r *run) csiAtClaim(ctx context.Context, data []byte) []byte {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := json.Unmarshal(data, pvc); err != nil || pvc.Spec.VolumeName == "" {
		return data
	}
	s := r.claimSnapshot(ctx, pvc)
	if s == nil || s.err != nil || s.name == "" {
		return data
	}
	out, err := addMetadata(data, csisnapshot.ClaimLabels(r.b, s.name), csisnapshot.ClaimAnnotations(s.name))
	if err != nil {
		return data
	}
	if raised, err := raiseRequestToCapacity(out, pvc, s.pv); err == nil {
		out = raised
	}
	return out
}

// raiseRequestToCapacity stores a snapshotted claim asking for at least its
// volume's capacity. Velero stores the claim asking for the snapshot's
// restore size when that is larger (its claim action waits for the
// snapshot first); Lifeboat stores the claim as the snapshot is asked for,
// before its size is known, so it takes the volume's capacity, which is
// what a snapshot of it restores into. Without this, a claim of 1500Mi
// whose provisioner rounded the volume up to 2Gi could not be restored by
// Velero from a 2Gi snapshot (the provisioner refuses a volume smaller
// than its source). Lifeboat's own restore also raises the request to the
// snapshot's recorded restore size (internal/restore/csi.go).
func raiseRequestToCapacity(data []byte, pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) ([]byte, error) {
	capacity, ok := pv.Spec.Capacity[corev1.ResourceStorage]
	if !ok || capacity.IsZero() {
		return data, nil
	}
	if req, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; ok && req.Cmp(capacity) >= 0 {
		return data, nil
	}
	var obj map[string]any
	if err := utiljson.Unmarshal(data, &obj); err != nil {
		return nil, err
	}
	if err := unstructured.SetNestedField(obj, capacity.String(), "spec", "resources", "requests", "storage"); err != nil {
		return nil, err
	}
	return json.Marshal(obj)
}

// claimSnapshot returns the claim's CSI snapshot, created on the first
// call for the claim when its decision says so; nil when none is taken.
// Calls for different claims may run at once.
func (r *run) claimSnapshot(ctx context.Context, pvc *corev1.PersistentVolumeClaim) *csiSnap {
	key := pvc.Namespace + "/" + pvc.Name
	r.csi.mu.Lock()
	s, seen := r.csi.byClaim[key], r.csi.checked[key]
	r.csi.checked[key] = true
	r.csi.mu.Unlock()
	if seen {
		return s
	}
	pv := &corev1.PersistentVolume{}
	gctx, cancel := context.WithTimeout(ctx, csiCallTimeout)
	defer cancel()
	if r.e.Client == nil || r.e.Client.Get(gctx, crclient.ObjectKey{Name: pvc.Spec.VolumeName}, pv) != nil {
		return nil // decided (and reported) with the stored PV, if any, later
	}
	if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.Namespace != pvc.Namespace || pv.Spec.ClaimRef.Name != pvc.Name {
		return nil
	}
	h, err := r.volumeHelper(ctx)
	if err != nil {
		return nil // reported by the volume step
	}
	v := &volumeItem{pv: pv, pvc: pvc}
	d, err := r.decision(h, v)
	if err != nil || d.Action != policy.Snapshot {
		return nil
	}
	native, err := r.nativeTakes(ctx, pv)
	if err != nil || native {
		r.csi.mu.Lock()
		r.csi.volumeStep[key] = true
		r.csi.mu.Unlock()
		return nil
	}
	if pv.Spec.CSI == nil {
		return nil // the volume step says why no snapshot was taken
	}
	explicit := d.Source == volumehelper.SourceRule || d.Source == volumehelper.SourceSnapshotVolumes
	if !r.snapshotAPIServed() {
		if explicit {
			r.results.Warning(pvc.Namespace, fmt.Sprintf("%s: CSI snapshot not taken: the cluster does not serve volumesnapshots.snapshot.storage.k8s.io; "+
				"install the external-snapshotter's CRDs and snapshot controller, or configure a VolumeSnapshotLocation", v))
		}
		return nil
	}
	s = &csiSnap{pvc: pvc, pv: pv}
	r.csi.mu.Lock()
	r.csi.byClaim[key] = s
	r.csi.snaps = append(r.csi.snaps, s)
	r.csi.mu.Unlock()
	if err := r.createVolumeSnapshot(ctx, s); err != nil {
		s.err = err
		msg := fmt.Sprintf("PersistentVolumeClaim %s: CSI snapshot not taken: %v", key, err)
		var noClass *noClassError
		if errors.As(err, &noClass) && !explicit {
			// Only the default chose the snapshot (snapshotVolumes
			// unset): a cluster where nobody set CSI snapshots up keeps
			// backing up as it did, with a warning saying how to.
			s.skipped = true
			r.results.Warning(pvc.Namespace, msg)
			r.log.Warn("CSI snapshot not taken", "claim", key, "error", err)
			return s
		}
		r.results.Error(pvc.Namespace, msg)
		r.log.Error("CSI snapshot not taken", "claim", key, "error", err)
	}
	return s
}

// nativeTakes reports whether a VolumeSnapshotLocation's VolumeSnapshotter
// knows the volume: then it is snapshotted natively, as Velero does
// without its EnableCSI feature.
func (r *run) nativeTakes(ctx context.Context, pv *corev1.PersistentVolume) (bool, error) {
	locs, err := r.openLocations(ctx)
	if err != nil || len(locs) == 0 {
		return false, err
	}
	obj, err := toUnstructured(pv)
	if err != nil {
		return false, err
	}
	for _, loc := range locs {
		vs, err := loc.snapshotter(r.e.Plugins)
		if err != nil {
			return true, err // the volume step reports it
		}
		if id, err := vs.GetVolumeID(obj); err != nil || id != "" {
			return true, err
		}
	}
	return false, nil
}

// createVolumeSnapshot creates the claim's VolumeSnapshot with the class
// Velero would choose.
func (r *run) createVolumeSnapshot(ctx context.Context, s *csiSnap) error {
	if s.pvc.Spec.StorageClassName == nil || *s.pvc.Spec.StorageClassName == "" {
		return &noClassError{errors.New("the claim has no storage class, so no VolumeSnapshotClass can be chosen for it; give the claim a storageClassName")}
	}
	cctx, cancel := context.WithTimeout(ctx, csiCallTimeout)
	defer cancel()
	sc := &storagev1.StorageClass{}
	if err := r.e.Client.Get(cctx, crclient.ObjectKey{Name: *s.pvc.Spec.StorageClassName}, sc); err != nil {
		err = fmt.Errorf("reading the claim's StorageClass %s: %w", *s.pvc.Spec.StorageClassName, err)
		if apierrors.IsNotFound(err) {
			return &noClassError{err}
		}
		return err
	}
	classes := &snapshotv1.VolumeSnapshotClassList{}
	if err := r.e.Client.List(cctx, classes); err != nil {
		return fmt.Errorf("listing VolumeSnapshotClasses: %w", err)
	}
	class, err := csisnapshot.ChooseClass(classes.Items, sc.Provisioner, r.b, s.pvc)
	if err != nil {
		return &noClassError{err}
	}
	vs := csisnapshot.NewVolumeSnapshot(r.b, s.pvc, class.Name)
	if err := r.e.Client.Create(cctx, vs); err != nil {
		return fmt.Errorf("creating its VolumeSnapshot: %w", err)
	}
	s.name, s.class, s.created = vs.Name, class.Name, time.Now()
	r.log.Info("CSI VolumeSnapshot created", "claim", s.claim(), "volumeSnapshot", vs.Name, "class", class.Name, "driver", class.Driver)
	return nil
}

// noClassError: no VolumeSnapshotClass could be chosen for a claim.
type noClassError struct{ err error }

func (e *noClassError) Error() string { return e.err.Error() }
func (e *noClassError) Unwrap() error { return e.err }

// csiTimeout is the backup's spec.csiSnapshotTimeout, or Velero's default.
func (r *run) csiTimeout() time.Duration {
	if d := r.b.Spec.CSISnapshotTimeout.Duration; d > 0 {
		return d
	}
	return csisnapshot.DefaultTimeout
}

// waitCSI waits, up to the timeout counted from the snapshot's creation,
// until its content has a snapshot handle (ready false) or the snapshot is
// ready to use (ready true, which also fills s.vs and s.vsc).
func (r *run) waitCSI(ctx context.Context, s *csiSnap, ready bool) error {
	deadline := s.created.Add(r.csiTimeout())
	delay := 50 * time.Millisecond
	var lastErr string
	for {
		vs, vsc, err := r.readCSI(ctx, s)
		if err != nil {
			return err
		}
		if vs.Status != nil && vs.Status.Error != nil && vs.Status.Error.Message != nil {
			lastErr = *vs.Status.Error.Message
		}
		if vsc != nil && vsc.Status != nil && vsc.Status.Error != nil && vsc.Status.Error.Message != nil {
			lastErr = *vsc.Status.Error.Message
		}
		switch {
		case !ready && vsc != nil && vsc.Status != nil && vsc.Status.SnapshotHandle != nil:
			return nil
		case ready && vsc != nil && vs.Status.ReadyToUse != nil && *vs.Status.ReadyToUse:
			s.vs, s.vsc = vs, vsc
			return nil
		}
		if time.Now().After(deadline) {
			what := "ready to use"
			if !ready {
				what = "cut (its content has no snapshot handle)"
			}
			msg := fmt.Sprintf("VolumeSnapshot %s/%s was not %s within spec.csiSnapshotTimeout (%s)", s.pvc.Namespace, s.name, what, r.csiTimeout())
			if lastErr != "" {
				msg += "; last error: " + lastErr
			}
			return errors.New(msg + "; check the CSI driver and its csi-snapshotter sidecar, or raise spec.csiSnapshotTimeout")
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for VolumeSnapshot %s/%s: %w", s.pvc.Namespace, s.name, context.Cause(ctx))
		case <-time.After(delay):
		}
		delay = min(2*delay, time.Second)
	}
}

// readCSI reads the snapshot and, once bound, its content.
func (r *run) readCSI(ctx context.Context, s *csiSnap) (*snapshotv1.VolumeSnapshot, *snapshotv1.VolumeSnapshotContent, error) {
	cctx, cancel := context.WithTimeout(ctx, csiCallTimeout)
	defer cancel()
	vs := &snapshotv1.VolumeSnapshot{}
	if err := r.e.Client.Get(cctx, crclient.ObjectKey{Namespace: s.pvc.Namespace, Name: s.name}, vs); err != nil {
		return nil, nil, fmt.Errorf("reading VolumeSnapshot %s/%s: %w", s.pvc.Namespace, s.name, err)
	}
	if vs.Status == nil || vs.Status.BoundVolumeSnapshotContentName == nil || *vs.Status.BoundVolumeSnapshotContentName == "" {
		return vs, nil, nil
	}
	vsc := &snapshotv1.VolumeSnapshotContent{}
	if err := r.e.Client.Get(cctx, crclient.ObjectKey{Name: *vs.Status.BoundVolumeSnapshotContentName}, vsc); err != nil {
		if apierrors.IsNotFound(err) {
			return vs, nil, nil
		}
		return nil, nil, fmt.Errorf("reading VolumeSnapshotContent %s: %w", *vs.Status.BoundVolumeSnapshotContentName, err)
	}
	return vs, vsc, nil
}

// csiFailed records a snapshot that will not be in the backup and deletes
// it, storage snapshot included, as Velero does: nothing would ever
// delete it otherwise.
func (r *run) csiFailed(ctx context.Context, s *csiSnap, err error) {
	if s.err != nil {
		return
	}
	s.err = err
	r.results.Error(s.pvc.Namespace, fmt.Sprintf("PersistentVolumeClaim %s: CSI snapshot failed: %v", s.claim(), err))
	r.log.Error("CSI snapshot failed", "claim", s.claim(), "volumeSnapshot", s.name, "error", err)
	r.deleteCSI(ctx, s, snapshotv1.VolumeSnapshotContentDelete)
}

// finishCSI stores the claims still held, waits for every snapshot to be
// ready and stores its VolumeSnapshot, content and class.
func (r *run) finishCSI(ctx context.Context, aw *archive.Writer) error {
	if err := r.writeHeldClaims(ctx, aw, nil); err != nil {
		return err
	}
	// Claims' snapshots are created a page at a time, several at once:
	// stored in claim order, the archive does not depend on which create
	// returned first.
	snaps := slices.Clone(r.csi.snaps)
	slices.SortStableFunc(snaps, func(a, b *csiSnap) int { return strings.Compare(a.claim(), b.claim()) })
	if len(snaps) == 0 {
		return nil
	}
	errs := make([]error, len(snaps))
	var wg sync.WaitGroup
	sem := make(chan struct{}, volumeWorkers)
	for i, s := range snaps {
		if s.err != nil {
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if errs[i] = r.waitCSI(ctx, s, true); errs[i] == nil {
				r.prepareCSI(ctx, s)
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("backup stopped before its CSI snapshots were ready: %w", context.Cause(ctx))
	}
	for i, s := range snaps {
		if s.err != nil {
			continue
		}
		if errs[i] != nil {
			r.csiFailed(ctx, s, errs[i])
			continue
		}
		if err := r.storeCSI(ctx, aw, s); err != nil {
			return err
		}
	}
	return nil
}

// prepareCSI readies a ready snapshot's objects for the archive: the
// content labelled with the backup (in the cluster too, as Velero does, so
// a content left behind can be found), then both read as stored, the
// VolumeSnapshot with the content's handle, driver, deletion policy and
// restore size as annotations. It runs as each snapshot becomes ready,
// several at once; a failure is kept for storeCSI to record.
func (r *run) prepareCSI(ctx context.Context, s *csiSnap) {
	cctx, cancel := context.WithTimeout(ctx, csiCallTimeout)
	defer cancel()
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q}}}`, v1.BackupNameLabel, v1.LabelValue(r.b.Name))
	if err := r.e.Client.Patch(cctx, s.vsc.DeepCopy(), crclient.RawPatch(types.MergePatchType, patch)); err != nil {
		r.log.Warn("labelling the VolumeSnapshotContent with the backup", "volumeSnapshotContent", s.vsc.Name, "error", err)
	}
	vsRT, vscRT := r.typesByGR[csisnapshot.VolumeSnapshots], r.typesByGR[csisnapshot.VolumeSnapshotContents]
	if s.vsItem, s.prepErr = r.e.lister.get(cctx, vsRT, s.pvc.Namespace, s.name); s.prepErr != nil {
		return
	}
	if s.vscItem, s.prepErr = r.e.lister.get(cctx, vscRT, "", s.vsc.Name); s.prepErr != nil {
		return
	}
	s.vsItem.JSON, s.prepErr = addMetadata(s.vsItem.JSON, nil, csisnapshot.StoredAnnotations(s.vsc))
}

// storeCSI writes a ready snapshot's objects (prepareCSI) into the archive
// as Velero's finalized backup holds them: the VolumeSnapshot, the
// content, and the class.
func (r *run) storeCSI(ctx context.Context, aw *archive.Writer, s *csiSnap) error {
	if s.prepErr != nil {
		r.csiFailed(ctx, s, s.prepErr)
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, csiCallTimeout)
	defer cancel()
	vsRT, vscRT := r.typesByGR[csisnapshot.VolumeSnapshots], r.typesByGR[csisnapshot.VolumeSnapshotContents]
	if err := r.writeCSIItem(aw, vsRT, s.vsItem); err != nil {
		return err
	}
	if err := r.writeCSIItem(aw, vscRT, s.vscItem); err != nil {
		return err
	}
	if !slices.ContainsFunc(r.csi.classes, func(c snapshotv1.VolumeSnapshotClass) bool { return c.Name == s.class }) {
		cls := snapshotv1.VolumeSnapshotClass{}
		if err := r.e.Client.Get(cctx, crclient.ObjectKey{Name: s.class}, &cls); err == nil {
			r.csi.classes = append(r.csi.classes, cls)
		}
	}
	if classRT, ok := r.typesByGR[csisnapshot.VolumeSnapshotClasses]; ok && !r.csi.classesStored[s.class] {
		cls, err := r.e.lister.get(cctx, classRT, "", s.class)
		if err != nil {
			r.results.Error("", fmt.Sprintf("VolumeSnapshotClass %s of claim %s's snapshot: %v", s.class, s.claim(), err))
		} else if err := r.writeCSIItem(aw, classRT, cls); err != nil {
			return err
		}
	}
	r.log.Info("CSI snapshot stored", "claim", s.claim(), "volumeSnapshot", s.name, "volumeSnapshotContent", s.vsc.Name,
		"snapshotHandle", deref(s.vsc.Status.SnapshotHandle))
	return nil
}

// writeCSIItem stores one of the CSI objects. Like Velero's, they are
// included whatever the backup's resource filters say
// (backup.velero.io/must-include-additional-items): without them the
// claim could not be restored.
func (r *run) writeCSIItem(aw *archive.Writer, rt resourceType, it rawItem) error {
	gr := rt.GroupResource()
	ref := archive.ItemRef{GroupResource: gr.String(), Version: rt.GVR.Version, Namespace: it.Namespace, Name: it.Name}
	if err := aw.WriteItem(ref, it.JSON); err != nil {
		return fmt.Errorf("writing the archive: %w", err)
	}
	if gr == csisnapshot.VolumeSnapshotClasses {
		r.csi.classesStored[it.Name] = true
	}
	if r.stored != nil {
		r.stored[gr.String()+"/"+it.Namespace+"/"+it.Name] = true
	}
	r.addToResourceList(rt, it.Namespace, it.Name)
	if it.Namespace != "" {
		r.namespacesWithItems[it.Namespace] = true
	}
	r.backedUp++
	r.perType[gr]++
	return nil
}

// noteListedClass notes a VolumeSnapshotClass stored as listed, so the
// end does not store it again. (VolumeSnapshots and contents are never
// listed: every backup excludes them, as Velero's does.)
func (r *run) noteListedClass(gr schema.GroupResource, it rawItem) {
	if gr == csisnapshot.VolumeSnapshotClasses {
		r.csi.classesStored[it.Name] = true
	}
}

// releaseCSI ends the backup's hold on the snapshots in the cluster. A
// stored backup keeps them (Velero's finalize step: the content set to
// Retain, then content and snapshot deleted, so the storage snapshot
// outlives both and belongs to the backup alone); a backup that failed
// deletes them, storage snapshot included.
func (r *run) releaseCSI(ctx context.Context, stored bool) {
	ctx = context.WithoutCancel(ctx)
	policy := snapshotv1.VolumeSnapshotContentDelete
	if stored {
		policy = snapshotv1.VolumeSnapshotContentRetain
	}
	// Several at once (volumeWorkers): three API calls per snapshot, one
	// snapshot after another, kept a backup of a hundred claims from
	// completing for seconds.
	var wg sync.WaitGroup
	sem := make(chan struct{}, volumeWorkers)
	for _, s := range r.csi.snaps {
		if s.err != nil || s.name == "" {
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			r.deleteCSI(ctx, s, policy)
		})
	}
	wg.Wait()
}

// deleteCSI sets the content's deletion policy and deletes it (when
// retained) and the snapshot. Failures are logged: the objects are
// labelled with the backup's name, so they can be found.
func (r *run) deleteCSI(ctx context.Context, s *csiSnap, policy snapshotv1.DeletionPolicy) {
	cctx, cancel := context.WithTimeout(ctx, csiCallTimeout)
	defer cancel()
	// A ready snapshot's content is known; the others' are looked up.
	vsc := s.vsc.DeepCopy()
	if vsc == nil {
		var err error
		if _, vsc, err = r.readCSI(cctx, s); err != nil && !apierrors.IsNotFound(errors.Unwrap(err)) {
			r.log.Warn("reading a CSI snapshot to release it", "volumeSnapshot", s.pvc.Namespace+"/"+s.name, "error", err)
		}
	}
	if vsc != nil {
		patch := fmt.Appendf(nil, `{"spec":{"deletionPolicy":%q}}`, policy)
		if err := r.e.Client.Patch(cctx, vsc, crclient.RawPatch(types.MergePatchType, patch)); err != nil {
			r.log.Warn("setting the VolumeSnapshotContent's deletionPolicy", "volumeSnapshotContent", vsc.Name, "policy", policy, "error", err)
			if policy == snapshotv1.VolumeSnapshotContentRetain {
				return // deleting now would delete the storage snapshot
			}
		}
		if policy == snapshotv1.VolumeSnapshotContentRetain {
			if err := r.e.Client.Delete(cctx, vsc); err != nil && !apierrors.IsNotFound(err) {
				r.log.Warn("deleting the VolumeSnapshotContent", "volumeSnapshotContent", vsc.Name, "error", err)
			}
		}
	}
	vs := &snapshotv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: s.pvc.Namespace, Name: s.name}}
	if err := r.e.Client.Delete(cctx, vs); err != nil && !apierrors.IsNotFound(err) {
		r.log.Warn("deleting the VolumeSnapshot", "volumeSnapshot", s.pvc.Namespace+"/"+s.name, "error", err)
	}
}

// csiInfo fills a volume's information from its CSI snapshot, when it got
// one; ok is false otherwise.
func (r *run) csiInfo(v *volumeItem, info *volumefiles.BackupVolumeInfo) bool {
	if v.pvc == nil {
		return false
	}
	r.csi.mu.Lock()
	s := r.csi.byClaim[v.pvc.Namespace+"/"+v.pvc.Name]
	r.csi.mu.Unlock()
	if s == nil {
		return false
	}
	if s.skipped {
		info.Skipped, info.SkippedReason = true, "CSI snapshot not taken: "+s.err.Error()
		return true
	}
	if info.PVName == "" {
		info.PVName = s.pv.Name
		info.PVInfo = &volumefiles.PVInfo{ReclaimPolicy: string(s.pv.Spec.PersistentVolumeReclaimPolicy), Labels: s.pv.Labels}
	}
	info.BackupMethod = volumefiles.CSISnapshot
	csi := &volumefiles.CSISnapshotInfo{}
	if s.name != "" {
		csi.VolumeSnapshot = s.pvc.Namespace + "/" + s.name
	}
	info.CSISnapshotInfo = csi
	if s.err != nil {
		info.Result = volumefiles.ResultFailed
		info.Skipped, info.SkippedReason = true, "CSI snapshot failed: "+s.err.Error()
		return true
	}
	info.PreserveLocalSnapshot = true
	info.Result = volumefiles.ResultSucceeded
	if s.vs != nil && s.vs.Status != nil {
		info.StartTimestamp = s.vs.Status.CreationTime
		csi.ReadyToUse = s.vs.Status.ReadyToUse
		if s.vs.Status.RestoreSize != nil {
			csi.Size = s.vs.Status.RestoreSize.Value()
		}
	}
	if s.vsc != nil {
		csi.VSCName, csi.Driver = s.vsc.Name, s.vsc.Spec.Driver
		if s.vsc.Status != nil {
			csi.SnapshotHandle = deref(s.vsc.Status.SnapshotHandle)
		}
	}
	return true
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// addMetadata merges labels and annotations into an item's JSON.
func addMetadata(data []byte, labels, annotations map[string]string) ([]byte, error) {
	var obj map[string]any
	if err := utiljson.Unmarshal(data, &obj); err != nil {
		return nil, err
	}
	meta, _ := obj["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		obj["metadata"] = meta
	}
	for field, add := range map[string]map[string]string{"labels": labels, "annotations": annotations} {
		if len(add) == 0 {
			continue
		}
		m, _ := meta[field].(map[string]any)
		if m == nil {
			m = map[string]any{}
		}
		for k, v := range add {
			m[k] = v
		}
		meta[field] = m
	}
	return json.Marshal(obj)
}

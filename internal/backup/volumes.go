package backup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/volumes"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	"github.com/lifeboat-io/lifeboat/pkg/policy"
	"github.com/lifeboat-io/lifeboat/pkg/volumehelper"
)

var (
	pvResource  = schema.GroupResource{Resource: "persistentvolumes"}
	pvcResource = schema.GroupResource{Resource: "persistentvolumeclaims"}
	podResource = schema.GroupResource{Resource: "pods"}
)

// volumeWorkers bounds concurrent decisions and snapshot calls.
const volumeWorkers = 8

// The zone labels Velero reads a volume's availability zone from, newest
// first.
var zoneLabels = []string{"topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone"}

// storedVolumes remembers the volume-related items as stored (after item
// actions ran), so that decisions are taken on what the backup holds and a
// plugin's claim of a custom volume is seen.
type storedVolumes struct {
	mu   sync.Mutex
	pvs  map[string]*corev1.PersistentVolume
	pvcs map[string]*corev1.PersistentVolumeClaim // by namespace/name
	// pods keep only what fs-backup decisions need: no spec beyond volumes.
	pods []*corev1.Pod
}

func newStoredVolumes() *storedVolumes {
	return &storedVolumes{pvs: map[string]*corev1.PersistentVolume{}, pvcs: map[string]*corev1.PersistentVolumeClaim{}}
}

// hasPV reports whether the PV is stored already: a claim's volume is
// stored with the claim (as Velero's claim action does) and must not be
// stored again when PersistentVolumes are listed.
func (s *storedVolumes) hasPV(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.pvs[name]
	return ok
}

// observe decodes a stored item of interest; other items cost a map lookup.
func (s *storedVolumes) observe(gr schema.GroupResource, data []byte) error {
	switch gr {
	case pvResource:
		pv := &corev1.PersistentVolume{}
		if err := json.Unmarshal(data, pv); err != nil {
			return fmt.Errorf("decoding PersistentVolume: %w", err)
		}
		s.mu.Lock()
		s.pvs[pv.Name] = pv
		s.mu.Unlock()
	case pvcResource:
		pvc := &corev1.PersistentVolumeClaim{}
		if err := json.Unmarshal(data, pvc); err != nil {
			return fmt.Errorf("decoding PersistentVolumeClaim: %w", err)
		}
		s.mu.Lock()
		s.pvcs[pvc.Namespace+"/"+pvc.Name] = pvc
		s.mu.Unlock()
	case podResource:
		// Only what fs-backup decisions read: a pod's containers, status
		// and the rest are most of its JSON and are left undecoded.
		var pod struct {
			Metadata struct {
				Namespace   string            `json:"namespace"`
				Name        string            `json:"name"`
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
			Spec struct {
				Volumes []corev1.Volume `json:"volumes"`
			} `json:"spec"`
		}
		if err := json.Unmarshal(data, &pod); err != nil {
			return fmt.Errorf("decoding Pod: %w", err)
		}
		slim := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Metadata.Namespace, Name: pod.Metadata.Name, Annotations: pod.Metadata.Annotations}}
		for _, vol := range pod.Spec.Volumes {
			// A claim's volume is decided with the claim.
			if vol.PersistentVolumeClaim == nil {
				slim.Spec.Volumes = append(slim.Spec.Volumes, vol)
			}
		}
		if len(slim.Spec.Volumes) > 0 {
			s.mu.Lock()
			s.pods = append(s.pods, slim)
			s.mu.Unlock()
		}
	}
	return nil
}

// volumeItem is one volume to decide: a stored PV (with its claim, when
// that is stored too), a stored claim without a stored PV, or one volume of
// a stored pod.
type volumeItem struct {
	pv  *corev1.PersistentVolume
	pvc *corev1.PersistentVolumeClaim
	pod *corev1.Pod
	vol *corev1.Volume
}

func (v *volumeItem) String() string {
	switch {
	case v.pod != nil:
		return fmt.Sprintf("pod volume %s/%s:%s", v.pod.Namespace, v.pod.Name, v.vol.Name)
	case v.pvc != nil && v.pv != nil:
		return fmt.Sprintf("PersistentVolume %s (claim %s/%s)", v.pv.Name, v.pvc.Namespace, v.pvc.Name)
	case v.pv != nil:
		return "PersistentVolume " + v.pv.Name
	}
	return fmt.Sprintf("PersistentVolumeClaim %s/%s", v.pvc.Namespace, v.pvc.Name)
}

func (v *volumeItem) namespace() string {
	switch {
	case v.pod != nil:
		return v.pod.Namespace
	case v.pvc != nil:
		return v.pvc.Namespace
	}
	return ""
}

// items lists the volumes in a stable order: PVs by name, unbound or
// PV-less claims, then pod volumes.
func (s *storedVolumes) items() []*volumeItem {
	var out []*volumeItem
	claimOf := map[string]*corev1.PersistentVolumeClaim{}
	for _, pvc := range s.pvcs {
		if pvc.Spec.VolumeName != "" {
			claimOf[pvc.Spec.VolumeName] = pvc
		}
	}
	names := make([]string, 0, len(s.pvs))
	for name := range s.pvs {
		names = append(names, name)
	}
	sort.Strings(names)
	covered := map[*corev1.PersistentVolumeClaim]bool{}
	for _, name := range names {
		pv := s.pvs[name]
		pvc := claimOf[name]
		if pvc != nil && (pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.Namespace != pvc.Namespace || pv.Spec.ClaimRef.Name != pvc.Name) {
			pvc = nil
		}
		covered[pvc] = true
		out = append(out, &volumeItem{pv: pv, pvc: pvc})
	}
	keys := make([]string, 0, len(s.pvcs))
	for k, pvc := range s.pvcs {
		if !covered[pvc] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, &volumeItem{pvc: s.pvcs[k]})
	}
	sort.Slice(s.pods, func(i, j int) bool {
		a, b := s.pods[i], s.pods[j]
		return a.Namespace < b.Namespace || (a.Namespace == b.Namespace && a.Name < b.Name)
	})
	for _, pod := range s.pods {
		for i := range pod.Spec.Volumes {
			out = append(out, &volumeItem{pod: pod, vol: &pod.Spec.Volumes[i]})
		}
	}
	return out
}

// snapshotLocation is a VolumeSnapshotLocation the backup may use, with
// its VolumeSnapshotter, initialised once for the whole backup (not once
// per volume) on first use.
type snapshotLocation struct {
	name     string
	provider string
	config   map[string]string

	once    sync.Once
	vs      api.VolumeSnapshotter
	initErr error
}

func (l *snapshotLocation) snapshotter(p Plugins) (api.VolumeSnapshotter, error) {
	l.once.Do(func() {
		l.vs, l.initErr = p.VolumeSnapshotter(l.provider)
		if l.initErr == nil {
			l.initErr = l.vs.Init(l.config)
		}
		if l.initErr != nil {
			l.initErr = fmt.Errorf("VolumeSnapshotLocation %s (provider %s): %w", l.name, l.provider, l.initErr)
		}
	})
	return l.vs, l.initErr
}

// ResolveSnapshotLocations returns the VolumeSnapshotLocations a backup
// uses, by name: those spec.volumeSnapshotLocations names (each must exist,
// at most one per provider), or when it names none, the only location of
// each provider. Like Velero's server, the caller records the result in
// spec.volumeSnapshotLocations, so the backup says where its snapshots
// went. Problems come back as messages naming the field.
func ResolveSnapshotLocations(ctx context.Context, c crclient.Reader, b *v1.Backup) ([]string, []string) {
	list := &v1.VolumeSnapshotLocationList{}
	if err := c.List(ctx, list, crclient.InNamespace(b.Namespace)); err != nil {
		return nil, []string{fmt.Sprintf("spec.volumeSnapshotLocations: listing VolumeSnapshotLocations: %v", err)}
	}
	byName := map[string]*v1.VolumeSnapshotLocation{}
	byProvider := map[string][]string{}
	for i := range list.Items {
		l := &list.Items[i]
		byName[l.Name] = l
		byProvider[l.Spec.Provider] = append(byProvider[l.Spec.Provider], l.Name)
	}
	var msgs []string
	if len(b.Spec.VolumeSnapshotLocations) > 0 {
		seen := map[string]string{}
		var names []string
		for _, name := range b.Spec.VolumeSnapshotLocations {
			l, ok := byName[name]
			if !ok {
				msgs = append(msgs, fmt.Sprintf("spec.volumeSnapshotLocations: VolumeSnapshotLocation %q not found in namespace %s; create it or remove the name", name, b.Namespace))
				continue
			}
			if other, dup := seen[l.Spec.Provider]; dup && other != name {
				msgs = append(msgs, fmt.Sprintf("spec.volumeSnapshotLocations: %q and %q both use provider %s; name at most one location per provider", other, name, l.Spec.Provider))
				continue
			}
			if _, dup := seen[l.Spec.Provider]; !dup {
				seen[l.Spec.Provider] = name
				names = append(names, name)
			}
		}
		return names, msgs
	}
	var names []string
	providers := make([]string, 0, len(byProvider))
	for p := range byProvider {
		providers = append(providers, p)
	}
	sort.Strings(providers)
	for _, p := range providers {
		locs := byProvider[p]
		if len(locs) > 1 {
			sort.Strings(locs)
			// Velero refuses the backup too: snapshots in a location
			// chosen at random could not be found by the operator.
			msgs = append(msgs, fmt.Sprintf("spec.volumeSnapshotLocations: provider %s has several VolumeSnapshotLocations (%s); name the one to use", p, strings.Join(locs, ", ")))
			continue
		}
		names = append(names, locs[0])
	}
	return names, msgs
}

// decideVolumes takes every stored volume's decision and carries it out:
// snapshots through the locations' VolumeSnapshotters, warnings for what
// Lifeboat cannot do (fs-backup) or what nobody did (an unclaimed custom
// action). It fills r.snapshots and r.volumeInfos.
func (r *run) decideVolumes(ctx context.Context) error {
	items := r.volumes.items()
	if len(items) == 0 {
		return nil
	}
	if r.e.Client == nil {
		return errors.New("volume decisions need a Kubernetes client; the engine has none")
	}
	helper, err := volumehelper.NewVolumeHelperForBackup(ctx, r.b, r.e.Client, r.e.Log)
	if err != nil {
		return fmt.Errorf("preparing volume decisions: %w", err)
	}
	locs, err := r.snapshotLocations(ctx)
	if err != nil {
		return err
	}
	infos := make([]volumes.BackupVolumeInfo, len(items))
	snaps := make([]*volumes.Snapshot, len(items))
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(volumeWorkers, len(items)) {
		wg.Go(func() {
			for i := range work {
				infos[i], snaps[i] = r.decideVolume(ctx, helper, locs, items[i])
			}
		})
	}
	for i := range items {
		work <- i
	}
	close(work)
	wg.Wait()
	r.volumeInfos = infos
	for _, s := range snaps {
		if s != nil {
			r.snapshots = append(r.snapshots, *s)
		}
	}
	counts := map[string]int{}
	for _, in := range infos {
		counts[in.Decision.Action]++
	}
	r.log.Info("volume decisions", "volumes", len(items), "snapshot", counts[string(policy.Snapshot)], "fs-backup", counts[string(policy.FSBackup)],
		"custom", counts[string(policy.Custom)], "skip", counts[string(policy.Skip)], "snapshotsTaken", len(r.snapshots))
	return nil
}

// snapshotLocations opens the backup's VolumeSnapshotLocations through
// the engine's SnapshotLocations, the one way every path opens them, so
// the snapshot is taken with the location's credentials.
func (r *run) snapshotLocations(ctx context.Context) ([]*snapshotLocation, error) {
	if len(r.b.Spec.VolumeSnapshotLocations) > 0 && r.e.SnapshotLocations == nil {
		return nil, errors.New("the backup names VolumeSnapshotLocations, and the engine has no way to open them")
	}
	var locs []*snapshotLocation
	for _, name := range r.b.Spec.VolumeSnapshotLocations {
		provider, config, err := r.e.SnapshotLocations.SnapshotLocation(ctx, name)
		if err != nil {
			return nil, err
		}
		locs = append(locs, &snapshotLocation{name: name, provider: provider, config: config})
	}
	return locs, nil
}

// decideVolume decides one volume and carries the decision out. Failures
// are recorded on the backup (a failed snapshot is an error, a decision
// Lifeboat cannot carry out a warning) and in the volume's info.
func (r *run) decideVolume(ctx context.Context, h volumehelper.VolumeHelper, locs []*snapshotLocation, v *volumeItem) (volumes.BackupVolumeInfo, *volumes.Snapshot) {
	info := volumes.BackupVolumeInfo{}
	if v.pvc != nil {
		info.PVCName, info.PVCNamespace = v.pvc.Name, v.pvc.Namespace
	}
	if v.pv != nil {
		info.PVName = v.pv.Name
		info.PVInfo = &volumes.PVInfo{ReclaimPolicy: string(v.pv.Spec.PersistentVolumeReclaimPolicy), Labels: v.pv.Labels}
	}
	if v.pod != nil {
		info.PVBInfo = &volumes.PodVolumeInfo{VolumeName: v.vol.Name, PodName: v.pod.Name, PodNamespace: v.pod.Namespace}
	}
	d, err := r.decision(h, v)
	if err != nil {
		r.results.Error(v.namespace(), fmt.Sprintf("%s: deciding what to do with the volume: %v", v, err))
		info.Skipped, info.SkippedReason, info.Result = true, "no decision: "+err.Error(), volumes.ResultFailed
		info.Decision = &volumes.Decision{Action: "none", Reason: err.Error()}
		return info, nil
	}
	info.Decision = &volumes.Decision{Action: string(d.Action), Parameters: d.Parameters, Reason: d.Reason}
	if d.Rule != volumehelper.NoRule {
		rule := d.Rule
		info.Decision.Rule = &rule
	}
	skip := func(reason string) {
		info.Skipped, info.SkippedReason = true, reason
	}
	switch d.Action {
	case policy.Snapshot:
		if v.pv == nil {
			skip("its PersistentVolume is not in the backup, so there is nothing to snapshot")
			return info, nil
		}
		return r.snapshot(ctx, locs, v, d, info)
	case policy.FSBackup:
		why := "fs-backup was chosen, but Lifeboat has no file-system data mover (node agent) yet: the volume's data is not in this backup"
		r.results.Warning(v.namespace(), fmt.Sprintf("%s: %s", v, why))
		skip(why)
	case policy.Custom:
		if by := r.volumes.claimedBy(v); by != "" {
			info.Decision.ClaimedBy = by
			info.Result = volumes.ResultSucceeded
			return info, nil
		}
		why := "custom action treated as skip: no BackupItemAction claimed the volume (a plugin claims it by setting the " + volumehelper.ClaimedByAnnotation + " annotation on the claim or volume it returns)"
		r.results.Warning(v.namespace(), fmt.Sprintf("%s: %s", v, why))
		skip(why)
	default:
		reason := d.Reason
		if reason == "" {
			reason = fmt.Sprintf("volume policy %d says skip", d.Rule)
		}
		skip(reason)
	}
	return info, nil
}

func (r *run) decision(h volumehelper.VolumeHelper, v *volumeItem) (volumehelper.Decision, error) {
	switch {
	case v.pod != nil:
		return h.DecidePodVolume(*v.vol, *v.pod)
	case v.pv != nil:
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(v.pv)
		if err != nil {
			return volumehelper.Decision{}, err
		}
		return h.DecideVolume(&unstructured.Unstructured{Object: obj}, volumehelper.PersistentVolumes)
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(v.pvc)
	if err != nil {
		return volumehelper.Decision{}, err
	}
	return h.DecideVolume(&unstructured.Unstructured{Object: obj}, volumehelper.PersistentVolumeClaims)
}

// claimedBy returns the plugin that claimed the volume's custom action on
// its stored claim or PV, or "".
func (s *storedVolumes) claimedBy(v *volumeItem) string {
	if v.pvc != nil {
		if by := v.pvc.Annotations[volumehelper.ClaimedByAnnotation]; by != "" {
			return by
		}
	}
	if v.pv != nil {
		return v.pv.Annotations[volumehelper.ClaimedByAnnotation]
	}
	return ""
}

// snapshot asks each location's VolumeSnapshotter, in order, for the
// volume's ID; the first that knows the volume takes the snapshot (as
// Velero does).
func (r *run) snapshot(ctx context.Context, locs []*snapshotLocation, v *volumeItem, d volumehelper.Decision, info volumes.BackupVolumeInfo) (volumes.BackupVolumeInfo, *volumes.Snapshot) {
	// Only an explicit choice deserves a warning when it cannot be carried
	// out; the default (snapshotVolumes unset) quietly does what it can.
	explicit := d.Rule != volumehelper.NoRule || d.Reason == "snapshotVolumes=true"
	notTaken := func(why string) (volumes.BackupVolumeInfo, *volumes.Snapshot) {
		if explicit {
			r.results.Warning(v.namespace(), fmt.Sprintf("%s: snapshot not taken: %s", v, why))
		}
		info.Skipped, info.SkippedReason = true, why
		return info, nil
	}
	if len(locs) == 0 {
		return notTaken("no VolumeSnapshotLocation is configured")
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(v.pv)
	if err != nil {
		return notTaken(err.Error())
	}
	pv := &unstructured.Unstructured{Object: obj}
	var providers []string
	for _, loc := range locs {
		providers = append(providers, loc.provider)
		vs, err := loc.snapshotter(r.e.Plugins)
		if err != nil {
			return r.snapshotFailed(v, info, err)
		}
		volumeID, err := vs.GetVolumeID(pv)
		if err != nil {
			return r.snapshotFailed(v, info, fmt.Errorf("VolumeSnapshotLocation %s: GetVolumeID: %w", loc.name, err))
		}
		if volumeID == "" {
			continue
		}
		return r.takeSnapshot(ctx, vs, loc, v, volumeID, info)
	}
	return notTaken(fmt.Sprintf("no VolumeSnapshotter of the backup's locations (providers %s) can snapshot this volume", strings.Join(providers, ", ")))
}

func (r *run) takeSnapshot(ctx context.Context, vs api.VolumeSnapshotter, loc *snapshotLocation, v *volumeItem, volumeID string, info volumes.BackupVolumeInfo) (volumes.BackupVolumeInfo, *volumes.Snapshot) {
	if err := ctx.Err(); err != nil {
		return r.snapshotFailed(v, info, err)
	}
	az := ""
	for _, l := range zoneLabels {
		if z := v.pv.Labels[l]; z != "" {
			az = z
			break
		}
	}
	start := metav1.Now()
	info.StartTimestamp = &start
	volumeType, iops, err := vs.GetVolumeInfo(volumeID, az)
	if err != nil {
		return r.snapshotFailed(v, info, fmt.Errorf("VolumeSnapshotLocation %s: GetVolumeInfo(%s): %w", loc.name, volumeID, err))
	}
	tags := map[string]string{}
	for k, val := range r.b.Labels {
		tags[k] = val
	}
	tags["velero.io/backup"] = r.b.Name
	tags["velero.io/pv"] = v.pv.Name
	snap := &volumes.Snapshot{
		Spec: volumes.SnapshotSpec{
			BackupName: r.b.Name, BackupUID: string(r.b.UID), Location: loc.name,
			PersistentVolumeName: v.pv.Name, ProviderVolumeID: volumeID, VolumeType: volumeType, VolumeAZ: az, VolumeIOPS: iops,
		},
		Status: volumes.SnapshotStatus{Phase: volumes.SnapshotPhaseNew},
	}
	id, err := vs.CreateSnapshot(volumeID, az, tags)
	done := metav1.Now()
	info.CompletionTimestamp = &done
	info.BackupMethod = volumes.NativeSnapshot
	native := &volumes.NativeSnapshotInfo{VolumeType: volumeType, VolumeAZ: az, IOPS: "0"}
	if iops != nil {
		native.IOPS = strconv.FormatInt(*iops, 10)
	}
	info.NativeSnapshotInfo = native
	if err != nil {
		snap.Status.Phase = volumes.SnapshotPhaseFailed
		native.Phase = snap.Status.Phase
		info.Result = volumes.ResultFailed
		r.results.Error(v.namespace(), fmt.Sprintf("%s: snapshot through VolumeSnapshotLocation %s failed: %v", v, loc.name, err))
		return info, snap
	}
	snap.Status.ProviderSnapshotID, snap.Status.Phase = id, volumes.SnapshotPhaseCompleted
	native.SnapshotHandle, native.Phase = id, snap.Status.Phase
	info.Result = volumes.ResultSucceeded
	r.log.Info("volume snapshot taken", "volume", v.String(), "location", loc.name, "snapshotID", id)
	return info, snap
}

func (r *run) snapshotFailed(v *volumeItem, info volumes.BackupVolumeInfo, err error) (volumes.BackupVolumeInfo, *volumes.Snapshot) {
	r.results.Error(v.namespace(), fmt.Sprintf("%s: snapshot failed: %v", v, err))
	info.Result = volumes.ResultFailed
	info.Skipped, info.SkippedReason = true, "snapshot failed: "+err.Error()
	return info, nil
}

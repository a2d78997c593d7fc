package backup

// Carrying out the volume decisions: the stored PVs, claims and pods are
// remembered as the items are written, then the backup's VolumeHelper
// decides each volume and the decision is done (volume_snapshots.go for
// snapshots) and recorded in the volume information.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lifeboat-io/lifeboat/internal/volumefiles"
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

// storedVolumes remembers the volume-related items as stored (after item
// actions ran), so that decisions are taken on what the backup holds and a
// plugin's claim of a custom volume is seen.
type storedVolumes struct {
	mu   sync.Mutex
	pvs  map[string]*corev1.PersistentVolume
	pvcs map[string]*corev1.PersistentVolumeClaim // by namespace/name
	// pods keep only what fs-backup decisions need: no spec beyond volumes.
	pods []*corev1.Pod
	// ran holds, by "resource/namespace/name" of a stored PV, claim or pod,
	// the backup item actions that ran on it: a volume decided custom is
	// handled by them (plugins built on Velero's SDK cannot mark it
	// claimed).
	ran map[string][]string
}

func newStoredVolumes() *storedVolumes {
	return &storedVolumes{pvs: map[string]*corev1.PersistentVolume{}, pvcs: map[string]*corev1.PersistentVolumeClaim{}, ran: map[string][]string{}}
}

func ranKey(gr schema.GroupResource, namespace, name string) string {
	return gr.Resource + "/" + namespace + "/" + name
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

// observe decodes a stored item of interest, remembering the actions that
// ran on it; other items cost a map lookup.
func (s *storedVolumes) observe(gr schema.GroupResource, data []byte, ran []string) error {
	switch gr {
	case pvResource:
		pv := &corev1.PersistentVolume{}
		if err := json.Unmarshal(data, pv); err != nil {
			return fmt.Errorf("decoding PersistentVolume: %w", err)
		}
		s.mu.Lock()
		s.pvs[pv.Name] = pv
		s.noteRan(ranKey(gr, "", pv.Name), ran)
		s.mu.Unlock()
	case pvcResource:
		pvc := &corev1.PersistentVolumeClaim{}
		if err := json.Unmarshal(data, pvc); err != nil {
			return fmt.Errorf("decoding PersistentVolumeClaim: %w", err)
		}
		s.mu.Lock()
		s.pvcs[pvc.Namespace+"/"+pvc.Name] = pvc
		s.noteRan(ranKey(gr, pvc.Namespace, pvc.Name), ran)
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
			s.noteRan(ranKey(gr, slim.Namespace, slim.Name), ran)
			s.mu.Unlock()
		}
	}
	return nil
}

// noteRan records the actions that ran on an item; s.mu is held.
func (s *storedVolumes) noteRan(key string, ran []string) {
	if len(ran) > 0 {
		s.ran[key] = ran
	}
}

// actionsOn returns the backup item actions that ran on the volume's
// stored claim, PV or pod, each named once, in the order they first ran.
func (s *storedVolumes) actionsOn(v *volumeItem) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []string
	switch {
	case v.pod != nil:
		keys = append(keys, ranKey(podResource, v.pod.Namespace, v.pod.Name))
	default:
		if v.pvc != nil {
			keys = append(keys, ranKey(pvcResource, v.pvc.Namespace, v.pvc.Name))
		}
		if v.pv != nil {
			keys = append(keys, ranKey(pvResource, "", v.pv.Name))
		}
	}
	var out []string
	for _, k := range keys {
		for _, name := range s.ran[k] {
			if !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	return out
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

// decideVolumes takes every stored volume's decision and carries it out:
// snapshots through the locations' VolumeSnapshotters, PodVolumeBackups
// for fs-backup (waited for), warnings for what nobody did (an unclaimed
// custom action). It fills r.snapshots, r.podVolumeBackups and
// r.volumeInfos.
func (r *run) decideVolumes(ctx context.Context) error {
	items := r.volumes.items()
	if len(items) == 0 {
		return nil
	}
	helper, err := r.volumeHelper(ctx)
	if err != nil {
		return err
	}
	locs, err := r.openLocations(ctx)
	if err != nil {
		return err
	}
	claimers := r.volumes.claimers()
	infos := make([]volumefiles.BackupVolumeInfo, len(items))
	snaps := make([]*volumefiles.Snapshot, len(items))
	targets := make([]*podVolumeRef, len(items))
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(volumeWorkers, len(items)) {
		wg.Go(func() {
			for i := range work {
				infos[i], snaps[i], targets[i] = r.decideVolume(ctx, helper, locs, claimers, items[i])
			}
		})
	}
	for i := range items {
		work <- i
	}
	close(work)
	wg.Wait()
	r.backupPodVolumes(ctx, targets, infos)
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

// decideVolume decides one volume and carries the decision out. Failures
// are recorded on the backup (a failed snapshot is an error, a decision
// Lifeboat cannot carry out a warning) and in the volume's info. A volume
// decided fs-backup returns the pod volume that copies it, for
// backupPodVolumes.
func (r *run) decideVolume(ctx context.Context, h volumehelper.VolumeHelper, locs []*snapshotLocation, claimers map[string]bool, v *volumeItem) (volumefiles.BackupVolumeInfo, *volumefiles.Snapshot, *podVolumeRef) {
	info, snap := r.decideVolumeAction(ctx, h, locs, claimers, v)
	if info.Decision == nil || info.Decision.Action != string(policy.FSBackup) || info.Skipped {
		return info, snap, nil
	}
	d, err := r.decision(h, v)
	if err != nil {
		return info, snap, nil
	}
	t, err := r.fsTarget(ctx, v, d)
	if err != nil {
		r.results.Warning(v.namespace(), fmt.Sprintf("%s: %v", v, err))
		info.Skipped, info.SkippedReason = true, err.Error()
		return info, snap, nil
	}
	return info, snap, &t
}

func (r *run) decideVolumeAction(ctx context.Context, h volumehelper.VolumeHelper, locs []*snapshotLocation, claimers map[string]bool, v *volumeItem) (volumefiles.BackupVolumeInfo, *volumefiles.Snapshot) {
	info := volumefiles.BackupVolumeInfo{}
	if v.pvc != nil {
		info.PVCName, info.PVCNamespace = v.pvc.Name, v.pvc.Namespace
	}
	if v.pv != nil {
		info.PVName = v.pv.Name
		info.PVInfo = &volumefiles.PVInfo{ReclaimPolicy: string(v.pv.Spec.PersistentVolumeReclaimPolicy), Labels: v.pv.Labels}
	}
	if v.pod != nil {
		info.PVBInfo = &volumefiles.PodVolumeInfo{VolumeName: v.vol.Name, PodName: v.pod.Name, PodNamespace: v.pod.Namespace}
	}
	d, err := r.decision(h, v)
	if err != nil {
		r.results.Error(v.namespace(), fmt.Sprintf("%s: deciding what to do with the volume: %v", v, err))
		info.Skipped, info.SkippedReason, info.Result = true, "no decision: "+err.Error(), volumefiles.ResultFailed
		info.Decision = &volumefiles.Decision{Action: "none", Reason: err.Error()}
		return info, nil
	}
	info.Decision = &volumefiles.Decision{Action: string(d.Action), Parameters: d.Parameters, Reason: d.Reason}
	if d.Source == volumehelper.SourceRule {
		rule := d.Rule
		info.Decision.Rule = &rule
	}
	skip := func(reason string) {
		info.Skipped, info.SkippedReason = true, reason
	}
	switch d.Action {
	case policy.Snapshot:
		// A CSI snapshot is of the claim: it is in the backup even when
		// the PersistentVolume is not (cluster-scoped items left out).
		if r.csiInfo(v, &info) {
			return info, nil
		}
		if v.pv == nil {
			skip("its PersistentVolume is not in the backup, so there is nothing to snapshot")
			return info, nil
		}
		return r.snapshot(ctx, locs, v, d, info)
	case policy.FSBackup:
		// Carried out by backupPodVolumes, all the backup's pod volumes
		// together, a pod's repository made ready once.
	case policy.Custom:
		if by := r.volumes.claimedBy(v); by != "" {
			info.Decision.ClaimedBy = by
			info.Result = volumefiles.ResultSucceeded
			return info, nil
		}
		// Lifeboat's annotation names the plugin that took the volume; a
		// plugin built on Velero's SDK cannot set it, and Velero leaves a
		// custom volume to the plugins without asking. So any backup item
		// action whose selector took the claim or the PV (a pod volume: its
		// pod) and ran on it counts as handling it, except those that
		// claimed another volume of this backup: they speak Lifeboat's
		// protocol, and not claiming this one is declining it.
		for _, name := range r.volumes.actionsOn(v) {
			if !claimers[name] {
				info.Decision.HandledBy = append(info.Decision.HandledBy, name)
			}
		}
		if len(info.Decision.HandledBy) > 0 {
			info.Result = volumefiles.ResultSucceeded
			r.log.Info("custom volume left to the backup item actions that ran on it", "volume", v.String(), "actions", info.Decision.HandledBy)
			return info, nil
		}
		why := "custom action not handled: no backup item action applies to the volume's claim or PersistentVolume (by its resource selector) " +
			"other than those that claimed other volumes, so its data is not in this backup"
		if v.pod != nil {
			why = "custom action not handled: no backup item action applies to the pod (by its resource selector) " +
				"other than those that claimed other volumes, so the volume's data is not in this backup"
		}
		r.results.Warning(v.namespace(), fmt.Sprintf("%s: %s", v, why))
		skip(why)
	default:
		reason := d.Reason
		if d.Source == volumehelper.SourceRule && reason == "" {
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

func toUnstructured(obj any) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// claimers are the plugins that claimed any stored claim or PV with
// Lifeboat's annotation.
func (s *storedVolumes) claimers() map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]bool{}
	for _, pvc := range s.pvcs {
		if by := pvc.Annotations[volumehelper.ClaimedByAnnotation]; by != "" {
			out[by] = true
		}
	}
	for _, pv := range s.pvs {
		if by := pv.Annotations[volumehelper.ClaimedByAnnotation]; by != "" {
			out[by] = true
		}
	}
	return out
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

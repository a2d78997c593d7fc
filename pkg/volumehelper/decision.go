package volumehelper

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lifeboat-io/lifeboat/pkg/policy"
)

// NoRule is Decision.Rule when no volume policy matched and a fallback
// decided.
const NoRule = -1

// Decision is what a backup does with one volume, and why: the server
// records one per volume in the backup's volume information, and `policy
// explain` prints the same reasoning before a backup runs.
type Decision struct {
	// Action is snapshot, fs-backup, skip or custom.
	Action policy.ActionType
	// Rule is the index of the volume policy that matched, or NoRule.
	Rule int
	// Parameters are the matching policy's action parameters (a copy).
	Parameters map[string]any
	// Reason says which fallback decided when no rule did, or why a rule's
	// action does not apply; empty when a rule decided plainly.
	Reason string

	// Source is the step of the decision that chose Action; callers switch
	// on it rather than on Reason, whose wording is for people.
	Source Source
	// Pod names the pod volume whose fs-backup copies the claim's files,
	// when Source is SourcePodVolume; nil otherwise.
	Pod *PodVolume
	// Match is the volume policies' verdict on the volume: for each policy
	// tried before the one that matched (every policy when none did) the
	// first condition that failed, and the matching policy's conditions.
	// Only ExplainVolume and ExplainPodVolume fill it, and only when the
	// helper has volume policies and the decision reached them (a pod
	// volume fs-backup never copies is decided before); the Decide methods
	// leave it nil, as a backup does not print it.
	Match *policy.Match
}

// Source is the step of the decision tree that decided a volume, that is
// which of the backup's inputs chose the action.
type Source int

// The sources of a decision. The zero Source is not one of them: a
// Decision the helper did not make.
const (
	// SourceRule: a volume policy matched; Decision.Rule is its index.
	SourceRule Source = iota + 1
	// SourceNeverFSBackup: the pod volume is one fs-backup never copies
	// (hostPath, secret, configMap, projected, downwardAPI, a
	// service-account token), or a claim the backup's resource filters
	// leave out; Reason says which. Only pod volumes get it.
	SourceNeverFSBackup
	// SourceUnboundClaim: the claim has no volume bound to it, and no
	// volume policy decided it: there is no data to back up.
	SourceUnboundClaim
	// SourcePodVolume: no volume policy matched the volume, and a pod that
	// mounts its claim copies the files by fs-backup; Decision.Pod names
	// the pod volume and what chose it.
	SourcePodVolume
	// SourcePodAnnotation: the pod's backup.velero.io/backup-volumes
	// annotation opts the volume in, or (with defaultVolumesToFsBackup)
	// its backup.velero.io/backup-volumes-excludes annotation opts it out.
	SourcePodAnnotation
	// SourceDefaultVolumesToFsBackup: no annotation names the pod volume,
	// so spec.defaultVolumesToFsBackup decides: true copies it, false (or
	// unset) leaves it.
	SourceDefaultVolumesToFsBackup
	// SourceSnapshotVolumes: spec.snapshotVolumes, set explicitly, decides
	// a PersistentVolume no policy or pod decided.
	SourceSnapshotVolumes
	// SourceDefault: spec.snapshotVolumes is unset, which snapshots.
	SourceDefault
)

var sourceNames = [...]string{
	SourceRule:                     "rule",
	SourceNeverFSBackup:            "neverFSBackup",
	SourceUnboundClaim:             "unboundClaim",
	SourcePodVolume:                "podVolume",
	SourcePodAnnotation:            "podAnnotation",
	SourceDefaultVolumesToFsBackup: "defaultVolumesToFsBackup",
	SourceSnapshotVolumes:          "snapshotVolumes",
	SourceDefault:                  "default",
}

func (s Source) String() string {
	if s > 0 && int(s) < len(sourceNames) {
		return sourceNames[s]
	}
	return fmt.Sprintf("Source(%d)", int(s))
}

// PodVolume is a pod's volume whose fs-backup copies a claim's files, and
// what chose it for fs-backup.
type PodVolume struct {
	Namespace, Pod, Volume string
	// Source is SourcePodAnnotation, SourceDefaultVolumesToFsBackup, or
	// SourceRule for a volume policy on the pod's generic ephemeral
	// volume (whose claim this is).
	Source Source
	// Rule is that policy's index when Source is SourceRule, else NoRule.
	Rule int
	// Reason is the annotation fallback's reason; empty when a rule chose.
	Reason string
}

// ClaimedByAnnotation is how a BackupItemAction says it took care of a
// volume whose policy action is custom: it sets this annotation, with its
// plugin name as the value, on the PersistentVolumeClaim (or the
// PersistentVolume) it returns from Execute. The server reads it from the
// stored item. Plugins built with Velero's SDK cannot set it, so the server
// also counts as handling a custom volume any action that ran on its claim
// or PV and claimed no other volume of the backup; a custom volume nobody
// handled is treated as skip, and the backup says so in its warnings.
// Restores strip the annotation. MarkClaimed sets it.
const ClaimedByAnnotation = "volumes.lifeboat.io/claimed-by"

// MarkClaimed records on obj (the PVC or PV a BackupItemAction returns)
// that the plugin named plugin handled its volume's custom action.
func MarkClaimed(obj interface {
	GetAnnotations() map[string]string
	SetAnnotations(map[string]string)
}, plugin string) {
	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[ClaimedByAnnotation] = plugin
	obj.SetAnnotations(ann)
}

// DecideVolume is the decision for a PersistentVolume or claim, the one
// ShouldPerformSnapshot answers from: the first matching volume policy,
// else fs-backup when a pod's fs-backup copies the claim's files, else
// snapshotVolumes. Unlike ShouldPerformSnapshot, a claim that is not bound
// to a volume is not an error here: it has no data to back up, and the
// decision is skip with the reason.
func (h *helper) DecideVolume(obj runtime.Unstructured, gr schema.GroupResource) (Decision, error) {
	return h.decideObject(obj, gr, false)
}

// ExplainVolume is DecideVolume with Decision.Match filled.
func (h *helper) ExplainVolume(obj runtime.Unstructured, gr schema.GroupResource) (Decision, error) {
	return h.decideObject(obj, gr, true)
}

func (h *helper) decideObject(obj runtime.Unstructured, gr schema.GroupResource, trace bool) (Decision, error) {
	ctx := lookupContext()
	v, err := h.resolve(ctx, obj, gr)
	if err != nil {
		return Decision{}, err
	}
	d, err := h.decideVolume(ctx, v, trace)
	if err != nil {
		return Decision{}, err
	}
	d.Parameters = copyParams(d.Parameters)
	return d, nil
}

// decideVolume is the decision tree for a PersistentVolume or claim, the
// only one: every question about such a volume is answered from it. The
// parameters are the policy's own map; callers handing them out copy them.
func (h *helper) decideVolume(ctx context.Context, v *volume, trace bool) (Decision, error) {
	d := Decision{Rule: NoRule}
	if h.policies != nil {
		if i, action := h.matchPolicies(policy.VolumeFromPV(v.pv, v.pvc), &d, trace); i >= 0 {
			d.Action, d.Rule, d.Parameters, d.Source = action.Type, i, action.Parameters, SourceRule
			return d, nil
		}
	}
	if v.unbound != nil {
		d.Action, d.Source, d.Reason = policy.Skip, SourceUnboundClaim, v.unbound.Error()+": no volume data to back up"
		return d, nil
	}
	// A volume whose files a pod's fs-backup copies is not snapshotted as
	// well: the data would be stored twice and restored from either.
	if v.claimName != "" {
		pod, err := h.fsBackedUpBy(ctx, v)
		if err != nil {
			return Decision{}, err
		}
		if pod != nil {
			d.Action, d.Source, d.Pod = policy.FSBackup, SourcePodVolume, pod
			d.Reason = "pod " + pod.Namespace + "/" + pod.Pod + " copies it by fs-backup"
			return d, nil
		}
	}
	switch {
	case !h.snapshotVolumes:
		d.Action, d.Source, d.Reason = policy.Skip, SourceSnapshotVolumes, "snapshotVolumes=false"
	case h.snapshotVolumesSet:
		d.Action, d.Source, d.Reason = policy.Snapshot, SourceSnapshotVolumes, "snapshotVolumes=true"
	default:
		d.Action, d.Source, d.Reason = policy.Snapshot, SourceDefault, "snapshotVolumes (unset, so true)"
	}
	return d, nil
}

// DecidePodVolume is the decision for one volume of a pod, the one
// ShouldPerformFSBackup answers from. Only PersistentVolumes are
// snapshotted, so a rule choosing snapshot for a pod volume that is not a
// claim leaves it skipped, with the reason.
func (h *helper) DecidePodVolume(vol corev1.Volume, pod corev1.Pod) (Decision, error) {
	d, _, err := h.decidePodVolume(lookupContext(), &vol, &pod, false)
	d.Parameters = copyParams(d.Parameters)
	return d, err
}

// ExplainPodVolume is DecidePodVolume with Decision.Match filled.
func (h *helper) ExplainPodVolume(vol corev1.Volume, pod corev1.Pod) (Decision, error) {
	d, _, err := h.decidePodVolume(lookupContext(), &vol, &pod, true)
	d.Parameters = copyParams(d.Parameters)
	return d, err
}

// decidePodVolume is the decision tree for a pod volume, the only one. The
// second result says why the volume's claim has no volume when that
// decided (SourceUnboundClaim), for ShouldPerformFSBackup's error.
// Parameters are not copied, as in decideVolume.
func (h *helper) decidePodVolume(ctx context.Context, vol *corev1.Volume, pod *corev1.Pod, trace bool) (Decision, error, error) {
	d := Decision{Rule: NoRule}
	if why := NeverFSBackedUpReason(vol, h.backupExcludePVC); why != "" {
		d.Action, d.Source, d.Reason = policy.Skip, SourceNeverFSBackup, why
		return d, nil, nil
	}
	if h.policies != nil {
		info, noVolume, err := h.podVolumeInfo(ctx, vol, pod)
		if err != nil {
			return Decision{}, nil, err
		}
		if i, action := h.matchPolicies(info, &d, trace); i >= 0 {
			d.Action, d.Rule, d.Parameters, d.Source = action.Type, i, action.Parameters, SourceRule
			if d.Action == policy.Snapshot && vol.PersistentVolumeClaim == nil {
				d.Action, d.Reason = policy.Skip, "snapshot does not apply to a pod volume"
			}
			return d, nil, nil
		}
		if noVolume != nil {
			unbound := fmt.Errorf("volume %s of pod %s/%s: %w", vol.Name, pod.Namespace, pod.Name, noVolume)
			d.Action, d.Source, d.Reason = policy.Skip, SourceUnboundClaim, unbound.Error()+": no volume data to back up"
			return d, unbound, nil
		}
	}
	if why := FSBackupSelection(pod.Annotations, vol.Name, h.defaultVolumesToFSBackup); why != "" {
		d.Action, d.Source, d.Reason = policy.FSBackup, h.selectionSource(), why
		return d, nil, nil
	}
	d.Action = policy.Skip
	if h.defaultVolumesToFSBackup {
		d.Source, d.Reason = SourcePodAnnotation, "listed in "+VolumesToExcludeAnnotation
	} else {
		d.Source, d.Reason = SourceDefaultVolumesToFsBackup, "not listed in "+VolumesToBackupAnnotation+" (defaultVolumesToFsBackup is false)"
	}
	return d, nil, nil
}

// matchPolicies returns the first volume policy info meets and its action,
// or -1; with trace it records every policy's verdict in d.Match. h.policies
// must not be nil.
func (h *helper) matchPolicies(info policy.VolumeInfo, d *Decision, trace bool) (int, policy.Action) {
	if !trace {
		return h.policies.MatchAction(info)
	}
	m := h.policies.Match(info)
	action := m.Action
	// The verdicts are handed out; their copy of the parameters must not
	// be the policy's own map, which every decision reads.
	m.Action.Parameters = copyParams(m.Action.Parameters)
	d.Match = &m
	return m.Index, action
}

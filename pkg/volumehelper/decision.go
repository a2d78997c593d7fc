package volumehelper

import (
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
}

// ClaimedByAnnotation is how a BackupItemAction says it took care of a
// volume whose policy action is custom: it sets this annotation, with its
// plugin name as the value, on the PersistentVolumeClaim (or the
// PersistentVolume) it returns from Execute. The server reads it from the
// stored item; a custom volume that no plugin claimed is treated as skip,
// and the backup says so in its warnings. MarkClaimed sets it.
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

// DecideVolume is the decision for a PersistentVolume or claim, the one the
// Should* methods answer from: the first matching volume policy, else
// fs-backup when a pod's fs-backup copies the claim's files, else
// snapshotVolumes. Unlike ShouldPerformSnapshot, a claim that is not bound
// to a volume is not an error here: it has no data to back up, and the
// decision is skip with the reason.
func (h *helper) DecideVolume(obj runtime.Unstructured, gr schema.GroupResource) (Decision, error) {
	ctx := lookupContext()
	v, err := h.resolve(ctx, obj, gr)
	if err != nil {
		return Decision{}, err
	}
	if i, action := h.match(v); i >= 0 {
		return Decision{Action: action.Type, Rule: i, Parameters: copyParams(action.Parameters)}, nil
	}
	if v.unbound != nil {
		return Decision{Action: policy.Skip, Rule: NoRule, Reason: v.unbound.Error() + ": no volume data to back up"}, nil
	}
	if v.claimName != "" {
		pod, err := h.fsBackedUpBy(ctx, v)
		if err != nil {
			return Decision{}, err
		}
		if pod != "" {
			return Decision{Action: policy.FSBackup, Rule: NoRule, Reason: "pod " + pod + " copies it by fs-backup"}, nil
		}
	}
	switch {
	case !h.snapshotVolumes:
		return Decision{Action: policy.Skip, Rule: NoRule, Reason: "snapshotVolumes=false"}, nil
	case h.snapshotVolumesSet:
		return Decision{Action: policy.Snapshot, Rule: NoRule, Reason: "snapshotVolumes=true"}, nil
	}
	return Decision{Action: policy.Snapshot, Rule: NoRule, Reason: "snapshotVolumes (unset, so true)"}, nil
}

// DecidePodVolume is the decision for one volume of a pod, the one
// ShouldPerformFSBackup answers from. Only PersistentVolumes are
// snapshotted, so a rule choosing snapshot for a pod volume that is not a
// claim leaves it skipped, with the reason.
func (h *helper) DecidePodVolume(vol corev1.Volume, pod corev1.Pod) (Decision, error) {
	if why := NeverFSBackedUpReason(&vol, h.backupExcludePVC); why != "" {
		return Decision{Action: policy.Skip, Rule: NoRule, Reason: why}, nil
	}
	if h.policies != nil {
		info, unbound, err := h.podVolumeInfo(lookupContext(), &vol, &pod)
		if err != nil {
			return Decision{}, err
		}
		if i, action := h.policies.MatchAction(info); i >= 0 {
			d := Decision{Action: action.Type, Rule: i, Parameters: copyParams(action.Parameters)}
			if d.Action == policy.Snapshot && vol.PersistentVolumeClaim == nil {
				d.Action, d.Reason = policy.Skip, "snapshot does not apply to a pod volume"
			}
			return d, nil
		}
		if unbound != nil {
			return Decision{Action: policy.Skip, Rule: NoRule, Reason: fmt.Sprintf("volume %s of pod %s/%s: %v: no volume data to back up", vol.Name, pod.Namespace, pod.Name, unbound)}, nil
		}
	}
	if why := FSBackupSelection(pod.Annotations, vol.Name, h.defaultVolumesToFSBackup); why != "" {
		return Decision{Action: policy.FSBackup, Rule: NoRule, Reason: why}, nil
	}
	if h.defaultVolumesToFSBackup {
		return Decision{Action: policy.Skip, Rule: NoRule, Reason: "listed in " + VolumesToExcludeAnnotation}, nil
	}
	return Decision{Action: policy.Skip, Rule: NoRule, Reason: "not listed in " + VolumesToBackupAnnotation + " (defaultVolumesToFsBackup is false)"}, nil
}

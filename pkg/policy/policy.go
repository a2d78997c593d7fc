package policy

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// SupportedVersion is the only policy format version Velero defines.
const SupportedVersion = "v1"

// Policies is a parsed, valid resource policy.
type Policies struct {
	Version        string
	VolumePolicies []VolumePolicy
	// IncludeExcludePolicy is nil when the policy has none.
	IncludeExcludePolicy *IncludeExcludePolicy
	// NamespacedFilterPolicies and ClusterScopedFilterPolicy are Velero's
	// fine-grained filters, applied by backups and restores as Velero
	// applies them (internal/selection holds the rules).
	NamespacedFilterPolicies  []NamespacedFilterPolicy
	ClusterScopedFilterPolicy *ClusterScopedFilterPolicy
	// Warnings are what Velero accepts but is most likely a mistake (a
	// volume type or phase that never matches, a condition with no value):
	// the policy is valid, and each warning names the field and the fix.
	Warnings []*FieldError
}

// VolumePolicy is one rule: when every condition holds, the volume gets
// Action.
type VolumePolicy struct {
	Conditions Conditions
	Action     Action
}

// Conditions are the tests of one volume policy. An unset condition (nil or
// empty) does not constrain the volume, so a rule without conditions matches
// every volume.
type Conditions struct {
	Capacity     *CapacityRange
	StorageClass []string
	// NFS set to an empty NFSCondition matches any NFS volume.
	NFS *NFSCondition
	// CSI set to an empty CSICondition matches any CSI volume.
	CSI         *CSICondition
	VolumeTypes []VolumeType
	PVCLabels   map[string]string
	PVCPhase    []corev1.PersistentVolumeClaimPhase
	// PVCVolumeMode matches claims whose spec.volumeMode is exactly it.
	PVCVolumeMode string
	// PVCAccessModes matches claims whose access modes are exactly these,
	// in any order.
	PVCAccessModes []string
}

// CapacityRange is an inclusive capacity range. A nil bound is open.
type CapacityRange struct {
	Min *resource.Quantity
	Max *resource.Quantity
	// Raw is the range as written in the policy, for messages.
	Raw string
}

// String quotes the range as written, for messages.
func (r *CapacityRange) String() string { return fmt.Sprintf("%q", r.Raw) }

// Contains reports whether q lies within the range. A volume whose
// capacity is unknown is asked about as 0, as Velero does.
func (r *CapacityRange) Contains(q *resource.Quantity) bool {
	if r.Min != nil && r.Min.Cmp(*q) > 0 {
		return false
	}
	if r.Max != nil && r.Max.Cmp(*q) < 0 {
		return false
	}
	return true
}

// NFSCondition matches NFS volumes; an empty field matches any value.
type NFSCondition struct {
	Server string
	Path   string
}

// CSICondition matches CSI volumes of Driver (any driver when empty) whose
// volume attributes include every VolumeAttributes pair.
type CSICondition struct {
	Driver           string
	VolumeAttributes map[string]string
}

// ActionType is what happens to a matched volume.
type ActionType string

const (
	// Snapshot takes a snapshot of the volume (native or CSI).
	Snapshot ActionType = "snapshot"
	// FSBackup copies the volume's files with a file-system data mover.
	FSBackup ActionType = "fs-backup"
	// Skip leaves the volume's data out of the backup.
	Skip ActionType = "skip"
	// Custom leaves the volume to a plugin that claims the action by its
	// parameters; with no such plugin it behaves as Skip.
	Custom ActionType = "custom"
)

// ActionTypes lists the valid action types in the order messages name them.
var ActionTypes = []ActionType{Snapshot, FSBackup, Skip, Custom}

// Action is a volume policy's action.
type Action struct {
	Type ActionType
	// Parameters are as the YAML gives them: string keys; values are
	// string, bool, int, float64, nil, []any or map[string]any.
	Parameters map[string]any
}

// IncludeExcludePolicy holds resource filters with the meaning of the
// Backup spec's scoped resource filters.
type IncludeExcludePolicy struct {
	IncludedClusterScopedResources   []string
	ExcludedClusterScopedResources   []string
	IncludedNamespaceScopedResources []string
	ExcludedNamespaceScopedResources []string
}

// PVCPhases are the claim phases Kubernetes defines. A pvcPhase condition
// may name any value, as in Velero; others never match and are warned about.
var PVCPhases = []corev1.PersistentVolumeClaimPhase{corev1.ClaimPending, corev1.ClaimBound, corev1.ClaimLost}

// PVCVolumeModes are the volume modes Kubernetes defines.
var PVCVolumeModes = []corev1.PersistentVolumeMode{corev1.PersistentVolumeFilesystem, corev1.PersistentVolumeBlock}

// PVCAccessModes are the access modes Kubernetes defines.
var PVCAccessModes = []corev1.PersistentVolumeAccessMode{
	corev1.ReadWriteOnce, corev1.ReadOnlyMany, corev1.ReadWriteMany, corev1.ReadWriteOncePod,
}

// WarningMessages returns one line per warning, as ValidationError.Messages
// words problems.
func (p *Policies) WarningMessages() []string {
	if p == nil {
		return nil
	}
	out := make([]string, len(p.Warnings))
	for i, w := range p.Warnings {
		out[i] = w.Error()
	}
	return out
}

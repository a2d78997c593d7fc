package policy

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Match is the outcome of evaluating a policy for one volume, with enough
// detail for `policy explain` to say why.
type Match struct {
	// Index is the volume policy that matched; -1 when none did.
	Index int
	// Action is the matched policy's action; zero when none matched.
	Action Action
	// Matched says, for each condition of the matched policy, why it holds.
	Matched []ConditionResult
	// Rejected says, for every policy before Index (every policy when none
	// matched), the first condition that failed and why.
	Rejected []Rejection
}

// ConditionResult is one condition's verdict on a volume.
type ConditionResult struct {
	// Condition is the key as written in the policy, e.g. "storageClass".
	Condition string
	// Reason is e.g. `"gold" not in [silver bronze]`.
	Reason string
}

func (c ConditionResult) String() string { return c.Condition + ": " + c.Reason }

// Rejection is why the volume policy at Index did not match.
type Rejection struct {
	Index int
	ConditionResult
}

func (r Rejection) String() string {
	return fmt.Sprintf("volumePolicies[%d]: %s", r.Index, r.ConditionResult)
}

// MatchAction returns the first volume policy v meets and its action, or -1
// and a zero Action. It does not allocate, so it can run for every volume of
// a large backup.
func (p *Policies) MatchAction(v VolumeInfo) (index int, action Action) {
	if p == nil {
		return -1, Action{}
	}
	for i := range p.VolumePolicies {
		vp := &p.VolumePolicies[i]
		if vp.Conditions.firstFailure(&v) < 0 {
			return i, vp.Action
		}
	}
	return -1, Action{}
}

// Match is MatchAction with the reasons.
func (p *Policies) Match(v VolumeInfo) Match {
	m := Match{Index: -1}
	if p == nil {
		return m
	}
	for i := range p.VolumePolicies {
		c := &p.VolumePolicies[i].Conditions
		if k := c.firstFailure(&v); k >= 0 {
			m.Rejected = append(m.Rejected, Rejection{Index: i, ConditionResult: ConditionResult{
				Condition: conditionNames[k], Reason: c.reason(k, &v, false),
			}})
			continue
		}
		m.Index = i
		m.Action = p.VolumePolicies[i].Action
		for k := range numConditions {
			if c.has(k) {
				m.Matched = append(m.Matched, ConditionResult{Condition: conditionNames[k], Reason: c.reason(k, &v, true)})
			}
		}
		return m
	}
	return m
}

// conditionKind orders the conditions as Velero evaluates them, which is
// also the order explanations report the first failure in.
type conditionKind int

const (
	condCapacity conditionKind = iota
	condStorageClass
	condNFS
	condCSI
	condVolumeTypes
	condPVCLabels
	condPVCPhase
	condPVCVolumeMode
	condPVCAccessModes
	numConditions
)

var conditionNames = [numConditions]string{"capacity", "storageClass", "nfs", "csi", "volumeTypes", "pvcLabels", "pvcPhase", "pvcVolumeMode", "pvcAccessModes"}

func (c *Conditions) firstFailure(v *VolumeInfo) conditionKind {
	for k := range numConditions {
		if c.has(k) && !c.holds(k, v) {
			return k
		}
	}
	return -1
}

func (c *Conditions) has(k conditionKind) bool {
	switch k {
	case condCapacity:
		return c.Capacity != nil
	case condStorageClass:
		return len(c.StorageClass) > 0
	case condNFS:
		return c.NFS != nil
	case condCSI:
		return c.CSI != nil
	case condVolumeTypes:
		return len(c.VolumeTypes) > 0
	case condPVCLabels:
		return len(c.PVCLabels) > 0
	case condPVCPhase:
		return len(c.PVCPhase) > 0
	case condPVCVolumeMode:
		return c.PVCVolumeMode != ""
	case condPVCAccessModes:
		return len(c.PVCAccessModes) > 0
	}
	return false
}

var zeroQuantity resource.Quantity

// capacityOf is the volume's capacity as conditions see it: Velero takes an
// unknown capacity (pod volumes, unbound claims) as 0.
func (v *VolumeInfo) capacityOf() *resource.Quantity {
	if v.Capacity == nil {
		return &zeroQuantity
	}
	return v.Capacity
}

func (c *Conditions) holds(k conditionKind, v *VolumeInfo) bool {
	switch k {
	case condCapacity:
		return c.Capacity.Contains(v.capacityOf())
	case condStorageClass:
		return v.StorageClass != "" && slices.Contains(c.StorageClass, v.StorageClass)
	case condNFS:
		return v.Type == VolumeNFS &&
			(c.NFS.Server == "" || c.NFS.Server == v.NFSServer) &&
			(c.NFS.Path == "" || c.NFS.Path == v.NFSPath)
	case condCSI:
		if v.Type != VolumeCSI || (c.CSI.Driver != "" && c.CSI.Driver != v.CSIDriver) {
			return false
		}
		if len(c.CSI.VolumeAttributes) > 0 && len(v.CSIVolumeAttributes) == 0 {
			return false
		}
		// As in Velero, a wanted empty value also matches an absent key.
		for key, want := range c.CSI.VolumeAttributes {
			if v.CSIVolumeAttributes[key] != want {
				return false
			}
		}
		return true
	case condVolumeTypes:
		return slices.Contains(c.VolumeTypes, v.Type)
	case condPVCLabels:
		for key, want := range c.PVCLabels {
			if got, ok := v.PVCLabels[key]; !ok || got != want {
				return false
			}
		}
		return true
	case condPVCPhase:
		return v.PVCPhase != "" && slices.Contains(c.PVCPhase, v.PVCPhase)
	case condPVCVolumeMode:
		return v.PVCVolumeMode == c.PVCVolumeMode
	case condPVCAccessModes:
		return sameSet(c.PVCAccessModes, v.PVCAccessModes)
	}
	return false
}

// sameSet reports whether a and b have the same length and hold the same
// strings, Velero's test for access modes.
func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, s := range a {
		if !slices.Contains(b, s) {
			return false
		}
	}
	for _, s := range b {
		if !slices.Contains(a, s) {
			return false
		}
	}
	return true
}

// reason words the verdict of condition k, which holds exactly when ok.
func (c *Conditions) reason(k conditionKind, v *VolumeInfo, ok bool) string {
	switch k {
	case condCapacity:
		if v.Capacity == nil {
			return fmt.Sprintf("the volume's capacity is unknown, taken as 0 (as Velero does), %s %s", inOrNot(ok), c.Capacity)
		}
		return fmt.Sprintf("%s %s %s", v.Capacity.String(), inOrNot(ok), c.Capacity)
	case condStorageClass:
		if v.StorageClass == "" {
			if v.PVC != "" && v.Type == "" {
				return fmt.Sprintf("a claim without a bound PersistentVolume has no storage class for policies (as in Velero), want one of %v", c.StorageClass)
			}
			return fmt.Sprintf("the volume has no storage class, want one of %v", c.StorageClass)
		}
		return fmt.Sprintf("%q %s %v", v.StorageClass, inOrNot(ok), c.StorageClass)
	case condNFS:
		if v.Type != VolumeNFS {
			return "not an NFS volume (" + typeName(v.Type) + ")"
		}
		if c.NFS.Server != "" && c.NFS.Server != v.NFSServer {
			return fmt.Sprintf("server %q is not %q", v.NFSServer, c.NFS.Server)
		}
		if c.NFS.Path != "" && c.NFS.Path != v.NFSPath {
			return fmt.Sprintf("path %q is not %q", v.NFSPath, c.NFS.Path)
		}
		return fmt.Sprintf("NFS volume, server %q, path %q", v.NFSServer, v.NFSPath)
	case condCSI:
		if v.Type != VolumeCSI {
			return "not a CSI volume (" + typeName(v.Type) + ")"
		}
		if c.CSI.Driver != "" && c.CSI.Driver != v.CSIDriver {
			return fmt.Sprintf("driver %q is not %q", v.CSIDriver, c.CSI.Driver)
		}
		if why := pairsMismatch("volumeAttributes", c.CSI.VolumeAttributes, v.CSIVolumeAttributes); why != "" {
			return why
		}
		return fmt.Sprintf("CSI volume, driver %q", v.CSIDriver)
	case condVolumeTypes:
		if v.Type == "" {
			return fmt.Sprintf("the volume's type is unknown, want one of %v", c.VolumeTypes)
		}
		return fmt.Sprintf("%q %s %v", v.Type, inOrNot(ok), c.VolumeTypes)
	case condPVCLabels:
		if v.PVC == "" && len(v.PVCLabels) == 0 && !ok {
			return "the volume has no PVC"
		}
		if why := pairsMismatch("label", c.PVCLabels, v.PVCLabels); why != "" {
			return why
		}
		return fmt.Sprintf("the PVC has %s", formatPairs(c.PVCLabels))
	case condPVCPhase:
		if v.PVCPhase == "" {
			if v.PVC == "" {
				return "the volume has no PVC"
			}
			return fmt.Sprintf("the PVC has no phase, want one of %v", c.PVCPhase)
		}
		return fmt.Sprintf("%q %s %v", v.PVCPhase, inOrNot(ok), c.PVCPhase)
	case condPVCVolumeMode:
		if v.PVC == "" {
			return "the volume has no PVC"
		}
		if ok {
			return fmt.Sprintf("volume mode %q", v.PVCVolumeMode)
		}
		return fmt.Sprintf("volume mode %q is not %q", v.PVCVolumeMode, c.PVCVolumeMode)
	case condPVCAccessModes:
		if v.PVC == "" {
			return "the volume has no PVC"
		}
		if ok {
			return fmt.Sprintf("access modes %v", v.PVCAccessModes)
		}
		return fmt.Sprintf("access modes %v are not exactly %v", v.PVCAccessModes, c.PVCAccessModes)
	}
	return ""
}

func inOrNot(ok bool) string {
	if ok {
		return "in"
	}
	return "not in"
}

func typeName(t VolumeType) string {
	if t == "" {
		return "type unknown"
	}
	return "type " + string(t)
}

// pairsMismatch names the first wanted pair (in key order, so explanations
// are stable) that got lacks, or returns "".
func pairsMismatch(what string, want, got map[string]string) string {
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		g, ok := got[k]
		if !ok {
			return fmt.Sprintf("%s %s is not set, want %q", what, k, want[k])
		}
		if g != want[k] {
			return fmt.Sprintf("%s %s is %q, want %q", what, k, g, want[k])
		}
	}
	return ""
}

func formatPairs(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ", ")
}

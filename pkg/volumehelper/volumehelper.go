package volumehelper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lifeboat-io/lifeboat/pkg/policy"
)

// VolumeHelper decides what a backup does with a volume. obj is a
// PersistentVolume or a PersistentVolumeClaim as unstructured content and
// groupResource says which (PersistentVolumes or PersistentVolumeClaims);
// the helper looks up the other half of the pair through its client.
type VolumeHelper interface {
	// ShouldPerformSnapshot reports whether the volume is to be snapshotted.
	ShouldPerformSnapshot(obj runtime.Unstructured, groupResource schema.GroupResource) (bool, error)
	// ShouldPerformFSBackup reports whether the pod's volume is to be
	// copied by a file-system data mover.
	ShouldPerformFSBackup(volume corev1.Volume, pod corev1.Pod) (bool, error)
	// ShouldPerformCustomAction reports whether the volume's policy action
	// is custom with parameters that include matchParams (compared by
	// value, see ParamsMatch). A plugin passes the parameters that identify
	// its own action, so that two custom actions in one policy stay apart.
	ShouldPerformCustomAction(obj runtime.Unstructured, groupResource schema.GroupResource, matchParams map[string]any) (bool, error)
	// GetActionParameters returns the action of the volume policy that
	// matches the volume and a copy of its parameters; found is false when
	// no volume policy matches.
	GetActionParameters(obj runtime.Unstructured, groupResource schema.GroupResource) (found bool, actionType string, params map[string]any, err error)
	// DecideVolume returns the decision for a PersistentVolume or claim and
	// why it was taken (see Decision).
	DecideVolume(obj runtime.Unstructured, groupResource schema.GroupResource) (Decision, error)
	// DecidePodVolume returns the decision for one volume of a pod and why.
	DecidePodVolume(volume corev1.Volume, pod corev1.Pod) (Decision, error)
	// ExplainVolume is DecideVolume with each volume policy's verdict on
	// the volume (Decision.Match), for tools that show the reasoning.
	ExplainVolume(obj runtime.Unstructured, groupResource schema.GroupResource) (Decision, error)
	// ExplainPodVolume is DecidePodVolume with Decision.Match.
	ExplainPodVolume(volume corev1.Volume, pod corev1.Pod) (Decision, error)
}

// The group/resources a VolumeHelper accepts.
var (
	PersistentVolumes      = schema.GroupResource{Resource: "persistentvolumes"}
	PersistentVolumeClaims = schema.GroupResource{Resource: "persistentvolumeclaims"}
)

// NewVolumeHelper returns a helper for one backup.
//
// policies may be nil (no resource policy). snapshotVolumes is the
// backup's spec.snapshotVolumes: nil means snapshot. defaultVolumesToFSBackup
// is spec.defaultVolumesToFsBackup as resolved by the server. backupExcludePVC
// says the backup's resource filters leave out persistentvolumeclaims; the
// claims' data is then not copied through the pods either. namespaces are
// the backup's namespaces, whose pods are indexed together the first time a
// claim's pods are needed ("*" for every namespace); a claim in a namespace
// not listed gets its namespace indexed on its own, so nil is valid too.
func NewVolumeHelper(
	policies *policy.Policies,
	snapshotVolumes *bool,
	logger *slog.Logger,
	client crclient.Client,
	defaultVolumesToFSBackup, backupExcludePVC bool,
	namespaces []string,
) (VolumeHelper, error) {
	return newHelper(config{
		policies:                 policies,
		snapshotVolumes:          snapshotVolumes,
		logger:                   logger,
		client:                   client,
		defaultVolumesToFSBackup: defaultVolumesToFSBackup,
		backupExcludePVC:         backupExcludePVC,
		namespaces:               namespaces,
	})
}

type config struct {
	policies                 *policy.Policies
	snapshotVolumes          *bool
	logger                   *slog.Logger
	client                   crclient.Client
	defaultVolumesToFSBackup bool
	backupExcludePVC         bool
	namespaces               []string
	// skipNamespaces are left out of an every-namespace index (the
	// backup's excluded namespaces); asked about, each is indexed alone.
	skipNamespaces []string
}

type helper struct {
	// policies is nil when there are no volume policies, so that a policy
	// holding only includeExcludePolicy changes no volume decision.
	policies        *policy.Policies
	snapshotVolumes bool
	// snapshotVolumesSet tells an explicit snapshotVolumes=true from an
	// unset one, for the reason a decision gives.
	snapshotVolumesSet       bool
	defaultVolumesToFSBackup bool
	backupExcludePVC         bool
	log                      *slog.Logger
	objects                  *objectCache
	pods                     *podIndex
}

func newHelper(c config) (*helper, error) {
	if c.client == nil {
		return nil, errors.New("volumehelper: a client is required to look up claims, volumes and pods")
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	h := &helper{
		policies: c.policies,
		// Copied, so a caller reusing its variable cannot change a helper
		// other workers are using.
		snapshotVolumes:          c.snapshotVolumes == nil || *c.snapshotVolumes,
		snapshotVolumesSet:       c.snapshotVolumes != nil,
		defaultVolumesToFSBackup: c.defaultVolumesToFSBackup,
		backupExcludePVC:         c.backupExcludePVC,
		log:                      c.logger,
		objects:                  newObjectCache(c.client),
	}
	if h.policies != nil && len(h.policies.VolumePolicies) == 0 {
		h.policies = nil
	}
	h.pods = newPodIndex(c.client, c.logger, c.namespaces, c.skipNamespaces, h.classifyUse)
	return h, nil
}

// Interface methods take no context (Velero's signature); lookups use this
// one and rely on the client's own timeouts.
func lookupContext() context.Context { return context.Background() }

func (h *helper) ShouldPerformSnapshot(obj runtime.Unstructured, gr schema.GroupResource) (bool, error) {
	ctx := lookupContext()
	v, err := h.resolve(ctx, obj, gr)
	if err != nil {
		return false, err
	}
	d, err := h.decideVolume(ctx, v, false)
	if err != nil {
		return false, err
	}
	switch d.Source {
	case SourceUnboundClaim:
		return false, unboundError(v.unbound)
	case SourcePodVolume:
		h.log.Debug("not snapshotting a volume that fs-backup copies", "volume", v.what, "podNamespace", d.Pod.Namespace, "pod", d.Pod.Pod)
	}
	return d.Action == policy.Snapshot, nil
}

func (h *helper) ShouldPerformFSBackup(vol corev1.Volume, pod corev1.Pod) (bool, error) {
	d, unbound, err := h.decidePodVolume(lookupContext(), &vol, &pod, false)
	if err != nil {
		return false, err
	}
	if unbound != nil {
		return false, unboundError(unbound)
	}
	return d.Action == policy.FSBackup, nil
}

func (h *helper) ShouldPerformCustomAction(obj runtime.Unstructured, gr schema.GroupResource, matchParams map[string]any) (bool, error) {
	if h.policies == nil {
		if err := checkGroupResource(gr); err != nil {
			return false, err
		}
		return false, nil
	}
	v, err := h.resolve(lookupContext(), obj, gr)
	if err != nil {
		return false, err
	}
	i, action := h.match(v)
	if i < 0 || action.Type != policy.Custom {
		return false, nil
	}
	return ParamsMatch(action.Parameters, matchParams), nil
}

func (h *helper) GetActionParameters(obj runtime.Unstructured, gr schema.GroupResource) (bool, string, map[string]any, error) {
	if h.policies == nil {
		if err := checkGroupResource(gr); err != nil {
			return false, "", nil, err
		}
		return false, "", nil, nil
	}
	v, err := h.resolve(lookupContext(), obj, gr)
	if err != nil {
		return false, "", nil, err
	}
	i, action := h.match(v)
	if i < 0 {
		return false, "", nil, nil
	}
	return true, string(action.Type), copyParams(action.Parameters), nil
}

func (h *helper) match(v *volume) (int, policy.Action) {
	if h.policies == nil {
		return -1, policy.Action{}
	}
	return h.policies.MatchAction(policy.VolumeFromPV(v.pv, v.pvc))
}

// unboundError explains why a claim without a volume stops a snapshot or
// fs-backup decision: the backup cannot take its data, and saying nothing
// would lose it silently. Velero reports it the same way; a rule on the
// claim alone (pvcPhase) decides such claims without an error.
func unboundError(err error) error {
	return fmt.Errorf("volumehelper: %w, and no volume policy decides it (a rule with conditions {pvcPhase: [Pending, Lost]} and action skip leaves such claims out)", err)
}

package volumehelper

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lifeboat-io/lifeboat/pkg/policy"
)

// volume is a PV/PVC pair as far as the helper could resolve it.
type volume struct {
	// what names the object asked about, for messages.
	what string
	pv   *corev1.PersistentVolume
	pvc  *corev1.PersistentVolumeClaim
	// unbound says why a claim has no volume; a rule on the claim alone
	// can still decide it, anything else reports it.
	unbound error
	// claimNamespace/claimName name the claim whose pods may copy the
	// volume's files; empty when there is none.
	claimNamespace, claimName string
}

func checkGroupResource(gr schema.GroupResource) error {
	if gr != PersistentVolumes && gr != PersistentVolumeClaims {
		return fmt.Errorf("volumehelper: %q is not a volume resource; pass %q or %q", gr.String(), PersistentVolumes.String(), PersistentVolumeClaims.String())
	}
	return nil
}

func (h *helper) resolve(ctx context.Context, obj runtime.Unstructured, gr schema.GroupResource) (*volume, error) {
	if err := checkGroupResource(gr); err != nil {
		return nil, err
	}
	if u, ok := obj.(*unstructured.Unstructured); obj == nil || (ok && u == nil) {
		return nil, fmt.Errorf("volumehelper: no %s object given", gr.Resource)
	}
	content := obj.UnstructuredContent()
	if gr == PersistentVolumeClaims {
		pvc := &corev1.PersistentVolumeClaim{}
		if err := fromUnstructured(content, "PersistentVolumeClaim", pvc); err != nil {
			return nil, err
		}
		v := &volume{
			what: "PersistentVolumeClaim " + pvc.Namespace + "/" + pvc.Name,
			pvc:  pvc, claimNamespace: pvc.Namespace, claimName: pvc.Name,
		}
		var err error
		v.pv, v.unbound, err = h.volumeOfClaim(ctx, pvc)
		return v, err
	}
	pv := &corev1.PersistentVolume{}
	if err := fromUnstructured(content, "PersistentVolume", pv); err != nil {
		return nil, err
	}
	v := &volume{what: "PersistentVolume " + pv.Name, pv: pv}
	ref := pv.Spec.ClaimRef
	if ref == nil || ref.Name == "" || ref.Namespace == "" {
		return v, nil
	}
	pvc, err := h.objects.claim(ctx, ref.Namespace, ref.Name)
	if err != nil {
		return nil, fmt.Errorf("volumehelper: %s: %w", v.what, err)
	}
	if pvc != nil && !claimedBy(pvc, pv) {
		// The claim of that name is a newer one, bound elsewhere: neither
		// its labels nor its pods say anything about this volume.
		return v, nil
	}
	v.pvc, v.claimNamespace, v.claimName = pvc, ref.Namespace, ref.Name
	return v, nil
}

// claimedBy reports whether pvc is the claim pv's claimRef points at, not a
// later claim that reused the name.
func claimedBy(pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) bool {
	ref := pv.Spec.ClaimRef
	if ref.UID != "" && pvc.UID != "" && ref.UID != pvc.UID {
		return false
	}
	return pvc.Spec.VolumeName == "" || pvc.Spec.VolumeName == pv.Name
}

// fromUnstructured converts content into out after checking its kind, since
// the converter ignores unknown fields and would turn a Pod handed in as a
// claim into an empty claim without a word.
func fromUnstructured(content map[string]any, kind string, out any) error {
	if k, _ := content["kind"].(string); k != "" && k != kind {
		return fmt.Errorf("volumehelper: object is a %s, not a %s", k, kind)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(content, out); err != nil {
		return fmt.Errorf("volumehelper: reading %s: %w", kind, err)
	}
	return nil
}

// volumeOfClaim returns the PV bound to pvc. A claim without one (not
// bound, or bound to a PV that is gone) gives unbound rather than err: the
// policy may still decide it by the claim alone.
func (h *helper) volumeOfClaim(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (pv *corev1.PersistentVolume, unbound, err error) {
	name := pvc.Namespace + "/" + pvc.Name
	if pvc.Spec.VolumeName == "" {
		phase := pvc.Status.Phase
		if phase == "" {
			phase = corev1.ClaimPending
		}
		return nil, fmt.Errorf("PersistentVolumeClaim %s has no volume bound to it (phase %s)", name, phase), nil
	}
	if pvc.Status.Phase != corev1.ClaimBound {
		return nil, fmt.Errorf("PersistentVolumeClaim %s is in phase %q, not bound to its volume %s", name, pvc.Status.Phase, pvc.Spec.VolumeName), nil
	}
	pv, err = h.objects.volume(ctx, pvc.Spec.VolumeName)
	if err != nil {
		return nil, nil, fmt.Errorf("volumehelper: PersistentVolumeClaim %s: %w", name, err)
	}
	if pv == nil {
		return nil, fmt.Errorf("PersistentVolumeClaim %s is bound to PersistentVolume %s, which does not exist", name, pvc.Spec.VolumeName), nil
	}
	return pv, nil, nil
}

// podVolumeInfo describes a pod volume for the policy. A claim volume is
// described by its claim and PV, as the same volume reached through the
// claim would be, so that both paths meet the same rule.
func (h *helper) podVolumeInfo(ctx context.Context, vol *corev1.Volume, pod *corev1.Pod) (info policy.VolumeInfo, unbound, err error) {
	switch {
	case vol.PersistentVolumeClaim != nil:
		claim := vol.PersistentVolumeClaim.ClaimName
		pvc, err := h.objects.claim(ctx, pod.Namespace, claim)
		if err != nil {
			return info, nil, fmt.Errorf("volumehelper: volume %s of pod %s/%s: %w", vol.Name, pod.Namespace, pod.Name, err)
		}
		if pvc == nil {
			return info, nil, fmt.Errorf("volumehelper: volume %s of pod %s/%s uses PersistentVolumeClaim %s, which does not exist", vol.Name, pod.Namespace, pod.Name, claim)
		}
		pv, unbound, err := h.volumeOfClaim(ctx, pvc)
		if err != nil {
			return info, nil, err
		}
		return policy.VolumeFromPodVolume(*vol, pvc, pv), unbound, nil
	case vol.Ephemeral != nil:
		// A generic ephemeral volume's claim is named after the pod and the
		// volume; before the claim exists there is nothing but the type.
		pvc, err := h.objects.claim(ctx, pod.Namespace, ephemeralClaimName(pod.Name, vol.Name))
		if err != nil {
			return info, nil, fmt.Errorf("volumehelper: volume %s of pod %s/%s: %w", vol.Name, pod.Namespace, pod.Name, err)
		}
		return policy.VolumeFromPodVolume(*vol, pvc, nil), nil, nil
	}
	return policy.VolumeFromPodVolume(*vol, nil, nil), nil, nil
}

func ephemeralClaimName(pod, volume string) string { return pod + "-" + volume }

// objectCache remembers the PVs and claims the helper fetched, "not found"
// included: a backup asks about the same volume several times (snapshot,
// custom action, parameters, each pod that mounts it), and one GET per
// object keeps a large backup from costing tens of thousands of requests.
// Errors other than NotFound are not remembered, so they are retried.
type objectCache struct {
	client crclient.Client
	mu     sync.RWMutex
	pvs    map[string]*corev1.PersistentVolume
	pvcs   map[string]*corev1.PersistentVolumeClaim
}

func newObjectCache(c crclient.Client) *objectCache {
	return &objectCache{
		client: c,
		pvs:    map[string]*corev1.PersistentVolume{},
		pvcs:   map[string]*corev1.PersistentVolumeClaim{},
	}
}

// volume returns the named PV, or nil when it does not exist. Callers must
// not modify it: it is shared by all workers.
func (c *objectCache) volume(ctx context.Context, name string) (*corev1.PersistentVolume, error) {
	return cached(ctx, c, c.pvs, crclient.ObjectKey{Name: name}, "PersistentVolume "+name, &corev1.PersistentVolume{})
}

// claim returns the named claim, or nil when it does not exist; shared, as
// volume's result.
func (c *objectCache) claim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	return cached(ctx, c, c.pvcs, crclient.ObjectKey{Namespace: namespace, Name: name}, "PersistentVolumeClaim "+namespace+"/"+name, &corev1.PersistentVolumeClaim{})
}

func cached[T crclient.Object](ctx context.Context, c *objectCache, m map[string]T, key crclient.ObjectKey, what string, fresh T) (T, error) {
	k := key.String()
	c.mu.RLock()
	obj, ok := m[k]
	c.mu.RUnlock()
	if ok {
		return obj, nil
	}
	var none T
	if err := c.client.Get(ctx, key, fresh); err != nil {
		if !apierrors.IsNotFound(err) {
			return none, fmt.Errorf("getting %s: %w", what, err)
		}
		fresh = none
	}
	c.mu.Lock()
	// Two workers may have fetched it at once; keep the first so that every
	// caller sees the same object.
	if prev, ok := m[k]; ok {
		fresh = prev
	} else {
		m[k] = fresh
	}
	c.mu.Unlock()
	return fresh, nil
}

package restore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

func ownerKey(group, kind, ns, name string) string {
	return group + "/" + kind + "/" + ns + "/" + name
}

func (r *run) recordUID(group, kind, ns, name string, uid types.UID) {
	if r.wantedOwners != nil && !r.wantedOwners[group+"/"+kind+"/"+name] {
		return
	}
	r.mu.Lock()
	r.uids[ownerKey(group, kind, ns, name)] = uid
	r.mu.Unlock()
}

// ownerRefsField is how an item that names owners shows it: most items
// do not, and are not decoded for it.
var ownerRefsField = []byte(`"ownerReferences"`)

// noteOwners remembers the owners data's item refers to, by group, kind
// and name: the namespace an owner is restored into may be mapped, and
// keeping one too many UIDs costs nothing. Called while the archive is
// spooled, before anything is created; an item that cannot be decoded
// fails later, where it is restored.
func (r *run) noteOwners(data []byte) {
	if !bytes.Contains(data, ownerRefsField) {
		return
	}
	var head struct {
		Metadata struct {
			OwnerReferences []metav1.OwnerReference `json:"ownerReferences"`
		} `json:"metadata"`
	}
	if json.Unmarshal(data, &head) != nil {
		return
	}
	for _, ref := range head.Metadata.OwnerReferences {
		if gv, err := schema.ParseGroupVersion(ref.APIVersion); err == nil {
			r.wantedOwners[gv.Group+"/"+ref.Kind+"/"+ref.Name] = true
		}
	}
}

// resolveOwner finds the UID an owner got in this restore. Owners live in
// the dependent's namespace or are cluster-scoped.
func (r *run) resolveOwner(ref metav1.OwnerReference, ns string) (types.UID, bool) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return "", false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if uid, ok := r.uids[ownerKey(gv.Group, ref.Kind, ns, ref.Name)]; ok {
		return uid, true
	}
	uid, ok := r.uids[ownerKey(gv.Group, ref.Kind, "", ref.Name)]
	return uid, ok
}

// rewriteOwners points owner references at the owners' new UIDs. An owner
// not restored yet is dropped for now and put back by applyFixups once it
// exists; an owner that never comes is left out, since a reference to a
// missing UID would get the item garbage-collected.
func (r *run) rewriteOwners(obj *unstructured.Unstructured, info resourceInfo) {
	refs := obj.GetOwnerReferences()
	if len(refs) == 0 {
		return
	}
	kept := make([]metav1.OwnerReference, 0, len(refs))
	for _, ref := range refs {
		if uid, ok := r.resolveOwner(ref, obj.GetNamespace()); ok {
			ref.UID = uid
			kept = append(kept, ref)
		}
	}
	if len(kept) < len(refs) {
		r.mu.Lock()
		// Clones: a decoded item's strings share its whole JSON text
		// (jsonmap), which a fixup must not keep alive.
		r.fixups = append(r.fixups, ownerFixup{info: info, ns: strings.Clone(obj.GetNamespace()), name: strings.Clone(obj.GetName()), refs: refs})
		r.mu.Unlock()
	}
	obj.SetOwnerReferences(kept)
}

// applyFixups restores the owner references whose owners were created
// after their dependents.
func (r *run) applyFixups(ctx context.Context) {
	for _, f := range r.fixups {
		var refs []metav1.OwnerReference
		missing := 0
		for _, ref := range f.refs {
			if uid, ok := r.resolveOwner(ref, f.ns); ok {
				ref.UID = uid
				refs = append(refs, ref)
			} else {
				missing++
			}
		}
		if missing == len(f.refs) {
			r.log.Info("owner references dropped: owners not restored", "resource", f.info.GVR.GroupResource().String(), "namespace", f.ns, "name", f.name)
			continue
		}
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": refs}})
		if err != nil {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		_, err = r.client(f.info, f.ns).Patch(cctx, f.name, types.MergePatchType, patch, metav1.PatchOptions{})
		cancel()
		if err != nil {
			r.results.Warning(f.ns, fmt.Sprintf("could not restore the owner references of %s %s: %v", f.info.GVR.GroupResource(), qualified(f.ns, f.name), err))
		}
	}
}

// mergePatch returns the JSON merge patch that turns live into desired, or
// nil when they are the same.
func mergePatch(live, desired *unstructured.Unstructured) ([]byte, error) {
	a, err := json.Marshal(live.Object)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(desired.Object)
	if err != nil {
		return nil, err
	}
	patch, err := jsonpatch.CreateMergePatch(a, b)
	if err != nil {
		return nil, fmt.Errorf("comparing with the live object: %w", err)
	}
	if bytes.Equal(bytes.TrimSpace(patch), []byte("{}")) {
		return nil, nil
	}
	return patch, nil
}

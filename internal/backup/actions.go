package backup

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/archive"
	"github.com/lifeboat-io/lifeboat/internal/itemops"
	"github.com/lifeboat-io/lifeboat/internal/selection"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

// Plugins are where the engine finds backup item actions (the plugin
// host, built-ins included).
type Plugins interface {
	Names(kind api.Kind) []string
	BackupItemAction(name string) (api.BackupItemAction, error)
	BackupItemActionV2(name string) (api.BackupItemActionV2, error)
	ItemBlockAction(name string) (api.ItemBlockAction, error)
	// VolumeSnapshotter takes native snapshots for a snapshot location's
	// provider.
	VolumeSnapshotter(name string) (api.VolumeSnapshotter, error)
}

// itemAction is a backup item action with its selector resolved for this
// cluster. v1 actions are called through the v2 shape.
type itemAction struct {
	name string
	// remote actions run in another process and take items as JSON.
	remote    bool
	appliesTo *selection.AppliesTo
	execute   func(item runtime.Unstructured, b *v1.Backup) (runtime.Unstructured, []api.ResourceIdentifier, string, []api.ResourceIdentifier, error)
}

// actionWorkers bounds concurrent item action calls within one page. Calls
// to a plugin built with Lifeboat's SDK share one stream, where more calls
// in flight make fuller messages and fewer round trips per item (at 16 the
// round trips, not the work, set a page's pace).
const actionWorkers = 64

// maxAdditionalDepth bounds chains of additional items (an item naming an
// item naming an item ...); items are stored once, so only a plugin that
// invents new names forever could reach it.
const maxAdditionalDepth = 16

// executeFunc is an action's Execute in the v2 shape.
type executeFunc = func(runtime.Unstructured, *v1.Backup) (runtime.Unstructured, []api.ResourceIdentifier, string, []api.ResourceIdentifier, error)

// actionLoader gets one action of a kind by name: its selector, how to
// execute it, and whether it runs in another process.
type actionLoader func(name string) (api.ResourceSelector, executeFunc, bool, error)

// loadActions gets every backup item action, v2 first then item block
// actions then v1, each in name order (a plugin offered as both v1 and v2
// is called once, as v2), and resolves what it applies to.
func (r *run) loadActions(resolver selection.ResourceResolver) ([]itemAction, error) {
	p := r.e.Plugins
	if p == nil {
		return nil, nil
	}
	kinds := []struct {
		kind api.Kind
		what string
		load actionLoader
	}{
		{api.KindBackupItemActionV2, "backup item action", func(name string) (api.ResourceSelector, executeFunc, bool, error) {
			a, err := p.BackupItemActionV2(name)
			if err != nil {
				return api.ResourceSelector{}, nil, false, err
			}
			sel, err := a.AppliesTo()
			return sel, a.Execute, isRemote(a), err
		}},
		// An ItemBlockAction names items that belong with an item. Velero
		// backs such a block up together; the single writer here gets the
		// same effect by storing them right after the item.
		{api.KindItemBlockAction, "item block action", func(name string) (api.ResourceSelector, executeFunc, bool, error) {
			a, err := p.ItemBlockAction(name)
			if err != nil {
				return api.ResourceSelector{}, nil, false, err
			}
			sel, err := a.AppliesTo()
			return sel, func(item runtime.Unstructured, b *v1.Backup) (runtime.Unstructured, []api.ResourceIdentifier, string, []api.ResourceIdentifier, error) {
				related, err := a.GetRelatedItems(item, b)
				return nil, related, "", nil, err
			}, isRemote(a), err
		}},
		{api.KindBackupItemAction, "backup item action", func(name string) (api.ResourceSelector, executeFunc, bool, error) {
			a, err := p.BackupItemAction(name)
			if err != nil {
				return api.ResourceSelector{}, nil, false, err
			}
			sel, err := a.AppliesTo()
			return sel, func(item runtime.Unstructured, b *v1.Backup) (runtime.Unstructured, []api.ResourceIdentifier, string, []api.ResourceIdentifier, error) {
				updated, extra, err := a.Execute(item, b)
				return updated, extra, "", nil, err
			}, isRemote(a), err
		}},
	}
	var out []itemAction
	seen := map[string]bool{}
	for _, k := range kinds {
		names := p.Names(k.kind)
		sort.Strings(names)
		for _, name := range names {
			if k.kind == api.KindBackupItemAction && seen[name] {
				continue
			}
			sel, execute, remote, err := k.load(name)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", k.what, name, err)
			}
			at, err := selection.NewAppliesTo(sel, resolver)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", k.what, name, err)
			}
			if k.kind == api.KindBackupItemActionV2 {
				seen[name] = true
			}
			out = append(out, itemAction{name: name, appliesTo: at, execute: execute, remote: remote})
		}
	}
	return out, nil
}

// actionsFor returns the actions that may apply to items of rt.
func (r *run) actionsFor(rt resourceType) []itemAction {
	gr := rt.GroupResource()
	if acts, ok := r.typeActions[gr]; ok {
		return acts
	}
	var acts []itemAction
	for _, a := range r.actions {
		if a.appliesTo.MatchesResource(gr, rt.Namespaced) {
			acts = append(acts, a)
		}
	}
	r.typeActions[gr] = acts
	return acts
}

// actionResult is an item after the actions that apply to it.
type actionResult struct {
	data       []byte
	additional []api.ResourceIdentifier
	// ran names the actions whose selector took the item and that ran on
	// it, in order: a volume decided custom is handled by them.
	ran []string
	// skip leaves the item out: an action failed on it (recorded).
	skip bool
	err  error
}

// applyActions runs the actions that apply to one item. It is safe to call
// for several items at once; problems with the item are recorded, only a
// broken item (undecodable) comes back as err.
func (r *run) applyActions(rt resourceType, it rawItem, acts []itemAction) actionResult {
	gr := rt.GroupResource()
	// The item stays JSON unless an action is in-process or changes it:
	// an out-of-process action gets the bytes as listed, and the bytes it
	// returns are stored as they are.
	var cur runtime.Unstructured = api.NewRawItem(it.JSON)
	labels := it.Labels
	// The labels of an item an action changed are read only if a later
	// action needs them: for an item still in JSON that is a decode.
	labelsStale := false
	var res actionResult
	for _, a := range acts {
		if labelsStale {
			labels, labelsStale = itemLabels(cur), false
		}
		if !a.appliesTo.Matches(gr, it.Namespace, labels) {
			continue
		}
		if !a.remote {
			cur = decodedItem(cur)
		}
		updated, extra, opID, post, err := a.execute(cur, r.actionBackup)
		if err != nil {
			// The item is left out rather than stored unprocessed: a
			// restore would otherwise bring back something the action
			// meant to change.
			msg := fmt.Sprintf("backup item action %s failed for %s %s: %v", a.name, gr, qualified(it.Namespace, it.Name), err)
			r.results.Error(it.Namespace, msg)
			r.log.Error("backup item action failed", "action", a.name, "resource", gr.String(), "namespace", it.Namespace, "name", it.Name, "error", err)
			return actionResult{skip: true}
		}
		if opID != "" {
			r.recordOperation(a.name, api.ResourceIdentifier{GroupResource: gr, Namespace: it.Namespace, Name: it.Name}, opID, post)
		}
		if updated != nil && updated != cur {
			cur, labelsStale = updated, true
		}
		res.additional = append(res.additional, extra...)
		res.ran = append(res.ran, a.name)
	}
	data, err := itemJSON(cur)
	if err != nil {
		return actionResult{err: fmt.Errorf("encoding %s %s: %w", gr, qualified(it.Namespace, it.Name), err)}
	}
	res.data = data
	return res
}

// isRemote reports whether a plugin runs in another process.
func isRemote(p any) bool {
	_, ok := p.(interface{ RemotePlugin() })
	return ok
}

// decodedItem gives in-process actions the *unstructured.Unstructured they
// are written against.
func decodedItem(item runtime.Unstructured) runtime.Unstructured {
	if raw, ok := item.(*api.RawItem); ok {
		return raw.Unstructured()
	}
	return item
}

// itemJSON encodes an item, or hands back its JSON when it still has it.
func itemJSON(item runtime.Unstructured) ([]byte, error) {
	if raw, ok := item.(*api.RawItem); ok {
		return raw.RawJSON()
	}
	return json.Marshal(item.UnstructuredContent())
}

// itemLabels reads the labels of an item an action returned; for an item
// still in JSON form only its metadata is decoded.
func itemLabels(item runtime.Unstructured) map[string]string {
	if raw, ok := item.(*api.RawItem); ok {
		if data, err := raw.RawJSON(); err == nil {
			var head itemHead
			if json.Unmarshal(data, &head) == nil {
				return head.Metadata.Labels
			}
		}
	}
	return (&unstructured.Unstructured{Object: item.UnstructuredContent()}).GetLabels()
}

// applyActionsToPage runs the actions on a page's items concurrently
// (bounded by actionWorkers): a plugin call is a round trip to another
// process, and one at a time they would dominate a backup. Results come
// back in item order, so the archive stays deterministic. Items already
// stored (as some earlier item's additional items) are not sent again, nor
// are pods with hooks and the claims they mount (later says which): their
// actions run between the pod's pre and post hooks.
func (r *run) applyActionsToPage(ctx context.Context, rt resourceType, items []rawItem, later func(int) bool) []*actionResult {
	acts := r.actionsFor(rt)
	out := make([]*actionResult, len(items))
	if len(acts) == 0 {
		return out
	}
	gr := rt.GroupResource().String()
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(actionWorkers, len(items)) {
		wg.Go(func() {
			for i := range work {
				res := r.applyActions(rt, items[i], acts)
				out[i] = &res
			}
		})
	}
	for i, it := range items {
		if r.stored[gr+"/"+it.Namespace+"/"+it.Name] || later(i) {
			continue
		}
		select {
		case work <- i:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	return out
}

// writeItem stores one item after the actions that apply to it (pre, when
// they already ran), then the additional items they name. Per-item
// problems are recorded as backup errors; only archive and cancellation
// errors are returned.
func (r *run) writeItem(ctx context.Context, aw *archive.Writer, rt resourceType, it rawItem, pre *actionResult, depth int) error {
	gr := rt.GroupResource()
	if gr == pvResource && r.volumes.hasPV(it.Name) {
		return nil // stored already, with its claim
	}
	if r.stored != nil {
		k := gr.String() + "/" + it.Namespace + "/" + it.Name
		if r.stored[k] {
			return nil
		}
		r.stored[k] = true
	}
	data := it.JSON
	var additional []api.ResourceIdentifier
	var ran []string
	if acts := r.actionsFor(rt); len(acts) > 0 {
		res := pre
		if res == nil {
			applied := r.applyActions(rt, it, acts)
			res = &applied
		}
		if res.err != nil {
			return res.err
		}
		if res.skip {
			return nil
		}
		data, additional, ran = res.data, res.additional, res.ran
	}
	if gr == pvcResource {
		data = r.csiAtClaim(ctx, data)
	}
	ref := archive.ItemRef{GroupResource: gr.String(), Version: rt.GVR.Version, Namespace: it.Namespace, Name: it.Name}
	if err := aw.WriteItem(ref, data); err != nil {
		return fmt.Errorf("writing the archive: %w", err)
	}
	r.noteListedClass(gr, it)
	if err := r.volumes.observe(gr, data, ran); err != nil {
		r.results.Error(it.Namespace, fmt.Sprintf("%s %s: %v", gr, qualified(it.Namespace, it.Name), err))
	} else if gr == pvcResource {
		additional = append(additional, r.claimVolume(it.Namespace, it.Name)...)
	}
	r.addToResourceList(rt, it.Namespace, it.Name)
	if it.Namespace != "" {
		r.namespacesWithItems[it.Namespace] = true
	}
	r.backedUp++
	r.perType[gr]++
	for _, id := range additional {
		if err := r.writeAdditional(ctx, aw, id, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// writeAdditional stores an item an action named, if the backup's filters
// allow it (Velero's looser rules for additional items).
func (r *run) writeAdditional(ctx context.Context, aw *archive.Writer, id api.ResourceIdentifier, depth int) error {
	where := fmt.Sprintf("additional item %s", id)
	if depth > maxAdditionalDepth {
		r.results.Error(id.Namespace, where+": chain of additional items is too deep")
		return nil
	}
	rt, ok := r.typesByGR[id.GroupResource]
	if !ok {
		r.results.Error(id.Namespace, where+": the cluster does not serve "+id.GroupResource.String())
		return nil
	}
	ns := id.Namespace
	if !rt.Namespaced {
		ns = ""
	}
	if !r.resources.ShouldIncludeAdditionalItem(id.GroupResource, rt.Namespaced) ||
		(rt.Namespaced && !r.resources.Namespaces().ShouldInclude(id.Namespace)) ||
		!r.fine.KeepsName(id.GroupResource, ns, id.Name) {
		r.log.Info("additional item left out by the backup's filters", "item", id.String())
		return nil
	}
	it, err := r.e.lister.get(ctx, rt, ns, id.Name)
	if err != nil {
		r.results.Error(id.Namespace, fmt.Sprintf("%s: %v", where, err))
		return nil
	}
	return r.writeItem(ctx, aw, rt, it, nil, depth)
}

// claimVolume names a bound claim's PersistentVolume as an additional
// item, as Velero's built-in claim action does, so that a backup of
// namespaces carries the volumes its claims use (unless the filters leave
// cluster-scoped items out, which writeAdditional checks).
func (r *run) claimVolume(namespace, name string) []api.ResourceIdentifier {
	r.volumes.mu.Lock()
	pvc := r.volumes.pvcs[namespace+"/"+name]
	r.volumes.mu.Unlock()
	if pvc == nil || pvc.Spec.VolumeName == "" {
		return nil
	}
	return []api.ResourceIdentifier{{GroupResource: pvResource, Name: pvc.Spec.VolumeName}}
}

func qualified(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

// recordOperation notes an asynchronous operation an action started; the
// backup then waits for it (phase WaitingForPluginOperations).
func (r *run) recordOperation(action string, item api.ResourceIdentifier, opID string, post []api.ResourceIdentifier) {
	now := metav1.Now()
	r.opsMu.Lock()
	defer r.opsMu.Unlock()
	r.operations = append(r.operations, itemops.BackupOperation{
		Spec: itemops.BackupOperationSpec{
			BackupName: r.b.Name, BackupUID: string(r.b.UID), BackupItemAction: action,
			ResourceIdentifier: item, OperationID: opID, PostOperationItems: post,
		},
		Status: itemops.Status{Phase: itemops.PhaseNew, Created: &now},
	})
	r.log.Info("asynchronous operation started", "action", action, "item", item.String(), "operationID", opID)
}

package restore

import (
	"context"
	"fmt"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/selection"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

// Plugins are where the engine finds restore item actions (the plugin
// host, built-ins included).
type Plugins interface {
	Names(kind api.Kind) []string
	RestoreItemAction(name string) (api.RestoreItemAction, error)
	RestoreItemActionV2(name string) (api.RestoreItemActionV2, error)
	// VolumeSnapshotter creates volumes from native snapshots for a
	// snapshot location's provider.
	VolumeSnapshotter(name string) (api.VolumeSnapshotter, error)
}

// additionalItemsTimeout bounds the wait for additional items an action
// asked to be ready, when the action gives no timeout of its own.
const additionalItemsTimeout = 10 * time.Minute

// itemAction is a restore item action with its selector resolved. v1
// actions have no ready check.
type itemAction struct {
	name      string
	appliesTo *selection.AppliesTo
	execute   func(*api.RestoreItemActionExecuteInput) (*api.RestoreItemActionExecuteOutput, error)
	ready     func([]api.ResourceIdentifier, *v1.Restore) (bool, error)
}

// loadActions gets every restore item action, v2 first then v1, each in
// name order (one offered as both is called once, as v2).
func (r *run) loadActions(resolver selection.ResourceResolver) error {
	p := r.e.Plugins
	if p == nil {
		return nil
	}
	seen := map[string]bool{}
	add := func(name string, sel api.ResourceSelector, a itemAction) error {
		at, err := selection.NewAppliesTo(sel, resolver)
		if err != nil {
			return fmt.Errorf("restore item action %s: %w", name, err)
		}
		a.name, a.appliesTo = name, at
		r.actions = append(r.actions, a)
		seen[name] = true
		return nil
	}
	v2 := p.Names(api.KindRestoreItemActionV2)
	sort.Strings(v2)
	for _, name := range v2 {
		a, err := p.RestoreItemActionV2(name)
		if err != nil {
			return err
		}
		sel, err := a.AppliesTo()
		if err != nil {
			return fmt.Errorf("restore item action %s: AppliesTo: %w", name, err)
		}
		if err := add(name, sel, itemAction{execute: a.Execute, ready: a.AreAdditionalItemsReady}); err != nil {
			return err
		}
	}
	v1names := p.Names(api.KindRestoreItemAction)
	sort.Strings(v1names)
	for _, name := range v1names {
		if seen[name] {
			continue
		}
		a, err := p.RestoreItemAction(name)
		if err != nil {
			return err
		}
		sel, err := a.AppliesTo()
		if err != nil {
			return fmt.Errorf("restore item action %s: AppliesTo: %w", name, err)
		}
		if err := add(name, sel, itemAction{execute: a.Execute}); err != nil {
			return err
		}
	}
	return nil
}

// runActions passes obj (prepared for the target cluster) through the
// actions that apply to it. It returns the item to create, or nil when an
// action skipped it or failed (which is recorded).
func (r *run) runActions(ctx context.Context, gr schema.GroupResource, backupNS string, obj, fromBackup *unstructured.Unstructured) *unstructured.Unstructured {
	for _, a := range r.actions {
		if !a.appliesTo.Matches(gr, backupNS, fromBackup.GetLabels()) {
			continue
		}
		out, err := a.execute(&api.RestoreItemActionExecuteInput{Item: obj, ItemFromBackup: fromBackup, Restore: r.rs})
		if err != nil {
			r.itemError(obj.GetNamespace(), gr, obj.GetName(), fmt.Errorf("restore item action %s: %w", a.name, err))
			r.record(obj, "failed")
			return nil
		}
		if out == nil {
			continue
		}
		if out.SkipRestore {
			r.log.Info("restore item action skipped the item", "action", a.name, "resource", gr.String(), "namespace", obj.GetNamespace(), "name", obj.GetName())
			r.skip(gr, obj, "restore item action "+a.name+" skipped it")
			return nil
		}
		if out.UpdatedItem != nil {
			if u, ok := out.UpdatedItem.(*unstructured.Unstructured); ok {
				obj = u
			} else {
				obj = &unstructured.Unstructured{Object: out.UpdatedItem.UnstructuredContent()}
			}
		}
		for _, id := range out.AdditionalItems {
			r.restoreAdditional(ctx, id)
		}
		if out.OperationID != "" {
			r.results.Warning(obj.GetNamespace(), fmt.Sprintf("restore item action %s started asynchronous operation %q for %s %s; Lifeboat does not track asynchronous operations yet, so the restore does not wait for it",
				a.name, out.OperationID, gr, qualified(obj.GetNamespace(), obj.GetName())))
		}
		// A dry run's additional items never become ready: none exists.
		if out.WaitForAdditionalItems && a.ready != nil && len(out.AdditionalItems) > 0 && r.dry == nil {
			r.waitAdditionalReady(ctx, a, out, obj, gr)
		}
	}
	return obj
}

func (r *run) waitAdditionalReady(ctx context.Context, a itemAction, out *api.RestoreItemActionExecuteOutput, obj *unstructured.Unstructured, gr schema.GroupResource) {
	timeout := out.AdditionalItemsReadyTimeout
	if timeout <= 0 {
		timeout = additionalItemsTimeout
	}
	deadline := time.Now().Add(timeout)
	for {
		ready, err := a.ready(out.AdditionalItems, r.rs)
		if err == nil && ready {
			return
		}
		if err != nil || time.Now().After(deadline) || ctx.Err() != nil {
			why := "they were not ready in time"
			if err != nil {
				why = err.Error()
			}
			r.results.Warning(obj.GetNamespace(), fmt.Sprintf("restore item action %s: additional items of %s %s: %s; restoring it anyway",
				a.name, gr, qualified(obj.GetNamespace(), obj.GetName()), why))
			return
		}
		time.Sleep(time.Second)
	}
}

// restoreAdditional restores an item an action named, from the backup, if
// it is there and was not restored yet. The spool holds only what the
// restore's filters admitted, found by archive path, and restoreItem checks
// the item against that path: an action cannot bring in anything else.
func (r *run) restoreAdditional(ctx context.Context, id api.ResourceIdentifier) {
	key := id.GroupResource.String()
	it, ok, err := r.spool.lookup(key, id.Namespace, id.Name)
	if err != nil {
		r.results.Error(id.Namespace, fmt.Sprintf("additional item %s: %v", id, err))
		return
	}
	if !ok {
		r.log.Info("additional item is not in the backup", "item", id.String())
		return
	}
	// The type as the spool names it, so that the item is checked against
	// the directory it was found under.
	r.restoreItem(ctx, schema.ParseGroupResource(key), it)
}

// claim marks an item as handled and reports whether it was not before, so
// an item named as an additional item is restored once.
func (r *run) claim(gr schema.GroupResource, ns, name string) bool {
	if r.claimed == nil {
		return true
	}
	k := itemKey(gr.String(), ns, name)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.claimed[k] {
		return false
	}
	r.claimed[k] = true
	return true
}

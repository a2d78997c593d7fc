package selection

import (
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// BackupFineFilter is Velero's backup's reading of the fine-grained
// filters beside the spec's label selector. Velero applies them where it
// LISTs: a backup naming its namespaces is listed namespace by namespace,
// and there the entry ruling the namespace replaces the spec's selector
// with the kind's own; a backup of every namespace is listed across the
// cluster with the spec's selector, and the kind's selector is then
// checked too, so both must match. Names are checked when an item is
// stored, for additional items as well. Each rule lives here once; the
// engine asks per LIST and per item.
type BackupFineFilter struct {
	fine   *FineFilters
	global *LabelMatcher
	// perNamespace: the spec names its namespaces (includes neither empty
	// nor "*"), so Velero lists them one by one.
	perNamespace bool
}

// NewBackupFineFilter combines fine (nil: none) with the spec's label
// selector and namespace filter. It returns nil when there are no
// fine-grained filters.
func NewBackupFineFilter(fine *FineFilters, global *LabelMatcher, namespaces *NamespaceFilter) *BackupFineFilter {
	if fine == nil {
		return nil
	}
	if global == nil {
		global = &LabelMatcher{}
	}
	return &BackupFineFilter{fine: fine, global: global, perNamespace: namespaces.namesNamespaces()}
}

// namesNamespaces reports whether the includes are neither empty nor "*":
// Velero then lists the (expanded) included namespaces one by one.
func (f *NamespaceFilter) namesNamespaces() bool {
	return !f.ie.includes.empty() && !f.ie.includes.star
}

// veleroListNamespace is the namespace Velero's LIST of type gr that finds
// an item of namespace ns is made in: "" for cluster-scoped types and for
// backups of every namespace.
func (b *BackupFineFilter) veleroListNamespace(namespaced bool, ns string) string {
	if namespaced && b.perNamespace {
		return ns
	}
	return ""
}

// listRule is what Velero LISTs type gr with in namespace listNS ("" for
// a cluster-wide LIST): skip when the entry ruling listNS has neither the
// kind nor a catch-all. A namespace entry can match "" only through the
// pattern "*", which then rules cluster-wide LISTs, cluster-scoped types
// included, as in Velero.
func (b *BackupFineFilter) listRule(gr schema.GroupResource, namespaced bool, listNS string) (skip bool, m *LabelMatcher) {
	nr := b.fine.ForNamespace(listNS)
	if nr != nil && nr.Rule(gr) == nil {
		return true, nil
	}
	if !namespaced && b.fine.HasCluster() {
		if r := b.fine.ClusterRule(gr); r != nil {
			return false, r.labels
		}
		return false, b.global
	}
	if nr != nil {
		return false, nr.Rule(gr).labels
	}
	return false, b.global
}

// ListPlan says how to LIST type gr in namespace jobNS ("" across the
// cluster): skip when Velero would find none of its items there, else the
// selector the API server can filter with (nil: list everything, and let
// KeepsLabels decide per item).
func (b *BackupFineFilter) ListPlan(gr schema.GroupResource, namespaced bool, jobNS string) (skip bool, server labels.Selector) {
	if b == nil {
		return false, nil
	}
	var listNS string
	switch {
	case !namespaced:
	case jobNS != "":
		listNS = jobNS
	case b.perNamespace:
		// One LIST across the cluster where Velero lists per namespace:
		// the rules differ by namespace, so the items are judged one by one.
		return false, nil
	}
	skip, m := b.listRule(gr, namespaced, listNS)
	if skip {
		return true, nil
	}
	// Items found across the cluster are judged again by their own
	// namespace's entry (KeepsLabels); the LIST's selector still narrows.
	if sel, ok := m.Selector(); ok && !sel.Empty() {
		return false, sel
	}
	return false, nil
}

// KeepsLabels is Velero's verdict on an item of type gr in namespace ns
// (cluster-scoped: "") with these labels.
func (b *BackupFineFilter) KeepsLabels(gr schema.GroupResource, namespaced bool, ns string, itemLabels map[string]string) bool {
	listNS := b.veleroListNamespace(namespaced, ns)
	skip, m := b.listRule(gr, namespaced, listNS)
	if skip || !m.Matches(itemLabels) {
		return false
	}
	if namespaced && listNS == "" && ns != "" {
		// Found by a cluster-wide LIST: the item's own namespace entry
		// must take it too.
		if nr := b.fine.ForNamespace(ns); nr != nil {
			r := nr.Rule(gr)
			return r != nil && r.labels.Matches(itemLabels)
		}
	}
	return true
}

// KeepsName is Velero's check of the names and excludedNames of the rule
// for an item, made when it is stored: for listed items and for items an
// action adds. A kind the namespace's entry does not list lets an added
// item through (Velero keeps what plugins add); a cluster-scoped item is
// checked against clusterScopedFilterPolicy's rule for its kind.
func (b *BackupFineFilter) KeepsName(gr schema.GroupResource, ns, name string) bool {
	if b == nil {
		return true
	}
	if ns != "" {
		if nr := b.fine.ForNamespace(ns); nr != nil {
			if r := nr.Rule(gr); r != nil {
				return r.KeepsName(name)
			}
		}
		return true
	}
	if r := b.fine.ClusterRule(gr); r != nil {
		return r.KeepsName(name)
	}
	return true
}

// RestoreSelects is Velero's restore's verdict on an archived item of
// type gr and kind, from namespace ns of the backup (before any namespace
// mapping; "" for cluster-scoped), with name and labels. The entry ruling
// ns replaces the spec's label selector for the kinds it lists; a kind it
// neither lists nor covers with a catch-all is not restored; a
// cluster-scoped kind that clusterScopedFilterPolicy lists gets its rule
// instead of the spec's selector, and others keep the spec's.
func (f *FineFilters) RestoreSelects(gr schema.GroupResource, kind, ns, name string, itemLabels map[string]string, global *LabelMatcher) bool {
	if global == nil {
		global = &LabelMatcher{}
	}
	if f == nil {
		return global.Matches(itemLabels)
	}
	var r *KindRule
	if ns != "" {
		nr := f.ForNamespace(ns)
		if nr == nil {
			return global.Matches(itemLabels)
		}
		if r = nr.restoreRule(gr, kind); r == nil {
			return false
		}
	} else {
		r = f.ClusterRule(gr)
		if r == nil && f.clusterUnresolved {
			r = byItemKind(f.cluster, kind)
		}
		if r == nil {
			return global.Matches(itemLabels)
		}
	}
	return r.labels.Matches(itemLabels) && r.KeepsName(name)
}

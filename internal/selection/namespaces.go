package selection

import (
	"slices"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// NamespaceFilter is a backup's includedNamespaces/excludedNamespaces.
type NamespaceFilter struct {
	ie       IncludesExcludes
	all      bool
	explicit []string
	// listable is true when the includes name namespaces one by one, so the
	// engine can LIST per namespace instead of across the cluster.
	listable bool
}

// NewNamespaceFilter builds the filter; validate the lists separately with
// ValidateNamespaceIncludesExcludes (NewResourceFilter does).
func NewNamespaceFilter(includes, excludes []string) *NamespaceFilter {
	f := &NamespaceFilter{ie: *NewIncludesExcludes(includes, excludes)}
	f.all = f.ie.IncludesEverything()
	inc := &f.ie.includes
	if !inc.empty() && !inc.star && len(inc.globs) == 0 {
		f.listable = true
		for ns := range inc.exact {
			// "" names no namespace: listing it would list them all.
			if ns != "" && f.ie.ShouldInclude(ns) {
				f.explicit = append(f.explicit, ns)
			}
		}
		slices.Sort(f.explicit)
	}
	return f
}

// NamespaceFilterFor is the namespace filter of a backup spec.
func NamespaceFilterFor(spec *v1.BackupSpec) *NamespaceFilter {
	if spec == nil {
		return NewNamespaceFilter(nil, nil)
	}
	return NewNamespaceFilter(spec.IncludedNamespaces, spec.ExcludedNamespaces)
}

// ShouldInclude reports whether items in namespace ns are backed up.
func (f *NamespaceFilter) ShouldInclude(ns string) bool {
	return f.all || f.ie.ShouldInclude(ns)
}

// IncludesAll reports whether every namespace is included: includes empty
// or "*", and no excludes. Velero backs up cluster-scoped resources in
// "auto" mode only then, so excluding a single namespace turns them off.
func (f *NamespaceFilter) IncludesAll() bool { return f.all }

// ExplicitNamespaces returns the included namespaces, sorted, minus the
// excluded ones, when the includes are plain names (no "*" and no
// patterns); the engine can then LIST per namespace. ok is false when the
// includes are "*", empty, or hold patterns: LIST across the cluster and
// filter with ShouldInclude. The list may be empty when everything named
// is excluded.
func (f *NamespaceFilter) ExplicitNamespaces() (namespaces []string, ok bool) {
	if !f.listable {
		return nil, false
	}
	return slices.Clone(f.explicit), true
}

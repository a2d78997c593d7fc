package selection

import (
	"fmt"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

// AppliesTo is a plugin's ResourceSelector resolved for one cluster, with
// Velero's rules: resource names resolve through discovery to
// "resource.group" (names it does not know are kept as written); excludes
// win; empty or "*" includes match everything ("*" in excludes is
// ignored); a cluster-scoped item matches only when the namespace filter
// includes every namespace; the label selector is checked per item.
type AppliesTo struct {
	namespaces *IncludesExcludes
	resources  *IncludesExcludes
	selector   labels.Selector
}

// NewAppliesTo resolves sel. r may be nil, which keeps names as written.
func NewAppliesTo(sel api.ResourceSelector, r ResourceResolver) (*AppliesTo, error) {
	resolve := func(names []string) []string {
		out := make([]string, 0, len(names))
		for _, n := range names {
			if n == All || r == nil {
				out = append(out, n)
				continue
			}
			gr, _, err := r.ResolveResource(n)
			if err != nil {
				out = append(out, n)
				continue
			}
			out = append(out, gr.String())
		}
		return out
	}
	a := &AppliesTo{
		namespaces: NewIncludesExcludes(sel.IncludedNamespaces, sel.ExcludedNamespaces),
		resources:  NewIncludesExcludes(resolve(sel.IncludedResources), resolve(sel.ExcludedResources)),
		selector:   labels.Everything(),
	}
	if sel.LabelSelector != "" {
		s, err := labels.Parse(sel.LabelSelector)
		if err != nil {
			return nil, fmt.Errorf("label selector %q: %w", sel.LabelSelector, err)
		}
		a.selector = s
	}
	return a, nil
}

// NeedsLabels reports whether Matches looks at the item's labels: a caller
// that must decode an item to find them can skip that when it does not.
func (a *AppliesTo) NeedsLabels() bool {
	return !a.selector.Empty()
}

// Matches reports whether an item of gr in namespace (empty for
// cluster-scoped items) with these labels is selected.
func (a *AppliesTo) Matches(gr schema.GroupResource, namespace string, itemLabels map[string]string) bool {
	if !a.resources.ShouldInclude(gr.String()) {
		return false
	}
	if namespace == "" {
		if !a.namespaces.IncludesEverything() {
			return false
		}
	} else if !a.namespaces.ShouldInclude(namespace) {
		return false
	}
	return a.selector.Matches(labels.Set(itemLabels))
}

// MatchesResource reports whether any item of gr could match, so that a
// caller can skip a whole resource type.
func (a *AppliesTo) MatchesResource(gr schema.GroupResource, namespaced bool) bool {
	if !a.resources.ShouldInclude(gr.String()) {
		return false
	}
	return namespaced || a.namespaces.IncludesEverything()
}

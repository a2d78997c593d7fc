package selection

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gobwas/glob"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// FineFilterSpec is a resource policy's fine-grained filters, Velero's
// namespacedFilterPolicies and clusterScopedFilterPolicy, as the policy
// parser validated them (selection imports no policy package: the engines
// copy the fields over).
type FineFilterSpec struct {
	Namespaced []NamespacedFilterSpec
	// Cluster is nil when the policy has no clusterScopedFilterPolicy.
	Cluster []KindFilterSpec
}

// NamespacedFilterSpec is one entry of namespacedFilterPolicies.
type NamespacedFilterSpec struct {
	Namespaces []string
	Filters    []KindFilterSpec
}

// KindFilterSpec is one resourceFilters entry. Its fields are those of
// policy.ResourceFilter, so one converts to the other.
type KindFilterSpec struct {
	Kinds            []string
	LabelSelector    *metav1.LabelSelector
	OrLabelSelectors []*metav1.LabelSelector
	Names            []string
	ExcludedNames    []string
}

// IsCatchAll reports whether the entry covers every kind: no kinds, or
// just "*".
func (s KindFilterSpec) IsCatchAll() bool {
	return len(s.Kinds) == 0 || (len(s.Kinds) == 1 && s.Kinds[0] == All)
}

// Use says which of Velero's two readings of the filters to build: a
// backup resolves kinds as written, a restore lower-cases them first,
// refuses two kinds resolving to one type, and matches a kind discovery
// does not know against the items' own kind.
type Use int

const (
	// ForBackup builds the filters as Velero's backup resolves them.
	ForBackup Use = iota
	// ForRestore builds them as Velero's restore resolves them.
	ForRestore
)

// KindRule is what a policy says about the items of one kind: a label
// selector (labelSelector or orLabelSelectors) and name patterns.
type KindRule struct {
	labels *LabelMatcher
	names  *nameFilter
	// kinds are the entry's kinds as the restore compares them with an
	// item's kind when discovery did not know them.
	kinds []string
}

// Labels is the rule's label selector; it selects every item when the
// entry has none.
func (k *KindRule) Labels() *LabelMatcher { return k.labels }

// KeepsName reports whether the rule's names and excludedNames let an
// item named name through: excluded names win, and no names means all.
func (k *KindRule) KeepsName(name string) bool { return k.names.keeps(name) }

// NamespaceRules are the resource filters of the namespacedFilterPolicies
// entry ruling one namespace: an allowlist of kinds, each with its rule,
// and at most one catch-all for the kinds not listed.
type NamespaceRules struct {
	kinds    map[string]*KindRule
	catchAll *KindRule
	// resolved are the listed kinds discovery knew; unresolved is set when
	// some kind was kept as written.
	resolved   []schema.GroupResource
	unresolved bool
}

// FineFilters are a policy's fine-grained filters resolved against
// discovery, with Velero's rules for which entry rules an item.
type FineFilters struct {
	use     Use
	exact   map[string]*NamespaceRules
	globs   []namespaceGlob
	cluster map[string]*KindRule
	// clusterUnresolved: some cluster kind was not resolved (restore).
	clusterUnresolved bool
	warnings          []string
}

type namespaceGlob struct {
	pattern string
	g       glob.Glob
	rules   *NamespaceRules
}

// NewFineFilters resolves spec's kinds with r (nil keeps them as written)
// and compiles its selectors and patterns. It returns nil when spec holds
// no filters. The policy was validated when it was parsed; an error here
// is one Velero reports when the run starts (a restore's two kinds that
// resolve to one type).
func NewFineFilters(spec FineFilterSpec, r ResourceResolver, use Use) (*FineFilters, error) {
	if len(spec.Namespaced) == 0 && spec.Cluster == nil {
		return nil, nil
	}
	f := &FineFilters{use: use, exact: map[string]*NamespaceRules{}}
	for i, nfp := range spec.Namespaced {
		field := fmt.Sprintf("namespacedFilterPolicies[%d]", i)
		rules := &NamespaceRules{kinds: map[string]*KindRule{}}
		for j, kf := range nfp.Filters {
			rule, err := newKindRule(kf, use)
			if err != nil {
				return nil, fmt.Errorf("%s.resourceFilters[%d]: %w", field, j, err)
			}
			if kf.IsCatchAll() {
				rules.catchAll = rule
				continue
			}
			for _, kind := range kf.Kinds {
				key, unresolved := f.resolveKind(field, kind, true, r)
				rules.unresolved = rules.unresolved || unresolved
				if !unresolved {
					rules.resolved = append(rules.resolved, schema.ParseGroupResource(key))
				}
				if _, dup := rules.kinds[key]; dup && use == ForRestore {
					return nil, fmt.Errorf("%s: two kinds name %s; name each type once", field, key)
				}
				// A backup lets the later entry win, as Velero's does.
				rules.kinds[key] = rule
			}
		}
		for _, ns := range nfp.Namespaces {
			// Exact names are found by lookup before any pattern is tried,
			// wherever they are listed.
			f.exact[ns] = rules
			if strings.ContainsAny(ns, "*?[") {
				if g, err := glob.Compile(ns); err == nil {
					f.globs = append(f.globs, namespaceGlob{pattern: ns, g: g, rules: rules})
				}
			}
		}
	}
	if spec.Cluster != nil {
		f.cluster = map[string]*KindRule{}
		for j, kf := range spec.Cluster {
			field := fmt.Sprintf("clusterScopedFilterPolicy.resourceFilters[%d]", j)
			rule, err := newKindRule(kf, use)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", field, err)
			}
			for _, kind := range kf.Kinds {
				key, unresolved := f.resolveKind("clusterScopedFilterPolicy", kind, false, r)
				f.clusterUnresolved = f.clusterUnresolved || unresolved
				if _, dup := f.cluster[key]; dup && use == ForRestore {
					return nil, fmt.Errorf("clusterScopedFilterPolicy: two kinds name %s; name each type once", key)
				}
				f.cluster[key] = rule
			}
		}
	}
	return f, nil
}

// resolveKind gives the key a kind is looked up by: the group-resource
// discovery resolves it to, else the kind as written (lower-cased for a
// restore), which then matches only a type of exactly that name.
func (f *FineFilters) resolveKind(field, kind string, namespacedList bool, r ResourceResolver) (key string, unresolved bool) {
	written := kind
	if f.use == ForRestore {
		written = strings.ToLower(kind)
	}
	if r == nil || kind == All {
		return written, kind != All
	}
	gr, namespaced, rerr := r.ResolveResource(written)
	if rerr != nil {
		if f.use == ForRestore {
			f.warn("%s: kind %q is not a resource type the API server serves; it matches archived items of that kind (a custom resource whose definition the restore brings)", field, kind)
		} else {
			f.warn("%s: kind %q is not a resource type the API server serves; it only matches a type of exactly that name", field, kind)
		}
		return written, true
	}
	if namespaced != namespacedList {
		if namespacedList {
			f.warn("%s: kind %q (%s) is cluster-scoped and never matches here; move it to clusterScopedFilterPolicy", field, kind, gr)
		} else {
			f.warn("%s: kind %q (%s) is namespace-scoped and never matches here; move it to namespacedFilterPolicies", field, kind, gr)
		}
	}
	return gr.String(), false
}

func newKindRule(s KindFilterSpec, use Use) (*KindRule, error) {
	k := &KindRule{labels: &LabelMatcher{}}
	if selects(s.LabelSelector) {
		sel, err := metav1.LabelSelectorAsSelector(s.LabelSelector)
		if err != nil {
			return nil, fmt.Errorf("labelSelector: %w", err)
		}
		k.labels.single = sel
	}
	for i, ls := range s.OrLabelSelectors {
		// An empty selector in the list selects nothing extra: Velero
		// drops it, and a list of only empty ones selects every item.
		if !selects(ls) {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(ls)
		if err != nil {
			return nil, fmt.Errorf("orLabelSelectors[%d]: %w", i, err)
		}
		k.labels.or = append(k.labels.or, sel)
	}
	if len(s.Names) > 0 || len(s.ExcludedNames) > 0 {
		k.names = &nameFilter{includes: compileGlobs(s.Names), excludes: compileGlobs(s.ExcludedNames), star: slices.Contains(s.Names, All)}
		k.names.includesEmpty = len(s.Names) == 0
	}
	for _, kind := range s.Kinds {
		if use == ForRestore {
			kind = strings.ToLower(kind)
		}
		k.kinds = append(k.kinds, kind)
	}
	return k, nil
}

func selects(s *metav1.LabelSelector) bool {
	return s != nil && (len(s.MatchLabels) > 0 || len(s.MatchExpressions) > 0)
}

// nameFilter is names/excludedNames, matched as Velero matches them: with
// gobwas globs, so "{a,b}" and "[!x]" mean what they mean there.
type nameFilter struct {
	includes, excludes []glob.Glob
	includesEmpty      bool
	star               bool
}

func compileGlobs(patterns []string) []glob.Glob {
	out := make([]glob.Glob, 0, len(patterns))
	for _, p := range patterns {
		// The policy parser refused patterns that do not compile.
		if g, err := glob.Compile(p); err == nil {
			out = append(out, g)
		}
	}
	return out
}

func (n *nameFilter) keeps(name string) bool {
	if n == nil {
		return true
	}
	for _, g := range n.excludes {
		if g.Match(name) {
			return false
		}
	}
	if n.includesEmpty || n.star {
		return true
	}
	for _, g := range n.includes {
		if g.Match(name) {
			return true
		}
	}
	return false
}

func (f *FineFilters) warn(format string, args ...any) {
	f.warnings = append(f.warnings, fmt.Sprintf(format, args...))
}

// Warnings are what the filters accept but can never match, each naming
// the entry and the fix.
func (f *FineFilters) Warnings() []string {
	if f == nil {
		return nil
	}
	return slices.Clone(f.warnings)
}

// WarnExcluded adds a warning for each kind a namespace entry lists that
// the resource filter leaves out everywhere: the entry cannot bring it back
// (Velero logs the same). what names the excluding setting.
func (f *FineFilters) WarnExcluded(include func(schema.GroupResource) bool, what string) {
	if f == nil {
		return
	}
	patterns := make([]string, 0, len(f.exact))
	for ns := range f.exact {
		patterns = append(patterns, ns)
	}
	slices.Sort(patterns)
	seen := map[*NamespaceRules]bool{}
	for _, ns := range patterns {
		rules := f.exact[ns]
		if seen[rules] {
			continue
		}
		seen[rules] = true
		for _, gr := range rules.resolved {
			if !include(gr) {
				f.warn("namespacedFilterPolicies (namespace %q): kind %s is excluded by %s; the entry cannot include it", ns, gr, what)
			}
		}
	}
}

// ForNamespace returns the rules of the entry ruling namespace ns, nil
// when none does: an entry naming ns exactly wins wherever it is listed,
// else the first pattern, in the policy's order, that matches.
func (f *FineFilters) ForNamespace(ns string) *NamespaceRules {
	if f == nil || len(f.exact) == 0 {
		return nil
	}
	if r, ok := f.exact[ns]; ok {
		return r
	}
	for _, g := range f.globs {
		if g.g.Match(ns) {
			return g.rules
		}
	}
	return nil
}

// Rule returns the rule for items of type gr (key as resolved), nil when
// the entry neither lists the type nor has a catch-all: the namespace's
// items of that type are then left out.
func (n *NamespaceRules) Rule(gr schema.GroupResource) *KindRule {
	if r, ok := n.kinds[gr.String()]; ok {
		return r
	}
	return n.catchAll
}

// restoreRule is Rule as Velero's restore finds it: a kind discovery did
// not know when the restore started is compared with the item's own kind.
func (n *NamespaceRules) restoreRule(gr schema.GroupResource, kind string) *KindRule {
	if r, ok := n.kinds[gr.String()]; ok {
		return r
	}
	if n.unresolved {
		if r := byItemKind(n.kinds, kind); r != nil {
			return r
		}
	}
	return n.catchAll
}

func byItemKind(rules map[string]*KindRule, kind string) *KindRule {
	if kind == "" {
		return nil
	}
	keys := make([]string, 0, len(rules))
	for key := range rules {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	for _, key := range keys {
		for _, k := range rules[key].kinds {
			if strings.EqualFold(k, kind) {
				return rules[key]
			}
		}
	}
	return nil
}

// ClusterRule returns the clusterScopedFilterPolicy rule for cluster-scoped
// type gr, nil when the policy does not list it (the spec's filters then
// apply alone).
func (f *FineFilters) ClusterRule(gr schema.GroupResource) *KindRule {
	if f == nil || f.cluster == nil {
		return nil
	}
	return f.cluster[gr.String()]
}

// HasCluster reports whether the policy has a clusterScopedFilterPolicy.
func (f *FineFilters) HasCluster() bool { return f != nil && f.cluster != nil }

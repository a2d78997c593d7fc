package policy

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NamespacedFilterPolicy is one entry of Velero's namespacedFilterPolicies:
// an allowlist of kinds, each with its label and name rules, for the
// namespaces its patterns match (an exact name wins over patterns, else
// the first matching pattern in the policy's order).
type NamespacedFilterPolicy struct {
	Namespaces      []string
	ResourceFilters []ResourceFilter
}

// ClusterScopedFilterPolicy is Velero's clusterScopedFilterPolicy: label
// and name rules for the cluster-scoped kinds it lists; other kinds keep
// the backup's or restore's own filters.
type ClusterScopedFilterPolicy struct {
	ResourceFilters []ResourceFilter
}

// ResourceFilter selects items of some kinds by labels and names.
type ResourceFilter struct {
	// Kinds empty or ["*"] makes a catch-all filter.
	Kinds            []string
	LabelSelector    *metav1.LabelSelector
	OrLabelSelectors []*metav1.LabelSelector
	Names            []string
	ExcludedNames    []string
}

// FineGrainedFields names the fine-grained filter policies p holds, nil
// when it holds none. Velero refuses them beside a backup's old resource
// filters (includedResources, excludedResources, includeClusterResources).
func (p *Policies) FineGrainedFields() []string {
	if p == nil {
		return nil
	}
	var out []string
	if len(p.NamespacedFilterPolicies) > 0 {
		out = append(out, "namespacedFilterPolicies")
	}
	if p.ClusterScopedFilterPolicy != nil {
		out = append(out, "clusterScopedFilterPolicy")
	}
	return out
}

// RestoreProblems are Velero's refusals of a restore's policy: a restore
// reads only the fine-grained filters, and Velero fails a restore whose
// policy has volumePolicies or includeExcludePolicy rather than ignore
// them. Each message names the field and the fix; nil when p is fit for a
// restore.
func (p *Policies) RestoreProblems() []string {
	if p == nil {
		return nil
	}
	const fix = "give the restore a ConfigMap holding only namespacedFilterPolicies and clusterScopedFilterPolicy"
	var out []string
	if len(p.VolumePolicies) > 0 {
		out = append(out, "volumePolicies: not supported for restores (Velero refuses them too); "+fix)
	}
	if p.IncludeExcludePolicy != nil {
		out = append(out, "includeExcludePolicy: not supported for restores (Velero refuses it too); "+fix+", and filter resources with the restore's includedResources/excludedResources")
	}
	return out
}

var (
	namespacedFilterKeys = []string{"namespaces", "resourceFilters"}
	clusterFilterKeys    = []string{"resourceFilters"}
	resourceFilterKeys   = []string{"kinds", "labelSelector", "orLabelSelectors", "names", "excludedNames"}
	labelSelectorKeys    = []string{"matchLabels", "matchExpressions"}
	requirementKeys      = []string{"key", "operator", "values"}
)

func (p *parser) namespacedFilterPolicies(n *yaml.Node, field string) []NamespacedFilterPolicy {
	n = deref(n)
	if n.Kind != yaml.SequenceNode {
		p.fail(n, field, "must be a list of {namespaces, resourceFilters}")
		return nil
	}
	var out []NamespacedFilterPolicy
	firstUse := map[string]string{}
	for i, item := range n.Content {
		f := fmt.Sprintf("%s[%d]", field, i)
		entries := p.mapping(item, f, namespacedFilterKeys)
		if entries == nil {
			continue
		}
		var nfp NamespacedFilterPolicy
		var nsNodes []stringNode
		if v := entries.get("namespaces"); v != nil {
			nsNodes = p.stringsWithNodes(v, f+".namespaces")
		}
		if len(nsNodes) == 0 {
			p.missing(deref(item), f+".namespaces", "give at least one namespace name or pattern")
		}
		for j, s := range nsNodes {
			fj := fmt.Sprintf("%s.namespaces[%d]", f, j)
			if why := namespacePatternProblem(s.value); why != "" {
				p.fail(s.node, fj, "%q: %s", s.value, why)
				continue
			}
			// Velero refuses a pattern written twice, in one entry or two:
			// which entry rules its namespaces would depend on the order.
			if prev, dup := firstUse[s.value]; dup {
				p.fail(s.node, fj, "%q is also %s; a namespace pattern may appear once", s.value, prev)
				continue
			}
			firstUse[s.value] = fj
			nfp.Namespaces = append(nfp.Namespaces, s.value)
		}
		if v := entries.get("resourceFilters"); v != nil && !isNull(v) {
			nfp.ResourceFilters = p.resourceFilters(v, f+".resourceFilters", true)
		} else {
			p.missing(deref(item), f+".resourceFilters", "give at least one resource filter ({kinds, labelSelector, names, ...})")
		}
		out = append(out, nfp)
	}
	return out
}

func (p *parser) clusterScopedFilterPolicy(n *yaml.Node, field string) *ClusterScopedFilterPolicy {
	entries := p.mapping(n, field, clusterFilterKeys)
	if entries == nil {
		return nil
	}
	out := &ClusterScopedFilterPolicy{}
	if v := entries.get("resourceFilters"); v != nil && !isNull(v) {
		out.ResourceFilters = p.resourceFilters(v, field+".resourceFilters", false)
	} else {
		p.missing(deref(n), field+".resourceFilters", "give at least one resource filter, or remove clusterScopedFilterPolicy")
	}
	return out
}

// resourceFilters reads a list of filters with Velero's rules: at least
// one; each kind in one filter only; a catch-all (no kinds, or ["*"]) at
// most once, only where namespaced, and without names.
func (p *parser) resourceFilters(n *yaml.Node, field string, namespaced bool) []ResourceFilter {
	n = deref(n)
	if n.Kind != yaml.SequenceNode {
		p.fail(n, field, "must be a list of {kinds, labelSelector, orLabelSelectors, names, excludedNames}")
		return nil
	}
	if len(n.Content) == 0 {
		p.fail(n, field, "is empty; give at least one resource filter")
		return nil
	}
	var out []ResourceFilter
	kindAt := map[string]int{}
	catchAll := -1
	for i, item := range n.Content {
		f := fmt.Sprintf("%s[%d]", field, i)
		entries := p.mapping(item, f, resourceFilterKeys)
		if entries == nil {
			continue
		}
		var rf ResourceFilter
		var kindNodes []stringNode
		if v := entries.get("kinds"); v != nil {
			kindNodes = p.stringsWithNodes(v, f+".kinds")
		}
		for _, k := range kindNodes {
			rf.Kinds = append(rf.Kinds, k.value)
		}
		isCatchAll := len(rf.Kinds) == 0 || (len(rf.Kinds) == 1 && rf.Kinds[0] == "*")
		if v := entries.get("names"); v != nil {
			rf.Names = p.globs(v, f+".names")
		}
		if v := entries.get("excludedNames"); v != nil {
			rf.ExcludedNames = p.globs(v, f+".excludedNames")
		}
		switch {
		case isCatchAll && !namespaced:
			p.fail(deref(item), f+".kinds", `give the kinds; a catch-all filter (no kinds, or ["*"]) is not allowed for cluster-scoped resources`)
		case isCatchAll && catchAll >= 0:
			p.fail(deref(item), f+".kinds", "a second catch-all filter (no kinds, or [\"*\"]); %s[%d] is one already, and only one is allowed", field, catchAll)
		case isCatchAll:
			catchAll = i
			if len(rf.Names) > 0 || len(rf.ExcludedNames) > 0 {
				p.fail(deref(item), f, "a catch-all filter (no kinds, or [\"*\"]) cannot have names or excludedNames; name the kinds")
			}
		}
		for _, k := range kindNodes {
			if k.value == "*" {
				continue
			}
			if prev, dup := kindAt[k.value]; dup && prev != i {
				p.fail(k.node, f+".kinds", "%q is also in %s[%d].kinds; a kind may appear in one filter only", k.value, field, prev)
				continue
			}
			kindAt[k.value] = i
		}
		if v := entries.get("labelSelector"); v != nil && !isNull(v) {
			rf.LabelSelector = p.labelSelector(v, f+".labelSelector")
		}
		if v := entries.get("orLabelSelectors"); v != nil && !isNull(v) {
			vv := deref(v)
			if vv.Kind != yaml.SequenceNode {
				p.fail(v, f+".orLabelSelectors", "must be a list of label selectors")
			} else {
				for j, s := range vv.Content {
					rf.OrLabelSelectors = append(rf.OrLabelSelectors, p.labelSelector(s, fmt.Sprintf("%s.orLabelSelectors[%d]", f, j)))
				}
			}
		}
		if selects(rf.LabelSelector) && len(rf.OrLabelSelectors) > 0 {
			p.fail(deref(item), f, "labelSelector and orLabelSelectors cannot be combined; use one")
		}
		out = append(out, rf)
	}
	return out
}

func selects(s *metav1.LabelSelector) bool {
	return s != nil && (len(s.MatchLabels) > 0 || len(s.MatchExpressions) > 0)
}

func (p *parser) labelSelector(n *yaml.Node, field string) *metav1.LabelSelector {
	entries := p.mapping(n, field, labelSelectorKeys)
	if entries == nil {
		return nil
	}
	s := &metav1.LabelSelector{}
	if v := entries.get("matchLabels"); v != nil {
		s.MatchLabels = p.stringMap(v, field+".matchLabels")
	}
	if v := entries.get("matchExpressions"); v != nil && !isNull(v) {
		vv := deref(v)
		if vv.Kind != yaml.SequenceNode {
			p.fail(v, field+".matchExpressions", "must be a list of {key, operator, values}")
		} else {
			for i, item := range vv.Content {
				f := fmt.Sprintf("%s.matchExpressions[%d]", field, i)
				re := p.mapping(item, f, requirementKeys)
				if re == nil {
					continue
				}
				var req metav1.LabelSelectorRequirement
				if k := re.get("key"); k != nil {
					req.Key, _ = p.str(k, f+".key")
				}
				if o := re.get("operator"); o != nil {
					op, _ := p.str(o, f+".operator")
					req.Operator = metav1.LabelSelectorOperator(op)
				}
				if vs := re.get("values"); vs != nil {
					req.Values = p.strings(vs, f+".values")
				}
				s.MatchExpressions = append(s.MatchExpressions, req)
			}
		}
	}
	if selects(s) {
		if _, err := metav1.LabelSelectorAsSelector(s); err != nil {
			p.fail(n, field, "not a valid label selector: %v", err)
		}
	}
	return s
}

// globs reads name patterns; Velero compiles them as globs, which refuses
// unclosed brackets and braces.
func (p *parser) globs(n *yaml.Node, field string) []string {
	var out []string
	for i, s := range p.stringsWithNodes(n, field) {
		if why := globProblem(s.value); why != "" {
			p.fail(s.node, fmt.Sprintf("%s[%d]", field, i), "%q is not a valid name pattern: %s", s.value, why)
			continue
		}
		out = append(out, s.value)
	}
	return out
}

func globProblem(s string) string {
	depth := map[byte]int{}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			if i+1 == len(s) {
				return `it ends with an escaping "\"`
			}
			i++
		case '[':
			end := strings.IndexByte(s[i+1:], ']')
			if end < 0 {
				return `"[" is not closed`
			}
			if end == 0 || (end == 1 && s[i+1] == '!') {
				return `"[]" is empty`
			}
			i += end + 1
		case '{':
			depth['{']++
		case '}':
			if depth['{'] == 0 {
				return `"}" has no "{"`
			}
			depth['{']--
		}
	}
	if depth['{'] > 0 {
		return `"{" is not closed`
	}
	return ""
}

// namespacePatternProblem applies Velero's rules for namespace patterns.
func namespacePatternProblem(s string) string {
	switch {
	case strings.ContainsAny(s, "|()!{},"):
		return `only "*", "?" and "[...]" may be used in a pattern, not | ( ) ! { } ,`
	case strings.Contains(s, "**"):
		return `"**" is not allowed; use a single "*"`
	}
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			end := strings.IndexByte(s[i+1:], ']')
			if end < 0 {
				return `"[" is not closed`
			}
			if end == 0 {
				return `"[]" is empty`
			}
			i += end + 1
		case ']':
			return `"]" has no "["`
		}
	}
	return ""
}

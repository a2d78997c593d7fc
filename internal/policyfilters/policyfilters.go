// Package policyfilters turns a resource policy's fine-grained filters into
// the specification internal/selection resolves: selection imports no
// policy package, and the backup and restore engines share this one copy.
package policyfilters

import (
	"github.com/lifeboat-io/lifeboat/internal/selection"
	"github.com/lifeboat-io/lifeboat/pkg/policy"
)

// Spec copies a policy's fine-grained filters for
// internal/selection, which imports no policy package.
func Spec(p *policy.Policies) selection.FineFilterSpec {
	var spec selection.FineFilterSpec
	if p == nil {
		return spec
	}
	for _, nfp := range p.NamespacedFilterPolicies {
		e := selection.NamespacedFilterSpec{Namespaces: nfp.Namespaces}
		for _, rf := range nfp.ResourceFilters {
			e.Filters = append(e.Filters, selection.KindFilterSpec(rf))
		}
		spec.Namespaced = append(spec.Namespaced, e)
	}
	if c := p.ClusterScopedFilterPolicy; c != nil {
		spec.Cluster = make([]selection.KindFilterSpec, 0, len(c.ResourceFilters))
		for _, rf := range c.ResourceFilters {
			spec.Cluster = append(spec.Cluster, selection.KindFilterSpec(rf))
		}
	}
	return spec
}

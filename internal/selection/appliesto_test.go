package selection

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

func TestAppliesTo(t *testing.T) {
	resolver := NewDiscoveryResolver(discoveryFixture())
	pods := schema.GroupResource{Resource: "pods"}
	deploys := schema.GroupResource{Group: "apps", Resource: "deployments"}
	pvs := schema.GroupResource{Resource: "persistentvolumes"}
	type item struct {
		gr     schema.GroupResource
		ns     string
		labels map[string]string
	}
	cases := []struct {
		name    string
		sel     api.ResourceSelector
		match   []item
		nomatch []item
	}{
		{
			name:  "empty selector matches everything",
			sel:   api.ResourceSelector{},
			match: []item{{pods, "a", nil}, {pvs, "", nil}},
		},
		{
			name:    "resources resolve by short name and kind",
			sel:     api.ResourceSelector{IncludedResources: []string{"po", "Deployment"}},
			match:   []item{{pods, "a", nil}, {deploys, "b", nil}},
			nomatch: []item{{pvs, "", nil}},
		},
		{
			name:    "excluded resources win over star",
			sel:     api.ResourceSelector{IncludedResources: []string{"*"}, ExcludedResources: []string{"pods"}},
			match:   []item{{deploys, "a", nil}},
			nomatch: []item{{pods, "a", nil}},
		},
		{
			name:  "star in excludes is ignored",
			sel:   api.ResourceSelector{ExcludedResources: []string{"*"}},
			match: []item{{pods, "a", nil}},
		},
		{
			name:    "a namespace filter leaves cluster-scoped items out",
			sel:     api.ResourceSelector{IncludedNamespaces: []string{"a"}},
			match:   []item{{pods, "a", nil}},
			nomatch: []item{{pods, "b", nil}, {pvs, "", nil}},
		},
		{
			name:    "excluded namespaces win",
			sel:     api.ResourceSelector{IncludedNamespaces: []string{"*"}, ExcludedNamespaces: []string{"b"}},
			match:   []item{{pods, "a", nil}},
			nomatch: []item{{pods, "b", nil}, {pvs, "", nil}},
		},
		{
			name:    "label selector per item",
			sel:     api.ResourceSelector{LabelSelector: "app=web,tier!=db"},
			match:   []item{{pods, "a", map[string]string{"app": "web"}}},
			nomatch: []item{{pods, "a", map[string]string{"app": "web", "tier": "db"}}, {pods, "a", nil}},
		},
		{
			name:    "unresolvable names are kept as written",
			sel:     api.ResourceSelector{IncludedResources: []string{"widgets.example.io"}},
			match:   []item{{schema.GroupResource{Group: "example.io", Resource: "widgets"}, "a", nil}},
			nomatch: []item{{pods, "a", nil}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, err := NewAppliesTo(tc.sel, resolver)
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range tc.match {
				if !a.Matches(it.gr, it.ns, it.labels) {
					t.Errorf("%v in %q %v should match", it.gr, it.ns, it.labels)
				}
			}
			for _, it := range tc.nomatch {
				if a.Matches(it.gr, it.ns, it.labels) {
					t.Errorf("%v in %q %v should not match", it.gr, it.ns, it.labels)
				}
			}
		})
	}
	if _, err := NewAppliesTo(api.ResourceSelector{LabelSelector: "app in (a"}, resolver); err == nil {
		t.Error("a bad label selector must be an error")
	}
}

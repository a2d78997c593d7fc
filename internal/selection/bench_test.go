package selection

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// The filters run per item, so they must stay cheap next to the LIST that
// produced the item.
func BenchmarkNamespaceShouldInclude(b *testing.B) {
	f := NewNamespaceFilter([]string{"team-*", "prod-[0-9]", "default"}, []string{"team-x*", "kube-system"})
	names := make([]string, 64)
	for i := range names {
		names[i] = fmt.Sprintf("team-%c%d", 'a'+i%26, i)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		f.ShouldInclude(names[i%len(names)])
	}
}

func BenchmarkLabelMatches(b *testing.B) {
	m, err := NewLabelMatcher(&v1.BackupSpec{LabelSelector: &metav1.LabelSelector{
		MatchLabels: map[string]string{"app": "web"},
		MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "env", Operator: metav1.LabelSelectorOpIn, Values: []string{"prod", "staging"}},
		},
	}})
	if err != nil {
		b.Fatal(err)
	}
	item := map[string]string{"app": "web", "env": "prod", "pod-template-hash": "abc123"}
	b.ReportAllocs()
	for b.Loop() {
		m.Matches(item)
	}
}

func BenchmarkShouldIncludeResource(b *testing.B) {
	f, _ := NewResourceFilter(&v1.BackupSpec{IncludedResources: []string{"pods", "deployments.apps", "*.example.com"}}, NewDiscoveryResolver(discoveryFixture()))
	gr := schema.GroupResource{Group: "apps", Resource: "deployments"}
	b.ReportAllocs()
	for b.Loop() {
		f.ShouldIncludeResource(gr, true)
	}
}

package selection

import (
	"reflect"
	"testing"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

func TestNamespaceFilter(t *testing.T) {
	tests := []struct {
		name       string
		includes   []string
		excludes   []string
		included   []string
		excluded   []string
		all        bool
		explicit   []string
		explicitOK bool
	}{
		{
			name: "no filter", all: true,
			included: []string{"default", "kube-system"},
		},
		{
			name: "star", includes: []string{"*"}, all: true,
			included: []string{"default"},
		},
		{
			name: "an exclude means not all", excludes: []string{"kube-system"},
			included: []string{"default"}, excluded: []string{"kube-system"},
		},
		{
			name: "star with an exclude", includes: []string{"*"}, excludes: []string{"kube-*"},
			included: []string{"default"}, excluded: []string{"kube-system", "kube-public"},
		},
		{
			name: "plain names are listed one by one, sorted, minus excludes", includes: []string{"b", "a", "c", "a"}, excludes: []string{"c"},
			included: []string{"a", "b"}, excluded: []string{"c", "d"},
			explicit: []string{"a", "b"}, explicitOK: true,
		},
		{
			name: "pattern excludes apply to the explicit list", includes: []string{"app-1", "test-1"}, excludes: []string{"test-*"},
			included: []string{"app-1"}, excluded: []string{"test-1"},
			explicit: []string{"app-1"}, explicitOK: true,
		},
		{
			name: "everything named is excluded", includes: []string{"a"}, excludes: []string{"a"},
			excluded: []string{"a"}, explicitOK: true,
		},
		{
			name: "patterns in includes need a cluster-wide list", includes: []string{"app-*", "default"},
			included: []string{"app-east", "default"}, excluded: []string{"kube-system"},
		},
		{
			name: "the empty name lists nothing", includes: []string{""},
			excluded: []string{"default"}, explicitOK: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := NamespaceFilterFor(&v1.BackupSpec{IncludedNamespaces: tc.includes, ExcludedNamespaces: tc.excludes})
			for _, ns := range tc.included {
				if !f.ShouldInclude(ns) {
					t.Errorf("ShouldInclude(%q) = false", ns)
				}
			}
			for _, ns := range tc.excluded {
				if f.ShouldInclude(ns) {
					t.Errorf("ShouldInclude(%q) = true", ns)
				}
			}
			if f.IncludesAll() != tc.all {
				t.Errorf("IncludesAll() = %v, want %v", f.IncludesAll(), tc.all)
			}
			explicit, ok := f.ExplicitNamespaces()
			if ok != tc.explicitOK || !reflect.DeepEqual(explicit, tc.explicit) {
				t.Errorf("ExplicitNamespaces() = %q, %v; want %q, %v", explicit, ok, tc.explicit, tc.explicitOK)
			}
		})
	}
}

func TestNamespaceFilterForNilSpec(t *testing.T) {
	if f := NamespaceFilterFor(nil); !f.IncludesAll() {
		t.Error("a nil spec does not include every namespace")
	}
}

func TestExplicitNamespacesReturnsACopy(t *testing.T) {
	f := NewNamespaceFilter([]string{"a", "b"}, nil)
	got, _ := f.ExplicitNamespaces()
	got[0] = "changed"
	if again, _ := f.ExplicitNamespaces(); again[0] != "a" {
		t.Errorf("caller changed the filter: %q", again)
	}
}

package selection

import (
	"reflect"
	"strings"
	"testing"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// A resource policy's includeExcludePolicy is merged into the spec's scoped
// filters as Velero merges it (CombineWithPolicy): the spec's own lists come
// first, and a policy entry is added only where neither of the spec's lists
// of that scope names it already ("*" names everything).
func TestResourceFilterWithPolicy(t *testing.T) {
	resolver := NewDiscoveryResolver(discoveryFixture())
	tests := []struct {
		name         string
		spec         v1.BackupSpec
		policy       PolicyFilters
		want         []string
		wantWarnings []string
	}{
		{
			name:   "no spec filters: the policy's excludes apply",
			policy: PolicyFilters{ExcludedNamespaceScopedResources: []string{"secrets"}},
			// Excluding a namespaced type ends the whole-cluster default, as in
			// Velero: cluster-scoped types then only when listed (namespaces always).
			want: sorted([]string{"configmaps", "deployments.apps", "pods"}, []string{"namespaces"}),
		},
		{
			name:   "policy includes narrow the namespaced types",
			policy: PolicyFilters{IncludedNamespaceScopedResources: []string{"pods", "cm"}, IncludedClusterScopedResources: []string{"pv"}},
			want:   []string{"configmaps", "namespaces", "persistentvolumes", "pods"},
		},
		{
			name:   "the spec's include wins over the policy's exclude",
			spec:   v1.BackupSpec{IncludedNamespaceScopedResources: []string{"secrets", "pods"}},
			policy: PolicyFilters{ExcludedNamespaceScopedResources: []string{"secrets", "configmaps"}},
			want:   []string{"namespaces", "pods", "secrets"},
		},
		{
			name:   "the spec's exclude wins over the policy's include",
			spec:   v1.BackupSpec{ExcludedNamespaceScopedResources: []string{"secrets"}},
			policy: PolicyFilters{IncludedNamespaceScopedResources: []string{"secrets", "pods"}},
			want:   []string{"namespaces", "pods"},
		},
		{
			name:   "a spec include of * leaves the policy's lists of that scope unused",
			spec:   v1.BackupSpec{IncludedNamespaceScopedResources: []string{"*"}},
			policy: PolicyFilters{ExcludedNamespaceScopedResources: []string{"secrets"}, ExcludedClusterScopedResources: []string{"storageclasses"}},
			// The cluster-scoped exclude is added, and ends the whole-cluster default.
			want: sorted(namespacedTypes, []string{"namespaces"}),
		},
		{
			name:   "cluster-scoped excludes",
			policy: PolicyFilters{ExcludedClusterScopedResources: []string{"storageclasses", "customresourcedefinitions"}},
			want:   sorted(namespacedTypes, []string{"namespaces"}),
		},
		{
			name:         "a name of the other scope is ignored with a warning",
			policy:       PolicyFilters{ExcludedNamespaceScopedResources: []string{"persistentvolumes", "secrets"}},
			want:         sorted([]string{"configmaps", "deployments.apps", "pods"}, []string{"namespaces"}),
			wantWarnings: []string{`includeExcludePolicy.excludedNamespaceScopedResources: "persistentvolumes"`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := tc.spec
			f, errs := NewResourceFilter(&spec, resolver)
			if len(errs) > 0 {
				t.Fatalf("spec errors: %v", errs)
			}
			f.CombineWithPolicy(tc.policy, resolver)
			if got := included(f, (*ResourceFilter).ShouldIncludeResource); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("included types:\n got %q\nwant %q", got, tc.want)
			}
			warnings := f.Warnings()
			if len(warnings) != len(tc.wantWarnings) {
				t.Fatalf("warnings:\n got %q\nwant %q", warnings, tc.wantWarnings)
			}
			for i, w := range tc.wantWarnings {
				if !strings.Contains(warnings[i], w) {
					t.Errorf("warning %q does not contain %q", warnings[i], w)
				}
			}
		})
	}
}

// A spec in the old style cannot take a policy's filters: the backup is
// refused (UsesOldResourceFilters names the fields).
func TestUsesOldResourceFilters(t *testing.T) {
	if got := OldResourceFilterFields(&v1.BackupSpec{IncludedNamespaceScopedResources: []string{"pods"}}); got != nil {
		t.Errorf("scoped spec: got %q", got)
	}
	got := OldResourceFilterFields(&v1.BackupSpec{IncludedResources: []string{"pods"}, IncludeClusterResources: ptr(false)})
	want := []string{"spec.includedResources", "spec.includeClusterResources"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

package selection

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

type resourceType struct {
	gr         schema.GroupResource
	namespaced bool
}

// universe holds the types each case is asked about, by their
// "resource.group" names.
var universe = []resourceType{
	{schema.GroupResource{Resource: "pods"}, true},
	{schema.GroupResource{Resource: "configmaps"}, true},
	{schema.GroupResource{Resource: "secrets"}, true},
	{schema.GroupResource{Group: "apps", Resource: "deployments"}, true},
	{schema.GroupResource{Group: "snapshot.storage.k8s.io", Resource: "volumesnapshots"}, true},
	{schema.GroupResource{Resource: "namespaces"}, false},
	{schema.GroupResource{Resource: "persistentvolumes"}, false},
	{schema.GroupResource{Group: "storage.k8s.io", Resource: "storageclasses"}, false},
	{schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}, false},
	{schema.GroupResource{Group: "snapshot.storage.k8s.io", Resource: "volumesnapshotcontents"}, false},
}

var (
	namespacedTypes = []string{"configmaps", "deployments.apps", "pods", "secrets"}
	clusterTypes    = []string{"customresourcedefinitions.apiextensions.k8s.io", "namespaces", "persistentvolumes", "storageclasses.storage.k8s.io"}
	everything      = sorted(namespacedTypes, clusterTypes)
)

func sorted(lists ...[]string) []string {
	out := slices.Concat(lists...)
	slices.Sort(out)
	return out
}

func included(f *ResourceFilter, check func(*ResourceFilter, schema.GroupResource, bool) bool) []string {
	var got []string
	for _, rt := range universe {
		if check(f, rt.gr, rt.namespaced) {
			got = append(got, rt.gr.String())
		}
	}
	slices.Sort(got)
	return got
}

func ptr(b bool) *bool { return &b }

func TestResourceFilter(t *testing.T) {
	resolver := NewDiscoveryResolver(discoveryFixture())
	tests := []struct {
		name         string
		spec         v1.BackupSpec
		want         []string
		wantErrs     []string // fields named by the validation errors
		wantWarnings []string // substrings, one per warning
	}{
		// Old style.
		{
			name: "no filters back up everything but CSI snapshots",
			want: everything,
		},
		{
			name: "a namespace filter leaves cluster-scoped types out, namespaces themselves in",
			spec: v1.BackupSpec{IncludedNamespaces: []string{"team-a"}},
			want: sorted(namespacedTypes, []string{"namespaces"}),
		},
		{
			name: "excluding one namespace counts as a namespace filter",
			spec: v1.BackupSpec{ExcludedNamespaces: []string{"kube-system"}},
			want: sorted(namespacedTypes, []string{"namespaces"}),
		},
		{
			name: "includeClusterResources true with a namespace filter",
			spec: v1.BackupSpec{IncludedNamespaces: []string{"team-a"}, IncludeClusterResources: ptr(true)},
			want: everything,
		},
		{
			name: "includeClusterResources false leaves every cluster-scoped type out, namespaces too",
			spec: v1.BackupSpec{IncludeClusterResources: ptr(false)},
			want: namespacedTypes,
		},
		{
			name:         "includeClusterResources false beats a cluster-scoped type in includedResources",
			spec:         v1.BackupSpec{IncludedResources: []string{"sc", "cm"}, IncludeClusterResources: ptr(false)},
			want:         []string{"configmaps"},
			wantWarnings: []string{`spec.includedResources: "sc" is cluster-scoped and spec.includeClusterResources is false`},
		},
		{
			name: "includedResources of a namespaced type without a namespace filter",
			spec: v1.BackupSpec{IncludedResources: []string{"configmap"}},
			want: []string{"configmaps"},
		},
		{
			name: "includedResources can name cluster-scoped types when every namespace is included",
			spec: v1.BackupSpec{IncludedResources: []string{"Deployment", "storageclasses.storage.k8s.io", "namespaces"}},
			want: []string{"deployments.apps", "namespaces", "storageclasses.storage.k8s.io"},
		},
		{
			name:         "with a namespace filter a cluster-scoped include needs includeClusterResources",
			spec:         v1.BackupSpec{IncludedNamespaces: []string{"team-a"}, IncludedResources: []string{"deployments.apps", "pv", "ns"}},
			want:         []string{"deployments.apps", "namespaces"},
			wantWarnings: []string{`spec.includedResources: "pv" is cluster-scoped; with a namespace filter`},
		},
		{
			name: "excludedResources",
			spec: v1.BackupSpec{ExcludedResources: []string{"secrets", "pv"}},
			want: sorted([]string{"configmaps", "deployments.apps", "pods"}, []string{"customresourcedefinitions.apiextensions.k8s.io", "namespaces", "storageclasses.storage.k8s.io"}),
		},
		{
			name: "star with an exclude",
			spec: v1.BackupSpec{IncludedResources: []string{"*"}, ExcludedResources: []string{"crds"}},
			want: sorted(namespacedTypes, []string{"namespaces", "persistentvolumes", "storageclasses.storage.k8s.io"}),
		},
		{
			name:     "excluded beats included",
			spec:     v1.BackupSpec{IncludedResources: []string{"pods", "secrets"}, ExcludedResources: []string{"secret"}},
			want:     []string{"pods"},
			wantErrs: nil, // "secret" and "secrets" differ as written; Velero validates the strings
		},
		{
			name:     "excluded beats included, same spelling",
			spec:     v1.BackupSpec{IncludedResources: []string{"pods", "secrets"}, ExcludedResources: []string{"secrets"}},
			want:     []string{"pods"},
			wantErrs: []string{"spec.excludedResources"},
		},
		{
			name:     "star with other includes is invalid and includes everything",
			spec:     v1.BackupSpec{IncludedResources: []string{"*", "pods"}},
			want:     everything,
			wantErrs: []string{"spec.includedResources"},
		},
		{
			name:     "star in excludedResources is invalid and ignored",
			spec:     v1.BackupSpec{ExcludedResources: []string{"*"}},
			want:     everything,
			wantErrs: []string{"spec.excludedResources"},
		},
		{
			name:         "unknown includes are kept as written and match nothing",
			spec:         v1.BackupSpec{IncludedResources: []string{"gadgets"}},
			want:         nil,
			wantWarnings: []string{`spec.includedResources: "gadgets" is not a resource type the API server serves`},
		},
		{
			name:         "unknown excludes are kept as written",
			spec:         v1.BackupSpec{ExcludedResources: []string{"gadgets", "pods"}},
			want:         sorted([]string{"configmaps", "deployments.apps", "secrets"}, clusterTypes),
			wantWarnings: []string{`spec.excludedResources: "gadgets" is not a resource type`},
		},
		{
			name: "patterns match resource.group names",
			spec: v1.BackupSpec{IncludedResources: []string{"*.apps", "*maps"}},
			want: []string{"configmaps", "deployments.apps"},
		},
		{
			name: "CSI snapshots are never collected, even when named",
			spec: v1.BackupSpec{IncludedResources: []string{"volumesnapshots.snapshot.storage.k8s.io", "vsc"}},
			want: nil,
		},
		{
			name: "namespace patterns are namespace filters too",
			spec: v1.BackupSpec{IncludedNamespaces: []string{"team-*"}},
			want: sorted(namespacedTypes, []string{"namespaces"}),
		},

		// Scoped style.
		{
			name: "all namespace-scoped types in every namespace bring every cluster-scoped type",
			spec: v1.BackupSpec{IncludedNamespaceScopedResources: []string{"*"}},
			want: everything,
		},
		{
			name: "a namespace filter turns the whole-cluster default off",
			spec: v1.BackupSpec{IncludedNamespaces: []string{"team-a"}, IncludedNamespaceScopedResources: []string{"*"}},
			want: sorted(namespacedTypes, []string{"namespaces"}),
		},
		{
			name: "some namespace-scoped types bring namespaces only",
			spec: v1.BackupSpec{IncludedNamespaceScopedResources: []string{"deploy", "cm"}},
			want: []string{"configmaps", "deployments.apps", "namespaces"},
		},
		{
			name: "excluding a namespace-scoped type turns the whole-cluster default off",
			spec: v1.BackupSpec{ExcludedNamespaceScopedResources: []string{"secrets"}},
			want: []string{"configmaps", "deployments.apps", "namespaces", "pods"},
		},
		{
			name: "listed cluster-scoped types, and namespaces",
			spec: v1.BackupSpec{IncludedClusterScopedResources: []string{"StorageClass"}},
			want: sorted(namespacedTypes, []string{"namespaces", "storageclasses.storage.k8s.io"}),
		},
		{
			name: "all cluster-scoped types",
			spec: v1.BackupSpec{IncludedNamespaces: []string{"team-a"}, IncludedClusterScopedResources: []string{"*"}},
			want: everything,
		},
		{
			name: "excluding a cluster-scoped type turns the whole-cluster default off",
			spec: v1.BackupSpec{ExcludedClusterScopedResources: []string{"pv"}},
			want: sorted(namespacedTypes, []string{"namespaces"}),
		},
		{
			name: "namespaces can be excluded",
			spec: v1.BackupSpec{ExcludedClusterScopedResources: []string{"namespaces"}},
			want: namespacedTypes,
		},
		{
			name: "excluding all cluster-scoped types",
			spec: v1.BackupSpec{ExcludedClusterScopedResources: []string{"*"}},
			want: namespacedTypes,
		},
		{
			name: "cluster-scoped types only",
			spec: v1.BackupSpec{ExcludedNamespaceScopedResources: []string{"*"}, IncludedClusterScopedResources: []string{"pv", "crd"}},
			want: []string{"customresourcedefinitions.apiextensions.k8s.io", "namespaces", "persistentvolumes"},
		},
		{
			name:     "excluded beats included in the scoped lists",
			spec:     v1.BackupSpec{IncludedNamespaceScopedResources: []string{"pods", "secrets"}, ExcludedNamespaceScopedResources: []string{"secrets"}},
			want:     []string{"namespaces", "pods"},
			wantErrs: []string{"spec.excludedNamespaceScopedResources"},
		},
		{
			// Velero drops a type named in the list of the other scope; with
			// nothing left in the cluster lists, the whole-cluster default applies.
			name:         "a type in the wrong scoped list is ignored",
			spec:         v1.BackupSpec{IncludedClusterScopedResources: []string{"configmaps"}},
			want:         everything,
			wantWarnings: []string{`spec.includedClusterScopedResources: "configmaps" (configmaps) is namespace-scoped; ignored`},
		},
		{
			name:         "a cluster-scoped type in the namespace-scoped list is ignored",
			spec:         v1.BackupSpec{IncludedNamespaceScopedResources: []string{"pods", "pv"}},
			want:         []string{"namespaces", "pods"},
			wantWarnings: []string{`spec.includedNamespaceScopedResources: "pv" (persistentvolumes) is cluster-scoped; ignored`},
		},
		{
			name: "CSI snapshots are never collected in the scoped style either",
			spec: v1.BackupSpec{IncludedNamespaceScopedResources: []string{"volumesnapshots.snapshot.storage.k8s.io"}, IncludedClusterScopedResources: []string{"*"}},
			want: clusterTypes,
		},

		// Mixing the styles.
		{
			name:     "old and new fields together are refused and read in the old style",
			spec:     v1.BackupSpec{IncludedResources: []string{"pods"}, IncludeClusterResources: ptr(false), ExcludedClusterScopedResources: []string{"sc"}},
			want:     []string{"pods"},
			wantErrs: []string{"spec.includedResources, spec.includeClusterResources"},
		},
		{
			name:     "namespace validation is part of the spec's",
			spec:     v1.BackupSpec{IncludedNamespaces: []string{"Bad_Name"}},
			want:     sorted(namespacedTypes, []string{"namespaces"}),
			wantErrs: []string{"spec.includedNamespaces[0]"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := tc.spec
			f, errs := NewResourceFilter(&spec, resolver)
			if got := included(f, (*ResourceFilter).ShouldIncludeResource); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("included types:\n got %q\nwant %q", got, tc.want)
			}
			var gotFields []string
			for _, err := range errs {
				var fe *FieldError
				if !errors.As(err, &fe) {
					t.Fatalf("error %v is a %T, want *FieldError", err, err)
				}
				gotFields = append(gotFields, fe.Field)
			}
			if !reflect.DeepEqual(gotFields, tc.wantErrs) {
				t.Errorf("fields with errors:\n got %q\nwant %q\n(errors %v)", gotFields, tc.wantErrs, errs)
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

func TestMixedStylesErrorNamesBothSides(t *testing.T) {
	spec := &v1.BackupSpec{ExcludedResources: []string{"pods"}, IncludedNamespaceScopedResources: []string{"pods"}}
	_, errs := NewResourceFilter(spec, nil)
	if len(errs) != 1 {
		t.Fatalf("errors: %v", errs)
	}
	msg := errs[0].Error()
	for _, field := range []string{"spec.excludedResources", "spec.includedNamespaceScopedResources"} {
		if !strings.Contains(msg, field) {
			t.Errorf("%q does not name %s", msg, field)
		}
	}
}

func TestResourceFilterAdditionalItems(t *testing.T) {
	resolver := NewDiscoveryResolver(discoveryFixture())
	tests := []struct {
		name string
		spec v1.BackupSpec
		want []string
	}{
		{
			// A PVC's volume is kept although the namespace filter keeps
			// persistentvolumes from being collected.
			name: "namespace filter in auto mode",
			spec: v1.BackupSpec{IncludedNamespaces: []string{"team-a"}},
			want: everything,
		},
		{
			name: "includeClusterResources false drops everything cluster-scoped but namespaces",
			spec: v1.BackupSpec{IncludedNamespaces: []string{"team-a"}, IncludeClusterResources: ptr(false)},
			want: sorted(namespacedTypes, []string{"namespaces"}),
		},
		{
			name: "includeClusterResources true keeps cluster-scoped types includedResources does not name",
			spec: v1.BackupSpec{IncludedResources: []string{"pvc", "pods"}, IncludeClusterResources: ptr(true)},
			want: sorted([]string{"pods"}, clusterTypes),
		},
		{
			name: "auto mode with includedResources keeps only the named cluster-scoped types",
			spec: v1.BackupSpec{IncludedNamespaces: []string{"team-a"}, IncludedResources: []string{"pods", "pv"}},
			want: []string{"namespaces", "persistentvolumes", "pods"},
		},
		{
			name: "excluded cluster-scoped types are dropped",
			spec: v1.BackupSpec{ExcludedResources: []string{"pv"}},
			want: sorted(namespacedTypes, []string{"customresourcedefinitions.apiextensions.k8s.io", "namespaces", "storageclasses.storage.k8s.io"}),
		},
		{
			name: "scoped style keeps cluster-scoped types unless excluded",
			spec: v1.BackupSpec{IncludedNamespaces: []string{"team-a"}, IncludedNamespaceScopedResources: []string{"pods"}, ExcludedClusterScopedResources: []string{"sc"}},
			want: []string{"customresourcedefinitions.apiextensions.k8s.io", "namespaces", "persistentvolumes", "pods"},
		},
		{
			name: "scoped style excluding all cluster-scoped types keeps namespaces",
			spec: v1.BackupSpec{ExcludedClusterScopedResources: []string{"*"}},
			want: sorted(namespacedTypes, []string{"namespaces"}),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := tc.spec
			f, errs := NewResourceFilter(&spec, resolver)
			if len(errs) > 0 {
				t.Fatalf("validation: %v", errs)
			}
			if got := included(f, (*ResourceFilter).ShouldIncludeAdditionalItem); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("kept types:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// mapResolver is the fake a test of the engine would use.
type mapResolver map[string]resourceType

func (m mapResolver) ResolveResource(name string) (schema.GroupResource, bool, error) {
	if name == "flaky" {
		return schema.GroupResource{}, false, errors.New("discovery timed out")
	}
	rt, ok := m[name]
	if !ok {
		return schema.GroupResource{}, false, ErrUnknownResource
	}
	return rt.gr, rt.namespaced, nil
}

func TestResourceFilterWithOtherResolvers(t *testing.T) {
	fake := mapResolver{"cm": {schema.GroupResource{Resource: "configmaps"}, true}}
	tests := []struct {
		name         string
		resolver     ResourceResolver
		includes     []string
		want         []string
		wantWarnings int
	}{
		{name: "map resolver", resolver: fake, includes: []string{"cm"}, want: []string{"configmaps"}},
		{name: "resolver failure keeps the name as written", resolver: fake, includes: []string{"cm", "flaky"}, want: []string{"configmaps"}, wantWarnings: 1},
		{name: "nil resolver keeps names as written", resolver: nil, includes: []string{"cm", "deployments.apps"}, want: []string{"deployments.apps"}, wantWarnings: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, errs := NewResourceFilter(&v1.BackupSpec{IncludedResources: tc.includes}, tc.resolver)
			if len(errs) > 0 {
				t.Fatalf("validation: %v", errs)
			}
			if got := included(f, (*ResourceFilter).ShouldIncludeResource); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("included types: got %q, want %q", got, tc.want)
			}
			if got := len(f.Warnings()); got != tc.wantWarnings {
				t.Errorf("%d warnings %q, want %d", got, f.Warnings(), tc.wantWarnings)
			}
		})
	}
}

func TestResourceFilterNilSpec(t *testing.T) {
	f, errs := NewResourceFilter(nil, nil)
	if len(errs) > 0 {
		t.Fatalf("validation: %v", errs)
	}
	if got := included(f, (*ResourceFilter).ShouldIncludeResource); !reflect.DeepEqual(got, everything) {
		t.Errorf("included types: got %q", got)
	}
	if !f.Namespaces().IncludesAll() {
		t.Error("a nil spec does not include every namespace")
	}
}

func TestAlwaysExcludedResourcesReturnsACopy(t *testing.T) {
	got := AlwaysExcludedResources()
	got[0] = schema.GroupResource{Resource: "pods"}
	if AlwaysExcludedResources()[0].Resource != "volumesnapshots" {
		t.Error("caller changed the package's list")
	}
}

// TestARestoreJudgesSnapshotTypesLikeAnyOther: no backup collects CSI
// VolumeSnapshots or contents, but a restore's filters decide them as
// they decide any type.
func TestARestoreJudgesSnapshotTypesLikeAnyOther(t *testing.T) {
	vs := schema.GroupResource{Group: "snapshot.storage.k8s.io", Resource: "volumesnapshots"}
	vsc := schema.GroupResource{Group: "snapshot.storage.k8s.io", Resource: "volumesnapshotcontents"}
	all, _ := NewResourceFilter(nil, nil)
	if all.ShouldIncludeResource(vs, true) || !all.ShouldRestoreResource(vs, true) || !all.ShouldRestoreResource(vsc, false) {
		t.Errorf("an empty spec: backup includes volumesnapshots %v, restore %v / contents %v; want false, true, true",
			all.ShouldIncludeResource(vs, true), all.ShouldRestoreResource(vs, true), all.ShouldRestoreResource(vsc, false))
	}
	excluded, _ := NewResourceFilter(&v1.BackupSpec{ExcludedResources: []string{"volumesnapshots.snapshot.storage.k8s.io"}}, nil)
	if excluded.ShouldRestoreResource(vs, true) || !excluded.ShouldRestoreResource(vsc, false) {
		t.Errorf("excluding volumesnapshots: restore volumesnapshots %v, contents %v; want false, true",
			excluded.ShouldRestoreResource(vs, true), excluded.ShouldRestoreResource(vsc, false))
	}
}

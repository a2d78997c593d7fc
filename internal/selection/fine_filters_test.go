package selection

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/pkg/policy"
)

// fineFixture is discovery with the types the documented examples name.
func fineFixture() *DiscoveryResolver {
	res := func(name, singular, kind string, namespaced bool) metav1.APIResource {
		return metav1.APIResource{Name: name, SingularName: singular, Kind: kind, Namespaced: namespaced}
	}
	return NewDiscoveryResolver(append(discoveryFixture(),
		&metav1.APIResourceList{GroupVersion: "v1", APIResources: []metav1.APIResource{
			res("services", "service", "Service", true),
		}},
		&metav1.APIResourceList{GroupVersion: "rbac.authorization.k8s.io/v1", APIResources: []metav1.APIResource{
			res("clusterroles", "clusterrole", "ClusterRole", false),
			res("clusterrolebindings", "clusterrolebinding", "ClusterRoleBinding", false),
		}},
	))
}

// fineSpec parses a policy document and copies its fine-grained filters.
func fineSpec(t *testing.T, doc string) FineFilterSpec {
	t.Helper()
	p, err := policy.Parse([]byte(doc))
	if err != nil {
		t.Fatalf("policy: %v", err)
	}
	var spec FineFilterSpec
	for _, nfp := range p.NamespacedFilterPolicies {
		e := NamespacedFilterSpec{Namespaces: nfp.Namespaces}
		for _, rf := range nfp.ResourceFilters {
			e.Filters = append(e.Filters, KindFilterSpec(rf))
		}
		spec.Namespaced = append(spec.Namespaced, e)
	}
	if c := p.ClusterScopedFilterPolicy; c != nil {
		spec.Cluster = []KindFilterSpec{}
		for _, rf := range c.ResourceFilters {
			spec.Cluster = append(spec.Cluster, KindFilterSpec(rf))
		}
	}
	return spec
}

// item is an object a case asks about; "+" in want means stored/restored.
type fineItem struct {
	gr     schema.GroupResource
	ns     string
	name   string
	labels map[string]string
	want   bool
}

func cm(ns, name string, want bool, kv ...string) fineItem {
	return fineItem{schema.GroupResource{Resource: "configmaps"}, ns, name, lbls(kv...), want}
}

func of(resource, ns, name string, want bool, kv ...string) fineItem {
	gr := schema.ParseGroupResource(resource)
	return fineItem{gr, ns, name, lbls(kv...), want}
}

func lbls(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

var namespacedTypesSet = map[string]bool{"configmaps": true, "secrets": true, "pods": true, "deployments.apps": true, "services": true, "persistentvolumeclaims": true}

// fineCase is one documented example: the policy is the example's YAML,
// the items and verdicts are those the example's expected outcome names.
type fineCase struct {
	name   string
	policy string
	spec   v1.BackupSpec
	items  []fineItem
}

// Test data: the policies are the examples of Velero v1.18.3's
// site/content/docs/v1.18/fine-grained-backup-filters.md (the example
// number is in each name); items and verdicts follow each example's
// "Expected outcome".
var documentedExamples = []fineCase{
	{
		name: "example 1: per-namespace kinds and labels",
		policy: `version: v1
namespacedFilterPolicies:
  - namespaces:
      - ns-a
    resourceFilters:
      - kinds: [ConfigMap, Secret, Deployment, Pod]
        labelSelector:
          matchLabels:
            app: my-app
`,
		spec: v1.BackupSpec{IncludedNamespaces: []string{"ns-a", "ns-b"}},
		items: []fineItem{
			cm("ns-a", "app-config", true, "app", "my-app"),
			of("secrets", "ns-a", "app-secret", true, "app", "my-app"),
			of("deployments.apps", "ns-a", "app-deployment", true, "app", "my-app"),
			cm("ns-a", "monitoring-config", false, "app", "monitoring"),
			// Not a listed kind: the entry is an allowlist.
			of("persistentvolumeclaims", "ns-a", "data", false, "app", "my-app"),
			// ns-b has no entry: the spec's filters alone.
			cm("ns-b", "monitoring-config", true, "app", "monitoring"),
			of("persistentvolumeclaims", "ns-b", "data", true),
		},
	},
	{
		name: "example 2: exact resource names",
		policy: `version: v1
namespacedFilterPolicies:
  - namespaces:
      - target-namespace
    resourceFilters:
      - kinds: [ConfigMap]
        names: [vm-1, vm-2]
        labelSelector:
          matchLabels:
            resource-type: VirtualMachine
`,
		spec: v1.BackupSpec{IncludedNamespaces: []string{"target-namespace"}},
		items: []fineItem{
			cm("target-namespace", "vm-1", true, "resource-type", "VirtualMachine"),
			cm("target-namespace", "vm-2", true, "resource-type", "VirtualMachine"),
			cm("target-namespace", "vm-3", false, "resource-type", "VirtualMachine"),
			cm("target-namespace", "vm-2", false),
		},
	},
	{
		name: "example 3: glob name patterns with exclusions",
		policy: `version: v1
namespacedFilterPolicies:
  - namespaces:
      - production
    resourceFilters:
      - kinds: [ConfigMap, Secret]
        names: ["app-*"]
        excludedNames: ["*-tmp-*", "*-debug-*", "*-tmp", "*-debug"]
`,
		spec: v1.BackupSpec{IncludedNamespaces: []string{"production"}},
		items: []fineItem{
			cm("production", "app-config", true),
			cm("production", "app-cache-config", true),
			of("secrets", "production", "app-secret", true),
			of("secrets", "production", "app-db-secret", true),
			cm("production", "app-tmp-config", false),
			cm("production", "app-debug-config", false),
			of("secrets", "production", "monitoring-tmp-secret", false),
		},
	},
	{
		name: "example 4: OR of label groups",
		policy: `version: v1
namespacedFilterPolicies:
  - namespaces:
      - target-namespace
    resourceFilters:
      - kinds: [ConfigMap]
        orLabelSelectors:
          - matchLabels:
              app: production-workload-1
              component: vm-group
          - matchLabels:
              app: production-workload-2
              component: vm-service
`,
		spec: v1.BackupSpec{IncludedNamespaces: []string{"target-namespace"}},
		items: []fineItem{
			cm("target-namespace", "a", true, "app", "production-workload-1", "component", "vm-group"),
			cm("target-namespace", "b", true, "app", "production-workload-2", "component", "vm-service"),
			cm("target-namespace", "c", false, "app", "production-workload-1", "component", "vm-service"),
			cm("target-namespace", "d", false),
		},
	},
	{
		name: "example 4b: set-based selectors",
		policy: `version: v1
namespacedFilterPolicies:
  - namespaces:
      - production
    resourceFilters:
      - kinds: [Deployment, Pod]
        labelSelector:
          matchLabels:
            app: my-app
          matchExpressions:
            - key: environment
              operator: In
              values: [prod, staging]
            - key: do-not-backup
              operator: DoesNotExist
`,
		spec: v1.BackupSpec{IncludedNamespaces: []string{"production"}},
		items: []fineItem{
			of("pods", "production", "p1", true, "app", "my-app", "environment", "staging"),
			of("deployments.apps", "production", "d1", true, "app", "my-app", "environment", "prod"),
			of("pods", "production", "p2", false, "app", "my-app", "environment", "dev"),
			of("pods", "production", "p3", false, "app", "my-app", "environment", "prod", "do-not-backup", "x"),
			cm("production", "c", false, "app", "my-app", "environment", "prod"),
		},
	},
	{
		name: "example 7: one entry, several namespaces",
		policy: `version: v1
namespacedFilterPolicies:
  - namespaces:
      - ns-a
      - ns-b
      - production
    resourceFilters:
      - kinds: [ConfigMap]
      - kinds: [Deployment]
        labelSelector:
          matchLabels:
            tier: web
`,
		spec: v1.BackupSpec{IncludedNamespaces: []string{"ns-a", "ns-b", "production"}},
		items: []fineItem{
			cm("ns-a", "any", true),
			cm("production", "any", true, "tier", "db"),
			of("deployments.apps", "ns-b", "web", true, "tier", "web"),
			of("deployments.apps", "ns-b", "db", false, "tier", "db"),
			of("secrets", "ns-a", "s", false),
		},
	},
	{
		name: "example 8: namespace patterns, exact first, then globs in order",
		policy: `version: v1
namespacedFilterPolicies:
  - namespaces:
      - "team-frontend-*"
    resourceFilters:
      - kinds: [Deployment, Service, ConfigMap]
  - namespaces:
      - "team-*"
    resourceFilters:
      - kinds: [Deployment, Service]
  - namespaces:
      - team-frontend-prod          # exact match
    resourceFilters:
      - kinds: [Deployment, Service, ConfigMap, Secret, PersistentVolumeClaim]
`,
		spec: v1.BackupSpec{IncludedNamespaces: []string{"team-frontend-prod", "team-frontend-dev", "team-backend-test"}},
		items: []fineItem{
			of("secrets", "team-frontend-prod", "s", true),
			of("persistentvolumeclaims", "team-frontend-prod", "c", true),
			cm("team-frontend-dev", "c", true),
			of("secrets", "team-frontend-dev", "s", false),
			of("services", "team-backend-test", "svc", true),
			cm("team-backend-test", "c", false),
		},
	},
	{
		name: "example 9: catch-all by label, kind entries override it",
		policy: `version: v1
namespacedFilterPolicies:
  - namespaces:
      - ns-a
    resourceFilters:
      - kinds: ["*"]                 # catch-all
        labelSelector:
          matchLabels:
            app: common-app
      - kinds: [ConfigMap, Secret]   # override for these kinds
        labelSelector:
          matchLabels:
            app: specialized-app
`,
		spec: v1.BackupSpec{IncludedNamespaces: []string{"ns-a"}},
		items: []fineItem{
			cm("ns-a", "special", true, "app", "specialized-app"),
			cm("ns-a", "common", false, "app", "common-app"),
			of("pods", "ns-a", "common", true, "app", "common-app"),
			of("services", "ns-a", "special", false, "app", "specialized-app"),
		},
	},
	{
		name: "example 10: catch-all with per-kind names",
		policy: `version: v1
namespacedFilterPolicies:
  - namespaces:
      - ns-a
    resourceFilters:
      - kinds: [Deployment]
        names: [api-server, worker]
      - kinds: [Secret]
        names: [db-credentials, tls-cert]
      - kinds: ["*"]
        labelSelector:
          matchLabels:
            backup: "true"
`,
		spec: v1.BackupSpec{IncludedNamespaces: []string{"ns-a"}},
		items: []fineItem{
			of("deployments.apps", "ns-a", "api-server", true),
			of("deployments.apps", "ns-a", "other-deployment", false, "backup", "true"),
			of("secrets", "ns-a", "tls-cert", true),
			cm("ns-a", "backup-labeled-config", true, "backup", "true"),
			cm("ns-a", "no-backup-label-config", false),
			of("services", "ns-a", "catch-all-labeled-service", true, "backup", "true"),
		},
	},
	{
		name: "example 11: override-only catch-all",
		policy: `version: v1
namespacedFilterPolicies:
  - namespaces:
      - ns-a
    resourceFilters:
      - kinds: [Secret]
        names: [app-secret]
      - kinds: ["*"]    # no labelSelector — all other kinds included
`,
		spec: v1.BackupSpec{IncludedNamespaces: []string{"ns-a"}},
		items: []fineItem{
			of("secrets", "ns-a", "app-secret", true),
			of("secrets", "ns-a", "other", false),
			cm("ns-a", "anything", true),
			of("pods", "ns-a", "anything", true),
		},
	},
	{
		name: "example 12: cluster-scoped refinement",
		policy: `version: v1
clusterScopedFilterPolicy:
  resourceFilters:
    - kinds: [StorageClass]
      names: ["my-app-*"]
    - kinds: [ClusterRole, ClusterRoleBinding]
      labelSelector:
        matchLabels:
          app: my-app
`,
		// The example's spec, plus persistentvolumes to show an unlisted kind.
		spec: v1.BackupSpec{IncludedNamespaces: []string{"ns-a"}, IncludedClusterScopedResources: []string{"storageclasses", "clusterroles", "clusterrolebindings", "persistentvolumes"}},
		items: []fineItem{
			of("storageclasses.storage.k8s.io", "", "my-app-fast", true),
			of("storageclasses.storage.k8s.io", "", "standard", false),
			of("clusterroles.rbac.authorization.k8s.io", "", "mine", true, "app", "my-app"),
			of("clusterroles.rbac.authorization.k8s.io", "", "admin", false),
			of("clusterrolebindings.rbac.authorization.k8s.io", "", "mine", true, "app", "my-app"),
			// Unlisted cluster-scoped kinds keep the spec's filters.
			of("persistentvolumes", "", "pv-1", true),
			cm("ns-a", "c", true),
		},
	},
}

// backupVerdict is what Velero stores of a listed item: its type is
// collected by the spec's filters, its labels pass the LIST's and the
// item's rules, and its name passes when stored.
func backupVerdict(t *testing.T, c fineCase, it fineItem) bool {
	t.Helper()
	resolver := fineFixture()
	spec := c.spec
	resources, errs := NewResourceFilter(&spec, resolver)
	if len(errs) > 0 {
		t.Fatalf("spec: %v", errs)
	}
	fine, err := NewFineFilters(fineSpec(t, c.policy), resolver, ForBackup)
	if err != nil {
		t.Fatal(err)
	}
	global, err := NewLabelMatcher(&spec)
	if err != nil {
		t.Fatal(err)
	}
	bf := NewBackupFineFilter(fine, global, resources.Namespaces())
	namespaced := namespacedTypesSet[it.gr.String()]
	if !resources.ShouldIncludeResource(it.gr, namespaced) {
		return false
	}
	if namespaced && !resources.Namespaces().ShouldInclude(it.ns) {
		return false
	}
	return bf.KeepsLabels(it.gr, namespaced, it.ns, it.labels) && bf.KeepsName(it.gr, it.ns, it.name)
}

func TestFineFiltersDocumentedBackupExamples(t *testing.T) {
	for _, c := range documentedExamples {
		t.Run(c.name, func(t *testing.T) {
			for _, it := range c.items {
				if got := backupVerdict(t, c, it); got != it.want {
					t.Errorf("%s %s/%s %v: stored %v, want %v", it.gr, it.ns, it.name, it.labels, got, it.want)
				}
			}
		})
	}
}

// The restore documentation uses the same policies with the same
// outcomes (fine-grained-restore-filters.md, examples 1 to 12).
func TestFineFiltersDocumentedRestoreExamples(t *testing.T) {
	for _, c := range documentedExamples {
		t.Run(c.name, func(t *testing.T) {
			resolver := fineFixture()
			fine, err := NewFineFilters(fineSpec(t, c.policy), resolver, ForRestore)
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range c.items {
				if got := fine.RestoreSelects(it.gr, "", it.ns, it.name, it.labels, nil); got != it.want {
					t.Errorf("%s %s/%s %v: restored %v, want %v", it.gr, it.ns, it.name, it.labels, got, it.want)
				}
			}
		})
	}
}

// Velero lists a backup that names its namespaces namespace by namespace,
// where the kind's selector replaces the spec's (a catch-all does not
// inherit it); a backup of every namespace is listed across the cluster
// with the spec's selector, and the kind's selector must match as well.
func TestFineFiltersBackupSelectorBesideSpecSelector(t *testing.T) {
	const doc = `version: v1
namespacedFilterPolicies:
  - namespaces: [ns-a]
    resourceFilters:
      - kinds: [ConfigMap]
        labelSelector: {matchLabels: {app: my-app}}
      - kinds: ["*"]
`
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"backup": "yes"}}
	named := fineCase{policy: doc, spec: v1.BackupSpec{IncludedNamespaces: []string{"ns-a", "ns-b"}, LabelSelector: sel}}
	every := fineCase{policy: doc, spec: v1.BackupSpec{LabelSelector: sel}}
	for _, tc := range []struct {
		c    fineCase
		it   fineItem
		want bool
	}{
		{named, cm("ns-a", "policy-only", false, "app", "my-app"), true},
		{named, cm("ns-a", "spec-only", false, "backup", "yes"), false},
		{named, of("pods", "ns-a", "catch-all", false), true},
		{named, cm("ns-b", "spec-only", false, "backup", "yes"), true},
		{named, cm("ns-b", "policy-only", false, "app", "my-app"), false},
		{every, cm("ns-a", "policy-only", false, "app", "my-app"), false},
		{every, cm("ns-a", "both", false, "app", "my-app", "backup", "yes"), true},
		{every, of("pods", "ns-a", "catch-all", false), false},
		{every, of("pods", "ns-a", "catch-all", false, "backup", "yes"), true},
		{every, cm("ns-b", "spec-only", false, "backup", "yes"), true},
	} {
		if got := backupVerdict(t, tc.c, tc.it); got != tc.want {
			t.Errorf("includedNamespaces %q, %s %s/%s %v: stored %v, want %v", tc.c.spec.IncludedNamespaces, tc.it.gr, tc.it.ns, tc.it.name, tc.it.labels, got, tc.want)
		}
	}
}

// A namespace pattern "*" also matches the empty namespace of Velero's
// cluster-wide LISTs: in a backup of every namespace it rules those LISTs,
// so a type it neither lists nor covers is not collected at all, even in
// a namespace with an entry of its own, and cluster-scoped types too.
func TestFineFiltersStarPatternRulesClusterWideLists(t *testing.T) {
	const doc = `version: v1
namespacedFilterPolicies:
  - namespaces: ["*"]
    resourceFilters:
      - kinds: [ConfigMap]
  - namespaces: [prod]
    resourceFilters:
      - kinds: [Secret]
`
	every := fineCase{policy: doc}
	named := fineCase{policy: doc, spec: v1.BackupSpec{IncludedNamespaces: []string{"prod", "dev"}}}
	for _, tc := range []struct {
		c    fineCase
		it   fineItem
		want bool
	}{
		{every, of("secrets", "prod", "s", false), false},
		{every, cm("dev", "c", false), true},
		{every, cm("prod", "c", false), false},
		{every, of("persistentvolumes", "", "pv", false), false},
		{named, of("secrets", "prod", "s", false), true},
		{named, cm("dev", "c", false), true},
		{named, of("pods", "dev", "p", false), false},
	} {
		if got := backupVerdict(t, tc.c, tc.it); got != tc.want {
			t.Errorf("includedNamespaces %q, %s %s/%s: stored %v, want %v", tc.c.spec.IncludedNamespaces, tc.it.gr, tc.it.ns, tc.it.name, got, tc.want)
		}
	}
}

// Items an action adds are held to the names of their kind's rule, never
// to its labels, and pass when their kind is not listed.
func TestFineFiltersAdditionalItemNames(t *testing.T) {
	const doc = `version: v1
namespacedFilterPolicies:
  - namespaces: [ns-a]
    resourceFilters:
      - kinds: [ConfigMap]
        names: [keep-*]
clusterScopedFilterPolicy:
  resourceFilters:
    - kinds: [PersistentVolume]
      names: [pv-keep]
      labelSelector: {matchLabels: {x: y}}
`
	resolver := fineFixture()
	fine, err := NewFineFilters(fineSpec(t, doc), resolver, ForBackup)
	if err != nil {
		t.Fatal(err)
	}
	bf := NewBackupFineFilter(fine, nil, NewNamespaceFilter([]string{"ns-a"}, nil))
	for _, tc := range []struct {
		gr   string
		ns   string
		name string
		want bool
	}{
		{"configmaps", "ns-a", "keep-1", true},
		{"configmaps", "ns-a", "other", false},
		{"secrets", "ns-a", "anything", true},
		{"persistentvolumes", "", "pv-keep", true},
		{"persistentvolumes", "", "pv-other", false},
		{"storageclasses.storage.k8s.io", "", "any", true},
	} {
		if got := bf.KeepsName(schema.ParseGroupResource(tc.gr), tc.ns, tc.name); got != tc.want {
			t.Errorf("%s %s/%s: kept %v, want %v", tc.gr, tc.ns, tc.name, got, tc.want)
		}
	}
}

// Names are gobwas globs, as in Velero: braces and negated classes work.
func TestFineFiltersNameGlobs(t *testing.T) {
	n := &nameFilter{includes: compileGlobs([]string{"{web,api}-*", "db-[!x]"}), excludes: compileGlobs([]string{"*-old"})}
	for name, want := range map[string]bool{"web-1": true, "api-2": true, "db-a": true, "db-x": false, "web-old": false, "cache-1": false} {
		if got := n.keeps(name); got != want {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
}

// A restore's entry replaces the spec's label selector for the kinds it
// covers, wherever the backup's namespaces were; a kind discovery does not
// know (a custom resource whose definition the restore brings) is matched
// by the items' kind.
func TestFineFiltersRestore(t *testing.T) {
	const doc = `version: v1
namespacedFilterPolicies:
  - namespaces: [ns-a]
    resourceFilters:
      - kinds: [ConfigMap]
        labelSelector: {matchLabels: {app: my-app}}
      - kinds: [Gadget]
        names: [g-*]
clusterScopedFilterPolicy:
  resourceFilters:
    - kinds: [Doohickey]
      names: [d-1]
`
	resolver := fineFixture()
	fine, err := NewFineFilters(fineSpec(t, doc), resolver, ForRestore)
	if err != nil {
		t.Fatal(err)
	}
	global, err := NewLabelMatcher(&v1.BackupSpec{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"restore": "yes"}}})
	if err != nil {
		t.Fatal(err)
	}
	gadgets := schema.GroupResource{Group: "example.org", Resource: "gadgets"}
	doohickeys := schema.GroupResource{Group: "example.org", Resource: "doohickeys"}
	for _, tc := range []struct {
		gr         schema.GroupResource
		kind, ns   string
		name       string
		labels     map[string]string
		want       bool
		whyMessage string
	}{
		{schema.GroupResource{Resource: "configmaps"}, "ConfigMap", "ns-a", "c", lbls("app", "my-app"), true, "the kind's selector replaces the spec's"},
		{schema.GroupResource{Resource: "configmaps"}, "ConfigMap", "ns-a", "c", lbls("restore", "yes"), false, "the spec's selector does not apply to listed kinds"},
		{schema.GroupResource{Resource: "configmaps"}, "ConfigMap", "ns-b", "c", lbls("restore", "yes"), true, "no entry: the spec's selector"},
		{schema.GroupResource{Resource: "configmaps"}, "ConfigMap", "ns-b", "c", lbls("app", "my-app"), false, "no entry: the spec's selector"},
		{gadgets, "Gadget", "ns-a", "g-1", nil, true, "an unknown kind matches the items' kind"},
		{gadgets, "Gadget", "ns-a", "other", nil, false, "and its names apply"},
		{schema.GroupResource{Resource: "secrets"}, "Secret", "ns-a", "s", lbls("restore", "yes"), false, "not listed, no catch-all"},
		{doohickeys, "Doohickey", "", "d-1", nil, true, "cluster-scoped unknown kind matched by kind"},
		{doohickeys, "Doohickey", "", "d-2", nil, false, "its names apply"},
		{schema.GroupResource{Resource: "persistentvolumes"}, "PersistentVolume", "", "pv", lbls("restore", "yes"), true, "unlisted cluster kind: the spec's selector"},
		{schema.GroupResource{Resource: "persistentvolumes"}, "PersistentVolume", "", "pv", nil, false, "unlisted cluster kind: the spec's selector"},
	} {
		if got := fine.RestoreSelects(tc.gr, tc.kind, tc.ns, tc.name, tc.labels, global); got != tc.want {
			t.Errorf("%s %s/%s %v: restored %v, want %v (%s)", tc.gr, tc.ns, tc.name, tc.labels, got, tc.want, tc.whyMessage)
		}
	}
}

// Velero's restore refuses two kinds of one entry that resolve to one type;
// its backup lets the later one win.
func TestFineFiltersRestoreRefusesAmbiguousKinds(t *testing.T) {
	const doc = `version: v1
namespacedFilterPolicies:
  - namespaces: [ns-a]
    resourceFilters:
      - kinds: [ConfigMap]
        names: [a]
      - kinds: [configmaps]
        names: [b]
`
	resolver := fineFixture()
	if _, err := NewFineFilters(fineSpec(t, doc), resolver, ForRestore); err == nil || !strings.Contains(err.Error(), "configmaps") {
		t.Errorf("restore: got %v, want an error naming configmaps", err)
	}
	fine, err := NewFineFilters(fineSpec(t, doc), resolver, ForBackup)
	if err != nil {
		t.Fatal(err)
	}
	bf := NewBackupFineFilter(fine, nil, NewNamespaceFilter([]string{"ns-a"}, nil))
	if bf.KeepsName(schema.GroupResource{Resource: "configmaps"}, "ns-a", "a") || !bf.KeepsName(schema.GroupResource{Resource: "configmaps"}, "ns-a", "b") {
		t.Error("backup: the later entry does not win")
	}
}

// Kinds of the wrong scope, unknown kinds and kinds excluded for every
// namespace are accepted with a warning naming the entry.
func TestFineFiltersWarnings(t *testing.T) {
	const doc = `version: v1
namespacedFilterPolicies:
  - namespaces: [ns-a]
    resourceFilters:
      - kinds: [ClusterRole, Secret, Gizmo]
clusterScopedFilterPolicy:
  resourceFilters:
    - kinds: [Pod]
`
	fine, err := NewFineFilters(fineSpec(t, doc), fineFixture(), ForBackup)
	if err != nil {
		t.Fatal(err)
	}
	fine.WarnExcluded(func(gr schema.GroupResource) bool { return gr.Resource != "secrets" }, "includeExcludePolicy")
	all := strings.Join(fine.Warnings(), "\n")
	for _, want := range []string{`kind "ClusterRole" (clusterroles.rbac.authorization.k8s.io) is cluster-scoped`, `kind "Gizmo" is not a resource type`, `kind "Pod" (pods) is namespace-scoped`, "kind secrets is excluded by includeExcludePolicy"} {
		if !strings.Contains(all, want) {
			t.Errorf("warnings do not say %q:\n%s", want, all)
		}
	}
}

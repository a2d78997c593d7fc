package policy

import (
	"strings"
	"testing"
)

// A restore reads only the fine-grained filters; Velero's restore refuses
// a policy with volumePolicies or includeExcludePolicy (its
// ValidateForRestore). The policies are from Velero v1.18.3's
// site/content/docs/v1.18/fine-grained-restore-filters.md (example 14 and
// example 12) and the includeExcludePolicy example of resource-filtering.md.
func TestRestoreProblems(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []string
	}{
		{
			name: "fine-grained-restore-filters.md example 14: volume policies beside namespace filters",
			doc: `version: v1
volumePolicies:
  - conditions:
      capacity: "0,10Gi"
    action:
      type: fs-backup
namespacedFilterPolicies:
  - namespaces:
      - production
    resourceFilters:
      - kinds: [ConfigMap, Secret]
        names: ["app-*"]
`,
			want: []string{"volumePolicies: not supported for restores"},
		},
		{
			name: "fine-grained-restore-filters.md example 12: cluster-scoped refinement",
			doc: `version: v1
clusterScopedFilterPolicy:
  resourceFilters:
    - kinds: [StorageClass]
      names: ["my-app-*"]
    - kinds: [ClusterRole, ClusterRoleBinding]
      labelSelector:
        matchLabels:
          app: my-app
`,
		},
		{
			name: "resource-filtering.md includeExcludePolicy",
			doc: `version: v1
includeExcludePolicy:
  includedClusterScopedResources:
    - "cr"
  excludedNamespaceScopedResources:
    - "secrets"
`,
			want: []string{"includeExcludePolicy: not supported for restores"},
		},
		{
			name: "an empty includeExcludePolicy is one too",
			doc:  "version: v1\nincludeExcludePolicy: {}\n",
			want: []string{"includeExcludePolicy: not supported for restores"},
		},
		{
			name: "an empty volumePolicies list is none",
			doc:  "version: v1\nvolumePolicies: []\nnamespacedFilterPolicies:\n- namespaces: [a]\n  resourceFilters:\n  - kinds: [Pod]\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse([]byte(tc.doc))
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			got := p.RestoreProblems()
			if len(got) != len(tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(got[i], w) {
					t.Errorf("problem %q does not start with %q", got[i], w)
				}
			}
		})
	}
}

// The policies of Velero's restore guide get the verdict Velero's restore
// gives them: parsed as any policy, then refused when they hold what a
// restore does not read (testdata/velero/*.restorecases).
func TestVeleroRestoreVerdicts(t *testing.T) {
	cases := readVeleroCases(t, "restorecases")
	counts := map[bool]int{}
	for _, c := range cases {
		counts[c.valid]++
		t.Run(c.file+"/"+c.name, func(t *testing.T) {
			p, err := Parse([]byte(c.doc))
			var problems []string
			if err == nil {
				problems = p.RestoreProblems()
			}
			switch valid := err == nil && len(problems) == 0; {
			case c.valid && !valid:
				t.Errorf("Velero's restore accepts this policy; Lifeboat refuses it: %v %q\n--- policy:\n%s", err, problems, c.doc)
			case !c.valid && valid:
				t.Errorf("Velero's restore refuses this policy; Lifeboat accepts it\n--- policy:\n%s", c.doc)
			}
		})
	}
	if counts[true] == 0 || counts[false] == 0 {
		t.Errorf("%d valid and %d invalid cases; the table needs both", counts[true], counts[false])
	}
}

package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func writePolicyFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const validPolicy = `version: v1
volumePolicies:
- conditions:
    csi: {driver: vault.example.com}
  action:
    type: custom
    parameters: {myCustomAction: true}
- conditions:
    storageClass: [scratch]
  action: {type: skip}
`

func TestPolicyValidate(t *testing.T) {
	tests := []struct {
		name    string
		content string
		wantOut []string // the lines printed, with FILE for the path
		wantErr string   // with FILE for the path; empty when valid
	}{
		{
			name:    "a valid policy",
			content: validPolicy,
			wantOut: []string{"FILE: valid (2 volume policies)"},
		},
		{
			name:    "one volume policy",
			content: "version: v1\nvolumePolicies:\n- action: {type: snapshot}\n",
			wantOut: []string{"FILE: valid (1 volume policy)"},
		},
		{
			name:    "only an include/exclude policy",
			content: "version: v1\nincludeExcludePolicy:\n  excludedNamespaceScopedResources: [events]\n",
			wantOut: []string{"FILE: valid (0 volume policies)"},
		},
		{
			name: "every problem, one per line",
			content: `version: v2
volumePolicies:
- conditions:
    capacity: "10Gi,5Gi"
    csi: {volumeAttributes: {protocol: nfs}}
  action: {type: archive}
`,
			wantOut: []string{
				`version: "v2" is not supported; use v1`,
				`volumePolicies[0].conditions.capacity: "10Gi,5Gi": the lower bound is above the upper one`,
				"volumePolicies[0].conditions.csi.volumeAttributes: needs csi.driver; volume attributes are only meaningful for one driver",
				`volumePolicies[0].action.type: "archive" is not an action; use snapshot, fs-backup, skip or custom`,
			},
			wantErr: "FILE: invalid (4 problems)",
		},
		{
			name:    "not YAML",
			content: "version: v1\nvolumePolicies: [\n",
			wantOut: []string{"not valid YAML: line 2: did not find expected node content"},
			wantErr: "FILE: invalid (1 problem)",
		},
		{
			name: "a ConfigMap manifest is read through its one data key",
			content: `apiVersion: v1
kind: ConfigMap
metadata:
  name: volume-policy
  namespace: velero
data:
  policy.yaml: |
` + indent(validPolicy, "    "),
			wantOut: []string{"FILE: valid (2 volume policies)"},
		},
		{
			name: "problems in a ConfigMap manifest name the ConfigMap",
			content: `apiVersion: v1
kind: ConfigMap
metadata:
  name: volume-policy
  namespace: velero
data:
  policy.yaml: |
    version: v1
    volumePolicies:
    - conditions: {capacity: "2Gi,1Gi"}
      action: {type: skip}
`,
			wantOut: []string{`ConfigMap velero/volume-policy: volumePolicies[0].conditions.capacity: "2Gi,1Gi": the lower bound is above the upper one`},
			wantErr: "FILE: invalid (1 problem)",
		},
		{
			// Velero's own documentation has this example; Velero accepts it.
			name: "what Velero accepts is valid, with a warning for what never matches",
			content: `version: v1
volumePolicies:
- conditions: {volumeTypes: [emptyDir, downwardAPI, configmap, cinder]}
  action: {type: skip}
- conditions: {pvcPhase: [Released]}
  action: {type: skip}
`,
			wantOut: []string{
				`warning: volumePolicies[0].conditions.volumeTypes[2]: "configmap" is not a volume type, so it never matches (names are case-sensitive); did you mean "configMap"?`,
				`warning: volumePolicies[1].conditions.pvcPhase[0]: "Released" is not a PVC phase, so it never matches (phases are case-sensitive); use Pending, Bound, Lost`,
				"FILE: valid (2 volume policies, 2 warnings)",
			},
		},
		{
			name: "a ConfigMap with two keys",
			content: `apiVersion: v1
kind: ConfigMap
metadata: {name: volume-policy, namespace: velero}
data:
  a.yaml: "version: v1"
  b.yaml: "version: v1"
`,
			wantOut: []string{"ConfigMap velero/volume-policy: data: has 2 keys (a.yaml, b.yaml); a resource policy ConfigMap holds exactly one data key whose value is the policy YAML"},
			wantErr: "FILE: invalid (1 problem)",
		},
		{
			name:    "another kind is not mistaken for a policy",
			content: "apiVersion: v1\nkind: Secret\nmetadata: {name: x}\n",
			wantOut: []string{
				"apiVersion: unknown key; allowed keys are version, volumePolicies, includeExcludePolicy, namespacedFilterPolicies, clusterScopedFilterPolicy",
				"kind: unknown key; allowed keys are version, volumePolicies, includeExcludePolicy, namespacedFilterPolicies, clusterScopedFilterPolicy",
				"metadata: unknown key; allowed keys are version, volumePolicies, includeExcludePolicy, namespacedFilterPolicies, clusterScopedFilterPolicy",
				"version: missing; use v1",
			},
			wantErr: "FILE: invalid (4 problems)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writePolicyFile(t, tt.content)
			out, _, err := run(t, newTestFactory(nil), "policy", "validate", path)
			wantOut := strings.ReplaceAll(strings.Join(tt.wantOut, "\n")+"\n", "FILE", path)
			if out != wantOut {
				t.Errorf("output:\n%s\nwant:\n%s", out, wantOut)
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tt.wantErr != "" && err == nil:
				t.Errorf("no error, want %q", tt.wantErr)
			case tt.wantErr != "" && err.Error() != strings.ReplaceAll(tt.wantErr, "FILE", path):
				t.Errorf("error %q, want %q", err, strings.ReplaceAll(tt.wantErr, "FILE", path))
			}
		})
	}
}

func TestPolicyValidateReadsStandardInput(t *testing.T) {
	cmd := newRootCommand(newTestFactory(nil))
	var out strings.Builder
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetIn(strings.NewReader(validPolicy))
	cmd.SetArgs([]string{"policy", "validate", "-"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if out.String() != "-: valid (2 volume policies)\n" {
		t.Errorf("output %q", out.String())
	}
}

func TestPolicyValidateMissingFile(t *testing.T) {
	_, _, err := run(t, newTestFactory(nil), "policy", "validate", filepath.Join(t.TempDir(), "nope.yaml"))
	if err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("error %v, want one naming the missing file", err)
	}
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n") + "\n"
}

// A few hundred bytes of nested YAML aliases stand for billions of values;
// validate must refuse them at once, as the server does, whether they are
// in the policy or in the ConfigMap manifest around it (whose decoder
// would expand them too).
func TestPolicyValidateRefusesAliasBombs(t *testing.T) {
	bomb := func(indent string) string {
		var b strings.Builder
		fmt.Fprintf(&b, "%sl0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n", indent)
		for i := 1; i <= 9; i++ {
			refs := strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d, ", i-1), 10), ", ")
			fmt.Fprintf(&b, "%sl%d: &l%d [%s]\n", indent, i, i, refs)
		}
		return b.String()
	}
	tests := []struct {
		name    string
		content string
		want    string
	}{
		{
			name:    "in the policy",
			content: "version: v1\nvolumePolicies:\n- action:\n    type: custom\n    parameters:\n" + bomb("      "),
			want:    "volumePolicies[0].action.parameters.l4[7]: the YAML alias *l3 makes the policy hold more than 100000 values",
		},
		{
			name: "in the manifest",
			content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: volume-policy\n  annotations:\n" + bomb("    ") +
				"data:\n  policy.yaml: |\n" + indent(validPolicy, "    "),
			want: "metadata.annotations.l4[7]: the YAML alias *l3 makes the policy hold more than 100000 values",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writePolicyFile(t, tt.content)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			out, _, err := run(t, newTestFactory(nil), "policy", "validate", path)
			took := time.Since(start)
			runtime.ReadMemStats(&after)
			if err == nil || !strings.HasPrefix(out, tt.want) {
				t.Errorf("output %q, error %v; want %q", out, err, tt.want)
			}
			if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 8<<20 || took > 5*time.Second {
				t.Errorf("took %v and %d MiB to refuse %d bytes", took, allocated>>20, len(tt.content))
			}
		})
	}
}

// Fine-grained filters are counted; --restore refuses what Velero's
// restore refuses (fine-grained-restore-filters.md, example 14).
func TestPolicyValidateFineGrainedFilters(t *testing.T) {
	const doc = `version: v1
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
clusterScopedFilterPolicy:
  resourceFilters:
    - kinds: [StorageClass]
`
	path := writePolicyFile(t, doc)
	out, _, err := run(t, newTestFactory(nil), "policy", "validate", path)
	if err != nil || out != path+": valid (1 volume policy, 1 namespaced filter policy, a cluster-scoped filter policy)\n" {
		t.Errorf("validate: %q, %v", out, err)
	}
	out, _, err = run(t, newTestFactory(nil), "policy", "validate", "--restore", path)
	if err == nil || err.Error() != path+": invalid for a restore (1 problem)" || !strings.HasPrefix(out, "volumePolicies: not supported for restores") {
		t.Errorf("validate --restore: %q, %v", out, err)
	}
}

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// policy validate and explain against a real API server: PVCs of two
// tiers get the actions of two different rules, with reasons. The claims
// are unbound, and Velero reads no storage class from a claim alone, so the
// rules select by label.
func TestPolicyValidateAndExplain(t *testing.T) {
	ns := env.NewNamespace(t, "policy")
	for name, class := range map[string]string{"fast": "gold", "archive": "silver", "other": "bronze"} {
		env.Create(t, &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"tier": class}},
			Spec: corev1.PersistentVolumeClaimSpec{
				StorageClassName: &class,
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		})
	}
	dir := t.TempDir()
	good := filepath.Join(dir, "policy.yaml")
	policyYAML := "version: v1\nvolumePolicies:\n" +
		"- conditions: {pvcLabels: {tier: gold}}\n  action: {type: skip}\n" +
		"- conditions: {pvcLabels: {tier: silver}}\n  action: {type: custom, parameters: {mover: tape, copies: 2}}\n" +
		"- conditions: {storageClass: [bronze]}\n  action: {type: skip}\n"
	if err := os.WriteFile(good, []byte(policyYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := mustLifeboat(t, "policy", "validate", good); !strings.Contains(out, "valid (3 volume policies)") {
		t.Errorf("validate: %s", out)
	}
	bad := filepath.Join(dir, "bad.yaml")
	badYAML := "version: v1\nvolumePolicies:\n- conditions: {capacity: \"10Gi,1Gi\"}\n  action: {type: archive}\n" +
		"- conditions: {csi: {volumeAttributes: {a: b}}}\n  action: {type: skip}\n"
	if err := os.WriteFile(bad, []byte(badYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := lifeboat(t, "policy", "validate", bad)
	if err == nil || !strings.Contains(out, "volumePolicies[0].conditions.capacity") || !strings.Contains(out, "volumePolicies[0].action.type") {
		t.Errorf("validate of a bad policy: %v\n%s", err, out)
	}

	// A backup naming the same policy fails validation with the same
	// messages, and writes nothing.
	bsl, storeDir := env.FilesystemLocation(t, env.Name("fs"))
	cm := env.Name("bad-policy")
	env.Create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: cm}, Data: map[string]string{"policy.yaml": badYAML}})
	b := newBackup(t, bsl.Name, v1.BackupSpec{IncludedNamespaces: []string{ns}, ResourcePolicy: &corev1.TypedLocalObjectReference{Kind: "configmap", Name: cm}})
	if b.Status.Phase != v1.BackupPhaseFailedValidation {
		t.Fatalf("backup with an invalid policy: phase %s, want FailedValidation", b.Status.Phase)
	}
	validation := strings.Join(b.Status.ValidationErrors, "\n")
	lines := 0
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(line, "volumePolicies[") {
			continue
		}
		lines++
		if !strings.Contains(validation, line) {
			t.Errorf("the backup's validation errors lack %q:\n%s", line, validation)
		}
	}
	if lines != 3 || !strings.Contains(validation, "spec.resourcePolicy") || !strings.Contains(validation, "ConfigMap "+env.Namespace+"/"+cm) {
		t.Errorf("policy validate printed %d problems (want 3); validation errors:\n%s", lines, validation)
	}
	if _, err := os.Stat(filepath.Join(storeDir, "lifeboat", "backups", b.Name)); !os.IsNotExist(err) {
		t.Errorf("a backup that failed validation wrote to storage (stat: %v)", err)
	}

	var rows []struct {
		Volume     string         `json:"volume"`
		Action     string         `json:"action"`
		Parameters map[string]any `json:"parameters"`
		Rule       *int           `json:"rule"`
		Reasons    []string       `json:"reasons"`
	}
	if err := json.Unmarshal([]byte(mustLifeboat(t, "policy", "explain", "--policy-file", good, "--include-namespaces", ns, "-o", "json")), &rows); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range rows {
		got[r.Volume] = r.Action
		if r.Volume == "pvc "+ns+"/archive" && (r.Rule == nil || *r.Rule != 1 || r.Parameters["mover"] != "tape") {
			t.Errorf("archive row %+v", r)
		}
		if r.Volume == "pvc "+ns+"/other" && (r.Rule != nil || !strings.Contains(strings.Join(r.Reasons, " "), "no storage class for policies")) {
			t.Errorf("other row %+v: want no rule (an unbound claim has no storage class for policies, as in Velero)", r)
		}
	}
	if got["pvc "+ns+"/fast"] != "skip" || !strings.HasPrefix(got["pvc "+ns+"/archive"], "custom") {
		t.Errorf("actions %v", got)
	}
}

// A resource policy's includeExcludePolicy narrows the backup as in Velero:
// the kinds it excludes are not in the tarball, and a backup combining it
// with the old filters fails validation naming them. What Velero accepts
// but never matches (its own docs' "configmap" volume type) is valid, with
// a warning from policy validate and in the backup's results.
func TestPolicyIncludeExcludeFilters(t *testing.T) {
	ns := env.NewNamespace(t, "ie-policy")
	env.Create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"}, Data: map[string]string{"a": "b"}})
	env.Create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "token"}, StringData: map[string]string{"k": "v"}})
	env.Create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "robot"}})
	policyYAML := "version: v1\nvolumePolicies:\n- conditions: {volumeTypes: [configmap]}\n  action: {type: skip}\n" +
		"includeExcludePolicy:\n  excludedNamespaceScopedResources: [secrets, serviceaccounts]\n"
	file := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(file, []byte(policyYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	out := mustLifeboat(t, "policy", "validate", file)
	if !strings.Contains(out, `warning: volumePolicies[0].conditions.volumeTypes[0]: "configmap"`) || !strings.Contains(out, "valid (1 volume policy, 1 warning)") {
		t.Errorf("validate: %s", out)
	}

	bsl, _ := env.FilesystemLocation(t, env.Name("fs"))
	cm := env.Name("ie-policy")
	env.Create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: cm}, Data: map[string]string{"policy.yaml": policyYAML}})
	ref := &corev1.TypedLocalObjectReference{Kind: "configmap", Name: cm}
	b := newBackup(t, bsl.Name, v1.BackupSpec{IncludedNamespaces: []string{ns}, ResourcePolicy: ref})
	if b.Status.Phase != v1.BackupPhaseCompleted {
		t.Fatalf("backup phase %s (%v), want Completed", b.Status.Phase, b.Status.ValidationErrors)
	}
	paths, _ := archivePaths(t, openStore(t, bsl), b.Name)
	all := strings.Join(paths, "\n")
	for _, excluded := range []string{"resources/secrets/", "resources/serviceaccounts/"} {
		if strings.Contains(all, excluded) {
			t.Errorf("the tarball holds %s, which the policy excludes:\n%s", excluded, all)
		}
	}
	if !strings.Contains(all, "resources/configmaps/namespaces/"+ns+"/settings.json") {
		t.Errorf("the tarball lacks the ConfigMap the policy keeps:\n%s", all)
	}
	if b.Status.Warnings == 0 {
		t.Errorf("the backup has no warnings; the policy's never-matching volume type is one")
	}

	old := newBackup(t, bsl.Name, v1.BackupSpec{IncludedNamespaces: []string{ns}, ExcludedResources: []string{"pods"}, ResourcePolicy: ref})
	validation := strings.Join(old.Status.ValidationErrors, "\n")
	if old.Status.Phase != v1.BackupPhaseFailedValidation || !strings.Contains(validation, "spec.excludedResources") || !strings.Contains(validation, "includeExcludePolicy") {
		t.Errorf("backup with old filters and includeExcludePolicy: phase %s, validation errors:\n%s", old.Status.Phase, validation)
	}
}

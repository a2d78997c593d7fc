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
// storage classes get the actions of two different rules, with reasons.
func TestPolicyValidateAndExplain(t *testing.T) {
	ns := env.NewNamespace(t, "policy")
	for name, class := range map[string]string{"fast": "gold", "archive": "silver", "other": "bronze"} {
		env.Create(t, &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
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
		"- conditions: {storageClass: [gold]}\n  action: {type: skip}\n" +
		"- conditions: {storageClass: [silver]}\n  action: {type: custom, parameters: {mover: tape, copies: 2}}\n"
	if err := os.WriteFile(good, []byte(policyYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := mustLifeboat(t, "policy", "validate", good); !strings.Contains(out, "valid (2 volume policies)") {
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
		if r.Volume == "pvc "+ns+"/other" && (r.Rule != nil || !strings.Contains(strings.Join(r.Reasons, " "), "bronze")) {
			t.Errorf("other row %+v: want no rule, with the storage class named in the reasons", r)
		}
	}
	if got["pvc "+ns+"/fast"] != "skip" || !strings.HasPrefix(got["pvc "+ns+"/archive"], "custom") {
		t.Errorf("actions %v", got)
	}
}

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/testutil/testenv"
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

// Velero's fine-grained filters through the real server: a backup whose
// policy has namespacedFilterPolicies stores, from the namespace an entry
// rules, exactly the kinds, labels and names it allows (everything from a
// namespace without one), and a restore whose spec.resourcePolicy has
// them restores exactly what its entry allows. The shapes are those of
// fine-grained-backup-filters.md's examples 1 and 3 (Velero v1.18.3).
func TestPolicyFineGrainedFilters(t *testing.T) {
	nsA, nsB := env.NewNamespace(t, "fine-a"), env.NewNamespace(t, "fine-b")
	myApp := map[string]string{"app": "my-app"}
	for _, obj := range []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "app-config", Labels: myApp}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "app-settings"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "app-cache-tmp", Labels: myApp}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "monitoring-config", Labels: myApp}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "app-secret", Labels: myApp}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "other-secret"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "robot", Labels: myApp}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: nsB, Name: "monitoring-config"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: nsB, Name: "other-secret"}},
	} {
		env.Create(t, obj)
	}
	backupPolicy := `version: v1
namespacedFilterPolicies:
  - namespaces:
      - ` + nsA + `
    resourceFilters:
      - kinds: [ConfigMap]
        names: ["app-*"]
        excludedNames: ["*-tmp"]
      - kinds: [Secret]
        labelSelector:
          matchLabels:
            app: my-app
`
	file := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(file, []byte(backupPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := mustLifeboat(t, "policy", "validate", file); !strings.Contains(out, "valid (0 volume policies, 1 namespaced filter policy)") {
		t.Errorf("validate: %s", out)
	}

	bsl, _ := env.FilesystemLocation(t, env.Name("fs"))
	cm := env.Name("fine-policy")
	env.Create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: cm}, Data: map[string]string{"policy.yaml": backupPolicy}})
	b := newBackup(t, bsl.Name, v1.BackupSpec{IncludedNamespaces: []string{nsA, nsB}, ResourcePolicy: &corev1.TypedLocalObjectReference{Kind: "configmap", Name: cm}})
	if b.Status.Phase != v1.BackupPhaseCompleted {
		t.Fatalf("backup phase %s (%v), want Completed", b.Status.Phase, b.Status.ValidationErrors)
	}
	// What Velero stores: from nsA the entry's kinds, names and labels;
	// from nsB (no entry) everything of these kinds the namespace holds.
	want := []string{
		"resources/configmaps/namespaces/" + nsA + "/app-config.json",
		"resources/configmaps/namespaces/" + nsA + "/app-settings.json",
		"resources/secrets/namespaces/" + nsA + "/app-secret.json",
	}
	want = append(want, namespacePaths(t, nsB)...)
	slices.Sort(want)
	paths, _ := archivePaths(t, openStore(t, bsl), b.Name)
	var got []string
	for _, p := range paths {
		for _, gr := range []string{"configmaps", "secrets", "serviceaccounts"} {
			for _, ns := range []string{nsA, nsB} {
				if strings.HasPrefix(p, "resources/"+gr+"/namespaces/"+ns+"/") {
					got = append(got, p)
				}
			}
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("the backup stored:\n%s\nVelero stores:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// The restore's policy: from nsA only the ConfigMaps labelled
	// app=my-app (Secrets are not listed); nsB has no entry, so all of it.
	restorePolicy := `version: v1
namespacedFilterPolicies:
  - namespaces: [` + nsA + `]
    resourceFilters:
      - kinds: [ConfigMap]
        labelSelector:
          matchLabels:
            app: my-app
`
	rcm := env.Name("fine-restore-policy")
	env.Create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: rcm}, Data: map[string]string{"policy.yaml": restorePolicy}})
	dstA, dstB := env.Name("fine-a2"), env.Name("fine-b2")
	t.Cleanup(func() {
		for _, ns := range []string{dstA, dstB} {
			_ = env.Client.Delete(testenv.Ctx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		}
	})
	rs := &v1.Restore{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: env.Name("fine-rs")}, Spec: v1.RestoreSpec{
		BackupName:       b.Name,
		NamespaceMapping: map[string]string{nsA: dstA, nsB: dstB},
		ResourcePolicy:   &corev1.TypedLocalObjectReference{Kind: "configmap", Name: rcm},
	}}
	env.Create(t, rs)
	if got := waitRestore(t, rs.Name); got.Status.Phase != v1.RestorePhaseCompleted {
		t.Fatalf("restore: %+v", got.Status)
	}
	restored := func(ns string) []string {
		var out []string
		var cms corev1.ConfigMapList
		var secrets corev1.SecretList
		sel := client.MatchingLabels{v1.RestoreNameLabel: v1.LabelValue(rs.Name)}
		if err := env.Client.List(testenv.Ctx(t), &cms, client.InNamespace(ns), sel); err != nil {
			t.Fatal(err)
		}
		if err := env.Client.List(testenv.Ctx(t), &secrets, client.InNamespace(ns), sel); err != nil {
			t.Fatal(err)
		}
		for _, c := range cms.Items {
			out = append(out, "configmaps/"+c.Name)
		}
		for _, s := range secrets.Items {
			out = append(out, "secrets/"+s.Name)
		}
		slices.Sort(out)
		return out
	}
	if got, want := restored(dstA), []string{"configmaps/app-config"}; !slices.Equal(got, want) {
		t.Errorf("restored into %s: %q, want %q", dstA, got, want)
	}
	var wantB []string
	for _, p := range namespacePaths(t, nsB) {
		parts := strings.Split(p, "/")
		wantB = append(wantB, parts[1]+"/"+strings.TrimSuffix(parts[4], ".json"))
	}
	slices.Sort(wantB)
	if got := restored(dstB); !slices.Equal(got, wantB) {
		t.Errorf("restored into %s: %q, want %q", dstB, got, wantB)
	}

	// A restore's policy may hold only the fine-grained filters, as in
	// Velero.
	bad := &v1.Restore{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: env.Name("fine-bad")}, Spec: v1.RestoreSpec{
		BackupName:     b.Name,
		ResourcePolicy: &corev1.TypedLocalObjectReference{Kind: "configmap", Name: env.Name("fine-volumes")},
	}}
	env.Create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: bad.Spec.ResourcePolicy.Name}, Data: map[string]string{
		"policy.yaml": "version: v1\nvolumePolicies:\n- conditions: {capacity: \"0,10Gi\"}\n  action: {type: skip}\n" + restorePolicy[len("version: v1\n"):],
	}})
	env.Create(t, bad)
	if got := waitRestore(t, bad.Name); got.Status.Phase != v1.RestorePhaseFailedValidation ||
		!strings.Contains(strings.Join(got.Status.ValidationErrors, "\n"), "volumePolicies: not supported for restores") {
		t.Errorf("restore with volume policies: %+v", got.Status)
	}
}

// namespacePaths lists the tarball paths of the ConfigMaps and Secrets ns
// holds now (a cluster's own, such as kube-root-ca.crt, included).
func namespacePaths(t *testing.T, ns string) []string {
	t.Helper()
	var cms corev1.ConfigMapList
	var secrets corev1.SecretList
	if err := env.Client.List(testenv.Ctx(t), &cms, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.List(testenv.Ctx(t), &secrets, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range cms.Items {
		out = append(out, "resources/configmaps/namespaces/"+ns+"/"+c.Name+".json")
	}
	for _, s := range secrets.Items {
		out = append(out, "resources/secrets/namespaces/"+ns+"/"+s.Name+".json")
	}
	return out
}

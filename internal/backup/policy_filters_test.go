package backup

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/results"
	"github.com/lifeboat-io/lifeboat/internal/storage"
)

// A resource policy's includeExcludePolicy narrows what the backup
// collects, as in Velero; what the policy parser accepts but suspects is a
// backup warning.
func TestIncludeExcludePolicyApplied(t *testing.T) {
	f := newFixture(t, 2)
	ctx := context.Background()
	c := f.engine.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "velero"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	mustCreate(t, c, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "token"}, StringData: map[string]string{"k": "v"}})
	mustCreate(t, c, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "robot"}})
	name := f.ns + "-filters"
	mustCreate(t, c, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: name}, Data: map[string]string{"p": `version: v1
volumePolicies:
- conditions: {volumeTypes: [configmap]}
  action: {type: skip}
includeExcludePolicy:
  excludedNamespaceScopedResources: [secrets, sa]
`}})
	b := f.backup("filtered")
	b.Spec.ResourcePolicy = &corev1.TypedLocalObjectReference{Kind: "configmap", Name: name}
	if _, msgs := ValidateVolumes(ctx, c, b); len(msgs) > 0 {
		t.Fatalf("validation: %v", msgs)
	}
	out := f.engine.Run(ctx, b, f.store, nil)
	if out.Phase != v1.BackupPhaseCompleted {
		t.Fatalf("outcome %+v, want Completed", out)
	}
	items := readItems(t, f, "filtered")
	for path := range items {
		if strings.Contains(path, "resources/secrets/") || strings.Contains(path, "resources/serviceaccounts/") {
			t.Errorf("%s is in the backup; the policy excludes it", path)
		}
	}
	if items["resources/configmaps/namespaces/"+f.ns+"/cm-0000.json"] == nil {
		t.Errorf("the policy's excludes dropped the configmaps too: %v", keysOf(items))
	}
	var res results.Results
	if err := f.store.GetGzipJSON(ctx, f.store.BackupKey("filtered", storage.BackupResultsFile("filtered")), &res); err != nil {
		t.Fatal(err)
	}
	if w := strings.Join(append(res.Warnings.Velero, res.Warnings.Cluster...), "\n"); !strings.Contains(w, "volumePolicies[0].conditions.volumeTypes[0]") || !strings.Contains(w, `"configMap"`) {
		t.Errorf("backup warnings %q do not point at the never-matching volume type", w)
	}
}

// Velero refuses includeExcludePolicy beside the old resource filters.
func TestIncludeExcludePolicyWithOldFiltersRefused(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	c := f.engine.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "velero"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	name := f.ns + "-old"
	mustCreate(t, c, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: name}, Data: map[string]string{"p": "version: v1\nincludeExcludePolicy:\n  excludedNamespaceScopedResources: [secrets]\n"}})
	b := f.backup("old")
	b.Spec.ResourcePolicy = &corev1.TypedLocalObjectReference{Kind: "ConfigMap", Name: name}
	b.Spec.ExcludedResources = []string{"pods"}
	includeCluster := false
	b.Spec.IncludeClusterResources = &includeCluster
	_, msgs := ValidateVolumes(ctx, c, b)
	all := strings.Join(msgs, "\n")
	for _, w := range []string{"spec.excludedResources", "spec.includeClusterResources", "includeExcludePolicy"} {
		if !strings.Contains(all, w) {
			t.Errorf("validation messages do not name %s:\n%s", w, all)
		}
	}
}

// Velero's fine-grained filter policies are read and validated but not
// applied yet: a backup naming one is refused, never run without them.
func TestFineGrainedFilterPoliciesRefused(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	c := f.engine.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "velero"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	name := f.ns + "-fine"
	mustCreate(t, c, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: name}, Data: map[string]string{"p": "version: v1\n" +
		"namespacedFilterPolicies:\n- namespaces: [team-*]\n  resourceFilters:\n  - kinds: [Pod]\n" +
		"clusterScopedFilterPolicy:\n  resourceFilters:\n  - kinds: [ClusterRole]\n"}})
	b := f.backup("fine")
	b.Spec.ResourcePolicy = &corev1.TypedLocalObjectReference{Kind: "configmap", Name: name}
	_, msgs := ValidateVolumes(ctx, c, b)
	if all := strings.Join(msgs, "\n"); !strings.Contains(all, "namespacedFilterPolicies, clusterScopedFilterPolicy: not supported by Lifeboat yet") {
		t.Errorf("validation messages:\n%s", all)
	}
}

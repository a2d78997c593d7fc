package backup

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

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

// Velero's fine-grained filters decide what a backup stores: the entry
// for a namespace is an allowlist of kinds with their labels and names, a
// namespace without one keeps the spec's filters, and the cluster-scoped
// policy refines the kinds it lists. Listed namespace by namespace (up to
// three) or across the cluster, the backup stores the same items.
func TestFineGrainedFiltersApplied(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	c := f.engine.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "velero"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	nsA, nsB := f.ns, f.ns+"-b"
	others := []string{f.ns + "-c", f.ns + "-d"}
	for _, ns := range append([]string{nsB}, others...) {
		mustCreate(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	cmap := func(ns, name string, labels map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}}
	}
	secret := func(ns, name string, labels map[string]string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}}
	}
	myApp := map[string]string{"app": "my-app"}
	for _, obj := range []crclient.Object{
		cmap(nsA, "app-config", nil), cmap(nsA, "app-cache-tmp", nil), cmap(nsA, "monitoring-config", myApp),
		cmap(nsA, "app-excluded", map[string]string{"app": "my-app", "velero.io/exclude-from-backup": "true"}),
		secret(nsA, "app-secret", myApp), secret(nsA, "other-secret", nil),
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "robot", Labels: myApp}},
		cmap(nsB, "monitoring-config", nil), secret(nsB, "other-secret", nil),
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: f.ns + "-keep"}, Provisioner: "example.com/none"},
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: f.ns + "-drop"}, Provisioner: "example.com/none"},
	} {
		mustCreate(t, c, obj)
	}
	name := f.ns + "-fine"
	// The shapes of fine-grained-backup-filters.md's examples 1, 3 and 12.
	mustCreate(t, c, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: name}, Data: map[string]string{"policy": `version: v1
namespacedFilterPolicies:
  - namespaces: [` + nsA + `]
    resourceFilters:
      - kinds: [ConfigMap]
        names: ["app-*"]
        excludedNames: ["*-tmp"]
      - kinds: [Secret]
        labelSelector:
          matchLabels:
            app: my-app
clusterScopedFilterPolicy:
  resourceFilters:
    - kinds: [StorageClass]
      names: ["*-keep"]
`}})
	want := []string{
		"resources/configmaps/namespaces/" + nsA + "/app-config.json",
		"resources/configmaps/namespaces/" + nsB + "/monitoring-config.json",
		"resources/secrets/namespaces/" + nsA + "/app-secret.json",
		"resources/secrets/namespaces/" + nsB + "/other-secret.json",
		"resources/storageclasses.storage.k8s.io/cluster/" + f.ns + "-keep.json",
	}
	slices.Sort(want)
	for _, tc := range []struct {
		name       string
		namespaces []string
	}{
		{"per-namespace", []string{nsA, nsB}},
		{"across-the-cluster", append([]string{nsA, nsB}, others...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := f.backup(tc.name)
			b.Spec.IncludedNamespaces = tc.namespaces
			b.Spec.IncludedClusterScopedResources = []string{"storageclasses"}
			b.Spec.ResourcePolicy = &corev1.TypedLocalObjectReference{Kind: "configmap", Name: name}
			if _, msgs := ValidateVolumes(ctx, c, b); len(msgs) > 0 {
				t.Fatalf("validation: %v", msgs)
			}
			out := f.engine.Run(ctx, b, f.store, nil)
			if out.Phase != v1.BackupPhaseCompleted {
				t.Fatalf("outcome %+v, want Completed", out)
			}
			var got []string
			for path := range readItems(t, f, tc.name) {
				if strings.Contains(path, "-preferredversion/") {
					continue
				}
				if strings.Contains(path, "/namespaces/"+f.ns) || strings.Contains(path, "/cluster/"+f.ns+"-") {
					if !strings.HasPrefix(path, "resources/namespaces/") {
						got = append(got, path)
					}
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("stored:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// Velero refuses fine-grained filters beside the old resource filters.
func TestFineGrainedFiltersWithOldFiltersRefused(t *testing.T) {
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
	if _, msgs := ValidateVolumes(ctx, c, b); len(msgs) > 0 {
		t.Fatalf("a policy with fine-grained filters is refused: %v", msgs)
	}
	b.Spec.IncludedResources = []string{"pods"}
	_, msgs := ValidateVolumes(ctx, c, b)
	all := strings.Join(msgs, "\n")
	for _, w := range []string{"spec.includedResources", "namespacedFilterPolicies and clusterScopedFilterPolicy", "includeExcludePolicy"} {
		if !strings.Contains(all, w) {
			t.Errorf("validation messages do not name %s:\n%s", w, all)
		}
	}
}

// A claim's PersistentVolume, added to the backup as an additional item,
// is held to the names of clusterScopedFilterPolicy's PersistentVolume
// rule (never to its labels), as Velero holds additional items.
func TestFineGrainedFiltersAdditionalVolumes(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	c := f.engine.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "velero"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	hostPath := corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/x"}}
	createVolume(t, cs, f.ns, "keep", "standard", hostPath)
	createVolume(t, cs, f.ns, "drop", "standard", hostPath)
	name := f.ns + "-fine"
	mustCreate(t, c, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: name}, Data: map[string]string{"policy": `version: v1
clusterScopedFilterPolicy:
  resourceFilters:
    - kinds: [PersistentVolume]
      names: ["*-keep"]
      labelSelector:
        matchLabels:
          nothing: has-this
`}})
	b := f.backup("volumes")
	b.Spec.ResourcePolicy = &corev1.TypedLocalObjectReference{Kind: "configmap", Name: name}
	noSnapshots := false
	b.Spec.SnapshotVolumes = &noSnapshots
	out := f.engine.Run(ctx, b, f.store, nil)
	if out.Phase != v1.BackupPhaseCompleted {
		t.Fatalf("outcome %+v, want Completed", out)
	}
	items := readItems(t, f, "volumes")
	if items["resources/persistentvolumeclaims/namespaces/"+f.ns+"/keep.json"] == nil || items["resources/persistentvolumeclaims/namespaces/"+f.ns+"/drop.json"] == nil {
		t.Fatalf("claims missing: %v", keysOf(items))
	}
	if items["resources/persistentvolumes/cluster/"+f.ns+"-keep.json"] == nil {
		t.Errorf("the PV whose name the rule allows is missing (labels do not apply to additional items): %v", keysOf(items))
	}
	if items["resources/persistentvolumes/cluster/"+f.ns+"-drop.json"] != nil {
		t.Errorf("the PV whose name the rule leaves out was stored")
	}
}

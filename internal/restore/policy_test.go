package restore

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

func (w *world) policyConfigMap(doc string) string {
	w.t.Helper()
	if _, err := w.cs.CoreV1().Namespaces().Create(ctx(w.t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "velero"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		w.t.Fatal(err)
	}
	name := uniq("policy")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: name}, Data: map[string]string{"policy": doc}}
	if _, err := w.cs.CoreV1().ConfigMaps("velero").Create(ctx(w.t), cm, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
	return name
}

// A restore's resource policy restores, from the backup's namespace it
// names, only the kinds it lists, by their labels and names; the spec's
// label selector does not apply to them (Velero's fine-grained restore
// filters, with the shapes of its documented examples 1 and 3).
func TestFineGrainedRestoreFilters(t *testing.T) {
	w := newWorld(t)
	src, dst := uniq("src"), uniq("dst")
	w.namespace(src)
	myApp := map[string]string{"app": "my-app"}
	core := w.cs.CoreV1()
	for _, c := range []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Name: "app-config", Labels: myApp}},
		{ObjectMeta: metav1.ObjectMeta{Name: "app-cache-tmp", Labels: myApp}},
		{ObjectMeta: metav1.ObjectMeta{Name: "monitoring-config", Labels: myApp}},
	} {
		if _, err := core.ConfigMaps(src).Create(ctx(t), c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "app-secret", Labels: myApp}},
		{ObjectMeta: metav1.ObjectMeta{Name: "other-secret"}},
	} {
		if _, err := core.Secrets(src).Create(ctx(t), s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := core.ServiceAccounts(src).Create(ctx(t), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot", Labels: myApp}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b := w.backupOf(src)
	name := w.policyConfigMap(`version: v1
namespacedFilterPolicies:
  - namespaces: [` + src + `]
    resourceFilters:
      - kinds: [ConfigMap]
        names: ["app-*"]
        excludedNames: ["*-tmp"]
      - kinds: [Secret]
        labelSelector:
          matchLabels:
            app: my-app
`)
	spec := v1.RestoreSpec{
		NamespaceMapping: map[string]string{src: dst},
		ResourcePolicy:   &corev1.TypedLocalObjectReference{Kind: "configmap", Name: name},
		// Replaced by the policy's rules for the kinds it lists.
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "nothing-has-this"}},
	}
	rs := &v1.Restore{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: "check"}, Spec: spec}
	if msgs := ValidatePolicy(ctx(t), newAccess(t).Reader, rs); len(msgs) > 0 {
		t.Fatalf("policy refused: %v", msgs)
	}
	if _, out := w.restore(b, spec); out.Phase != v1.RestorePhaseCompleted {
		t.Fatalf("restore: %+v", out)
	}
	names := func(list []string) []string { slices.Sort(list); return list }
	cms, err := core.ConfigMaps(dst).List(ctx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cms.Items {
		got = append(got, c.Name)
	}
	if want := []string{"app-config"}; !slices.Equal(names(got), want) {
		t.Errorf("configmaps restored %q, want %q", got, want)
	}
	secrets, err := core.Secrets(dst).List(ctx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	for _, s := range secrets.Items {
		got = append(got, s.Name)
	}
	if want := []string{"app-secret"}; !slices.Equal(names(got), want) {
		t.Errorf("secrets restored %q, want %q", got, want)
	}
	if _, err := core.ServiceAccounts(dst).Get(ctx(t), "robot", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the service account, a kind the entry does not list, was restored (err %v)", err)
	}
}

// Velero refuses a restore's policy with volume policies or an
// includeExcludePolicy, one of another kind than configmap, and one whose
// ConfigMap is missing.
func TestRestorePolicyRefused(t *testing.T) {
	w := newWorld(t)
	withVolumes := w.policyConfigMap("version: v1\nvolumePolicies:\n- conditions: {capacity: \"0,10Gi\"}\n  action: {type: skip}\n" +
		"namespacedFilterPolicies:\n- namespaces: [production]\n  resourceFilters:\n  - kinds: [ConfigMap]\n")
	for _, tc := range []struct {
		ref  corev1.TypedLocalObjectReference
		want string
	}{
		{corev1.TypedLocalObjectReference{Kind: "configmap", Name: withVolumes}, "volumePolicies: not supported for restores"},
		{corev1.TypedLocalObjectReference{Kind: "Secret", Name: withVolumes}, `spec.resourcePolicy.kind "Secret" is not supported`},
		{corev1.TypedLocalObjectReference{Kind: "ConfigMap", Name: "no-such-policy"}, "not found"},
	} {
		rs := &v1.Restore{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: "r"}, Spec: v1.RestoreSpec{BackupName: "b", ResourcePolicy: &tc.ref}}
		msgs := ValidatePolicy(ctx(t), newAccess(t).Reader, rs)
		if all := strings.Join(msgs, "\n"); !strings.Contains(all, tc.want) {
			t.Errorf("%+v: messages %q do not say %q", tc.ref, all, tc.want)
		}
	}
}

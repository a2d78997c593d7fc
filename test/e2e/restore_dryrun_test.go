package e2e

import (
	"maps"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/testutil/testenv"
)

// namespaceState is every object of the test's types in ns, with its
// resourceVersion.
func namespaceState(t *testing.T, ns string) map[string]string {
	t.Helper()
	state := map[string]string{}
	lists := map[string]client.ObjectList{
		"configmaps": &corev1.ConfigMapList{}, "secrets": &corev1.SecretList{}, "serviceaccounts": &corev1.ServiceAccountList{},
		"services": &corev1.ServiceList{}, "deployments": &appsv1.DeploymentList{}, "resourcequotas": &corev1.ResourceQuotaList{},
	}
	for kind, list := range lists {
		if err := env.Client.List(testenv.Ctx(t), list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		err := meta.EachListItem(list, func(o runtime.Object) error {
			m, err := meta.Accessor(o)
			if err == nil {
				state[kind+" "+m.GetName()] = m.GetResourceVersion()
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var nsObj corev1.Namespace
	if err := env.Client.Get(testenv.Ctx(t), client.ObjectKey{Name: ns}, &nsObj); err != nil {
		t.Fatal(err)
	}
	state["namespace"] = nsObj.ResourceVersion
	return state
}

// TestRestoreDryRun: `restore create --dry-run` into a namespace where a
// resource quota leaves room for no ConfigMap and one object exists
// changed: the ConfigMap is reported as failing with the quota's error,
// the changed object as skipped, the rest as created; the CLI exits
// non-zero, `restore describe` and `restore get` show the dry run, and not
// one object of the namespace changes.
func TestRestoreDryRun(t *testing.T) {
	bsl, _ := env.FilesystemLocation(t, env.Name("fs"))
	src := env.NewNamespace(t, "drsrc")
	sampleApp(t, src)
	name := env.Name("drbk")
	mustLifeboat(t, "backup", "create", name, "--include-namespaces", src, "--storage-location", bsl.Name, "--wait")

	dst := env.NewNamespace(t, "drdst")
	env.Create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: dst, Name: "token", Labels: map[string]string{"app": "demo"}},
		StringData: map[string]string{"token": "changed"}})
	// No quota controller runs here: the quota's usage is written by hand,
	// as the controller would, with the one ConfigMap allowed used up.
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: dst, Name: "no-more-configmaps"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/configmaps": resource.MustParse("1")}}}
	env.Create(t, quota)
	quota.Status = corev1.ResourceQuotaStatus{
		Hard: corev1.ResourceList{"count/configmaps": resource.MustParse("1")},
		Used: corev1.ResourceList{"count/configmaps": resource.MustParse("1")},
	}
	if err := env.Client.Status().Update(testenv.Ctx(t), quota); err != nil {
		t.Fatal(err)
	}

	before := namespaceState(t, dst)
	restoreName := env.Name("drrs")
	out, err := lifeboat(t, "restore", "create", restoreName, "--from-backup", name, "--namespace-mappings", src+":"+dst, "--dry-run")
	if err == nil || !strings.Contains(err.Error(), "items that would fail to restore: 1") {
		t.Errorf("restore create --dry-run with an item that would fail: error %v, want one naming the count:\n%s", err, out)
	}
	if !strings.Contains(out, "(dry run, nothing was written)") {
		t.Errorf("restore create --dry-run output does not say it was a dry run:\n%s", out)
	}
	for _, want := range [][]string{
		{"Would fail:", " 1"},
		{"Fail", "configmaps " + dst + "/settings: ", "exceeded quota: no-more-configmaps"},
		{"Skip", "secrets " + dst + "/token: it exists and differs from the backup"},
		{"Create", "deployments.apps " + dst + "/web"},
	} {
		if !hasLineWith(out, want...) {
			t.Errorf("restore create --dry-run output has no line with %q:\n%s", want, out)
		}
	}
	after := namespaceState(t, dst)
	if !maps.Equal(before, after) {
		t.Errorf("the dry run changed namespace %s:\nbefore %v\nafter  %v", dst, before, after)
	}

	var rs v1.Restore
	if err := env.Client.Get(testenv.Ctx(t), clientKey(restoreName), &rs); err != nil {
		t.Fatal(err)
	}
	if !rs.Spec.DryRun || rs.Status.DryRun == nil || rs.Status.DryRun.WouldFail != 1 || rs.Status.DryRun.WouldSkip != 3 {
		t.Errorf("the Restore's dry run: spec %v, status %+v (want 1 failing; the secret, the existing namespace and the widgets' CRD skipped)", rs.Spec.DryRun, rs.Status.DryRun)
	}
	got := mustLifeboat(t, "restore", "describe", restoreName)
	for _, want := range []string{"Dry run:", "Dry run result:", "Would create:", "exceeded quota"} {
		if !strings.Contains(got, want) {
			t.Errorf("restore describe lacks %q:\n%s", want, got)
		}
	}
	got = mustLifeboat(t, "restore", "get", restoreName)
	if !strings.Contains(got, "PartiallyFailed (dry run)") {
		t.Errorf("restore get does not mark the dry run:\n%s", got)
	}

	// Without the quota the same dry run would restore everything but the
	// changed Secret: exit 0.
	if err := env.Client.Delete(testenv.Ctx(t), quota); err != nil {
		t.Fatal(err)
	}
	out = mustLifeboat(t, "restore", "create", env.Name("drrs"), "--from-backup", name, "--namespace-mappings", src+":"+dst, "--dry-run")
	if !hasLineWith(out, "Would fail:", " 0") {
		t.Errorf("second dry run:\n%s", out)
	}
	var cms corev1.ConfigMapList
	if err := env.Client.List(testenv.Ctx(t), &cms, client.InNamespace(dst)); err != nil {
		t.Fatal(err)
	}
	if len(cms.Items) != 0 {
		t.Errorf("the dry runs left %d ConfigMaps in %s", len(cms.Items), dst)
	}
}

// hasLineWith reports whether one line of out holds every part.
func hasLineWith(out string, parts ...string) bool {
	for line := range strings.Lines(out) {
		if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(line, p) }) {
			return true
		}
	}
	return false
}

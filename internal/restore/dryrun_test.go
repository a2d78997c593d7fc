package restore

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/ptr"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/storage"
)

// clusterState is every object of the cluster by type and name, with its
// resourceVersion: a dry run must leave it exactly as it was. Leases
// (renewed by the API server itself) and events are left out.
func clusterState(t *testing.T) map[string]string {
	t.Helper()
	dc := discovery.NewDiscoveryClientForConfigOrDie(cfg)
	lists, err := dc.ServerPreferredResources()
	if err != nil {
		t.Fatal(err)
	}
	dyn := newWorld(t).dyn
	state := map[string]string{}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		for _, res := range l.APIResources {
			if !slices.Contains(res.Verbs, "list") || strings.Contains(res.Name, "/") ||
				gv.Group == "coordination.k8s.io" || res.Name == "events" {
				continue
			}
			gvr := gv.WithResource(res.Name)
			items, err := dyn.Resource(gvr).List(ctx(t), metav1.ListOptions{})
			if err != nil {
				t.Fatalf("listing %s: %v", gvr, err)
			}
			for _, it := range items.Items {
				state[gvr.String()+" "+qualified(it.GetNamespace(), it.GetName())] = it.GetResourceVersion()
			}
		}
	}
	return state
}

func diffStates(before, after map[string]string) []string {
	var diff []string
	for k, rv := range after {
		if b, ok := before[k]; !ok {
			diff = append(diff, "added "+k)
		} else if b != rv {
			diff = append(diff, "changed "+k)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			diff = append(diff, "removed "+k)
		}
	}
	slices.Sort(diff)
	return diff
}

var gadgets = schema.GroupVersionResource{Group: "dryrun.lifeboat.io", Version: "v1", Resource: "gadgets"}

// gadgetCRD defines a custom resource the test takes away after the
// backup, so that the restore meets a type the cluster does not serve.
func (w *world) gadgetCRD() {
	w.t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "gadgets.dryrun.lifeboat.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: gadgets.Group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gadgets", Singular: "gadget", Kind: "Gadget", ListKind: "GadgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true),
				}},
			}},
		},
	}
	u, err := toUnstructured(crd)
	if err != nil {
		w.t.Fatal(err)
	}
	crds := w.dyn.Resource(grCRDs.WithVersion("v1"))
	if _, err := crds.Create(ctx(w.t), u, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx(w.t), 100*time.Millisecond, time.Minute, true, func(c context.Context) (bool, error) {
		got, err := crds.Get(c, crd.Name, metav1.GetOptions{})
		return err == nil && established(got), nil
	})
	if err != nil {
		w.t.Fatalf("CRD not established: %v", err)
	}
}

// denyConfigMaps makes the API server refuse ConfigMaps labelled
// dry-run-test=deny, through a ValidatingAdmissionPolicy.
func (w *world) denyConfigMaps() {
	w.t.Helper()
	name := uniq("deny-cm")
	ar := w.cs.AdmissionregistrationV1()
	_, err := ar.ValidatingAdmissionPolicies().Create(ctx(w.t), &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: `!has(object.metadata.labels) || !('dry-run-test' in object.metadata.labels) || object.metadata.labels['dry-run-test'] != 'deny'`,
				Message:    "configmaps labelled dry-run-test=deny are refused",
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	_, err = ar.ValidatingAdmissionPolicyBindings().Create(ctx(w.t), &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: name, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = ar.ValidatingAdmissionPolicyBindings().Delete(c, name, metav1.DeleteOptions{})
		_ = ar.ValidatingAdmissionPolicies().Delete(c, name, metav1.DeleteOptions{})
	})
	// The policy takes effect once the API server has loaded it: wait
	// until a dry-run create of a labelled ConfigMap is refused.
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-", Labels: map[string]string{"dry-run-test": "deny"}}}
	err = wait.PollUntilContextTimeout(ctx(w.t), 200*time.Millisecond, time.Minute, true, func(c context.Context) (bool, error) {
		_, err := w.cs.CoreV1().ConfigMaps("default").Create(c, probe, metav1.CreateOptions{DryRun: dryRunAll})
		return apierrors.IsInvalid(err) || apierrors.IsForbidden(err), nil
	})
	if err != nil {
		w.t.Fatalf("the admission policy never took effect: %v", err)
	}
}

func byName(d *v1.RestoreDryRun) map[string]v1.RestoreDryRunItem {
	out := map[string]v1.RestoreDryRunItem{}
	for _, it := range d.Items {
		out[it.Resource+" "+qualified(it.Namespace, it.Name)] = it
	}
	return out
}

// TestDryRunReportsEachItemAndChangesNothing restores a backup as a dry
// run into a namespace where it would meet each kind of trouble: an
// object that exists and differs (existingResourcePolicy none), one that
// a validating admission policy refuses, one of a type the cluster no
// longer serves. Each is reported with its reason, the rest would be
// created, and not one object of the cluster changes.
func TestDryRunReportsEachItemAndChangesNothing(t *testing.T) {
	w := newWorld(t)
	src, dst := uniq("src"), uniq("dst")
	w.namespace(src)
	w.app(src)
	cms := w.cs.CoreV1().ConfigMaps(src)
	for _, cm := range []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Name: "fresh"}, Data: map[string]string{"k": "v"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "refused", Labels: map[string]string{"dry-run-test": "deny"}}},
	} {
		if _, err := cms.Create(ctx(t), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	w.gadgetCRD()
	gadget := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "dryrun.lifeboat.io/v1", "kind": "Gadget", "metadata": map[string]any{"name": "widget-maker"},
	}}
	if _, err := w.dyn.Resource(gadgets).Namespace(src).Create(ctx(t), gadget, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b := w.backupOf(src)
	if err := w.dyn.Resource(grCRDs.WithVersion("v1")).Delete(ctx(t), "gadgets.dryrun.lifeboat.io", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx(t), 200*time.Millisecond, time.Minute, true, func(c context.Context) (bool, error) {
		_, err := w.dyn.Resource(gadgets).Namespace(src).List(c, metav1.ListOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("gadgets still served: %v", err)
	}
	w.denyConfigMaps()
	// The target namespace exists and holds a changed copy of one object.
	w.namespace(dst)
	if _, err := w.cs.CoreV1().ConfigMaps(dst).Create(ctx(t), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "settings", Labels: map[string]string{"app": "shop"}}, Data: map[string]string{"a": "changed"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	before := clusterState(t)
	rs, out := w.restore(b, v1.RestoreSpec{
		DryRun: true, NamespaceMapping: map[string]string{src: dst},
		// The gadget's CRD stays out, so the restore meets a type the
		// cluster does not serve.
		ExcludedResources: []string{"customresourcedefinitions"},
	})
	after := clusterState(t)
	if d := diffStates(before, after); len(d) > 0 {
		t.Errorf("the dry run changed the cluster: %q", d)
	}

	if out.DryRun == nil {
		t.Fatalf("a dry run's outcome has no dry-run record: %+v", out)
	}
	d := out.DryRun
	items := byName(d)
	want := map[string]v1.DryRunOutcome{
		"configmaps " + dst + "/fresh":                        v1.DryRunCreate,
		"configmaps " + dst + "/refused":                      v1.DryRunFail,
		"configmaps " + dst + "/settings":                     v1.DryRunSkip,
		"gadgets.dryrun.lifeboat.io " + dst + "/widget-maker": v1.DryRunFail,
		"secrets " + dst + "/token":                           v1.DryRunCreate,
		"serviceaccounts " + dst + "/runner":                  v1.DryRunCreate,
		"services " + dst + "/web":                            v1.DryRunCreate,
		"deployments.apps " + dst + "/web":                    v1.DryRunCreate,
		"widgets.restore.lifeboat.io " + dst + "/gizmo":       v1.DryRunCreate,
		// The backup's namespace object, mapped: it exists.
		"namespaces " + dst: v1.DryRunSkip,
	}
	for k, o := range want {
		if got, ok := items[k]; !ok || got.Outcome != o {
			t.Errorf("item %s: %+v, want outcome %s", k, got, o)
		}
	}
	if msg := items["configmaps "+dst+"/refused"].Message; !strings.Contains(msg, "configmaps labelled dry-run-test=deny are refused") {
		t.Errorf("the refused ConfigMap's message %q does not carry the API server's", msg)
	}
	if msg := items["configmaps "+dst+"/settings"].Message; !strings.Contains(msg, "existingResourcePolicy none") {
		t.Errorf("the existing ConfigMap's message %q does not say why it is skipped", msg)
	}
	if msg := items["gadgets.dryrun.lifeboat.io "+dst+"/widget-maker"].Message; !strings.Contains(msg, "gadgets.dryrun.lifeboat.io") {
		t.Errorf("the gadget's message %q does not name its type", msg)
	}
	// The ServiceAccount's token ConfigMap kube-root-ca.crt is not in the
	// backup's namespace (no controller runs here), so these are all.
	if d.WouldFail != 2 || d.WouldSkip != 2 || d.WouldUpdate != 0 || d.Unchecked != 0 || len(d.Items) != len(want) || d.Truncated {
		t.Errorf("counts %+v with %d items, want 2 failing, 2 skipped, %d in all", *d, len(d.Items), len(want))
	}
	if out.Phase != v1.RestorePhasePartiallyFailed || out.Errors != 2 {
		t.Errorf("phase %s with %d errors, want PartiallyFailed with the 2 failing items", out.Phase, out.Errors)
	}
	// The stored resource list says what would happen, never "created".
	list := map[string][]string{}
	if err := w.store.GetGzipJSON(ctx(t), w.store.RestoreKey(rs.Name, storage.RestoreResourceListFile(rs.Name)), &list); err != nil {
		t.Fatal(err)
	}
	if got := list["v1/ConfigMap"]; !slices.Contains(got, dst+"/fresh(would create)") || !slices.Contains(got, dst+"/settings(would skip)") {
		t.Errorf("resource list v1/ConfigMap = %q", got)
	}

	// With existingResourcePolicy update, the changed ConfigMap would be
	// patched (a dry-run patch), and still nothing changes.
	before = clusterState(t)
	_, out = w.restore(b, v1.RestoreSpec{
		DryRun: true, NamespaceMapping: map[string]string{src: dst}, ExistingResourcePolicy: v1.PolicyTypeUpdate,
		IncludedResources: []string{"configmaps"},
	})
	if d := diffStates(before, clusterState(t)); len(d) > 0 {
		t.Errorf("the dry run with update changed the cluster: %q", d)
	}
	if got := byName(out.DryRun)["configmaps "+dst+"/settings"]; got.Outcome != v1.DryRunUpdate {
		t.Errorf("existing, differing ConfigMap under update: %+v, want Update", got)
	}
	if cm, err := w.cs.CoreV1().ConfigMaps(dst).Get(ctx(t), "settings", metav1.GetOptions{}); err != nil || cm.Data["a"] != "changed" {
		t.Errorf("the dry run changed the live ConfigMap: %v %v", cm.Data, err)
	}

	// The real restore meets what the dry run foretold, and its error
	// carries the API server's message too (not only its status code).
	rs, out = w.restore(b, v1.RestoreSpec{NamespaceMapping: map[string]string{src: dst}, IncludedResources: []string{"configmaps"}})
	if out.Phase != v1.RestorePhasePartiallyFailed || out.Errors != 1 || out.DryRun != nil {
		t.Fatalf("real restore: %+v, want PartiallyFailed with the refused ConfigMap's error", out)
	}
	if errs := w.results(rs).Errors.Namespaces[dst]; len(errs) != 1 || !strings.Contains(errs[0], "configmaps labelled dry-run-test=deny are refused") {
		t.Errorf("the real restore's errors %q do not carry the API server's message", errs)
	}
	if _, err := w.cs.CoreV1().ConfigMaps(dst).Get(ctx(t), "fresh", metav1.GetOptions{}); err != nil {
		t.Errorf("the real restore did not create what the dry run said it would: %v", err)
	}
}

// TestDryRunIntoANewNamespace: the API server refuses creates in a
// namespace that does not exist, dry run or not, so the items of a
// namespace the restore would create are reported unchecked, not as
// failing; and a CRD the restore would create makes its custom resources
// unchecked too.
func TestDryRunIntoANewNamespace(t *testing.T) {
	w := newWorld(t)
	src, dst := uniq("src"), uniq("dst")
	w.namespace(src)
	w.gadgetCRD2(src)
	b := w.backupOf(src)
	w.removeCRD("doohickeys.dryrun.lifeboat.io")

	before := clusterState(t)
	_, out := w.restore(b, v1.RestoreSpec{DryRun: true, NamespaceMapping: map[string]string{src: dst}})
	if d := diffStates(before, clusterState(t)); len(d) > 0 {
		t.Errorf("the dry run changed the cluster: %q", d)
	}
	if out.Phase != v1.RestorePhaseCompleted || out.DryRun == nil {
		t.Fatalf("outcome %+v", out)
	}
	items := byName(out.DryRun)
	for _, k := range []string{"configmaps " + dst + "/plain", "doohickeys.dryrun.lifeboat.io " + dst + "/thing"} {
		it := items[k]
		if it.Outcome != v1.DryRunCreate || !strings.HasPrefix(it.Message, "not checked") {
			t.Errorf("item %s: %+v, want an unchecked Create", k, it)
		}
	}
	if it := items["customresourcedefinitions.apiextensions.k8s.io doohickeys.dryrun.lifeboat.io"]; it.Outcome != v1.DryRunCreate || it.Message != "" {
		t.Errorf("the CRD: %+v, want a checked Create", it)
	}
	if it := items["namespaces "+dst]; it.Outcome != v1.DryRunCreate || it.Message != "" {
		t.Errorf("the namespace: %+v, want a checked Create", it)
	}
	if out.DryRun.Unchecked != 2 || out.DryRun.WouldFail != 0 {
		t.Errorf("counts %+v, want 2 unchecked and none failing", *out.DryRun)
	}
}

// gadgetCRD2 makes a second type (doohickeys) with one object in ns and a
// ConfigMap beside it.
func (w *world) gadgetCRD2(ns string) {
	w.t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "doohickeys.dryrun.lifeboat.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "dryrun.lifeboat.io", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "doohickeys", Singular: "doohickey", Kind: "Doohickey", ListKind: "DoohickeyList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true),
				}},
			}},
		},
	}
	u, err := toUnstructured(crd)
	if err != nil {
		w.t.Fatal(err)
	}
	crds := w.dyn.Resource(grCRDs.WithVersion("v1"))
	if _, err := crds.Create(ctx(w.t), u, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
	doohickeys := schema.GroupVersionResource{Group: "dryrun.lifeboat.io", Version: "v1", Resource: "doohickeys"}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "dryrun.lifeboat.io/v1", "kind": "Doohickey", "metadata": map[string]any{"name": "thing"},
	}}
	err = wait.PollUntilContextTimeout(ctx(w.t), 200*time.Millisecond, time.Minute, true, func(c context.Context) (bool, error) {
		_, err := w.dyn.Resource(doohickeys).Namespace(ns).Create(c, obj, metav1.CreateOptions{})
		return err == nil, nil
	})
	if err != nil {
		w.t.Fatalf("creating a doohickey: %v", err)
	}
	if _, err := w.cs.CoreV1().ConfigMaps(ns).Create(ctx(w.t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "plain"}}, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

// removeCRD deletes a CRD and waits until its type is no longer served.
func (w *world) removeCRD(name string) {
	w.t.Helper()
	crds := w.dyn.Resource(grCRDs.WithVersion("v1"))
	if err := crds.Delete(ctx(w.t), name, metav1.DeleteOptions{}); err != nil {
		w.t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx(w.t), 200*time.Millisecond, time.Minute, true, func(c context.Context) (bool, error) {
		_, err := crds.Get(c, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		w.t.Fatalf("CRD %s not gone: %v", name, err)
	}
}

func TestDryRunResultListsNotableItemsFirstAndStaysBounded(t *testing.T) {
	d := newDryRun()
	gr := schema.GroupResource{Resource: "configmaps"}
	for i := range v1.RestoreDryRunMaxItems + 10 {
		d.add(gr, "ns", fmt.Sprintf("cm-%05d", i), v1.DryRunCreate, "", false)
	}
	d.add(gr, "ns", "zz-fails", v1.DryRunFail, "refused", false)
	d.add(gr, "ns", "zz-new", v1.DryRunCreate, "not checked: …", true)
	got := d.result()
	if got.WouldCreate != v1.RestoreDryRunMaxItems+11 || got.WouldFail != 1 || got.Unchecked != 1 {
		t.Errorf("counts %+v", *got)
	}
	if len(got.Items) != v1.RestoreDryRunMaxItems || !got.Truncated {
		t.Fatalf("%d items, truncated %v; want %d and true", len(got.Items), got.Truncated, v1.RestoreDryRunMaxItems)
	}
	if got.Items[0].Name != "zz-fails" || got.Items[1].Name != "zz-new" || got.Items[2].Name != "cm-00000" {
		t.Errorf("first items %+v, want the failing one, the unchecked one, then the creates in order", got.Items[:3])
	}
	seen := map[string]bool{}
	for _, it := range got.Items {
		seen[it.Name] = true
	}
	if len(seen) != len(got.Items) {
		t.Errorf("items listed twice: %v", slices.Sorted(maps.Keys(seen)))
	}
}

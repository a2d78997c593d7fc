package main

import (
	"errors"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	discoveryfake "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/framework"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/plugintest"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// fakeClients is a cluster that serves receipts when crd is true.
func fakeClients(crd bool) (*clients, *dynamicfake.FakeDynamicClient) {
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{ReceiptResource: "ReceiptList"})
	disc := &discoveryfake.FakeDiscovery{Fake: &clienttesting.Fake{}}
	if crd {
		disc.Resources = []*metav1.APIResourceList{{
			GroupVersion: ReceiptResource.GroupVersion().String(),
			APIResources: []metav1.APIResource{{Name: "receipts", Namespaced: true, Kind: ReceiptKind}},
		}}
	} else {
		// What the API server answers for a resource it does not serve.
		dyn.PrependReactor("create", "receipts", func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewNotFound(ReceiptResource.GroupResource(), "")
		})
	}
	return &clients{dynamic: dyn, discovery: disc}, dyn
}

func configMap(ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// Both plugins called as the server calls them: served in process by
// plugintest, through the plugin protocol, with a fake cluster behind them.
func TestReceiptIsACustomResourceTheCleanupDeletes(t *testing.T) {
	c, dyn := fakeClients(true)
	at := time.Date(2026, 11, 29, 18, 10, 41, 0, time.UTC)
	b := &v1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "nightly"}}
	r := plugintest.BackupItemAction(t, ReceiptName, &receipt{log: quiet, clients: c, now: func() time.Time { return at }})

	out, extra, err := r.Execute(configMap("shop", "settings"), b)
	if err != nil || extra != nil {
		t.Fatalf("Execute: %v (additional items %v)", err, extra)
	}
	if !reflect.DeepEqual(out.UnstructuredContent(), configMap("shop", "settings").Object) {
		t.Errorf("the stored item changed: %v", out.UnstructuredContent())
	}
	name := ReceiptObjectName("nightly", "shop", "settings")
	got, err := dyn.Resource(ReceiptResource).Namespace("shop").Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("no receipt %s: %v", name, err)
	}
	if got.GetKind() != "Receipt" || got.GetAPIVersion() != "example.lifeboat.io/v1" {
		t.Errorf("receipt is %s %s", got.GetAPIVersion(), got.GetKind())
	}
	spec, _, _ := unstructured.NestedStringMap(got.Object, "spec")
	if want := map[string]string{"backup": "nightly", "configMap": "settings", "backedUpAt": "2026-11-29T18:10:41Z"}; !maps.Equal(spec, want) {
		t.Errorf("spec %v, want %v", spec, want)
	}
	l := got.GetLabels()
	if l[v1.BackupNameLabel] != "nightly" || l[ReceiptLabel] != "true" || l[ExcludeFromBackupLabel] != "true" {
		t.Errorf("labels %v", l)
	}
	// A retried backup creates nothing twice and does not fail.
	if _, _, err := r.Execute(configMap("shop", "settings"), b); err != nil {
		t.Errorf("second Execute: %v", err)
	}

	log := filepath.Join(t.TempDir(), "calls")
	cl := plugintest.DeleteItemAction(t, CleanupName, &cleanup{log: quiet, clients: c, callLog: log})
	in := &api.DeleteItemActionExecuteInput{Item: configMap("shop", "settings"), Backup: b}
	if err := cl.Execute(in); err != nil {
		t.Fatalf("cleanup: %v", err)
	}
	if _, err := dyn.Resource(ReceiptResource).Namespace("shop").Get(t.Context(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("receipt still there after cleanup (%v)", err)
	}
	// Deletions are retried: the receipt being gone already is success.
	if err := cl.Execute(in); err != nil {
		t.Errorf("cleanup of a receipt already gone: %v", err)
	}
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if want := "nightly configmaps shop/settings ok\nnightly configmaps shop/settings ok\n"; string(data) != want {
		t.Errorf("call log %q, want %q", data, want)
	}
}

// The binary serves both plugins under their names; a plugin whose
// initializer cannot reach a cluster fails its calls saying so, and the
// server sees the plugin's error.
func TestServesBothPlugins(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	conn := plugintest.Serve(t, newServer())
	var got []string
	for _, id := range conn.Plugins() {
		got = append(got, string(id.Kind)+" "+id.Name)
	}
	if want := []string{"BackupItemAction " + ReceiptName, "DeleteItemAction " + CleanupName}; !slices.Equal(got, want) {
		t.Errorf("the binary serves %q, want %q", got, want)
	}
	err := conn.DeleteItemAction(CleanupName).Execute(&api.DeleteItemActionExecuteInput{Item: configMap("shop", "a"), Backup: &v1.Backup{}})
	var pe *framework.PluginError
	if !errors.As(err, &pe) || pe.Name != CleanupName || !strings.Contains(pe.Message(), "KUBECONFIG is not set") {
		t.Errorf("Execute without a cluster: %v, want the plugin's error saying KUBECONFIG is not set", err)
	}
}

func TestLongBackupNamesAreLabelledAsVeleroDoes(t *testing.T) {
	long := strings.Repeat("b", 70)
	rec := NewReceipt(long, "shop", "settings", time.Now())
	if got := rec.GetLabels()[v1.BackupNameLabel]; got != v1.LabelValue(long) || len(got) > 63 {
		t.Errorf("label %q, want %q", got, v1.LabelValue(long))
	}
}

func TestMissingCRDFailsTheItemSayingWhatToApply(t *testing.T) {
	c, _ := fakeClients(false)
	r := &receipt{log: quiet, clients: c, now: time.Now}
	_, _, err := r.Execute(configMap("shop", "settings"), &v1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "nightly"}})
	if !errors.Is(err, ErrCRDMissing) || !strings.Contains(err.Error(), "receipt-crd.yaml") || !strings.Contains(err.Error(), "settings") {
		t.Errorf("error %v: want the ConfigMap named and receipt-crd.yaml to apply", err)
	}
}

func TestOtherErrorsAreReturned(t *testing.T) {
	c, dyn := fakeClients(true)
	boom := apierrors.NewForbidden(ReceiptResource.GroupResource(), "x", errors.New("no"))
	for _, verb := range []string{"create", "delete"} {
		dyn.PrependReactor(verb, "receipts", func(clienttesting.Action) (bool, runtime.Object, error) { return true, nil, boom })
	}
	b := &v1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "nightly"}}
	if _, _, err := (&receipt{log: quiet, clients: c, now: time.Now}).Execute(configMap("shop", "a"), b); !apierrors.IsForbidden(err) || errors.Is(err, ErrCRDMissing) {
		t.Errorf("create: %v, want the Forbidden error", err)
	}
	log := filepath.Join(t.TempDir(), "calls")
	err := (&cleanup{log: quiet, clients: c, callLog: log}).Execute(&api.DeleteItemActionExecuteInput{Item: configMap("shop", "a"), Backup: b})
	if !apierrors.IsForbidden(err) {
		t.Errorf("delete: %v, want the Forbidden error", err)
	}
	if data, _ := os.ReadFile(log); string(data) != "nightly configmaps shop/a error\n" {
		t.Errorf("call log %q", data)
	}
}

// The CRD shipped next to the plugin defines every field the plugin
// writes, with a real schema.
func TestReceiptCRDMatchesWhatThePluginWrites(t *testing.T) {
	data, err := os.ReadFile("receipt-crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(data, &crd); err != nil {
		t.Fatalf("receipt-crd.yaml: %v", err)
	}
	s := crd.Spec
	if crd.Name != ReceiptResource.Resource+"."+ReceiptResource.Group || s.Group != ReceiptResource.Group ||
		s.Names.Plural != ReceiptResource.Resource || s.Names.Kind != ReceiptKind || s.Scope != apiextensionsv1.NamespaceScoped {
		t.Fatalf("CRD %s: group %s names %+v scope %s", crd.Name, s.Group, s.Names, s.Scope)
	}
	if len(s.Versions) != 1 || s.Versions[0].Name != ReceiptResource.Version || !s.Versions[0].Served || !s.Versions[0].Storage {
		t.Fatalf("versions %+v", s.Versions)
	}
	root := s.Versions[0].Schema.OpenAPIV3Schema
	if root.XPreserveUnknownFields != nil {
		t.Error("the schema preserves unknown fields; it should define them")
	}
	spec := root.Properties["spec"]
	if spec.XPreserveUnknownFields != nil {
		t.Error("spec preserves unknown fields; it should define them")
	}
	written, _, _ := unstructured.NestedStringMap(NewReceipt("nightly", "shop", "settings", time.Now()).Object, "spec")
	var fields []string
	for f := range written {
		fields = append(fields, f)
		if spec.Properties[f].Type != "string" {
			t.Errorf("spec.%s: type %q in the CRD", f, spec.Properties[f].Type)
		}
	}
	slices.Sort(fields)
	slices.Sort(spec.Required)
	if !slices.Equal(fields, spec.Required) || len(spec.Properties) != len(fields) {
		t.Errorf("the plugin writes spec fields %v; the CRD requires %v and defines %d", fields, spec.Required, len(spec.Properties))
	}
	if spec.Properties["backedUpAt"].Format != "date-time" {
		t.Errorf("spec.backedUpAt format %q, want date-time", spec.Properties["backedUpAt"].Format)
	}
}

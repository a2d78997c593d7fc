package main

import (
	"log/slog"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/plugintest"
)

func configMap() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "settings", "namespace": "shop", "annotations": map[string]any{"owner": "team-a"}},
		"data":     map[string]any{"color": "blue"},
	}}
}

func annotations(item runtime.Unstructured) map[string]string {
	return (&unstructured.Unstructured{Object: item.UnstructuredContent()}).GetAnnotations()
}

// The plugin as the server runs it: the Server main serves, served in
// process by plugintest, its initializer included. Without a cluster to
// read a plugin ConfigMap from, the defaults apply.
func TestAnnotatesTheStoredCopy(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "") // not in a pod either
	conn := plugintest.Serve(t, newServer())
	bia := conn.BackupItemAction(Name)

	sel, err := bia.AppliesTo()
	if err != nil || !reflect.DeepEqual(sel, api.ResourceSelector{IncludedResources: DefaultResources}) {
		t.Errorf("AppliesTo = %+v, %v; want the default resources %v", sel, err, DefaultResources)
	}
	in := configMap()
	backup := &v1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "velero"}}
	out, extra, err := bia.Execute(in, backup)
	if err != nil || extra != nil {
		t.Fatalf("Execute: %v (additional items %v)", err, extra)
	}
	if want := map[string]string{"owner": "team-a", DefaultAnnotation: "nightly"}; !reflect.DeepEqual(annotations(out), want) {
		t.Errorf("the stored copy is annotated %v, want %v", annotations(out), want)
	}
	if data := out.UnstructuredContent()["data"]; !reflect.DeepEqual(data, map[string]any{"color": "blue"}) {
		t.Errorf("the stored copy's data is %v", data)
	}
	if _, ok := annotations(in)[DefaultAnnotation]; ok {
		t.Error("the caller's item was changed; only the plugin's copy should be")
	}

	// A server asking for v2 actions finds the v1 action, with the same
	// result and no asynchronous operation.
	out, _, op, _, err := conn.BackupItemActionV2(Name).Execute(configMap(), backup)
	if err != nil || op != "" || annotations(out)[DefaultAnnotation] != "nightly" {
		t.Errorf("v2 Execute: %v, operation %q, annotations %v", err, op, annotations(out))
	}
}

// One implementation, configured as a ConfigMap would configure it,
// served on its own.
func TestConfiguredAnnotationAndResources(t *testing.T) {
	impl := &annotate{log: slog.New(slog.DiscardHandler), resources: []string{"secrets"}, annotation: "example.com/backup"}
	bia := plugintest.BackupItemAction(t, Name, impl)
	sel, err := bia.AppliesTo()
	if err != nil || !reflect.DeepEqual(sel.IncludedResources, []string{"secrets"}) {
		t.Errorf("AppliesTo = %+v, %v", sel, err)
	}
	out, _, err := bia.Execute(configMap(), &v1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "weekly"}})
	if err != nil || annotations(out)["example.com/backup"] != "weekly" || annotations(out)[DefaultAnnotation] != "" {
		t.Errorf("Execute: %v, annotations %v", err, annotations(out))
	}
}

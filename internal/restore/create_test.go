package restore

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestCreateForUID: the lean create makes the object (core, API group,
// custom resource; namespaced and cluster-scoped), returns the UID the API
// server gave it, fails on a second create as the dynamic client does, and
// the API server really answers it with metadata alone.
func TestCreateForUID(t *testing.T) {
	acc := newAccess(t)
	r := &run{cs: acc.Typed}
	ctx := t.Context()
	ns := "create-for-uid"
	if _, err := acc.Typed.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		info resourceInfo
		obj  map[string]any
	}{
		{resourceInfo{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", Namespaced: true},
			map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "cm"}, "data": map[string]any{"k": strings.Repeat("v", 2000)}}},
		{resourceInfo{GVR: schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}, Kind: "ClusterRole"},
			map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": map[string]any{"name": "create-for-uid"}}},
		{resourceInfo{GVR: schema.GroupVersionResource{Group: "velero.io", Version: "v1", Resource: "backupstoragelocations"}, Kind: "BackupStorageLocation", Namespaced: true},
			map[string]any{"apiVersion": "velero.io/v1", "kind": "BackupStorageLocation", "metadata": map[string]any{"name": "bsl"},
				"spec": map[string]any{"provider": "aws", "objectStorage": map[string]any{"bucket": "b"}}}},
	}
	for _, c := range cases {
		obj := &unstructured.Unstructured{Object: c.obj}
		objNS := ""
		if c.info.Namespaced {
			objNS = ns
			obj.SetNamespace(ns)
		}
		uid, err := r.createForUID(ctx, c.info, objNS, obj)
		if err != nil {
			t.Fatalf("%s: %v", c.info.Kind, err)
		}
		got, err := acc.Dynamic.Resource(c.info.GVR).Namespace(objNS).Get(ctx, obj.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: reading it back: %v", c.info.Kind, err)
		}
		if uid == "" || got.GetUID() != uid {
			t.Errorf("%s: createForUID returned UID %q, the object has %q", c.info.Kind, uid, got.GetUID())
		}
		if _, err := r.createForUID(ctx, c.info, objNS, obj); !apierrors.IsAlreadyExists(err) {
			t.Errorf("%s: second create: %v, want AlreadyExists", c.info.Kind, err)
		}
	}

	// What the CPU saving rests on: the answer to a create is the
	// object's metadata, not the object.
	raw, err := acc.Typed.CoreV1().RESTClient().Post().AbsPath("/api/v1/namespaces/"+ns+"/configmaps").
		SetHeader("Content-Type", "application/json").SetHeader("Accept", metadataOnly).
		Body([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"probe"},"data":{"k":"v"}}`)).Do(ctx).Raw()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"kind":"PartialObjectMetadata"`) || strings.Contains(string(raw), `"data"`) {
		t.Errorf("the API server answered a create with %s, want PartialObjectMetadata", raw)
	}
}

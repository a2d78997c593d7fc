package selection

import (
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// discoveryFixture is what ServerPreferredResources returns for a small
// cluster, in discovery order (core group first).
func discoveryFixture() []*metav1.APIResourceList {
	res := func(name, singular, kind string, namespaced bool, short ...string) metav1.APIResource {
		return metav1.APIResource{Name: name, SingularName: singular, Kind: kind, Namespaced: namespaced, ShortNames: short}
	}
	return []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			res("pods", "pod", "Pod", true, "po"),
			res("pods/log", "", "Pod", true),
			res("configmaps", "configmap", "ConfigMap", true, "cm"),
			res("secrets", "secret", "Secret", true),
			res("persistentvolumeclaims", "persistentvolumeclaim", "PersistentVolumeClaim", true, "pvc"),
			res("persistentvolumes", "persistentvolume", "PersistentVolume", false, "pv"),
			res("namespaces", "namespace", "Namespace", false, "ns"),
			res("nodes", "node", "Node", false, "no"),
			res("events", "event", "Event", true, "ev"),
		}},
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{
			res("deployments", "deployment", "Deployment", true, "deploy"),
			res("replicasets", "replicaset", "ReplicaSet", true, "rs"),
		}},
		{GroupVersion: "events.k8s.io/v1", APIResources: []metav1.APIResource{
			res("events", "event", "Event", true, "ev"),
		}},
		{GroupVersion: "storage.k8s.io/v1", APIResources: []metav1.APIResource{
			res("storageclasses", "storageclass", "StorageClass", false, "sc"),
		}},
		{GroupVersion: "apiextensions.k8s.io/v1", APIResources: []metav1.APIResource{
			res("customresourcedefinitions", "customresourcedefinition", "CustomResourceDefinition", false, "crd", "crds"),
		}},
		{GroupVersion: "snapshot.storage.k8s.io/v1", APIResources: []metav1.APIResource{
			res("volumesnapshots", "volumesnapshot", "VolumeSnapshot", true, "vs"),
			res("volumesnapshotcontents", "volumesnapshotcontent", "VolumeSnapshotContent", false, "vsc", "vscs"),
		}},
		// Kinds from discovery are not always unique across groups, and a
		// short name may shadow another type's plural.
		{GroupVersion: "example.com/v1", APIResources: []metav1.APIResource{
			res("widgets", "widget", "Widget", true, "cm2", "configmaps"),
		}},
		nil,
		{GroupVersion: "not/a/group/version"},
	}
}

func TestDiscoveryResolver(t *testing.T) {
	r := NewDiscoveryResolver(discoveryFixture())
	deployments := schema.GroupResource{Group: "apps", Resource: "deployments"}
	configmaps := schema.GroupResource{Resource: "configmaps"}
	tests := []struct {
		name           string
		want           schema.GroupResource
		wantNamespaced bool
		wantUnknown    bool
	}{
		{name: "configmaps", want: configmaps, wantNamespaced: true},
		{name: "configmap", want: configmaps, wantNamespaced: true},
		{name: "cm", want: configmaps, wantNamespaced: true},
		{name: "ConfigMap", want: configmaps, wantNamespaced: true},
		{name: "CONFIGMAPS", want: configmaps, wantNamespaced: true},
		{name: "deployments.apps", want: deployments, wantNamespaced: true},
		{name: "deployments", want: deployments, wantNamespaced: true},
		{name: "Deployment", want: deployments, wantNamespaced: true},
		{name: "Deployment.apps", want: deployments, wantNamespaced: true},
		{name: "deploy.apps", want: deployments, wantNamespaced: true},
		{name: "pv", want: schema.GroupResource{Resource: "persistentvolumes"}},
		{name: "ns", want: schema.GroupResource{Resource: "namespaces"}},
		{name: "sc", want: schema.GroupResource{Group: "storage.k8s.io", Resource: "storageclasses"}},
		{name: "storageclasses.storage.k8s.io", want: schema.GroupResource{Group: "storage.k8s.io", Resource: "storageclasses"}},
		{name: "crds", want: schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}},
		{name: "events", want: schema.GroupResource{Resource: "events"}, wantNamespaced: true},
		{name: "events.events.k8s.io", want: schema.GroupResource{Group: "events.k8s.io", Resource: "events"}, wantNamespaced: true},
		{name: "ev.events.k8s.io", want: schema.GroupResource{Group: "events.k8s.io", Resource: "events"}, wantNamespaced: true},
		{name: "configmaps.example.com", want: schema.GroupResource{Group: "example.com", Resource: "widgets"}, wantNamespaced: true},
		{name: "widget", want: schema.GroupResource{Group: "example.com", Resource: "widgets"}, wantNamespaced: true},
		{name: "deployments.extensions", wantUnknown: true},
		{name: "log", wantUnknown: true},
		{name: "pods/log", wantUnknown: true},
		{name: "gadgets", wantUnknown: true},
		{name: "", wantUnknown: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			gr, namespaced, err := r.ResolveResource(tc.name)
			if tc.wantUnknown {
				if !errors.Is(err, ErrUnknownResource) {
					t.Fatalf("ResolveResource(%q) = %v, %v, %v; want ErrUnknownResource", tc.name, gr, namespaced, err)
				}
				return
			}
			if err != nil || gr != tc.want || namespaced != tc.wantNamespaced {
				t.Errorf("ResolveResource(%q) = %v, %v, %v; want %v, %v", tc.name, gr, namespaced, err, tc.want, tc.wantNamespaced)
			}
		})
	}
}

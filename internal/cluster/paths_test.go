package cluster

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestResourcePath(t *testing.T) {
	for _, c := range []struct {
		gvr  schema.GroupVersionResource
		ns   string
		want string
	}{
		{schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, "shop", "/api/v1/namespaces/shop/configmaps"},
		{schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, "", "/api/v1/namespaces"},
		{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, "shop", "/apis/apps/v1/namespaces/shop/deployments"},
		{schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}, "", "/apis/rbac.authorization.k8s.io/v1/clusterroles"},
	} {
		if got := ResourcePath(c.gvr, c.ns); got != c.want {
			t.Errorf("ResourcePath(%v, %q) = %q, want %q", c.gvr, c.ns, got, c.want)
		}
	}
}

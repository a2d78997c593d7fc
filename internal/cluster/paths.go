package cluster

import (
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ResourcePath is the REST path of a resource's collection (what LIST
// reads and create POSTs to), in namespace ns, or across the cluster when
// ns is empty; append a name for one object.
func ResourcePath(gvr schema.GroupVersionResource, ns string) string {
	var b strings.Builder
	if gvr.Group == "" {
		b.WriteString("/api/")
	} else {
		b.WriteString("/apis/")
		b.WriteString(gvr.Group)
		b.WriteByte('/')
	}
	b.WriteString(gvr.Version)
	if ns != "" {
		b.WriteString("/namespaces/")
		b.WriteString(ns)
	}
	b.WriteByte('/')
	b.WriteString(gvr.Resource)
	return b.String()
}

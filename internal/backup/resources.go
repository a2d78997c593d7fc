package backup

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"

	"github.com/lifeboat-io/lifeboat/internal/cluster"
)

// resourceType is one listable resource at its preferred version.
type resourceType struct {
	GVR        schema.GroupVersionResource
	Kind       string
	Namespaced bool
}

// GroupResource is the "resource.group" form used in archive paths.
func (r resourceType) GroupResource() schema.GroupResource { return r.GVR.GroupResource() }

// listPath is the REST path that LISTs the type, in ns when it is not empty.
func (r resourceType) listPath(ns string) string { return cluster.ResourcePath(r.GVR, ns) }

// resourceListKey is the key of the resource-list file, "v1/ConfigMap" or
// "apps/v1/Deployment", as Velero writes it.
func (r resourceType) resourceListKey() string {
	return r.GVR.GroupVersion().String() + "/" + r.Kind
}

// discoverResources returns every resource the server can list and get, at
// its preferred version, sorted by group-resource so that archives come out
// in a stable order. A group whose discovery failed (an aggregated API that
// is down, say) is reported as an error next to the usable ones, so the
// backup can go on without it and say so.
func discoverResources(dc discovery.DiscoveryInterface) ([]resourceType, []*metav1.APIResourceList, error) {
	lists, err := dc.ServerPreferredResources()
	var partial error
	if err != nil {
		var failed *discovery.ErrGroupDiscoveryFailed
		if !errors.As(err, &failed) {
			return nil, nil, fmt.Errorf("discovering the server's resources: %w", err)
		}
		partial = err
	}
	var out []resourceType
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			return nil, nil, fmt.Errorf("discovery returned group version %q: %w", list.GroupVersion, err)
		}
		for _, res := range list.APIResources {
			if strings.Contains(res.Name, "/") || !hasVerbs(res.Verbs, "list", "get") {
				continue
			}
			out = append(out, resourceType{
				GVR:        gv.WithResource(res.Name),
				Kind:       res.Kind,
				Namespaced: res.Namespaced,
			})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].GroupResource().String() < out[j].GroupResource().String()
	})
	return out, lists, partial
}

func hasVerbs(have metav1.Verbs, want ...string) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			if h == w {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

package restore

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

// resourceInfo is what the restore needs to know about a type in the
// target cluster.
type resourceInfo struct {
	GVR        schema.GroupVersionResource
	Kind       string
	Namespaced bool
	// HasStatus is true when the type has a status subresource: the API
	// server ignores status on create then, and a restored status would
	// describe an object that no longer exists.
	HasStatus bool
}

// clusterTypes answers "how does the target cluster serve this type at
// this version", refreshing discovery when custom resource definitions are
// restored.
type clusterTypes struct {
	dc discovery.DiscoveryInterface

	mu       sync.Mutex
	lists    []*metav1.APIResourceList
	byGVR    map[schema.GroupVersionResource]resourceInfo
	versions map[schema.GroupResource][]string
}

func newClusterTypes(dc discovery.DiscoveryInterface) *clusterTypes {
	return &clusterTypes{dc: dc}
}

// refresh reads discovery again. A partial failure (an aggregated API that
// is down) still yields the groups that answered.
func (c *clusterTypes) refresh() error {
	_, lists, err := c.dc.ServerGroupsAndResources()
	var failed *discovery.ErrGroupDiscoveryFailed
	if err != nil && !errors.As(err, &failed) {
		return fmt.Errorf("discovering the cluster's resources: %w", err)
	}
	byGVR := map[schema.GroupVersionResource]resourceInfo{}
	versions := map[schema.GroupResource][]string{}
	status := map[schema.GroupVersionResource]bool{}
	for _, list := range lists {
		gv, perr := schema.ParseGroupVersion(list.GroupVersion)
		if perr != nil {
			continue
		}
		for _, r := range list.APIResources {
			if base, sub, ok := strings.Cut(r.Name, "/"); ok {
				if sub == "status" {
					status[gv.WithResource(base)] = true
				}
				continue
			}
			gvr := gv.WithResource(r.Name)
			byGVR[gvr] = resourceInfo{GVR: gvr, Kind: r.Kind, Namespaced: r.Namespaced}
			versions[gvr.GroupResource()] = append(versions[gvr.GroupResource()], gv.Version)
		}
	}
	for gvr, info := range byGVR {
		info.HasStatus = status[gvr]
		byGVR[gvr] = info
	}
	c.mu.Lock()
	c.lists, c.byGVR, c.versions = lists, byGVR, versions
	c.mu.Unlock()
	return nil
}

// resourceLists returns what discovery last said, for resolving the names
// in a restore's resource filters.
func (c *clusterTypes) resourceLists() []*metav1.APIResourceList {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lists
}

// lookup finds gr at version; it refreshes discovery once on a miss, since
// the type may have been defined by a CRD this restore just created.
func (c *clusterTypes) lookup(gr schema.GroupResource, version string) (resourceInfo, error) {
	gvr := gr.WithVersion(version)
	for attempt := 0; ; attempt++ {
		c.mu.Lock()
		info, ok := c.byGVR[gvr]
		served := c.versions[gr]
		c.mu.Unlock()
		if ok {
			return info, nil
		}
		if attempt > 0 {
			if len(served) > 0 {
				return resourceInfo{}, fmt.Errorf("the cluster serves %s only at %s, not at %s, the version in the backup", gr, strings.Join(served, ", "), version)
			}
			return resourceInfo{}, fmt.Errorf("the cluster does not serve %s (is its CustomResourceDefinition or API service missing?)", gr)
		}
		if err := c.refresh(); err != nil {
			return resourceInfo{}, err
		}
	}
}

package selection

import (
	"errors"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ErrUnknownResource is wrapped by resolvers for names discovery does not
// know. Velero keeps such names as written, so they still match a type that
// appears later under exactly that name; callers report them as warnings.
var ErrUnknownResource = errors.New("unknown resource")

// ResourceResolver turns a name as users write it ("configmaps",
// "configmap", "cm", "ConfigMap", "deployments.apps", "Deployment.apps")
// into the group-resource that discovery serves, and whether it is
// namespaced. The backup engine implements it with discovery; tests use a
// map.
type ResourceResolver interface {
	ResolveResource(name string) (gr schema.GroupResource, namespaced bool, err error)
}

type resolvedResource struct {
	gr         schema.GroupResource
	namespaced bool
}

// DiscoveryResolver resolves names against discovery's resource lists.
type DiscoveryResolver struct {
	// tiers are tried in order, so a plural name wins over another type's
	// singular, short name or kind. Keys are lower case.
	tiers [4]map[string][]resolvedResource
}

// NewDiscoveryResolver indexes the lists that discovery returns (the
// preferred version of each group, as ServerPreferredResources gives them;
// repeated versions of a group are harmless). Lists are taken in order, so
// when a name exists in several groups and the user gave no group, the
// first list wins, as with kubectl: discovery lists the core group first.
// Subresources and lists whose group version does not parse are skipped.
func NewDiscoveryResolver(resources []*metav1.APIResourceList) *DiscoveryResolver {
	d := &DiscoveryResolver{}
	for i := range d.tiers {
		d.tiers[i] = make(map[string][]resolvedResource)
	}
	for _, list := range resources {
		if list == nil {
			continue
		}
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range list.APIResources {
			if r.Name == "" || strings.Contains(r.Name, "/") {
				continue
			}
			res := resolvedResource{gr: schema.GroupResource{Group: gv.Group, Resource: r.Name}, namespaced: r.Namespaced}
			d.add(0, r.Name, res)
			d.add(1, r.SingularName, res)
			for _, short := range r.ShortNames {
				d.add(2, short, res)
			}
			d.add(3, r.Kind, res)
		}
	}
	return d
}

func (d *DiscoveryResolver) add(tier int, key string, res resolvedResource) {
	if key == "" {
		return
	}
	key = strings.ToLower(key)
	for _, have := range d.tiers[tier][key] {
		if have.gr == res.gr {
			return
		}
	}
	d.tiers[tier][key] = append(d.tiers[tier][key], res)
}

// ResolveResource implements ResourceResolver. The text before the first
// "." is the resource (in any of its forms), the rest the group, as in
// Velero and kubectl; matching ignores case.
func (d *DiscoveryResolver) ResolveResource(name string) (schema.GroupResource, bool, error) {
	want := schema.ParseGroupResource(strings.ToLower(name))
	if want.Resource != "" {
		for _, tier := range d.tiers {
			for _, res := range tier[want.Resource] {
				if want.Group == "" || res.gr.Group == want.Group {
					return res.gr, res.namespaced, nil
				}
			}
		}
	}
	return schema.GroupResource{}, false, fmt.Errorf("resolve %q: %w", name, ErrUnknownResource)
}

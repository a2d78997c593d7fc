package deleteactions

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

// CleanupConfigLabel marks the ConfigMaps of the server namespace that list
// the kinds lifeboat.io/labelled-resource-cleanup deletes; its value is
// not looked at.
const CleanupConfigLabel = "lifeboat.io/cleanup-resources"

// CleanupConfigKey is the ConfigMap key holding the list, one
// resource.group per line.
const CleanupConfigKey = "resources"

const listPageSize = 500

var configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// LabelledResourceCleanup deletes the objects of the configured kinds that
// are labelled with the backup's name (see the package documentation).
// One instance reads the configuration once; the server makes a new
// instance for each lookup.
type LabelledResourceCleanup struct {
	c *Clients

	mu        sync.Mutex
	kinds     []*meta.RESTMapping
	loadErr   error
	loaded    bool
	clusterOK map[string]bool // backups whose cluster-scoped objects are gone
}

// NewLabelledResourceCleanup returns the action.
func NewLabelledResourceCleanup(c *Clients) *LabelledResourceCleanup {
	return &LabelledResourceCleanup{c: c, clusterOK: map[string]bool{}}
}

// AppliesTo implements api.DeleteItemAction: namespaces, the kind every
// backup with namespaced items holds one item of per namespace.
func (a *LabelledResourceCleanup) AppliesTo() (api.ResourceSelector, error) {
	return api.ResourceSelector{IncludedResources: []string{"namespaces"}}, nil
}

// Execute implements api.DeleteItemAction.
func (a *LabelledResourceCleanup) Execute(in *api.DeleteItemActionExecuteInput) error {
	item := &unstructured.Unstructured{Object: in.Item.UnstructuredContent()}
	if gvk := item.GroupVersionKind(); gvk.Group != "" || gvk.Kind != "Namespace" {
		return nil
	}
	namespace := item.GetName()
	kinds, err := a.config()
	if err != nil {
		return err
	}
	if len(kinds) == 0 {
		return nil
	}
	sel, err := madeForSelector(in.Backup)
	if err != nil {
		return err
	}
	backupKey := in.Backup.Namespace + "/" + in.Backup.Name + "/" + string(in.Backup.UID)
	a.mu.Lock()
	clusterDone := a.clusterOK[backupKey]
	a.mu.Unlock()

	var errs []error
	clusterFailed := false
	for _, m := range kinds {
		ns := namespace
		if m.Scope.Name() != meta.RESTScopeNameNamespace {
			if clusterDone {
				continue
			}
			ns = ""
		}
		n, err := a.deleteLabelled(m, ns, sel, in.Backup)
		if err != nil {
			errs = append(errs, err)
			clusterFailed = clusterFailed || ns == ""
		}
		if n > 0 {
			a.c.log().Info("deleted objects labelled for the backup", "backup", in.Backup.Name,
				"resource", m.Resource.GroupResource().String(), "namespace", ns, "count", n)
		}
	}
	if !clusterFailed {
		a.mu.Lock()
		a.clusterOK[backupKey] = true
		a.mu.Unlock()
	}
	return errors.Join(errs...)
}

// madeForSelector selects objects labelled with the backup's name and not
// restored from it (see madeFor).
func madeForSelector(b *v1.Backup) (labels.Selector, error) {
	is, err := labels.NewRequirement(v1.BackupNameLabel, selection.Equals, []string{v1.LabelValue(b.Name)})
	if err != nil {
		return nil, fmt.Errorf("selecting the objects of backup %s: %w", b.Name, err)
	}
	notRestored, err := labels.NewRequirement(v1.RestoreNameLabel, selection.DoesNotExist, nil)
	if err != nil {
		return nil, fmt.Errorf("selecting the objects of backup %s: %w", b.Name, err)
	}
	return labels.NewSelector().Add(*is, *notRestored), nil
}

// deleteLabelled deletes the objects of m in namespace ("" for all, or for
// a cluster-scoped kind) that sel selects and madeFor accepts, page by
// page, and says how many it deleted.
func (a *LabelledResourceCleanup) deleteLabelled(m *meta.RESTMapping, namespace string, sel labels.Selector, b *v1.Backup) (int, error) {
	gr := m.Resource.GroupResource()
	res := a.c.resource(m, namespace)
	deleted := 0
	var errs []error
	opts := metav1.ListOptions{LabelSelector: sel.String(), Limit: listPageSize}
	for {
		ctx, cancel := callCtx()
		list, err := res.List(ctx, opts)
		cancel()
		if err != nil {
			where := "in namespace " + namespace
			if namespace == "" {
				where = "in the cluster"
			}
			return deleted, fmt.Errorf("listing %s labelled %s %s: %w", gr, sel, where, err)
		}
		for i := range list.Items {
			obj := &list.Items[i]
			if !madeFor(obj, b) {
				continue
			}
			if err := a.c.deleteObject(res, obj); err != nil {
				errs = append(errs, fmt.Errorf("deleting %s: %w", describe(gr, obj.GetNamespace(), obj.GetName()), err))
				continue
			}
			deleted++
		}
		if opts.Continue = list.GetContinue(); opts.Continue == "" {
			return deleted, errors.Join(errs...)
		}
	}
}

// config returns the kinds to delete, read once per instance.
func (a *LabelledResourceCleanup) config() ([]*meta.RESTMapping, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.loaded {
		a.kinds, a.loadErr = a.readConfig()
		a.loaded = true
	}
	return a.kinds, a.loadErr
}

func (a *LabelledResourceCleanup) readConfig() ([]*meta.RESTMapping, error) {
	ctx, cancel := callCtx()
	defer cancel()
	list, err := a.c.Dynamic.Resource(configMaps).Namespace(a.c.Namespace).List(ctx, metav1.ListOptions{LabelSelector: CleanupConfigLabel})
	if err != nil {
		return nil, fmt.Errorf("listing the ConfigMaps labelled %s in namespace %s: %w", CleanupConfigLabel, a.c.Namespace, err)
	}
	slices.SortFunc(list.Items, func(x, y unstructured.Unstructured) int { return strings.Compare(x.GetName(), y.GetName()) })
	var out []*meta.RESTMapping
	seen := map[schema.GroupVersionResource]bool{}
	var errs []error
	for i := range list.Items {
		cm := &list.Items[i]
		kinds, err := a.parseConfigMap(cm)
		errs = append(errs, err...)
		for _, m := range kinds {
			if !seen[m.Resource] {
				seen[m.Resource] = true
				out = append(out, m)
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// parseConfigMap reads one ConfigMap's list. Each error names the
// ConfigMap, the key and, for a bad entry, the entry and its line.
func (a *LabelledResourceCleanup) parseConfigMap(cm *unstructured.Unstructured) ([]*meta.RESTMapping, []error) {
	where := fmt.Sprintf("ConfigMap %s/%s (labelled %s)", cm.GetNamespace(), cm.GetName(), CleanupConfigLabel)
	data, _, err := unstructured.NestedStringMap(cm.Object, "data")
	if err != nil {
		return nil, []error{fmt.Errorf("%s: reading its data: %w", where, err)}
	}
	var errs []error
	if bin, _, _ := unstructured.NestedMap(cm.Object, "binaryData"); len(bin) > 0 {
		errs = append(errs, fmt.Errorf("%s: binaryData is not read; put the list under data.%s", where, CleanupConfigKey))
	}
	for k := range data {
		if k != CleanupConfigKey {
			errs = append(errs, fmt.Errorf("%s: unknown key %q; the only key is %q, one resource.group per line", where, k, CleanupConfigKey))
		}
	}
	text, ok := data[CleanupConfigKey]
	if !ok {
		return nil, append(errs, fmt.Errorf("%s: no key %q; list the kinds to delete under it, one resource.group per line (e.g. configmaps, exports.storage.example.io)", where, CleanupConfigKey))
	}
	var out []*meta.RESTMapping
	for n, line := range strings.Split(text, "\n") {
		entry := strings.TrimSpace(line)
		if entry == "" || strings.HasPrefix(entry, "#") {
			continue
		}
		m, err := a.resolveEntry(entry)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s, key %q, line %d, entry %q: %w", where, CleanupConfigKey, n+1, entry, err))
			continue
		}
		out = append(out, m)
	}
	return out, errs
}

// resolveEntry checks one resource.group entry and finds it in discovery.
func (a *LabelledResourceCleanup) resolveEntry(entry string) (*meta.RESTMapping, error) {
	if strings.ContainsAny(entry, " \t/*") {
		return nil, errors.New("want one resource.group (e.g. configmaps or exports.storage.example.io), without versions, subresources or wildcards")
	}
	gr := schema.ParseGroupResource(entry)
	if errs := validation.IsDNS1123Label(gr.Resource); len(errs) > 0 {
		return nil, fmt.Errorf("resource %q: %s", gr.Resource, strings.Join(errs, "; "))
	}
	m, err := a.c.resolve(gr)
	if meta.IsNoMatchError(err) {
		return nil, errors.New("the API server serves no such resource (plural resource name, then its API group)")
	}
	if err != nil {
		return nil, fmt.Errorf("looking it up in discovery: %w", err)
	}
	if m.Resource.GroupResource() != gr {
		// A singular or short form was given; deleting works the same,
		// but the list should say what it means.
		return nil, fmt.Errorf("write it as %q", m.Resource.GroupResource().String())
	}
	return m, nil
}

var _ api.DeleteItemAction = (*LabelledResourceCleanup)(nil)

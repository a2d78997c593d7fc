package restore

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// dryRunAll is the dryRun option of every write a dry run sends: the API
// server runs the request through defaulting, validation and admission
// and stores nothing.
var dryRunAll = []string{metav1.DryRunAll}

// dryRun is what a dry run (spec.dryRun) learns as it goes: each item's
// outcome, and what the restore would have created that a dry run cannot
// create, so that the items which depend on it are not reported as
// failing for a reason a real restore would not meet.
type dryRun struct {
	mu     sync.Mutex
	counts v1.RestoreDryRun
	// notable are the items to list first (fail, skip, update, unchecked);
	// plain those that would simply be created. Each is bounded.
	notable, plain []v1.RestoreDryRunItem
	// newNamespaces are the namespaces the restore would create; the API
	// server refuses any create in a namespace that does not exist, so
	// their items cannot be checked.
	newNamespaces map[string]bool
	// newTypes are the types the restore's CustomResourceDefinitions
	// would serve; a dry-run CRD serves nothing.
	newTypes map[schema.GroupResource]bool
}

func newDryRun() *dryRun {
	return &dryRun{newNamespaces: map[string]bool{}, newTypes: map[schema.GroupResource]bool{}}
}

// add records one item's outcome. unchecked marks a Create the API server
// could not check (reason says why).
func (d *dryRun) add(gr schema.GroupResource, ns, name string, o v1.DryRunOutcome, reason string, unchecked bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch o {
	case v1.DryRunCreate:
		d.counts.WouldCreate++
	case v1.DryRunUpdate:
		d.counts.WouldUpdate++
	case v1.DryRunSkip:
		d.counts.WouldSkip++
	case v1.DryRunFail:
		d.counts.WouldFail++
	}
	if unchecked {
		d.counts.Unchecked++
	}
	// Clones: a decoded item's strings share its whole JSON text.
	item := v1.RestoreDryRunItem{Resource: gr.String(), Namespace: strings.Clone(ns), Name: strings.Clone(name), Outcome: o, Message: reason}
	if o == v1.DryRunCreate && !unchecked {
		if len(d.plain) < v1.RestoreDryRunMaxItems {
			d.plain = append(d.plain, item)
		}
		return
	}
	if len(d.notable) < v1.RestoreDryRunMaxItems {
		d.notable = append(d.notable, item)
	}
}

// result is the dry run's record for the Restore's status: the notable
// items first, then the plain creates, at most RestoreDryRunMaxItems.
func (d *dryRun) result() *v1.RestoreDryRun {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := d.counts
	rank := map[v1.DryRunOutcome]int{v1.DryRunFail: 0, v1.DryRunUpdate: 1, v1.DryRunSkip: 2, v1.DryRunCreate: 3}
	byItem := func(a, b v1.RestoreDryRunItem) int {
		return cmp.Or(cmp.Compare(rank[a.Outcome], rank[b.Outcome]), cmp.Compare(a.Resource, b.Resource),
			cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	}
	notable := slices.Clone(d.notable)
	slices.SortFunc(notable, byItem)
	plain := slices.Clone(d.plain)
	slices.SortFunc(plain, byItem)
	out.Items = append(notable, plain[:min(len(plain), v1.RestoreDryRunMaxItems-len(notable))]...)
	total := out.WouldCreate + out.WouldUpdate + out.WouldSkip + out.WouldFail
	out.Truncated = len(out.Items) < total
	return &out
}

func (d *dryRun) markNamespace(ns string) {
	d.mu.Lock()
	d.newNamespaces[ns] = true
	d.mu.Unlock()
}

func (d *dryRun) namespaceIsNew(ns string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.newNamespaces[ns]
}

// markType records the type a dry-run-created CRD would serve.
func (d *dryRun) markType(crd *unstructured.Unstructured) {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	if plural == "" {
		return
	}
	d.mu.Lock()
	d.newTypes[schema.GroupResource{Group: group, Resource: plural}] = true
	d.mu.Unlock()
}

func (d *dryRun) typeIsNew(gr schema.GroupResource) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.newTypes[gr]
}

// verdict records an item's outcome when the restore is a dry run.
func (r *run) verdict(gr schema.GroupResource, ns, name string, o v1.DryRunOutcome, reason string) {
	if r.dry != nil {
		r.dry.add(gr, ns, name, o, reason, false)
	}
}

// unchecked records, in a dry run, an item the restore would create but
// the API server cannot check, and reports whether it did: its namespace
// or its type's CustomResourceDefinition would be created by the restore
// first, and a dry run creates neither.
func (r *run) unchecked(gr schema.GroupResource, obj *unstructured.Unstructured, namespaced bool) bool {
	if r.dry == nil {
		return false
	}
	ns := obj.GetNamespace()
	var reason string
	switch {
	case r.dry.typeIsNew(gr):
		reason = "not checked: the restore would create its CustomResourceDefinition first, which a dry run does not"
	case namespaced && r.dry.namespaceIsNew(ns):
		reason = fmt.Sprintf("not checked: namespace %s does not exist yet, and the API server checks nothing in a namespace before it exists (restore into an existing namespace to check it)", ns)
	default:
		return false
	}
	r.dry.add(gr, ns, obj.GetName(), v1.DryRunCreate, reason, true)
	r.record(obj, "created")
	return true
}

// skip records an item the restore leaves as it is, and why.
func (r *run) skip(gr schema.GroupResource, obj *unstructured.Unstructured, reason string) {
	r.record(obj, "skipped")
	r.verdict(gr, obj.GetNamespace(), obj.GetName(), v1.DryRunSkip, reason)
}

// createOptions are the options of a create: a dry run's sends none for real.
func (r *run) createOptions() metav1.CreateOptions {
	if r.dry != nil {
		return metav1.CreateOptions{DryRun: dryRunAll}
	}
	return metav1.CreateOptions{}
}

func (r *run) patchOptions() metav1.PatchOptions {
	if r.dry != nil {
		return metav1.PatchOptions{DryRun: dryRunAll}
	}
	return metav1.PatchOptions{}
}

// dryRunActions are the words a dry run's resource list uses.
var dryRunActions = map[string]string{"created": "would create", "updated": "would update", "skipped": "would skip", "failed": "would fail"}

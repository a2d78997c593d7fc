package backup

import (
	"context"
	"fmt"
	"strings"

	"github.com/lifeboat-io/lifeboat/internal/policyfilters"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lifeboat-io/lifeboat/internal/hooks"
	"github.com/lifeboat-io/lifeboat/internal/selection"
	"github.com/lifeboat-io/lifeboat/pkg/volumehelper"
)

// perNamespaceLimit is the largest explicit namespace list that is listed
// namespace by namespace. Past it, one cluster-wide LIST per type filtered
// here is cheaper than (types × namespaces) mostly empty LISTs.
const perNamespaceLimit = 3

var namespacesResource = schema.GroupResource{Resource: "namespaces"}

// plan is what a backup will collect.
type plan struct {
	// jobs are the LISTs to run, in archive order.
	jobs []listJob
	// crdType, when set, is the CRD resource type: the definitions of
	// custom resources in the backup are added with them.
	crdType *resourceType
}

// applyPolicyFilters merges the resource policy's includeExcludePolicy
// into the backup's resource filter, as Velero does, resolves its
// fine-grained filters (nil without), and records the policy's warnings
// (what Velero accepts but is likely a mistake) on the backup. The
// controller validated the policy before the run.
func (r *run) applyPolicyFilters(ctx context.Context, resources *selection.ResourceFilter, resolver selection.ResourceResolver) (*selection.FineFilters, error) {
	if w := volumehelper.PolicyKindWarning(r.b); w != "" {
		r.results.Warning("", w)
	}
	if r.b.Spec.ResourcePolicy == nil || r.e.Client == nil {
		return nil, nil
	}
	pol, err := volumehelper.LoadPolicies(ctx, r.b, r.e.Client)
	if err != nil || pol == nil {
		return nil, err
	}
	for _, w := range pol.WarningMessages() {
		r.results.Warning("", "spec.resourcePolicy: "+w)
	}
	if ie := pol.IncludeExcludePolicy; ie != nil {
		// The two types hold the same lists; selection imports no policy.
		resources.CombineWithPolicy(selection.PolicyFilters(*ie), resolver)
	}
	fine, err := selection.NewFineFilters(policyfilters.Spec(pol), resolver, selection.ForBackup)
	if err != nil {
		return nil, fmt.Errorf("spec.resourcePolicy: %w", err)
	}
	fine.WarnExcluded(func(gr schema.GroupResource) bool { return resources.ShouldIncludeResource(gr, true) },
		"the backup's resource filters (spec and includeExcludePolicy)")
	for _, w := range fine.Warnings() {
		r.results.Warning("", "spec.resourcePolicy: "+w)
	}
	return fine, nil
}

// plan turns the backup's spec into the LISTs to run.
func (r *run) plan(ctx context.Context) (*plan, error) {
	types, lists, derr := discoverResources(r.e.discovery)
	if types == nil && derr != nil {
		return nil, derr
	}
	if derr != nil {
		// Some API groups could not be discovered: back up the rest, and
		// say the backup is incomplete.
		r.results.ServerError(derr.Error())
		r.log.Error("discovery was incomplete", "error", derr)
	}
	spec := r.b.Spec.DeepCopy()
	allNamespaces, err := r.listNamespaces(ctx, types)
	if err != nil {
		return nil, err
	}
	// Namespaces labelled velero.io/exclude-from-backup=true are left out
	// as if the spec excluded them, as Velero does.
	for _, ns := range allNamespaces {
		if selection.ExcludedFromBackup(ns.Labels) {
			spec.ExcludedNamespaces = append(spec.ExcludedNamespaces, ns.Name)
		}
	}

	resolver := selection.NewDiscoveryResolver(lists)
	resources, errs := selection.NewResourceFilter(spec, resolver)
	if len(errs) > 0 {
		return nil, fmt.Errorf("invalid resource filters: %w", joinErrors(errs))
	}
	fine, err := r.applyPolicyFilters(ctx, resources, resolver)
	if err != nil {
		return nil, err
	}
	r.resources = resources
	r.typesByGR = make(map[schema.GroupResource]resourceType, len(types))
	for _, rt := range types {
		r.typesByGR[rt.GroupResource()] = rt
	}
	if r.actions, err = r.loadActions(resolver); err != nil {
		return nil, err
	}
	if r.hookRules, err = hooks.NewBackupRules(r.b.Spec.Hooks.Resources, resolver); err != nil {
		return nil, fmt.Errorf("invalid hooks: %w", err)
	}
	if len(r.actions) > 0 {
		r.stored = map[string]bool{}
		r.actionBackup = r.b.DeepCopy()
		r.actionBackup.ManagedFields = nil
	}
	for _, w := range resources.Warnings() {
		r.results.Warning("", w)
	}
	labels, err := selection.NewLabelMatcher(spec)
	if err != nil {
		return nil, fmt.Errorf("invalid label selector: %w", err)
	}
	namespaces := resources.Namespaces()
	r.fine = selection.NewBackupFineFilter(fine, labels, namespaces)

	serverSelector := ""
	keepLabels := labels.Matches
	if sel, ok := labels.Selector(); ok && !sel.Empty() {
		serverSelector = sel.String()
		keepLabels = nil
	}
	explicit, isExplicit := namespaces.ExplicitNamespaces()
	perNamespace := isExplicit && len(explicit) <= perNamespaceLimit

	p := &plan{}
	var namespaceJob *listJob
	for _, rt := range types {
		gr := rt.GroupResource()
		if gr == crdResource && resources.ShouldIncludeAdditionalItem(gr, false) {
			p.crdType = &rt
		}
		switch {
		case !resources.ShouldIncludeResource(gr, rt.Namespaced):
			continue
		case gr == namespacesResource:
			kept := []rawItem{}
			for _, it := range allNamespaces {
				// A clusterScopedFilterPolicy rule for namespaces is held to
				// its names only: Velero lists namespaces without selectors.
				if namespaces.ShouldInclude(it.Name) && !selection.ExcludedFromBackup(it.Labels) && r.fine.KeepsName(namespacesResource, "", it.Name) {
					kept = append(kept, it)
				}
			}
			namespaceJob = &listJob{Type: rt, Preloaded: kept}
			if labels.Selects() && namespaces.IncludesAll() {
				// A whole-cluster backup with a label selector keeps the
				// namespaces that match it or hold items it kept.
				namespaceJob.WriteIf = func(it rawItem) bool {
					return labels.Matches(it.Labels) || r.namespacesWithItems[it.Name]
				}
			}
		case !rt.Namespaced:
			p.addJob(r.fine, listJob{Type: rt, LabelSelector: serverSelector}, keepLabels, nil)
		case perNamespace:
			for _, ns := range explicit {
				p.addJob(r.fine, listJob{Type: rt, Namespace: ns, LabelSelector: serverSelector}, keepLabels, nil)
			}
		default:
			var keepNS func(string) bool
			if !namespaces.IncludesAll() {
				keepNS = namespaces.ShouldInclude
			}
			p.addJob(r.fine, listJob{Type: rt, LabelSelector: serverSelector}, keepLabels, keepNS)
		}
	}
	// Namespaces go last: which of them to keep can depend on the items
	// found in them.
	if namespaceJob != nil {
		p.jobs = append(p.jobs, *namespaceJob)
	}
	return p, nil
}

// addJob adds a LIST whose items are kept by the spec's label selector
// (keepLabels, when the LIST's selector cannot say it all) and namespace
// filter (keepNS, for a LIST across the cluster). Under the resource
// policy's fine-grained filters (fine non-nil) those decide instead: they
// may leave the type out there, replace the LIST's selector, and judge each
// item by its labels and name, as Velero's LISTs and item checks do.
func (p *plan) addJob(fine *selection.BackupFineFilter, job listJob, keepLabels func(map[string]string) bool, keepNS func(string) bool) {
	if fine == nil {
		job.Keep = itemKeep(keepLabels, keepNS)
		p.jobs = append(p.jobs, job)
		return
	}
	gr, namespaced := job.Type.GroupResource(), job.Type.Namespaced
	skip, server := fine.ListPlan(gr, namespaced, job.Namespace)
	if skip {
		return
	}
	job.LabelSelector = ""
	if server != nil {
		job.LabelSelector = server.String()
	}
	keepRest := itemKeep(nil, keepNS)
	job.Keep = func(it rawItem) bool {
		return keepRest(it) && fine.KeepsLabels(gr, namespaced, it.Namespace, it.Labels) && fine.KeepsName(gr, it.Namespace, it.Name)
	}
	p.jobs = append(p.jobs, job)
}

// listNamespaces returns every namespace in one unpaged LIST. The plan
// needs them up front (to honour the exclude-from-backup label) and they are
// few; an unpaged LIST is also served at once from the API server's cache,
// where a paged one can wait for the cache to catch up with recent writes.
func (r *run) listNamespaces(ctx context.Context, types []resourceType) ([]rawItem, error) {
	for _, rt := range types {
		if rt.GroupResource() != namespacesResource {
			continue
		}
		pg, err := r.e.lister.listLimit(ctx, rt, "", "", "", 0)
		if err != nil {
			return nil, fmt.Errorf("listing namespaces: %w", err)
		}
		return pg.Items, nil
	}
	return nil, nil
}

// itemKeep combines the per-item filters of a job. Items labelled
// velero.io/exclude-from-backup=true never pass.
func itemKeep(keepLabels func(map[string]string) bool, keepNS func(string) bool) func(rawItem) bool {
	return func(it rawItem) bool {
		if keepNS != nil && !keepNS(it.Namespace) {
			return false
		}
		if keepLabels != nil && !keepLabels(it.Labels) {
			return false
		}
		return !selection.ExcludedFromBackup(it.Labels)
	}
}

func joinErrors(errs []error) error {
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return fmt.Errorf("%s", strings.Join(msgs, "; "))
}

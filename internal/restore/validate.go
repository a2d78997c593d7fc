package restore

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/util/validation"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/hooks"
	"github.com/lifeboat-io/lifeboat/internal/selection"
)

// Validate returns every problem with a restore's spec, one message per
// problem, each naming the field and what to do. Fields Lifeboat does not
// implement yet are refused rather than ignored.
func Validate(spec *v1.RestoreSpec) []string {
	var msgs []string
	unsupported := func(field, why string) {
		msgs = append(msgs, fmt.Sprintf("%s: not supported by Lifeboat yet (%s); remove the field", field, why))
	}
	msgs = append(msgs, hooks.ValidateRestoreHooks(spec.Hooks.Resources)...)
	if spec.ResourceModifier != nil {
		unsupported("spec.resourceModifier", "resource modifiers are not applied")
	}
	if spec.RestoreStatus != nil && (len(spec.RestoreStatus.IncludedResources) > 0 || len(spec.RestoreStatus.ExcludedResources) > 0) {
		unsupported("spec.restoreStatus", "status is never restored")
	}
	// spec.uploaderConfig (writeSparseFiles, parallelFilesDownload) goes
	// to each PodVolumeRestore as Velero's uploader settings; a count of
	// zero or less means the default, as in Velero's server.
	switch spec.ExistingResourcePolicy {
	case "", v1.PolicyTypeNone, v1.PolicyTypeUpdate:
	default:
		msgs = append(msgs, fmt.Sprintf("spec.existingResourcePolicy: %q is not a policy; use none or update", spec.ExistingResourcePolicy))
	}
	sources := make([]string, 0, len(spec.NamespaceMapping))
	for from := range spec.NamespaceMapping {
		sources = append(sources, from)
	}
	sort.Strings(sources)
	targets := map[string]string{}
	for _, from := range sources {
		to := spec.NamespaceMapping[from]
		for _, ns := range []string{from, to} {
			for _, e := range validation.IsDNS1123Label(ns) {
				msgs = append(msgs, fmt.Sprintf("spec.namespaceMapping: %q is not a valid namespace name: %s", ns, e))
			}
		}
		if other, ok := targets[to]; ok {
			msgs = append(msgs, fmt.Sprintf("spec.namespaceMapping: %q and %q both map to %q; map each namespace to its own target", other, from, to))
		}
		targets[to] = from
	}
	bs := &v1.BackupSpec{
		IncludedNamespaces: spec.IncludedNamespaces, ExcludedNamespaces: spec.ExcludedNamespaces,
		IncludedResources: spec.IncludedResources, ExcludedResources: spec.ExcludedResources,
		IncludeClusterResources: spec.IncludeClusterResources,
		LabelSelector:           spec.LabelSelector, OrLabelSelectors: spec.OrLabelSelectors,
	}
	_, errs := selection.NewResourceFilter(bs, nil)
	for _, err := range errs {
		msgs = append(msgs, err.Error())
	}
	if _, err := selection.NewLabelMatcher(bs); err != nil {
		msgs = append(msgs, err.Error())
	}
	return msgs
}

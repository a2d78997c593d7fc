package selection

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

var namespacesGR = schema.GroupResource{Resource: "namespaces"}

// alwaysExcluded are never collected into a backup. Velero's backup
// controller adds them to every backup's excludes: CSI VolumeSnapshots and
// their contents found in the cluster are intermediate objects, and the
// snapshots a backup takes are handled by its own item actions.
var alwaysExcluded = []schema.GroupResource{
	{Group: "snapshot.storage.k8s.io", Resource: "volumesnapshots"},
	{Group: "snapshot.storage.k8s.io", Resource: "volumesnapshotcontents"},
}

// AlwaysExcludedResources lists the types no backup collects, whatever its
// filters say.
func AlwaysExcludedResources() []schema.GroupResource {
	return append([]schema.GroupResource(nil), alwaysExcluded...)
}

func isAlwaysExcluded(gr schema.GroupResource) bool {
	for _, ex := range alwaysExcluded {
		if gr == ex {
			return true
		}
	}
	return false
}

// ResourceFilter decides which resource types a backup collects. It holds
// both of Velero's styles:
//
//   - old: includedResources/excludedResources plus includeClusterResources
//     (nil: cluster-scoped types only when every namespace is included;
//     true: yes; false: no);
//   - scoped: included/excludedClusterScopedResources and
//     included/excludedNamespaceScopedResources. Cluster-scoped types are
//     collected when listed (or "*"), namespaces always unless excluded,
//     and all of them when both cluster lists are empty and the backup
//     takes every namespace and every namespaced type.
//
// The scoped style is used when a scoped list is set and no old field is;
// a spec mixing both is invalid, and is then read in the old style, as
// Velero does.
type ResourceFilter struct {
	ns     *NamespaceFilter
	scoped bool
	// old is set when the spec uses the old style's fields.
	old            bool
	includeCluster *bool

	// old style
	includes, excludes matcher

	// scoped style
	nsIncludes, nsExcludes           matcher
	clusterIncludes, clusterExcludes matcher
	clusterDefault                   bool

	warnings []string
}

// NewResourceFilter resolves the spec's resource lists with r and validates
// the spec's namespace and resource filters. The errors name the offending
// fields; a spec with errors must be refused (FailedValidation), though the
// returned filter is usable for describing it. r may be nil, which keeps
// every name as written.
func NewResourceFilter(spec *v1.BackupSpec, r ResourceResolver) (*ResourceFilter, []error) {
	if spec == nil {
		spec = &v1.BackupSpec{}
	}
	f := &ResourceFilter{
		ns:             NamespaceFilterFor(spec),
		includeCluster: spec.IncludeClusterResources,
	}
	oldFields := OldResourceFilterFields(spec)
	f.old = len(oldFields) > 0
	errs := ValidateNamespaceIncludesExcludes("spec.Namespaces", spec.IncludedNamespaces, spec.ExcludedNamespaces)

	newFields := setFields(
		specField{"spec.includedClusterScopedResources", len(spec.IncludedClusterScopedResources) > 0},
		specField{"spec.excludedClusterScopedResources", len(spec.ExcludedClusterScopedResources) > 0},
		specField{"spec.includedNamespaceScopedResources", len(spec.IncludedNamespaceScopedResources) > 0},
		specField{"spec.excludedNamespaceScopedResources", len(spec.ExcludedNamespaceScopedResources) > 0})
	if len(oldFields) > 0 && len(newFields) > 0 {
		errs = append(errs, &FieldError{
			Field: strings.Join(oldFields, ", "),
			Detail: fmt.Sprintf("cannot be combined with %s; use either includedResources/excludedResources/includeClusterResources "+
				"or the cluster-scoped and namespace-scoped resource lists", strings.Join(newFields, ", ")),
		})
	}
	errs = append(errs, ValidateIncludesExcludes("spec.Resources", spec.IncludedResources, spec.ExcludedResources)...)
	errs = append(errs, ValidateScopedIncludesExcludes("spec.ClusterScopedResources", spec.IncludedClusterScopedResources, spec.ExcludedClusterScopedResources)...)
	errs = append(errs, ValidateScopedIncludesExcludes("spec.NamespaceScopedResources", spec.IncludedNamespaceScopedResources, spec.ExcludedNamespaceScopedResources)...)

	f.scoped = len(oldFields) == 0 && len(newFields) > 0
	if f.scoped {
		f.nsIncludes = f.resolveScoped("spec.includedNamespaceScopedResources", spec.IncludedNamespaceScopedResources, true, r)
		f.nsExcludes = f.resolveScoped("spec.excludedNamespaceScopedResources", spec.ExcludedNamespaceScopedResources, true, r)
		f.clusterIncludes = f.resolveScoped("spec.includedClusterScopedResources", spec.IncludedClusterScopedResources, false, r)
		f.clusterExcludes = f.resolveScoped("spec.excludedClusterScopedResources", spec.ExcludedClusterScopedResources, false, r)
		f.setClusterDefault()
	} else {
		f.includes = f.resolveOld("spec.includedResources", spec.IncludedResources, r, true)
		f.excludes = f.resolveOld("spec.excludedResources", spec.ExcludedResources, r, false)
	}
	return f, errs
}

// setClusterDefault decides whether a scoped filter takes every
// cluster-scoped type: when neither cluster list names anything and the
// backup takes every namespace and every namespaced type. The
// always-excluded CSI types stay out of these lists. Velero's controller
// appends them to the excludes, after which a backup in this style could
// never qualify for the whole-cluster default its filter documents;
// Lifeboat keeps the documented meaning.
func (f *ResourceFilter) setClusterDefault() {
	f.clusterDefault = f.clusterIncludes.empty() && f.clusterExcludes.empty() && f.ns.IncludesAll() &&
		f.nsExcludes.empty() && (f.nsIncludes.empty() || f.nsIncludes.onlyStar())
}

// OldResourceFilterFields names the fields of spec in Velero's old filter
// style (includedResources, excludedResources, includeClusterResources),
// nil when none is set. Velero refuses a backup setting any of them with a
// resource policy's includeExcludePolicy.
func OldResourceFilterFields(spec *v1.BackupSpec) []string {
	return setFields(
		specField{"spec.includedResources", len(spec.IncludedResources) > 0},
		specField{"spec.excludedResources", len(spec.ExcludedResources) > 0},
		specField{"spec.includeClusterResources", spec.IncludeClusterResources != nil})
}

// PolicyFilters are a resource policy's includeExcludePolicy lists, which
// mean what the spec's scoped lists of the same names mean.
type PolicyFilters struct {
	IncludedClusterScopedResources   []string
	ExcludedClusterScopedResources   []string
	IncludedNamespaceScopedResources []string
	ExcludedNamespaceScopedResources []string
}

// CombineWithPolicy merges a resource policy's includeExcludePolicy into
// the filter, as Velero merges it: the spec's lists come first, and each
// policy entry (resolved with r; one of the other scope is ignored with a
// warning) is added to its list only when neither of the spec's lists of
// that scope names it already, "*" naming everything. Excludes are merged
// before includes, namespace-scoped before cluster-scoped. A spec in the
// old style takes no policy lists (such a backup is refused: see
// OldResourceFilterFields); a spec with no resource lists at all becomes a
// scoped one.
func (f *ResourceFilter) CombineWithPolicy(p PolicyFilters, r ResourceResolver) {
	if f.old {
		return
	}
	f.scoped = true
	const field = "includeExcludePolicy."
	merge := func(name string, names []string, namespacedList bool, into *matcher, other *matcher) {
		for _, n := range names {
			if n == All {
				continue // refused when the policy is parsed
			}
			key, namespaced, known := f.resolve(field+name, n, r)
			if known && namespaced != namespacedList {
				f.warn("%s%s: %q (%s) is %s; ignored", field, name, n, key, scopeName(namespaced))
				continue
			}
			f.addPolicyEntry(key, into, other)
		}
	}
	merge("excludedNamespaceScopedResources", p.ExcludedNamespaceScopedResources, true, &f.nsExcludes, &f.nsIncludes)
	merge("includedNamespaceScopedResources", p.IncludedNamespaceScopedResources, true, &f.nsIncludes, &f.nsExcludes)
	merge("excludedClusterScopedResources", p.ExcludedClusterScopedResources, false, &f.clusterExcludes, &f.clusterIncludes)
	merge("includedClusterScopedResources", p.IncludedClusterScopedResources, false, &f.clusterIncludes, &f.clusterExcludes)
	f.setClusterDefault()
}

func (f *ResourceFilter) addPolicyEntry(key string, into, other *matcher) {
	named := func(m *matcher) bool { return m.star || m.match(key) }
	if !named(into) && !named(other) {
		into.add(key)
	}
}

type specField struct {
	name string
	set  bool
}

func setFields(fields ...specField) []string {
	var names []string
	for _, f := range fields {
		if f.set {
			names = append(names, f.name)
		}
	}
	return names
}

// resolve maps a written name to the string it is matched as: the
// group-resource for a known type, the name as written otherwise.
func (f *ResourceFilter) resolve(field, name string, r ResourceResolver) (key string, namespaced, known bool) {
	if isPattern(name) {
		return name, false, false
	}
	if r != nil {
		gr, namespaced, err := r.ResolveResource(name)
		if err == nil {
			return gr.String(), namespaced, true
		}
		if !errors.Is(err, ErrUnknownResource) {
			f.warn("%s: %q could not be resolved (%v); kept as written", field, name, err)
			return name, false, false
		}
	}
	f.warn("%s: %q is not a resource type the API server serves; kept as written", field, name)
	return name, false, false
}

func (f *ResourceFilter) resolveOld(field string, names []string, r ResourceResolver, includes bool) matcher {
	var keys []string
	for _, name := range names {
		if name == All {
			// "*" is meaningful in includes only; Velero drops it from
			// excludes (validation reports it).
			if includes {
				keys = append(keys, All)
			}
			continue
		}
		key, namespaced, known := f.resolve(field, name, r)
		if includes && known && !namespaced {
			f.warnClusterInclude(field, name, key)
		}
		keys = append(keys, key)
	}
	return newMatcher(keys)
}

// warnClusterInclude explains a cluster-scoped type named in
// includedResources that the old style's cluster rules leave out anyway.
func (f *ResourceFilter) warnClusterInclude(field, name, key string) {
	switch {
	case f.includeCluster != nil && !*f.includeCluster:
		f.warn("%s: %q is cluster-scoped and spec.includeClusterResources is false; it is not backed up", field, name)
	case f.includeCluster == nil && !f.ns.IncludesAll() && key != namespacesGR.String():
		f.warn("%s: %q is cluster-scoped; with a namespace filter it is backed up only when spec.includeClusterResources is true", field, name)
	}
}

func (f *ResourceFilter) resolveScoped(field string, names []string, namespacedList bool, r ResourceResolver) matcher {
	var keys []string
	for _, name := range names {
		if name == All {
			keys = append(keys, All)
			continue
		}
		key, namespaced, known := f.resolve(field, name, r)
		if known && namespaced != namespacedList {
			f.warn("%s: %q (%s) is %s; ignored", field, name, key, scopeName(namespaced))
			continue
		}
		keys = append(keys, key)
	}
	return newMatcher(keys)
}

func scopeName(namespaced bool) string {
	if namespaced {
		return "namespace-scoped"
	}
	return "cluster-scoped"
}

func (f *ResourceFilter) warn(format string, args ...any) {
	f.warnings = append(f.warnings, fmt.Sprintf(format, args...))
}

// Warnings lists what the filter noticed but accepted: names discovery does
// not know (kept as written, as Velero keeps them), names in a list of the
// wrong scope (ignored, as Velero ignores them), and included cluster-scoped
// types that the old style's cluster rules leave out.
func (f *ResourceFilter) Warnings() []string {
	return append([]string(nil), f.warnings...)
}

// Namespaces is the spec's namespace filter.
func (f *ResourceFilter) Namespaces() *NamespaceFilter { return f.ns }

// ShouldIncludeResource reports whether the backup collects items of type
// gr, which discovery says is namespaced or not.
func (f *ResourceFilter) ShouldIncludeResource(gr schema.GroupResource, namespaced bool) bool {
	if isAlwaysExcluded(gr) {
		return false
	}
	return f.ShouldRestoreResource(gr, namespaced)
}

// ShouldRestoreResource is what a restore's filters say of type gr: as
// ShouldIncludeResource, but a backup's CSI VolumeSnapshots and contents
// are judged like any other type (only backups leave them out).
func (f *ResourceFilter) ShouldRestoreResource(gr schema.GroupResource, namespaced bool) bool {
	key := gr.String()
	if f.scoped {
		if namespaced {
			if f.nsExcludes.star || f.nsExcludes.match(key) {
				return false
			}
			return f.nsIncludes.empty() || f.nsIncludes.star || f.nsIncludes.match(key)
		}
		if f.clusterExcludes.star || f.clusterExcludes.match(key) {
			return false
		}
		if f.clusterDefault {
			return true
		}
		return f.clusterIncludes.star || f.clusterIncludes.match(key) || gr == namespacesGR
	}
	if !namespaced {
		if f.includeCluster != nil && !*f.includeCluster {
			return false
		}
		// In auto mode only a whole-cluster backup collects cluster-scoped
		// types directly; namespaces themselves are still considered.
		if f.includeCluster == nil && !f.ns.IncludesAll() && gr != namespacesGR {
			return false
		}
	}
	return f.oldIncludes(key)
}

func (f *ResourceFilter) oldIncludes(key string) bool {
	if f.excludes.match(key) {
		return false
	}
	return f.includes.empty() || f.includes.star || f.includes.match(key)
}

// ShouldIncludeAdditionalItem reports whether an item that an item action
// adds to the backup (such as the PersistentVolume of a claim) is kept.
// Velero checks such items more loosely than collected types: a
// namespaced type must pass ShouldIncludeResource, but a cluster-scoped one
// is dropped only when it is excluded (in the old style also when
// includeClusterResources is false, or when it is nil and includedResources
// leaves the type out), and Namespace objects are always kept.
func (f *ResourceFilter) ShouldIncludeAdditionalItem(gr schema.GroupResource, namespaced bool) bool {
	if namespaced {
		return f.ShouldIncludeResource(gr, true)
	}
	if gr == namespacesGR {
		return true
	}
	if isAlwaysExcluded(gr) {
		return false
	}
	key := gr.String()
	if f.scoped {
		return !f.clusterExcludes.star && !f.clusterExcludes.match(key)
	}
	if f.excludes.match(key) {
		return false
	}
	if f.includeCluster != nil {
		return *f.includeCluster
	}
	return f.oldIncludes(key)
}

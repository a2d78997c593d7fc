package selection

import (
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// ExcludeFromBackupLabel set to "true" keeps an item out of every backup,
// whatever the filters and selectors say. On a namespace it also excludes
// the namespace's items: Velero adds such namespaces to excludedNamespaces
// when it starts a backup.
const ExcludeFromBackupLabel = "velero.io/exclude-from-backup"

// ExcludedFromBackup reports whether an item's labels opt it out.
func ExcludedFromBackup(itemLabels map[string]string) bool {
	return itemLabels[ExcludeFromBackupLabel] == "true"
}

// LabelMatcher is a backup's labelSelector or orLabelSelectors.
type LabelMatcher struct {
	single labels.Selector
	or     []labels.Selector
}

// NewLabelMatcher converts the spec's selectors. Setting both labelSelector
// and orLabelSelectors is an error, as in Velero, which refuses the spec
// when both are non-nil, even if the or-list is empty.
func NewLabelMatcher(spec *v1.BackupSpec) (*LabelMatcher, error) {
	m := &LabelMatcher{}
	if spec == nil {
		return m, nil
	}
	if spec.LabelSelector != nil && spec.OrLabelSelectors != nil {
		return nil, &FieldError{"spec.labelSelector, spec.orLabelSelectors", "only one of them can be set"}
	}
	if spec.LabelSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(spec.LabelSelector)
		if err != nil {
			return nil, &FieldError{"spec.labelSelector", err.Error()}
		}
		m.single = sel
	}
	var errs []error
	for i, ls := range spec.OrLabelSelectors {
		if ls == nil {
			// Velero would list with the selector "<none>", which the API
			// server refuses; saying so here is clearer.
			errs = append(errs, &FieldError{fmt.Sprintf("spec.orLabelSelectors[%d]", i), "must not be null"})
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(ls)
		if err != nil {
			errs = append(errs, &FieldError{fmt.Sprintf("spec.orLabelSelectors[%d]", i), err.Error()})
			continue
		}
		m.or = append(m.or, sel)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return m, nil
}

// Matches reports whether an item with these labels is selected. With no
// selector every item is.
func (m *LabelMatcher) Matches(itemLabels map[string]string) bool {
	set := labels.Set(itemLabels)
	if len(m.or) > 0 {
		for _, sel := range m.or {
			if sel.Matches(set) {
				return true
			}
		}
		return false
	}
	return m.single == nil || m.single.Matches(set)
}

// Selector returns the one selector that the engine can pass to LIST so the
// API server filters: labelSelector, everything when nothing is set, or the
// only entry of a one-element orLabelSelectors. ok is false when several
// or-selectors must be listed one by one (or listed unfiltered and checked
// with Matches).
func (m *LabelMatcher) Selector() (labels.Selector, bool) {
	switch {
	case len(m.or) > 1:
		return nil, false
	case len(m.or) == 1:
		return m.or[0], true
	case m.single != nil:
		return m.single, true
	}
	return labels.Everything(), true
}

// OrSelectors returns the or-selectors, each to be listed separately.
func (m *LabelMatcher) OrSelectors() []labels.Selector {
	return append([]labels.Selector(nil), m.or...)
}

// Selects reports whether any label selector is set, so that not every item
// passes.
func (m *LabelMatcher) Selects() bool { return m.single != nil || len(m.or) > 0 }

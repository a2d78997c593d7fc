// Package selection decides what a backup contains, with Velero's
// include/exclude, scope and label-selector rules: namespaces, resource
// types (both the old includedResources/includeClusterResources style and
// the newer cluster-/namespace-scoped lists) and labels. It is pure: the
// backup engine supplies discovery through a ResourceResolver and asks the
// filters per resource type and per item.
package selection

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation"
)

// All is the entry that stands for everything in an includes list.
const All = "*"

// matcher is one list of entries: exact names, glob patterns and "*".
type matcher struct {
	star  bool
	exact map[string]struct{}
	globs []pattern
	// n counts distinct entries, "*" included, as written.
	n int
}

func newMatcher(entries []string) matcher {
	m := matcher{}
	seen := make(map[string]struct{}, len(entries))
	for _, e := range entries {
		if _, dup := seen[e]; dup {
			continue
		}
		seen[e] = struct{}{}
		m.add(e)
	}
	return m
}

func (m *matcher) add(e string) {
	m.n++
	if e == All {
		m.star = true
		return
	}
	if isPattern(e) {
		if p, err := compilePattern(e); err == nil {
			m.globs = append(m.globs, p)
			return
		}
		// A pattern that does not compile is held as a literal; it matches
		// no real name, and validation reports it where it matters.
	}
	if m.exact == nil {
		m.exact = make(map[string]struct{})
	}
	m.exact[e] = struct{}{}
}

func (m *matcher) empty() bool { return m.n == 0 }

// onlyStar reports whether the list is exactly "*".
func (m *matcher) onlyStar() bool { return m.star && m.n == 1 }

// match reports whether s is named by an exact entry or a pattern; "*" is
// left to the caller, whose rules for it differ by list.
func (m *matcher) match(s string) bool {
	if _, ok := m.exact[s]; ok {
		return true
	}
	for i := range m.globs {
		if m.globs[i].match(s) {
			return true
		}
	}
	return false
}

// IncludesExcludes is a pair of string lists with Velero's semantics:
// excludes win; empty includes, or "*", include everything; entries with
// "*", "?" or "[...]" are glob patterns. "*" in excludes is ignored, as
// Velero ignores it when it builds its filters (validation refuses it).
type IncludesExcludes struct {
	includes matcher
	excludes matcher
}

// NewIncludesExcludes builds the pair; duplicates are harmless.
func NewIncludesExcludes(includes, excludes []string) *IncludesExcludes {
	return &IncludesExcludes{includes: newMatcher(includes), excludes: newMatcher(excludes)}
}

// ShouldInclude reports whether s is included and not excluded.
func (ie *IncludesExcludes) ShouldInclude(s string) bool {
	if ie.excludes.match(s) {
		return false
	}
	return ie.includes.empty() || ie.includes.star || ie.includes.match(s)
}

// IncludesEverything reports whether nothing is filtered out: the includes
// are empty or just "*", and there are no excludes. Velero calls this
// IncludeEverything and gates cluster-scoped resources on it.
func (ie *IncludesExcludes) IncludesEverything() bool {
	return ie.excludes.empty() && (ie.includes.empty() || ie.includes.onlyStar())
}

// FieldError is a validation error about one spec field (or a set of
// fields), in the form Backup status.validationErrors shows.
type FieldError struct {
	Field  string
	Detail string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Detail }

// pairFields names the two fields of a pair: "spec.Namespaces" gives
// "spec.includedNamespaces" and "spec.excludedNamespaces".
func pairFields(field string) (included, excluded string) {
	prefix, noun := "", field
	if i := strings.LastIndexByte(field, '.'); i >= 0 {
		prefix, noun = field[:i+1], field[i+1:]
	}
	if r, size := utf8.DecodeRuneInString(noun); size > 0 {
		noun = string(unicode.ToUpper(r)) + noun[size:]
	}
	return prefix + "included" + noun, prefix + "excluded" + noun
}

// ValidateIncludesExcludes applies Velero's rules for a plain pair (namespaces
// and the old includedResources/excludedResources): "*" in includes must
// stand alone, excludes cannot hold "*", and nothing may be both included
// and excluded. field names the pair by its shared noun with an optional
// path, e.g. "spec.Namespaces" for spec.includedNamespaces and
// spec.excludedNamespaces; the errors name the exact field.
func ValidateIncludesExcludes(field string, includes, excludes []string) []error {
	inField, exField := pairFields(field)
	var errs []error
	if hasStarWithOthers(includes) {
		errs = append(errs, &FieldError{inField, `"*" already includes everything and must be the only entry`})
	}
	if contains(excludes, All) {
		errs = append(errs, &FieldError{exField, fmt.Sprintf(`"*" is not allowed; to exclude everything, name what to keep in %s instead`, inField)})
	}
	return append(errs, bothIncludedAndExcluded(inField, exField, includes, excludes)...)
}

// ValidateScopedIncludesExcludes applies Velero's rules for the scoped
// resource lists (includedClusterScopedResources and friends), where "*" in
// excludes is allowed and means "none of this scope".
func ValidateScopedIncludesExcludes(field string, includes, excludes []string) []error {
	inField, exField := pairFields(field)
	var errs []error
	if hasStarWithOthers(includes) {
		errs = append(errs, &FieldError{inField, `"*" already includes everything and must be the only entry`})
	}
	if hasStarWithOthers(excludes) {
		errs = append(errs, &FieldError{exField, `"*" already excludes everything and must be the only entry`})
	}
	if contains(excludes, All) && len(includes) > 0 {
		errs = append(errs, &FieldError{exField, fmt.Sprintf(`"*" excludes everything, so %s must be empty`, inField)})
	}
	return append(errs, bothIncludedAndExcluded(inField, exField, includes, excludes)...)
}

// ValidateNamespaceIncludesExcludes adds to the plain rules a check of each
// entry: a namespace name (DNS-1123 label), "*", an empty string (which
// Velero accepts and which matches no namespace), or a pattern of the
// supported glob subset.
func ValidateNamespaceIncludesExcludes(field string, includes, excludes []string) []error {
	errs := ValidateIncludesExcludes(field, includes, excludes)
	inField, exField := pairFields(field)
	errs = append(errs, validateNamespaceEntries(inField, includes)...)
	return append(errs, validateNamespaceEntries(exField, excludes)...)
}

func validateNamespaceEntries(field string, entries []string) []error {
	var errs []error
	for i, e := range entries {
		if e == "" || e == All {
			continue
		}
		if err := validateNamespaceEntry(e); err != nil {
			errs = append(errs, &FieldError{fmt.Sprintf("%s[%d]", field, i), fmt.Sprintf("%q is not a namespace name or pattern: %v", e, err)})
		}
	}
	return errs
}

func validateNamespaceEntry(e string) error {
	name := e
	if isPattern(e) || strings.ContainsAny(e, "]|(){},!") {
		if _, err := compilePattern(e); err != nil {
			return err
		}
		// What is left once each wildcard stands for one letter must be a
		// valid name, or the pattern could never match a namespace.
		name = placeholderName(e)
	}
	if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
		return fmt.Errorf("%s", strings.Join(msgs, "; "))
	}
	return nil
}

// placeholderName replaces every wildcard and class of a compiled-clean
// pattern with "x".
func placeholderName(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '*', '?':
			b.WriteByte('x')
		case '[':
			i += strings.IndexByte(p[i:], ']')
			b.WriteByte('x')
		default:
			b.WriteByte(p[i])
		}
	}
	return b.String()
}

func hasStarWithOthers(list []string) bool {
	if !contains(list, All) {
		return false
	}
	for _, e := range list {
		if e != All {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

func bothIncludedAndExcluded(inField, exField string, includes, excludes []string) []error {
	var errs []error
	seen := make(map[string]struct{}, len(excludes))
	for _, e := range excludes {
		if _, dup := seen[e]; dup || e == All {
			continue
		}
		seen[e] = struct{}{}
		if contains(includes, e) {
			errs = append(errs, &FieldError{exField, fmt.Sprintf("%q is also in %s; an entry cannot be both included and excluded", e, inField)})
		}
	}
	return errs
}

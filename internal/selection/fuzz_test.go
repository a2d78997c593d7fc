package selection

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

// FuzzSelectors feeds the filters' parsers what a Backup or Restore spec
// (include/exclude lists) and a plugin's AppliesTo (a label selector
// string) may hold. Nothing may panic; a glob that compiles matches
// exactly what the equivalent regular expression matches; excludes win;
// every validation error names its field; a bad label selector is named.
func FuzzSelectors(f *testing.F) {
	f.Add("kube-*,ns-[a-c]?", "kube-system", "kube-public", "app=web,tier in (a,b)")
	f.Add("*", "", "default", "")
	f.Add("a*b*c,é?,[z-a]", "*", "aXbYc", "!x,y notin (z)")
	f.Add("ns-[,**,{a,b}", "a|b", "ns-", "x=(")
	f.Fuzz(func(t *testing.T, includes, excludes, name, selector string) {
		inc, exc := splitList(includes), splitList(excludes)

		for _, e := range append(append([]string{}, inc...), exc...) {
			if p, err := compilePattern(e); err == nil && utf8.ValidString(e) {
				re := regexp.MustCompile(globRegexp(e))
				if got, want := p.match(name), re.MatchString(name); got != want {
					t.Fatalf("pattern %q on %q: match %v, regexp %s says %v", e, name, got, re, want)
				}
			}
		}

		ie := NewIncludesExcludes(inc, exc)
		included := ie.ShouldInclude(name)
		for _, e := range exc {
			if e == name && e != All && included {
				t.Fatalf("%q is excluded by name but included", name)
			}
		}
		if !included && !isPattern(name) && contains(inc, name) && len(exc) == 0 {
			t.Fatalf("%q is included by name but not included", name)
		}

		for _, err := range ValidateNamespaceIncludesExcludes("spec.Namespaces", inc, exc) {
			var fe *FieldError
			if !errors.As(err, &fe) || !(strings.HasPrefix(fe.Field, "spec.includedNamespaces") || strings.HasPrefix(fe.Field, "spec.excludedNamespaces")) || fe.Detail == "" {
				t.Fatalf("validation error %v does not name its field", err)
			}
		}

		at, err := NewAppliesTo(api.ResourceSelector{
			IncludedNamespaces: inc, ExcludedNamespaces: exc,
			IncludedResources: inc, ExcludedResources: exc, LabelSelector: selector,
		}, nil)
		if err != nil {
			if !strings.Contains(err.Error(), fmt.Sprintf("label selector %q", selector)) {
				t.Fatalf("error %q does not name the selector", err)
			}
			return
		}
		gr := schema.GroupResource{Resource: name}
		matched := at.Matches(gr, name, map[string]string{"app": name})
		if matched && !at.MatchesResource(gr, true) {
			t.Fatalf("an item of %v matches, but the resource does not", gr)
		}
	})
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// globRegexp writes a pattern that compilePattern accepted as the regular
// expression Velero's documentation describes: "*" any run, "?" one
// character, "[...]" one of a set of characters and ranges.
func globRegexp(p string) string {
	var b strings.Builder
	b.WriteString(`^(?s:`)
	for i := 0; i < len(p); {
		r, size := utf8.DecodeRuneInString(p[i:])
		switch r {
		case '*':
			b.WriteString(`.*`)
		case '?':
			b.WriteString(`.`)
		case '[':
			end := i + strings.IndexByte(p[i:], ']')
			b.WriteByte('[')
			class := []rune(p[i+1 : end])
			for j := 0; j < len(class); j++ {
				lo, hi := class[j], class[j]
				if j+2 < len(class) && class[j+1] == '-' {
					hi = class[j+2]
					j += 2
				}
				fmt.Fprintf(&b, `\x{%x}-\x{%x}`, lo, hi)
			}
			b.WriteByte(']')
			i = end + 1
			continue
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
		i += size
	}
	b.WriteString(`)$`)
	return b.String()
}

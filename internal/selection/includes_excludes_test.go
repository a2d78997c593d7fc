package selection

import (
	"errors"
	"reflect"
	"testing"
)

func TestPatternMatch(t *testing.T) {
	tests := []struct {
		pattern string
		matches []string
		misses  []string
	}{
		{"kube-*", []string{"kube-system", "kube-", "kube-a.b"}, []string{"kube", "xkube-system"}},
		{"*-prod", []string{"app-prod", "-prod"}, []string{"app-prod2", "prod"}},
		{"*kube*", []string{"kube", "my-kube-ns"}, []string{"kub"}},
		{"ns?", []string{"ns1", "nsa"}, []string{"ns", "ns10"}},
		{"ns-[123]", []string{"ns-1", "ns-3"}, []string{"ns-4", "ns-12"}},
		{"ns-[a-c]x", []string{"ns-ax", "ns-cx"}, []string{"ns-dx", "ns-a"}},
		{"app-[0-9]*", []string{"app-1", "app-42-east"}, []string{"app-x"}},
		{"*.apps", []string{"deployments.apps"}, []string{"deployments", "apps"}},
		{"a*b*c", []string{"abc", "aXbYc", "abbbc", "abcbc"}, []string{"acb", "ab"}},
		{"é?", []string{"éa", "éé"}, []string{"é", "éab"}},
	}
	for _, tc := range tests {
		t.Run(tc.pattern, func(t *testing.T) {
			p, err := compilePattern(tc.pattern)
			if err != nil {
				t.Fatalf("compile: %v", err)
			}
			for _, s := range tc.matches {
				if !p.match(s) {
					t.Errorf("%q does not match %q", tc.pattern, s)
				}
			}
			for _, s := range tc.misses {
				if p.match(s) {
					t.Errorf("%q matches %q", tc.pattern, s)
				}
			}
		})
	}
}

func TestCompilePatternRefusesUnsupportedSyntax(t *testing.T) {
	for _, p := range []string{"kube-**", "a|b", "(a)", "{a,b}", "!a", "ns-[", "ns-[]", "ns-]", "ns-[^a]", "ns-[z-a]", "ns-[[a]"} {
		t.Run(p, func(t *testing.T) {
			if _, err := compilePattern(p); err == nil {
				t.Errorf("compilePattern(%q) succeeded", p)
			}
		})
	}
}

func TestIncludesExcludes(t *testing.T) {
	tests := []struct {
		name       string
		includes   []string
		excludes   []string
		item       string
		want       bool
		everything bool
	}{
		{name: "empty includes everything", item: "foo", want: true, everything: true},
		{name: "star includes everything", includes: []string{"*"}, item: "foo", want: true, everything: true},
		{name: "listed item", includes: []string{"foo", "bar"}, item: "foo", want: true},
		{name: "unlisted item", includes: []string{"foo", "bar"}, item: "baz", want: false},
		{name: "excluded beats star", includes: []string{"*"}, excludes: []string{"foo"}, item: "foo", want: false},
		{name: "other items pass an exclude", includes: []string{"*"}, excludes: []string{"foo"}, item: "bar", want: true},
		{name: "excluded beats included", includes: []string{"foo"}, excludes: []string{"foo"}, item: "foo", want: false},
		{name: "star with others still includes everything", includes: []string{"*", "foo"}, item: "bar", want: true},
		{name: "pattern include", includes: []string{"kube-*"}, item: "kube-system", want: true},
		{name: "pattern include miss", includes: []string{"kube-*"}, item: "default", want: false},
		{name: "pattern exclude", excludes: []string{"kube-*"}, item: "kube-public", want: false},
		{name: "star in excludes is ignored", excludes: []string{"*"}, item: "foo", want: true, everything: false},
		{name: "empty string includes only the empty name", includes: []string{""}, item: "foo", want: false},
		{name: "matching is case-sensitive", includes: []string{"Foo"}, item: "foo", want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ie := NewIncludesExcludes(tc.includes, tc.excludes)
			if got := ie.ShouldInclude(tc.item); got != tc.want {
				t.Errorf("ShouldInclude(%q) = %v, want %v", tc.item, got, tc.want)
			}
			if got := ie.IncludesEverything(); got != tc.everything {
				t.Errorf("IncludesEverything() = %v, want %v", got, tc.everything)
			}
		})
	}
}

func errorStrings(errs []error) []string {
	var out []string
	for _, err := range errs {
		out = append(out, err.Error())
	}
	return out
}

func TestValidateIncludesExcludes(t *testing.T) {
	tests := []struct {
		name     string
		field    string
		includes []string
		excludes []string
		want     []string
	}{
		{name: "empty", field: "spec.Namespaces"},
		{name: "star alone", field: "spec.Namespaces", includes: []string{"*"}},
		{
			name: "star with others", field: "spec.Namespaces", includes: []string{"*", "foo"},
			want: []string{`spec.includedNamespaces: "*" already includes everything and must be the only entry`},
		},
		{
			name: "star in excludes", field: "spec.Namespaces", includes: []string{"foo"}, excludes: []string{"*"},
			want: []string{`spec.excludedNamespaces: "*" is not allowed; to exclude everything, name what to keep in spec.includedNamespaces instead`},
		},
		{
			name: "both included and excluded, reported once", field: "spec.Resources", includes: []string{"foo", "bar"}, excludes: []string{"bar", "bar", "baz"},
			want: []string{`spec.excludedResources: "bar" is also in spec.includedResources; an entry cannot be both included and excluded`},
		},
		{
			name: "field without a path", field: "resources", includes: []string{"a"}, excludes: []string{"a"},
			want: []string{`excludedResources: "a" is also in includedResources; an entry cannot be both included and excluded`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := errorStrings(ValidateIncludesExcludes(tc.field, tc.includes, tc.excludes))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("errors:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestValidateScopedIncludesExcludes(t *testing.T) {
	const field = "spec.ClusterScopedResources"
	tests := []struct {
		name     string
		includes []string
		excludes []string
		want     []string
	}{
		{name: "empty"},
		{name: "star includes", includes: []string{"*"}},
		{name: "star excludes alone is allowed", excludes: []string{"*"}},
		{
			name: "star includes with others", includes: []string{"*", "foo"},
			want: []string{`spec.includedClusterScopedResources: "*" already includes everything and must be the only entry`},
		},
		{
			name: "star excludes with others", excludes: []string{"*", "foo"},
			want: []string{`spec.excludedClusterScopedResources: "*" already excludes everything and must be the only entry`},
		},
		{
			name: "star excludes with includes", includes: []string{"foo"}, excludes: []string{"*"},
			want: []string{`spec.excludedClusterScopedResources: "*" excludes everything, so spec.includedClusterScopedResources must be empty`},
		},
		{
			name: "both included and excluded", includes: []string{"foo", "bar"}, excludes: []string{"bar"},
			want: []string{`spec.excludedClusterScopedResources: "bar" is also in spec.includedClusterScopedResources; an entry cannot be both included and excluded`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := errorStrings(ValidateScopedIncludesExcludes(field, tc.includes, tc.excludes))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("errors:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestValidateNamespaceIncludesExcludes(t *testing.T) {
	tests := []struct {
		name       string
		includes   []string
		excludes   []string
		wantFields []string
	}{
		{name: "names", includes: []string{"foobar", "bar-321", "foo123bar"}, excludes: []string{"123bar"}},
		{name: "star", includes: []string{"*"}},
		{name: "empty string is allowed", includes: []string{""}},
		{name: "empty string exclude is allowed", includes: []string{"a"}, excludes: []string{""}},
		{name: "supported patterns", includes: []string{"kube-*", "test-?", "ns-[0-9]", "*kube*"}, excludes: []string{"*-test", "app-[a-c]"}},
		{name: "leading dash", includes: []string{"-123foo"}, wantFields: []string{"spec.includedNamespaces[0]"}},
		{name: "special characters", includes: []string{"ok", "foo.bar", "bar_321"}, excludes: []string{"$foo"},
			wantFields: []string{"spec.includedNamespaces[1]", "spec.includedNamespaces[2]", "spec.excludedNamespaces[0]"}},
		{name: "upper case", includes: []string{"Default"}, wantFields: []string{"spec.includedNamespaces[0]"}},
		{name: "consecutive stars", includes: []string{"kube-**"}, wantFields: []string{"spec.includedNamespaces[0]"}},
		{name: "regex alternation", excludes: []string{"test|prod"}, wantFields: []string{"spec.excludedNamespaces[0]"}},
		{name: "negation", includes: []string{"!kube-system"}, wantFields: []string{"spec.includedNamespaces[0]"}},
		{name: "braces", includes: []string{"app-{a,b}"}, wantFields: []string{"spec.includedNamespaces[0]"}},
		{name: "unclosed bracket", includes: []string{"ns-[0-9"}, wantFields: []string{"spec.includedNamespaces[0]"}},
		{name: "pattern that can never be a name", includes: []string{"*_x"}, wantFields: []string{"spec.includedNamespaces[0]"}},
		{name: "list rules still apply", includes: []string{"a"}, excludes: []string{"*", "a"},
			wantFields: []string{"spec.excludedNamespaces", "spec.excludedNamespaces"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, err := range ValidateNamespaceIncludesExcludes("spec.Namespaces", tc.includes, tc.excludes) {
				var fe *FieldError
				if !errors.As(err, &fe) {
					t.Fatalf("error %v is a %T, want *FieldError", err, err)
				}
				got = append(got, fe.Field)
			}
			if !reflect.DeepEqual(got, tc.wantFields) {
				t.Errorf("fields with errors: got %q, want %q", got, tc.wantFields)
			}
		})
	}
}

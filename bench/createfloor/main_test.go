package main

import "testing"

func TestEntry(t *testing.T) {
	for _, tc := range []struct {
		path, kind, ns, name string
	}{
		{"resources/configmaps/namespaces/a/cm-1.json", "configmaps", "a", "cm-1"},
		{"resources/namespaces/cluster/a.json", "namespaces", "", "a"},
		// The preferred-version copy of the same items is read once only.
		{"resources/configmaps/v1-preferredversion/namespaces/a/cm-1.json", "", "", ""},
		{"resources/namespaces/v1-preferredversion/cluster/a.json", "", "", ""},
		{"resources/secrets/namespaces/a/s.json", "", "", ""},
		{"metadata/version", "", "", ""},
	} {
		kind, ns, name := entry(tc.path)
		if kind != tc.kind || ns != tc.ns || name != tc.name {
			t.Errorf("entry(%q) = %q, %q, %q; want %q, %q, %q", tc.path, kind, ns, name, tc.kind, tc.ns, tc.name)
		}
	}
}

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The Velero-SDK compatibility plugin (test/compat, its own module that can
// import nothing of this one) serves the same store through Velero's
// framework. It holds store.go byte for byte, its SDK glue lives in other
// files, so the store the compatibility tests exercise is the one this
// package's tests cover. A byte comparison rather than a comparison of parsed
// functions: it needs no list of what to compare, so nothing added to one
// copy can be missed.
func TestCompatPluginHoldsTheSameStore(t *testing.T) {
	const (
		original = "store.go"
		copied   = "../../../test/compat/dirstore.go"
	)
	want, err := os.ReadFile(original)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.FromSlash(copied))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(got, want) {
		return
	}
	wantLines, gotLines := bytes.Split(want, []byte("\n")), bytes.Split(got, []byte("\n"))
	line := 0
	for line < len(wantLines) && line < len(gotLines) && bytes.Equal(wantLines[line], gotLines[line]) {
		line++
	}
	at := func(lines [][]byte) string {
		if line < len(lines) {
			return string(lines[line])
		}
		return "(end of file)"
	}
	t.Fatalf("test/compat/dirstore.go differs from examples/plugins/dirstore/store.go from line %d:\n"+
		"  store.go:    %s\n  dirstore.go: %s\n"+
		"edit store.go and copy it over (cp examples/plugins/dirstore/store.go test/compat/dirstore.go); "+
		"Velero-SDK glue belongs in test/compat/main.go",
		line+1, at(wantLines), at(gotLines))
}

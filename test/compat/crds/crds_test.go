// Package crds checks that the copy of Velero's CRDs that Lifeboat's main
// module tests against (internal/testutil/velerocrds) is Velero's own: the
// main module cannot depend on Velero, this module does. The comparison of
// Lifeboat's CRDs with them runs in the main module (config/crd).
package crds

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// copyDir is the copy, relative to this package.
const copyDir = "../../../internal/testutil/velerocrds/v1.18.3"

func TestVeleroCRDCopyIsVelerosOwn(t *testing.T) {
	// The module's directory, at the version go.mod requires (the copy's
	// directory is named after the same version).
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}} {{.Version}}", "github.com/vmware-tanzu/velero").Output()
	if err != nil {
		t.Fatalf("finding the Velero module: %v (run `go mod download` in test/compat)", err)
	}
	dir, version, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	if dir == "" {
		t.Fatalf("the Velero module is not downloaded; run `go mod download github.com/vmware-tanzu/velero` in test/compat")
	}
	if filepath.Base(copyDir) != version {
		t.Fatalf("the copy is of Velero %s, this module requires %s: copy config/crd/*/bases/*.yaml of %s into %s and rename it",
			filepath.Base(copyDir), version, version, filepath.Dir(copyDir))
	}
	theirs, err := filepath.Glob(filepath.Join(dir, "config", "crd", "*", "bases", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ours, err := filepath.Glob(filepath.Join(copyDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(theirs) == 0 {
		t.Fatalf("no CRDs under %s/config/crd", dir)
	}
	names := func(paths []string) []string {
		var out []string
		for _, p := range paths {
			out = append(out, filepath.Base(p))
		}
		sort.Strings(out)
		return out
	}
	if got, want := strings.Join(names(ours), " "), strings.Join(names(theirs), " "); got != want {
		t.Errorf("the copy holds\n  %s\nVelero %s ships\n  %s", got, version, want)
	}
	for _, p := range theirs {
		want, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(copyDir, filepath.Base(p)))
		if err != nil {
			continue // reported above
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from Velero's %s; copy it again", filepath.Base(p), p)
		}
	}
}

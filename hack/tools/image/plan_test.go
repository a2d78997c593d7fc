package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files from what the code does now")

// The images' contents, users and entry points, as a reviewer reads them:
// a change to any image shows up in the diff of testdata/plan.golden.
func TestPlan(t *testing.T) {
	specs := plan(planInput{
		Repo:         "ghcr.io/lifeboat-io/",
		Version:      "v1.2.3",
		PauseVersion: "1.0",
		Plugins:      []string{"annotate", "dirstore"},
		CABundle:     "/etc/ssl/certs/ca-certificates.crt",
		Busybox:      "/bin/busybox",
	})
	var out strings.Builder
	for _, s := range specs {
		fmt.Fprintf(&out, "%s\n  version %s\n  entrypoint %q user %s env %q\n  %s\n", s.Ref, s.Version, s.Entrypoint, s.User, s.Env, s.Description)
		for i, layer := range s.Layers {
			fmt.Fprintf(&out, "  layer %d\n", i+1)
			for _, e := range layer {
				line := fmt.Sprintf("    %-11s %5d:%-5d /%-35s %s", e.Mode, e.UID, e.GID, e.Path, source(e))
				out.WriteString(strings.TrimRight(line, " ") + "\n")
			}
		}
		fmt.Fprintf(&out, "  programs %q\n\n", programsOf(s))
	}
	golden := filepath.Join("testdata", "plan.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test -run TestPlan -update writes it)", err)
	}
	if got := out.String(); got != string(want) {
		t.Errorf("the plan differs from %s (go test -run TestPlan -update rewrites it after a deliberate change):\n%s", golden, got)
	}
}

// Every program an image names can be built.
func TestPlanNamesOnlyKnownPrograms(t *testing.T) {
	plugins := []string{"annotate", "dirstore"}
	known := programIndex(plugins)
	for _, s := range plan(planInput{Repo: "r", Version: "v", PauseVersion: "1", Plugins: plugins}) {
		for _, name := range programsOf(s) {
			if p, ok := known[name]; !ok || p.Name() != name {
				t.Errorf("image %s holds program %q, which the builder does not know", s.Name, name)
			}
		}
	}
}

func source(e entry) string {
	switch {
	case e.Program != "":
		return "program " + e.Program
	case e.HostFile != "":
		return "from the machine's " + e.HostFile
	case e.Data != "":
		return fmt.Sprintf("%q", e.Data)
	}
	return ""
}

package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `lifeboat policy validate` gives Velero's verdict on Velero's documented
// policy examples and on the policies of its validator's tests
// (pkg/policy/testdata/velero, which says where each comes from): exit 0
// for what Velero accepts, an error for what it refuses.
func TestPolicyValidateVeleroVerdicts(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "pkg", "policy", "testdata", "velero", "*.cases"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Velero cases (%v)", err)
	}
	n := 0
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		// Cases start with "=== valid NAME" or "=== invalid NAME".
		parts := strings.Split("\n"+string(data), "\n=== ")[1:]
		for _, part := range parts {
			head, doc, _ := strings.Cut(part, "\n")
			verdict, name, _ := strings.Cut(head, " ")
			n++
			t.Run(filepath.Base(file)+"/"+name, func(t *testing.T) {
				out, _, err := run(t, newTestFactory(nil), "policy", "validate", writePolicyFile(t, doc))
				switch {
				case verdict == "valid" && err != nil:
					t.Errorf("Velero accepts it; policy validate says %v:\n%s", err, out)
				case verdict == "invalid" && err == nil:
					t.Errorf("Velero refuses it; policy validate says:\n%s", out)
				}
			})
		}
	}
	if n < 100 {
		t.Errorf("%d cases; the Velero tables hold more", n)
	}
}

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
// for what Velero accepts, an error for what it refuses; with --restore,
// the verdict of Velero's restore on the policies of its restore guide.
func TestPolicyValidateVeleroVerdicts(t *testing.T) {
	var files []string
	for _, ext := range []string{"cases", "restorecases"} {
		found, err := filepath.Glob(filepath.Join("..", "..", "pkg", "policy", "testdata", "velero", "*."+ext))
		if err != nil || len(found) == 0 {
			t.Fatalf("no Velero %s (%v)", ext, err)
		}
		files = append(files, found...)
	}
	n := 0
	for _, file := range files {
		args := []string{"policy", "validate"}
		if strings.HasSuffix(file, ".restorecases") {
			args = append(args, "--restore")
		}
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
				out, _, err := run(t, newTestFactory(nil), append(args, writePolicyFile(t, doc))...)
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

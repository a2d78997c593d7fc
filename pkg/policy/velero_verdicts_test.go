package policy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// veleroCase is one policy from Velero's own tests or documentation with
// Velero v1.18.3's verdict on it.
type veleroCase struct {
	file, name string
	valid      bool
	doc        string
}

// readVeleroCases reads testdata/velero/*.cases (the files ext names):
// "#" lines before the first case describe the file's origin; each case
// starts with "=== valid NAME" or "=== invalid NAME" and holds the policy
// YAML up to the next case.
func readVeleroCases(t *testing.T, ext string) []veleroCase {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "velero", "*."+ext))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Velero cases (%v)", err)
	}
	var out []veleroCase
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var cur *veleroCase
		var body []string
		flush := func() {
			if cur != nil {
				cur.doc = strings.Join(body, "\n") + "\n"
				out = append(out, *cur)
			}
		}
		for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
			head, ok := strings.CutPrefix(line, "=== ")
			if !ok {
				if cur == nil && !strings.HasPrefix(line, "#") && line != "" {
					t.Fatalf("%s: text before the first case: %q", file, line)
				}
				body = append(body, line)
				continue
			}
			flush()
			verdict, name, _ := strings.Cut(head, " ")
			if verdict != "valid" && verdict != "invalid" {
				t.Fatalf("%s: case %q has verdict %q", file, name, verdict)
			}
			cur, body = &veleroCase{file: filepath.Base(file), name: name, valid: verdict == "valid"}, nil
		}
		flush()
	}
	return out
}

// Velero's documented policy examples and the policies of its validator's
// tests get Velero's verdict here: what Velero accepts is accepted (with
// warnings, where Velero is silent), what it refuses is refused.
func TestVeleroVerdicts(t *testing.T) {
	cases := readVeleroCases(t, "cases")
	counts := map[bool]int{}
	for _, c := range cases {
		counts[c.valid]++
		t.Run(c.file+"/"+c.name, func(t *testing.T) {
			p, err := Parse([]byte(c.doc))
			switch {
			case c.valid && err != nil:
				t.Errorf("Velero accepts this policy; Lifeboat refuses it:\n%v\n--- policy:\n%s", err, c.doc)
			case !c.valid && err == nil:
				t.Errorf("Velero refuses this policy; Lifeboat accepts it (warnings %q)\n--- policy:\n%s", p.WarningMessages(), c.doc)
			}
		})
	}
	if counts[true] == 0 || counts[false] == 0 {
		t.Errorf("%d valid and %d invalid cases; the table needs both", counts[true], counts[false])
	}
}

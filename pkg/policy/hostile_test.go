package policy

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// laughs returns a policy whose custom action's parameters nest levels
// lists of ten aliases to the level below: ten to the power levels values
// from a document of a few hundred bytes per level.
func laughs(levels int) string {
	var b strings.Builder
	b.WriteString("version: v1\nvolumePolicies:\n- action:\n    type: custom\n    parameters:\n")
	b.WriteString("      l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, "      l%d: &l%d [", i, i)
		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "*l%d", i-1)
		}
		b.WriteString("]\n")
	}
	return b.String()
}

// allocated returns the bytes f allocates and how long it takes.
func allocated(f func()) (uint64, time.Duration) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	f()
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc, elapsed
}

// Aliases are legal YAML and Velero resolves them, so a policy may use
// them; but a few hundred bytes of nested aliases stand for millions of
// values, and parsing must refuse that before building them, naming where.
func TestParseRefusesAliasBombs(t *testing.T) {
	for _, levels := range []int{6, 9} {
		doc := laughs(levels)
		t.Run(fmt.Sprintf("10^%d values from %d bytes", levels+1, len(doc)), func(t *testing.T) {
			var err error
			bytes, took := allocated(func() { _, err = Parse([]byte(doc)) })
			t.Logf("%d bytes of policy: %d KiB allocated in %v: %v", len(doc), bytes>>10, took, err)
			var ve *ValidationError
			if !errors.As(err, &ve) || len(ve.Problems) != 1 {
				t.Fatalf("got %v, want one problem", err)
			}
			p := ve.Problems[0]
			// Each *l3 stands for 12,221 values: the eighth in l4's list,
			// on line 10, is the one past 100,000.
			if !strings.Contains(p.Message, "alias *l3") || p.Field != "volumePolicies[0].action.parameters.l4[7]" || p.Line != 10 {
				t.Errorf("problem %q (line %d) should blame the alias that takes the policy past the limit", p, p.Line)
			}
			if bytes > 1<<20 {
				t.Errorf("allocated %d MiB to refuse a %d-byte policy", bytes>>20, len(doc))
			}
		})
	}
}

// Every other bound, and the loop yaml.v3 builds for an alias inside its
// own anchor (today's parser follows it until the stack overflows, which
// takes the whole server down), each refused quickly and naming the place.
func TestParseRefusesOversizedPolicies(t *testing.T) {
	bigText := strings.Repeat("x", 512<<10)
	manyClasses := strings.Repeat("x,", MaxValues)
	tests := []struct {
		name      string
		doc       string
		wantField string
		wantLine  int
		want      string
	}{
		{
			name:      "parameters that contain themselves",
			doc:       "version: v1\nvolumePolicies:\n- action:\n    type: custom\n    parameters: &p {x: *p}\n",
			wantField: "volumePolicies[0].action.parameters.x",
			wantLine:  5,
			want:      "alias *p is inside the value it names",
		},
		{
			name:      "a list that contains itself",
			doc:       "version: v1\nvolumePolicies: &v\n- *v\n",
			wantField: "volumePolicies[0]",
			wantLine:  3,
			want:      "alias *v is inside the value it names",
		},
		{
			name: "text repeated by aliases",
			doc: "version: v1\nvolumePolicies:\n- conditions:\n    storageClass: [&t " + bigText + "]\n" +
				"  action: {type: custom, parameters: {a: *t, b: *t, c: *t, d: *t, e: *t, f: *t, g: *t, h: *t}}\n",
			// The literal and six aliases are 3.5 MiB; the seventh passes 4.
			wantField: "volumePolicies[0].action.parameters.g",
			wantLine:  5,
			want:      "alias *t makes the policy hold more than 4 MiB of text",
		},
		{
			name:      "too many values without aliases",
			doc:       "version: v1\nvolumePolicies:\n- conditions:\n    storageClass: [" + manyClasses + "]\n  action: {type: skip}\n",
			wantField: fmt.Sprintf("volumePolicies[0].conditions.storageClass[%d]", MaxValues-11),
			wantLine:  4,
			want:      "the policy holds more than 100000 values",
		},
		{
			name: "more than a ConfigMap holds",
			doc:  "version: v1\n#" + strings.Repeat("x", MaxBytes) + "\n",
			want: "at most 1 MiB",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, err = Parse([]byte(tc.doc))
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Parse is still running after 10s")
			}
			var ve *ValidationError
			if !errors.As(err, &ve) || len(ve.Problems) != 1 {
				t.Fatalf("got %v, want one problem", err)
			}
			p := ve.Problems[0]
			if !strings.Contains(p.Message, tc.want) || p.Field != tc.wantField || p.Line != tc.wantLine {
				t.Errorf("got %q at line %d, want %q at %q line %d", p, p.Line, tc.want, tc.wantField, tc.wantLine)
			}
		})
	}
}

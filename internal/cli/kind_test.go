package cli

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// TestGetAndDescribeRulesPerKind pins the rules the three kinds share
// through kindSpec, word by word, so a change to one kind's words shows.
func TestGetAndDescribeRulesPerKind(t *testing.T) {
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: v1.DefaultNamespace}
	}
	for _, tc := range []struct {
		kind string
		objs []client.Object // created out of name order
	}{
		{"backup", []client.Object{&v1.Backup{ObjectMeta: meta("b")}, &v1.Backup{ObjectMeta: meta("a")}}},
		{"restore", []client.Object{&v1.Restore{ObjectMeta: meta("b")}, &v1.Restore{ObjectMeta: meta("a")}}},
		{"schedule", []client.Object{&v1.Schedule{ObjectMeta: meta("b")}, &v1.Schedule{ObjectMeta: meta("a")}}},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			f := newTestFactory(newFakeBuilder(t, tc.objs...).Build())
			_, _, err := run(t, f, tc.kind, "get", "a", "-l", "x=y")
			if want := "--selector cannot be combined with " + tc.kind + " names"; err == nil || err.Error() != want {
				t.Errorf("get NAME -l: error = %v, want %q", err, want)
			}
			for _, verb := range []string{"get", "describe"} {
				_, _, err := run(t, f, tc.kind, verb, "a", "-o", "wide")
				if err == nil || !strings.Contains(err.Error(), `invalid --output "wide"`) {
					t.Errorf("%s -o wide: error = %v", verb, err)
				}
			}
			// Without names, describe describes them all, as Velero's does.
			if out, _, err := run(t, f, tc.kind, "describe"); err != nil || !strings.Contains(squeeze(out), "Name: a\n") || !strings.Contains(squeeze(out), "Name: b\n") {
				t.Errorf("describe without a name: %v\n%s", err, out)
			}
			out, _, err := run(t, f, tc.kind, "get")
			if err != nil {
				t.Fatal(err)
			}
			if a, b := strings.Index(out, "\na "), strings.Index(out, "\nb "); a < 0 || b < a {
				t.Errorf("get did not list by name:\n%s", out)
			}
			out, _, err = run(t, f, tc.kind, "describe", "b", "a")
			if err != nil {
				t.Fatal(err)
			}
			if a, b := strings.Index(squeeze(out), "Name: a\n"), strings.Index(squeeze(out), "Name: b\n"); b < 0 || a < b {
				t.Errorf("describe did not keep the order given:\n%s", out)
			}
			if !strings.Contains(out, "\n\nName:") {
				t.Errorf("descriptions not separated by a blank line:\n%s", out)
			}
			for _, c := range []struct{ args, want string }{
				{"--help", " get List " + tc.kind + "s\n"},
				{"--help", " describe Show the details of " + tc.kind + "s\n"},
				{"get --help", "only list " + tc.kind + "s whose labels match this selector"},
				{"describe --help", "-o json|yaml prints the same as a " + strings.ToUpper(tc.kind[:1]) + tc.kind[1:] + "Description"},
			} {
				out, _, err := run(t, f, append([]string{tc.kind}, strings.Fields(c.args)...)...)
				if err != nil || !strings.Contains(squeeze(out), c.want) {
					t.Errorf("%s %s: error = %v, want %q in:\n%s", tc.kind, c.args, err, c.want, out)
				}
			}
		})
	}
}

// TestDescribeScopedResourceFilters checks the newer filters in a backup
// and, indented one level more, in a schedule's backup template.
func TestDescribeScopedResourceFilters(t *testing.T) {
	spec := v1.BackupSpec{
		IncludedClusterScopedResources:   []string{"persistentvolumes"},
		ExcludedNamespaceScopedResources: []string{"secrets", "events"},
	}
	b := &v1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: v1.DefaultNamespace}, Spec: spec}
	s := &v1.Schedule{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: v1.DefaultNamespace},
		Spec: v1.ScheduleSpec{Schedule: "@daily", Template: spec}}
	f := newTestFactory(newFakeBuilder(t, b, s).Build())
	for _, tc := range []struct {
		args   []string
		indent string
	}{
		{[]string{"backup", "describe", "web"}, ""},
		{[]string{"schedule", "describe", "nightly"}, "  "},
	} {
		out, _, err := run(t, f, tc.args...)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			"\n" + tc.indent + "Resources:\n",
			"\n" + tc.indent + "  Included cluster-scoped:",
			"\n" + tc.indent + "  Excluded cluster-scoped:",
			"\n" + tc.indent + "  Included namespace-scoped:",
			"\n" + tc.indent + "  Excluded namespace-scoped:",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("%v: %q missing from:\n%s", tc.args, want, out)
			}
		}
		for _, want := range []string{
			" Included cluster-scoped: persistentvolumes\n",
			" Excluded cluster-scoped: <none>\n",
			" Included namespace-scoped: *\n",
			" Excluded namespace-scoped: secrets, events\n",
		} {
			if !strings.Contains(squeeze(out), want) {
				t.Errorf("%v: %q missing from:\n%s", tc.args, want, out)
			}
		}
		if strings.Contains(out, "Cluster-scoped:") {
			t.Errorf("%v: the older filters are shown beside the newer:\n%s", tc.args, out)
		}
	}
}

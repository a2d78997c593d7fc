package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lifeboat-io/lifeboat/internal/integrity"
	"github.com/lifeboat-io/lifeboat/internal/testutil/testenv"
)

// diffLines are the item lines of `backup diff` output ("+ key", ...),
// which come before the counts.
func diffLines(out string) []string {
	var lines []string
	for line := range strings.Lines(out) {
		line = strings.TrimSpace(line)
		if strings.Contains(line, " unchanged.") {
			break
		}
		if len(line) > 2 && strings.ContainsRune("+-~", rune(line[0])) && line[1] == ' ' {
			lines = append(lines, line)
		}
	}
	return lines
}

// TestBackupDiff: two backups of a namespace in which one ConfigMap
// changed and one was added in between: the diff lists exactly those two,
// from the item digests and from the tarballs alike, and --item names the
// field that changed.
func TestBackupDiff(t *testing.T) {
	bsl, bucket := env.FilesystemLocation(t, env.Name("fs"))
	ns := env.NewNamespace(t, "diff")
	sampleApp(t, ns)
	first, second := env.Name("diff-a"), env.Name("diff-b")
	mustLifeboat(t, "backup", "create", first, "--include-namespaces", ns, "--storage-location", bsl.Name, "--wait")

	var cm corev1.ConfigMap
	if err := env.Client.Get(testenv.Ctx(t), client.ObjectKey{Namespace: ns, Name: "settings"}, &cm); err != nil {
		t.Fatal(err)
	}
	cm.Data["greeting"] = "bonjour"
	if err := env.Client.Update(testenv.Ctx(t), &cm); err != nil {
		t.Fatal(err)
	}
	env.Create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "added"}, Data: map[string]string{"k": "v"}})
	mustLifeboat(t, "backup", "create", second, "--include-namespaces", ns, "--storage-location", bsl.Name, "--wait")

	want := []string{"+ configmaps " + ns + "/added", "~ configmaps " + ns + "/settings"}
	check := func(what, out string) {
		t.Helper()
		if got := diffLines(out); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: lines %q, want %q:\n%s", what, got, want, out)
		}
		if !strings.Contains(out, "1 added, 0 removed, 1 changed, ") {
			t.Errorf("%s: counts missing:\n%s", what, out)
		}
	}
	out := mustLifeboat(t, "backup", "diff", first, second, "--item", "configmaps/"+ns+"/settings")
	check("diff from the item digests", out)
	if !strings.Contains(out, `~ data.greeting: "hello" -> "bonjour"`) {
		t.Errorf("--item does not show the changed field:\n%s", out)
	}
	check("diff from the tarballs", mustLifeboat(t, "backup", "diff", first, second, "--from-contents"))

	// A backup without item digests (as Velero writes them) is read whole.
	if err := os.Remove(filepath.Join(bucket, "lifeboat", "backups", first, integrity.ItemDigestsFile(first))); err != nil {
		t.Fatal(err)
	}
	out = mustLifeboat(t, "backup", "diff", first, second)
	check("diff with one backup without item digests", out)
	if !strings.Contains(out, "Backup "+first+" has no item digests") {
		t.Errorf("no note that the tarball was read instead:\n%s", out)
	}
}

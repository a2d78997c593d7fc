package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/archive/archivetest"
	"github.com/lifeboat-io/lifeboat/internal/integrity"
	"github.com/lifeboat-io/lifeboat/internal/testutil/testenv"
)

// TestVerifyAndRestoreRefuseATamperedBackup: a backup verifies as written;
// with one item taken out of its tarball, `backup verify` and a restore
// both name that item, and the restore creates nothing.
func TestVerifyAndRestoreRefuseATamperedBackup(t *testing.T) {
	bsl, bucket := env.FilesystemLocation(t, env.Name("fs"))
	src := env.NewNamespace(t, "vsrc")
	sampleApp(t, src)
	name := env.Name("verify")
	mustLifeboat(t, "backup", "create", name, "--include-namespaces", src, "--storage-location", bsl.Name, "--wait")

	var b v1.Backup
	if err := env.Client.Get(testenv.Ctx(t), clientKey(name), &b); err != nil {
		t.Fatal(err)
	}
	if b.Annotations[v1.DigestsAnnotation] == "" {
		t.Fatalf("the backup has no %s annotation: %v", v1.DigestsAnnotation, b.Annotations)
	}
	dir := filepath.Join(bucket, "lifeboat", "backups", name)
	for _, f := range []string{integrity.ManifestFile(name), integrity.ItemDigestsFile(name)} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatalf("the backup did not write %s: %v", f, err)
		}
	}

	out := mustLifeboat(t, "backup", "verify", name)
	if !strings.Contains(out, " Verified: ") || !strings.Contains(out, "tarball entries match their digests") {
		t.Fatalf("backup verify of an untouched backup:\n%s", out)
	}
	out = mustLifeboat(t, "backup", "describe", name)
	if !strings.Contains(out, "Verification:") || !strings.Contains(out, "Verified") {
		t.Errorf("backup describe lacks the verification:\n%s", out)
	}
	if err := env.Client.Get(testenv.Ctx(t), clientKey(name), &b); err != nil {
		t.Fatal(err)
	}
	if !hasCondition(b.Status.Conditions, v1.BackupConditionVerified, metav1.ConditionTrue) {
		t.Errorf("conditions after verification: %+v", b.Status.Conditions)
	}

	// Someone takes the ConfigMap out of the stored tarball.
	removed := "resources/configmaps/namespaces/" + src + "/settings.json"
	if err := archivetest.Rewrite(filepath.Join(dir, name+".tar.gz"), archivetest.Drop("/"+src+"/settings.json")); err != nil {
		t.Fatal(err)
	}
	out, err := lifeboat(t, "backup", "verify", name)
	if err == nil || !strings.Contains(out, " Differs: ") || !strings.Contains(out, removed+": missing (removed)") {
		t.Fatalf("backup verify of a tampered backup: err %v\n%s", err, out)
	}
	if err := env.Client.Get(testenv.Ctx(t), clientKey(name), &b); err != nil {
		t.Fatal(err)
	}
	if !hasCondition(b.Status.Conditions, v1.BackupConditionVerified, metav1.ConditionFalse) {
		t.Errorf("conditions after a failed verification: %+v", b.Status.Conditions)
	}

	dst := env.Name("vdst")
	restoreName := env.Name("verify")
	out, _ = lifeboat(t, "restore", "create", restoreName, "--from-backup", name, "--namespace-mappings", src+":"+dst, "--wait")
	var rs v1.Restore
	if err := env.Client.Get(testenv.Ctx(t), clientKey(restoreName), &rs); err != nil {
		t.Fatal(err)
	}
	if rs.Status.Phase != v1.RestorePhaseFailed || !strings.Contains(rs.Status.FailureReason, removed+": missing (removed)") {
		t.Fatalf("restore of a tampered backup: phase %s, reason %q\n%s", rs.Status.Phase, rs.Status.FailureReason, out)
	}
	if err := env.Client.Get(testenv.Ctx(t), client.ObjectKey{Name: dst}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
		t.Errorf("the refused restore created namespace %s (get: %v)", dst, err)
	}
}

package e2e

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
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

// TestVerifyWithRestoreDryRun: `backup verify --restore-dry-run` checks the
// files, then runs a restore dry run, here into a namespace whose quota
// leaves no room for the backup's ConfigMap: the outcome names that item,
// the dry run is a Restore of its own, and the namespace is unchanged. Into
// a namespace that does not exist the same backup verifies.
func TestVerifyWithRestoreDryRun(t *testing.T) {
	bsl, _ := env.FilesystemLocation(t, env.Name("fs"))
	src := env.NewNamespace(t, "vdsrc")
	sampleApp(t, src)
	name := env.Name("vdry")
	mustLifeboat(t, "backup", "create", name, "--include-namespaces", src, "--storage-location", bsl.Name, "--wait")

	dst := env.NewNamespace(t, "vddst")
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: dst, Name: "no-configmaps"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/configmaps": resource.MustParse("0")}}}
	env.Create(t, quota)
	quota.Status = corev1.ResourceQuotaStatus{
		Hard: corev1.ResourceList{"count/configmaps": resource.MustParse("0")},
		Used: corev1.ResourceList{"count/configmaps": resource.MustParse("0")},
	}
	if err := env.Client.Status().Update(testenv.Ctx(t), quota); err != nil {
		t.Fatal(err)
	}
	before := namespaceState(t, dst)
	out, err := lifeboat(t, "backup", "verify", name, "--restore-dry-run", "--namespace-mappings", src+":"+dst)
	if err == nil || !strings.Contains(out, " RestoreWouldFail: ") || !strings.Contains(out, "configmaps "+dst+"/settings") ||
		!strings.Contains(out, "exceeded quota") {
		t.Fatalf("verify with a dry run that would fail: err %v\n%s", err, out)
	}
	if after := namespaceState(t, dst); !maps.Equal(before, after) {
		t.Errorf("the verification's dry run changed namespace %s:\nbefore %v\nafter  %v", dst, before, after)
	}
	var restores v1.RestoreList
	if err := env.Client.List(testenv.Ctx(t), &restores, client.InNamespace(env.Namespace), client.MatchingLabels{v1.BackupNameLabel: name}); err != nil {
		t.Fatal(err)
	}
	if len(restores.Items) != 1 || !restores.Items[0].Spec.DryRun || restores.Items[0].Status.DryRun == nil {
		t.Fatalf("the verification's restores: %+v", restores.Items)
	}
	var b v1.Backup
	if err := env.Client.Get(testenv.Ctx(t), clientKey(name), &b); err != nil {
		t.Fatal(err)
	}
	if !hasCondition(b.Status.Conditions, v1.BackupConditionVerified, metav1.ConditionFalse) {
		t.Errorf("conditions after a dry run that would fail: %+v", b.Status.Conditions)
	}

	out = mustLifeboat(t, "backup", "verify", name, "--restore-dry-run", "--namespace-mappings", src+":"+env.Name("vdnew"))
	if !strings.Contains(out, " Verified: ") || !strings.Contains(out, "restore dry run ") || !strings.Contains(out, " 0 fail") {
		t.Errorf("verify with a dry run into a new namespace:\n%s", out)
	}
}

package restore

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/archive"
	"github.com/lifeboat-io/lifeboat/internal/archive/archivetest"
	"github.com/lifeboat-io/lifeboat/internal/integrity"
	"github.com/lifeboat-io/lifeboat/internal/storage"
)

// backupFile is where the filesystem store keeps file of backup b.
func (w *world) backupFile(b *v1.Backup, file string) string {
	return filepath.Join(w.dir, "bucket", "backups", b.Name, file)
}

// appBackup backs up the round-trip test's objects in a new namespace.
func (w *world) appBackup() (string, *v1.Backup) {
	src := uniq("src")
	w.namespace(src)
	w.app(src)
	return src, w.backupOf(src)
}

func TestABackupIsVerifiedAgainstTheDigestsItWrote(t *testing.T) {
	w := newWorld(t)
	_, b := w.appBackup()
	if b.Annotations[v1.DigestsAnnotation] == "" {
		t.Fatal("the backup reported no digests file")
	}
	rep, err := integrity.Check(ctx(t), w.store, b.Name, b.Annotations[v1.DigestsAnnotation], archive.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Verified() || !rep.Anchored || rep.Entries < 2*7 {
		t.Fatalf("check of an untouched backup: %+v: %s", rep, rep.Summary())
	}
}

func TestATamperedBackupIsRefusedBeforeAnythingIsCreated(t *testing.T) {
	w := newWorld(t)
	src, b := w.appBackup()
	// One item taken out of the stored tarball.
	removed := "resources/configmaps/namespaces/" + src + "/settings.json"
	if err := archivetest.Rewrite(w.backupFile(b, storage.BackupContentsFile(b.Name)), archivetest.Drop("/"+src+"/settings.json")); err != nil {
		t.Fatal(err)
	}

	dst := uniq("dst")
	_, out := w.restore(b, v1.RestoreSpec{NamespaceMapping: map[string]string{src: dst}})
	if out.Phase != v1.RestorePhaseFailed || !strings.Contains(out.FailureReason, removed+": missing (removed)") ||
		!strings.Contains(out.FailureReason, "nothing was restored") {
		t.Fatalf("outcome %+v, want Failed naming %s", out, removed)
	}
	if _, err := w.cs.CoreV1().Namespaces().Get(ctx(t), dst, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the refused restore created its namespace (get: %v)", err)
	}

	// Annotated, the same restore goes ahead without the missing item
	// and says what the check found.
	rs := &v1.Restore{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: uniq("rs"),
		Annotations: map[string]string{v1.IgnoreIntegrityAnnotation: "true"}},
		Spec: v1.RestoreSpec{BackupName: b.Name, NamespaceMapping: map[string]string{src: dst}}}
	out = NewEngine(newAccess(t), nil).Run(ctx(t), rs, b, w.store, nil)
	if out.Phase != v1.RestorePhaseCompleted || out.Warnings < 2 {
		t.Fatalf("outcome %+v, want Completed with the findings as warnings", out)
	}
	if _, err := w.cs.CoreV1().Secrets(dst).Get(ctx(t), "token", metav1.GetOptions{}); err != nil {
		t.Errorf("an item the tampering left alone was not restored: %v", err)
	}
	if _, err := w.cs.CoreV1().ConfigMaps(dst).Get(ctx(t), "settings", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the removed item exists after the restore (get: %v)", err)
	}
}

func TestAReplacedMetadataFileRefusesTheRestore(t *testing.T) {
	w := newWorld(t)
	src, b := w.appBackup()
	p := w.backupFile(b, storage.BackupMetadataFile)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, append(data, ' '), 0o644); err != nil {
		t.Fatal(err)
	}
	_, out := w.restore(b, v1.RestoreSpec{NamespaceMapping: map[string]string{src: uniq("dst")}})
	if out.Phase != v1.RestorePhaseFailed || !strings.Contains(out.FailureReason, "velero-backup.json: ") {
		t.Fatalf("outcome %+v, want Failed naming velero-backup.json", out)
	}
}

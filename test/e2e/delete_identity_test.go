package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/testutil/testenv"
)

// useS3 moves the world onto a storage location over bucket of the test S3
// server (prefix "lifeboat"), as a second cluster sharing the bucket would
// have it, and waits until its server finds it Available.
func (w *delWorld) useS3(bucket string) {
	w.t.Helper()
	t := w.t
	w.bsl = env.S3LocationOver(t, w.ns, env.Name("s3"), bucket)
	w.bucket = ""
	w.poll("the S3 location to be Available", time.Minute, func(ctx context.Context) (bool, error) {
		var bsl v1.BackupStorageLocation
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(w.bsl), &bsl); err != nil {
			return false, err
		}
		return bsl.Status.Phase == v1.BackupStorageLocationPhaseAvailable, nil
	})
}

// backupNamed backs up the app namespace under name and waits until the
// backup has ended, however it ended.
func (w *delWorld) backupNamed(name string) *v1.Backup {
	w.t.Helper()
	b := &v1.Backup{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name},
		Spec:       v1.BackupSpec{StorageLocation: w.bsl.Name, IncludedNamespaces: []string{w.app}},
	}
	env.Create(w.t, b)
	w.poll("backup "+name, 2*time.Minute, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return b.Status.Phase.IsTerminal(), nil
	})
	return b
}

// storedKeys lists the keys under backups/<name>/ in the world's S3 location.
func (w *delWorld) storedKeys(name string) []string {
	w.t.Helper()
	st := openStore(w.t, w.bsl)
	keys, err := st.ObjectStore().ListObjects(testenv.Ctx(w.t), st.Bucket(), st.BackupDir(name))
	if err != nil {
		w.t.Fatal(err)
	}
	return slices.Sorted(slices.Values(keys))
}

// Two clusters share a bucket and each has a schedule of the same name, so
// their backups have the same names. Cluster B's backup is refused (the
// name is taken by A's), and deleting it, by hand or when it expires, must
// leave A's backup whole: its keys, and the items its DeleteItemActions
// would clean up (A's receipts). Then a Backup in B that claims to be
// Completed under that name (made by hand, or synced by another tool)
// gets an error naming both backups, and nothing is deleted either.
func TestDeletingASameNameBackupLeavesTheOtherClustersBackupWhole(t *testing.T) {
	bucket := env.S3.NewBucket(t)
	a := newDelWorld(t, nil)
	a.useS3(bucket)
	b := newDelWorld(t, nil)
	b.useS3(bucket)
	name := env.Name("nightly")

	a.configMaps("settings", "features")
	ab := a.backupNamed(name)
	if ab.Status.Phase != v1.BackupPhaseCompleted {
		t.Fatalf("cluster A's backup: %s (%s)", ab.Status.Phase, ab.Status.FailureReason)
	}
	keysBefore := a.storedKeys(name)
	receiptsBefore := a.receipts()
	if len(receiptsBefore) != 2 || !slices.Contains(keysBefore, "lifeboat/backups/"+name+"/velero-backup.json") {
		t.Fatalf("cluster A's backup: receipts %v keys %v", receiptsBefore, keysBefore)
	}

	b.configMaps("other")
	bb := b.backupNamed(name)
	if bb.Status.Phase != v1.BackupPhaseFailed || !strings.Contains(bb.Status.FailureReason, "already exists") {
		t.Fatalf("cluster B's backup: %s (%s), want Failed because the name is taken", bb.Status.Phase, bb.Status.FailureReason)
	}
	if !bb.StoredNothing() {
		t.Errorf("cluster B's backup conditions %+v: want Stored=False", bb.Status.Conditions)
	}

	dbr := b.waitEnded(b.request(name))
	if dbr.Status.Phase != v1.DeleteBackupRequestPhaseProcessed || len(dbr.Status.Errors) != 0 {
		t.Fatalf("deleting B's refused backup: %s %v", dbr.Status.Phase, dbr.Status.Errors)
	}
	if !b.backupGone(bb) {
		t.Error("B's refused Backup object is still there")
	}
	if got := a.storedKeys(name); !slices.Equal(got, keysBefore) {
		t.Errorf("A's keys after B's deletion: %v, want %v", got, keysBefore)
	}
	if got := a.receipts(); !slices.Equal(got, receiptsBefore) {
		t.Errorf("A's receipts after B's deletion: %v, want %v (the cleanup action got A's items)", got, receiptsBefore)
	}
	if calls := b.calls(); len(calls) != 0 {
		t.Errorf("DeleteItemAction calls during B's deletion: %v, want none", calls)
	}

	// A Backup in B that says it is Completed, under A's name, as a sync by
	// another tool would make it: no stored UID on it. (The annotation only
	// keeps B's backup controller from running it in the moment before its
	// status is written.)
	impostor := &v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: b.ns, Name: name,
		Labels:      map[string]string{v1.StorageLocationLabel: b.bsl.Name},
		Annotations: map[string]string{v1.SyncedAnnotation: b.bsl.Name}},
		Spec: v1.BackupSpec{StorageLocation: b.bsl.Name}}
	env.Create(t, impostor)
	orig := impostor.DeepCopy()
	impostor.Status.Phase = v1.BackupPhaseCompleted
	if err := env.Client.Patch(testenv.Ctx(t), impostor, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	dbr = b.waitEnded(b.request(name))
	msg := strings.Join(dbr.Status.Errors, "\n")
	if dbr.Status.Phase != v1.DeleteBackupRequestPhaseFailed || dbr.Status.Attempts != 1 ||
		!strings.Contains(msg, string(ab.UID)) || !strings.Contains(msg, string(impostor.UID)) {
		t.Errorf("deleting the impostor: %s after %d attempts, errors %q; want Failed at once, naming uid %s and %s",
			dbr.Status.Phase, dbr.Status.Attempts, msg, ab.UID, impostor.UID)
	}
	if b.backupGone(impostor) {
		t.Error("the impostor Backup was deleted")
	}
	if got := a.storedKeys(name); !slices.Equal(got, keysBefore) {
		t.Errorf("A's keys after the impostor's deletion: %v, want %v", got, keysBefore)
	}
	if got := a.receipts(); !slices.Equal(got, receiptsBefore) {
		t.Errorf("A's receipts after the impostor's deletion: %v, want %v", got, receiptsBefore)
	}

	// A itself deletes its backup as before.
	dbr = a.waitEnded(a.request(name))
	if dbr.Status.Phase != v1.DeleteBackupRequestPhaseProcessed || len(dbr.Status.Errors) != 0 {
		t.Fatalf("deleting A's backup: %s %v", dbr.Status.Phase, dbr.Status.Errors)
	}
	if got := a.storedKeys(name); len(got) != 0 {
		t.Errorf("keys left after A deleted its backup: %v", got)
	}
}

package deletion

import (
	"errors"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/lifeboat-io/lifeboat/internal/storage"
)

// plantUpload leaves, in directory dir of the world's filesystem store,
// what a server killed in the middle of an upload leaves there: the
// temporary file it was writing. It returns the file's path.
func (w *world) plantUpload(dir string) string {
	w.t.Helper()
	// The filesystem store's signed URL is the object's path.
	raw, err := w.objects.CreateSignedURL(w.t.Context(), bucket, dir+"/x", 0)
	if err != nil {
		w.t.Fatal(err)
	}
	u, err := url.Parse(raw)
	if err != nil {
		w.t.Fatal(err)
	}
	p := filepath.Join(filepath.Dir(u.Path), ".lifeboat-upload-1234")
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		w.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("half a tarball"), 0o600); err != nil {
		w.t.Fatal(err)
	}
	return p
}

// withUploadsVisible opens the world's backup store on the filesystem
// store itself: the recording wrapper, like any wrapper, hides the
// store's optional storage.UnfinishedUploads.
func (w *world) withUploadsVisible() {
	w.store = storage.NewBackupStore(w.objects.ObjectStore, bucket, "lb")
}

func gone(p string) bool {
	_, err := os.Lstat(p)
	return errors.Is(err, fs.ErrNotExist)
}

// A server killed mid-backup leaves a half-written upload in the backup's
// directory, one killed while writing a restore's files leaves one in the
// restore's. Neither is a key, so deleting every key left them, and the
// report said nothing was left. The deletion removes them and counts them.
func TestDeletionRemovesUploadsAStoppedServerLeft(t *testing.T) {
	w := newWorld(t)
	w.withUploadsVisible()
	w.putTarball(sampleItems())
	w.putBackupFiles(nil)
	w.putRestore("r1")
	inBackup := w.plantUpload("lb/backups/nightly")
	inRestore := w.plantUpload("lb/restores/r1")
	otherBackup := w.plantUpload("lb/backups/nightly-2")
	keysBefore := w.keys()

	res := w.engine().Run(t.Context(), Input{Backup: w.backup, Store: w.store})
	if res.Err != nil {
		t.Fatalf("run: %v (%v)", res.Err, res.Messages())
	}
	if !gone(inBackup) || !gone(inRestore) {
		t.Errorf("uploads left: backup's gone %v, restore's gone %v", gone(inBackup), gone(inRestore))
	}
	if !gone(filepath.Dir(inBackup)) {
		t.Errorf("the backup's directory %s is still there", filepath.Dir(inBackup))
	}
	if gone(otherBackup) {
		t.Errorf("the upload of backup nightly-2 was removed by the deletion of nightly")
	}
	rep := res.Report
	if rep.UnfinishedUploadsRemoved != 2 || rep.KeysRemoved != int64(len(keysBefore)) || len(rep.LeftBehind) != 0 {
		t.Errorf("report: %d unfinished uploads removed, %d keys, left behind %v; want 2, %d, nothing",
			rep.UnfinishedUploadsRemoved, rep.KeysRemoved, rep.LeftBehind, len(keysBefore))
	}
}

// The count is part of the state an attempt hands over, so an upload
// removed by a failed attempt is still in the report of the one that
// finishes.
func TestUnfinishedUploadsRemovedAreCountedAcrossAttempts(t *testing.T) {
	w := newWorld(t)
	w.withUploadsVisible()
	w.putTarball(nil)
	w.putBackupFiles(nil)
	w.putRestore("r-stuck")
	upload := w.plantUpload("lb/restores/r-stuck")
	w.cluster.deleteFails = map[string]bool{"r-stuck": true}
	first := w.engine().Run(t.Context(), Input{Backup: w.backup, Store: w.store})
	if first.Err == nil {
		t.Fatal("the first attempt succeeded with a restore that cannot be deleted")
	}
	if !gone(upload) || first.State.UnfinishedUploadsRemoved != 1 {
		t.Fatalf("first attempt: upload gone %v, counted %d; want gone and 1", gone(upload), first.State.UnfinishedUploadsRemoved)
	}

	w.cluster.deleteFails = nil
	second := w.engine().Run(t.Context(), Input{Backup: w.backup, Store: w.store, State: first.State})
	if second.Err != nil {
		t.Fatalf("second attempt: %v (%v)", second.Err, second.Messages())
	}
	if second.Report.UnfinishedUploadsRemoved != 1 {
		t.Errorf("final report counts %d unfinished uploads removed, want the first attempt's 1", second.Report.UnfinishedUploadsRemoved)
	}
}

// A store that cannot find unfinished uploads (one served by a plugin)
// deletes the keys as before: what it cannot see is its own lifecycle
// rules' to clean.
func TestStoreWithoutUnfinishedUploadsStillDeletes(t *testing.T) {
	w := newWorld(t)
	w.putTarball(nil)
	w.putBackupFiles(nil)
	upload := w.plantUpload("lb/backups/nightly")
	res := w.engine().Run(t.Context(), Input{Backup: w.backup, Store: w.store})
	if res.Err != nil {
		t.Fatalf("run: %v (%v)", res.Err, res.Messages())
	}
	if left := w.keys(); len(left) != 0 || res.Report.UnfinishedUploadsRemoved != 0 {
		t.Errorf("keys left %v, unfinished uploads counted %d; want none and 0", left, res.Report.UnfinishedUploadsRemoved)
	}
	if gone(upload) {
		t.Error("a store without the capability removed an upload")
	}
	if !slices.Equal(w.cluster.removedBackups(), []string{"nightly"}) {
		t.Errorf("backup objects removed: %v", w.cluster.removedBackups())
	}
}

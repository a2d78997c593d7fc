package deletion

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/storage"
	"github.com/lifeboat-io/lifeboat/internal/volumefiles"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

// otherBackupStored puts a whole backup of the world's backup's name in the
// store, written by another Backup object (uid-other): items, a snapshot
// and a marker that names that Backup.
func (w *world) otherBackupStored(snap *fakeSnapshotter) {
	w.t.Helper()
	w.putTarball(sampleItems())
	w.putBackupFiles([]volumefiles.Snapshot{{Spec: volumefiles.SnapshotSpec{Location: "vsl"}, Status: volumefiles.SnapshotStatus{ProviderSnapshotID: "snap-other"}}})
	w.putMarker("uid-other")
	w.cluster.locations["vsl"] = v1.VolumeSnapshotLocationSpec{Provider: "example.io/disk"}
	w.plugins.snapshotters["example.io/disk"] = snap
}

// putMarker rewrites velero-backup.json as written for a Backup with uid.
func (w *world) putMarker(uid string) {
	w.t.Helper()
	stored := v1.Backup{TypeMeta: metav1.TypeMeta{APIVersion: "velero.io/v1", Kind: "Backup"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: w.backup.Name, UID: types.UID(uid)}}
	data, err := json.Marshal(stored)
	if err != nil {
		w.t.Fatal(err)
	}
	if err := w.store.PutBackupMetadata(w.t.Context(), w.backup.Name, data); err != nil {
		w.t.Fatal(err)
	}
}

// A Backup whose name is taken in the store by another backup (two clusters
// sharing a bucket, or a new backup made after `backup delete --force`) must
// not take that backup's items, snapshots or keys with it.
func TestDeletionOfAnotherBackupsDataIsRefused(t *testing.T) {
	w := newWorld(t)
	snap := &fakeSnapshotter{}
	w.otherBackupStored(snap)
	log := &callLog{}
	w.plugins.add(log, "example.io/everything", api.ResourceSelector{})
	keysBefore := w.keys()

	plan, err := w.engine().Plan(t.Context(), w.backup, w.store)
	var idErr *IdentityError
	if !errors.As(err, &idErr) {
		t.Fatalf("plan: %v, %+v; want an IdentityError", err, plan)
	}

	res := w.engine().Run(t.Context(), Input{Backup: w.backup, Store: w.store})
	if !errors.As(res.Err, &idErr) {
		t.Fatalf("run: %v; want an IdentityError", res.Err)
	}
	msg := strings.Join(res.Messages(), "\n")
	for _, want := range []string{"uid-other", "uid-1", "velero-backup.json", "nothing was deleted", "--force"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not mention %q", msg, want)
		}
	}
	if calls := log.all(); len(calls) != 0 {
		t.Errorf("DeleteItemActions were passed the other backup's items: %v", calls)
	}
	if len(snap.deleted) != 0 {
		t.Errorf("the other backup's snapshots were deleted: %v", snap.deleted)
	}
	if got := w.keys(); !slices.Equal(got, keysBefore) {
		t.Errorf("keys after: %v, want all of %v", got, keysBefore)
	}
	if len(w.objects.deletions()) != 0 || len(w.cluster.removedBackups()) != 0 {
		t.Errorf("deleted keys %v, backup objects %v; want nothing", w.objects.deletions(), w.cluster.removedBackups())
	}
}

// A Backup that wrote nothing (its name was taken, or it failed validation)
// is deleted without the steps that touch the location: the object goes,
// the other backup stays whole.
func TestBackupThatStoredNothingIsDeletedWithoutTouchingTheLocation(t *testing.T) {
	for name, mark := range map[string]func(*v1.Backup){
		"name taken": func(b *v1.Backup) {
			b.Status.Phase = v1.BackupPhaseFailed
			meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{Type: v1.BackupConditionStored, Status: metav1.ConditionFalse,
				Reason: "NameTaken", Message: "a backup named nightly already exists in storage location default"})
		},
		"failed validation": func(b *v1.Backup) { b.Status.Phase = v1.BackupPhaseFailedValidation },
	} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t)
			snap := &fakeSnapshotter{}
			w.otherBackupStored(snap)
			mark(w.backup)
			log := &callLog{}
			w.plugins.add(log, "example.io/everything", api.ResourceSelector{})
			keysBefore := w.keys()

			plan, err := w.engine().Plan(t.Context(), w.backup, w.store)
			if err != nil {
				t.Fatalf("plan: %v", err)
			}
			for _, a := range plan.Actions {
				if len(a.Items) != 0 {
					t.Errorf("plan passes %s the other backup's items: %v", a.Name, a.Items)
				}
			}
			if len(plan.Snapshots) != 0 || len(plan.BackupKeys) != 0 {
				t.Errorf("plan deletes snapshots %v and keys %v", plan.Snapshots, plan.BackupKeys)
			}

			res := w.engine().Run(t.Context(), Input{Backup: w.backup, Store: w.store})
			if res.Err != nil {
				t.Fatalf("run: %v", res.Messages())
			}
			if calls := log.all(); len(calls) != 0 {
				t.Errorf("DeleteItemActions were passed the other backup's items: %v", calls)
			}
			if len(snap.deleted) != 0 {
				t.Errorf("the other backup's snapshots were deleted: %v", snap.deleted)
			}
			if got := w.keys(); !slices.Equal(got, keysBefore) {
				t.Errorf("keys after: %v, want all of %v", got, keysBefore)
			}
			if !slices.Equal(w.cluster.removedBackups(), []string{"nightly"}) {
				t.Errorf("backup objects removed: %v, want the Backup", w.cluster.removedBackups())
			}
			if !slices.ContainsFunc(res.Report.Warnings, func(s string) bool { return strings.Contains(s, "stored nothing") }) {
				t.Errorf("report warnings %v do not say the backup stored nothing", res.Report.Warnings)
			}
		})
	}
}

// A Backup the sync created from the store has a UID of its own; the UID
// of the Backup that wrote the data is on its annotation, and it passes.
func TestSyncedBackupIsIdentifiedByTheStoredUID(t *testing.T) {
	w := newWorld(t)
	snap := &fakeSnapshotter{}
	w.otherBackupStored(snap)
	w.backup.Annotations = map[string]string{v1.StoredUIDAnnotation: "uid-other"}
	log := &callLog{}
	w.plugins.add(log, "example.io/everything", api.ResourceSelector{})

	res := w.engine().Run(t.Context(), Input{Backup: w.backup, Store: w.store})
	if res.Err != nil {
		t.Fatalf("run: %v", res.Messages())
	}
	if len(log.all()) == 0 || !slices.Equal(snap.deleted, []string{"snap-other"}) || len(w.keys()) != 0 {
		t.Errorf("calls %d, snapshots %v, keys left %v: want everything deleted", len(log.all()), snap.deleted, w.keys())
	}
}

// A marker that cannot be read as a Backup, or is larger than any real
// one, identifies nobody: nothing is deleted.
func TestUnreadableMarkerIsNotTrusted(t *testing.T) {
	for name, data := range map[string][]byte{
		"not json":  []byte("{"),
		"no uid":    []byte(`{"kind":"Backup","metadata":{"name":"nightly"}}`),
		"too large": []byte(`{"kind":"Backup","metadata":{"name":"nightly","uid":"uid-1"},"x":"` + strings.Repeat("a", storage.MaxBackupMetadataSize) + `"}`),
	} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t)
			w.putTarball(sampleItems())
			if err := w.store.PutBackupMetadata(t.Context(), w.backup.Name, data); err != nil {
				t.Fatal(err)
			}
			log := &callLog{}
			w.plugins.add(log, "example.io/everything", api.ResourceSelector{})
			res := w.engine().Run(t.Context(), Input{Backup: w.backup, Store: w.store})
			var idErr *IdentityError
			if !errors.As(res.Err, &idErr) {
				t.Fatalf("run: %v; want an IdentityError", res.Err)
			}
			if len(log.all()) != 0 || len(w.objects.deletions()) != 0 {
				t.Errorf("calls %v, deletions %v: want none", log.all(), w.objects.deletions())
			}
			if !strings.Contains(res.Err.Error(), storage.BackupMetadataFile) {
				t.Errorf("error %q does not name %s", res.Err, storage.BackupMetadataFile)
			}
		})
	}
}

package controller

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/deletion"
	"github.com/lifeboat-io/lifeboat/internal/locations"
	"github.com/lifeboat-io/lifeboat/internal/storage/filesystem"
)

func TestSpecChangedIgnoresStatusAndMetadata(t *testing.T) {
	old := &v1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "b", Generation: 1}, Spec: v1.BackupSpec{StorageLocation: "default"}}
	for _, tc := range []struct {
		name   string
		change func(b *v1.Backup)
		want   bool
	}{
		// Without a status subresource the API server increments the
		// generation on a status write too.
		{"status", func(b *v1.Backup) { b.Status.Phase, b.Generation = v1.BackupPhaseInProgress, 2 }, false},
		{"label", func(b *v1.Backup) { b.Labels = map[string]string{"a": "b"} }, false},
		{"spec", func(b *v1.Backup) { b.Spec.StorageLocation, b.Generation = "other", 2 }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur := old.DeepCopy()
			tc.change(cur)
			if got := specChanged.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: cur}); got != tc.want {
				t.Errorf("passes %t, want %t", got, tc.want)
			}
		})
	}
}

// With the CRDs' shape (no status subresource), a controller that records
// its work in the status must not be woken by that write: a location would
// be validated again the moment its validation is recorded, for ever.
func TestControllersSleepThroughTheirOwnStatusWrites(t *testing.T) {
	h := startAPIHarness(t)
	ns := h.namespace(t, "own-writes")
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "bucket"), 0o700); err != nil {
		t.Fatal(err)
	}
	bsl := &v1.BackupStorageLocation{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"},
		Spec: v1.BackupStorageLocationSpec{
			Provider: "lifeboat.io/filesystem", Config: map[string]string{filesystem.PathKey: dir},
			StorageType:         v1.StorageType{ObjectStorage: &v1.ObjectStorageLocation{Bucket: "bucket"}},
			ValidationFrequency: &metav1.Duration{Duration: time.Hour},
		},
	}
	if err := h.c.Create(testCtx(t), bsl); err != nil {
		t.Fatal(err)
	}
	h.startManager(t, ns, func(mgr ctrl.Manager, locs *locations.Resolver) error {
		return (&BackupStorageLocationReconciler{Client: mgr.GetClient(), Locations: locs, Log: testLog()}).SetupWithManager(mgr)
	})
	var first *metav1.Time
	for deadline := time.Now().Add(30 * time.Second); first == nil; time.Sleep(50 * time.Millisecond) {
		if err := h.c.Get(testCtx(t), client.ObjectKeyFromObject(bsl), bsl); err != nil {
			t.Fatal(err)
		}
		first = bsl.Status.LastValidationTime
		if time.Now().After(deadline) {
			t.Fatal("the location was never validated")
		}
	}
	// Validation times are recorded to the second.
	time.Sleep(2500 * time.Millisecond)
	if err := h.c.Get(testCtx(t), client.ObjectKeyFromObject(bsl), bsl); err != nil {
		t.Fatal(err)
	}
	if !bsl.Status.LastValidationTime.Equal(first) {
		t.Errorf("validated at %v, then again at %v with an hour's validation frequency: the controller woke on its own status write",
			first, bsl.Status.LastValidationTime)
	}
}

// A request waiting for a running backup records why once and sleeps until
// its retry: its own write (which, without a status subresource, bumps the
// generation) must not change what it writes next, or the request is
// rewritten for ever.
func TestAWaitingDeletionRequestIsWrittenOnce(t *testing.T) {
	h := startAPIHarness(t)
	ns := h.namespace(t, "waiting")
	h.location(t, ns, "default", "")
	b := &v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly"}, Spec: v1.BackupSpec{StorageLocation: "default"}}
	if err := h.c.Create(testCtx(t), b); err != nil {
		t.Fatal(err)
	}
	if err := writeStatus(testCtx(t), h.c, nil, b, func() { b.Status.Phase = v1.BackupPhaseInProgress }); err != nil {
		t.Fatal(err)
	}
	dbr := v1.NewDeleteBackupRequest(b)
	if err := h.c.Create(testCtx(t), dbr); err != nil {
		t.Fatal(err)
	}
	h.startManager(t, ns, func(mgr ctrl.Manager, locs *locations.Resolver) error {
		return (&DeleteBackupRequestReconciler{
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Locations: locs, Engine: &deletion.Engine{},
			Log: testLog(), RetryBase: time.Hour,
		}).SetupWithManager(mgr)
	})
	for deadline := time.Now().Add(30 * time.Second); !meta.IsStatusConditionTrue(dbr.Status.Conditions, ConditionWaiting); time.Sleep(50 * time.Millisecond) {
		if err := h.c.Get(testCtx(t), client.ObjectKeyFromObject(dbr), dbr); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the request never recorded that it waits")
		}
	}
	rv := dbr.ResourceVersion
	time.Sleep(2 * time.Second)
	if err := h.c.Get(testCtx(t), client.ObjectKeyFromObject(dbr), dbr); err != nil {
		t.Fatal(err)
	}
	if dbr.ResourceVersion != rv {
		t.Errorf("the waiting request was written again (resourceVersion %s, then %s; generation now %d): the controller rewrites it on its own writes",
			rv, dbr.ResourceVersion, dbr.Generation)
	}
}

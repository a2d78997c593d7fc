package controller

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/deletion"
)

// Status writes against a real API server, from a copy read before
// another writer (a second server, or this one through a stale read)
// wrote: such a write must never undo the other writer's, and a write
// that only met a metadata change (a label, a finalizer) still lands.
func TestStatusWritesNeverUndoAnotherWriter(t *testing.T) {
	h := startAPIHarness(t)
	ns := h.namespace(t, "status")
	backups := &BackupReconciler{Client: h.c, APIReader: h.c, Log: testLog()}

	inProgress := func(t *testing.T) *v1.Backup {
		t.Helper()
		b := &v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: h.name("bk")}}
		if err := h.c.Create(testCtx(t), b); err != nil {
			t.Fatal(err)
		}
		h.setStatus(t, b, func(s *v1.BackupStatus) { s.Phase = v1.BackupPhaseInProgress })
		return b
	}
	stored := func(t *testing.T, b *v1.Backup) *v1.Backup {
		t.Helper()
		var cur v1.Backup
		if err := h.c.Get(testCtx(t), client.ObjectKeyFromObject(b), &cur); err != nil {
			t.Fatal(err)
		}
		return &cur
	}

	t.Run("OutcomeOverAnotherServersFailure", func(t *testing.T) {
		// The server running the backup read it InProgress; another server,
		// taking it for abandoned, failed it since.
		running := inProgress(t)
		other := stored(t, running)
		h.setStatus(t, other, func(s *v1.BackupStatus) {
			s.Phase = v1.BackupPhaseFailed
			s.FailureReason = "the server stopped while this backup was in progress"
		})
		progress := backups.patchStatus(testCtx(t), running, func(s *v1.BackupStatus) { s.Progress = &v1.BackupProgress{ItemsBackedUp: 5} })
		outcome := backups.patchStatus(testCtx(t), running, func(s *v1.BackupStatus) { s.Phase = v1.BackupPhaseCompleted })
		if !apierrors.IsConflict(progress) || !apierrors.IsConflict(outcome) {
			t.Errorf("progress write: %v; outcome write: %v; want both refused as conflicts", progress, outcome)
		}
		if cur := stored(t, running); cur.Status.Phase != v1.BackupPhaseFailed || cur.Status.Progress != nil {
			t.Errorf("stored backup: phase %s progress %+v; want the other server's Failed, untouched", cur.Status.Phase, cur.Status.Progress)
		}
	})

	t.Run("StartOverAnotherServersStart", func(t *testing.T) {
		// Two servers read the backup New; the first moved it on.
		b := &v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: h.name("bk")}}
		if err := h.c.Create(testCtx(t), b); err != nil {
			t.Fatal(err)
		}
		second := b.DeepCopy()
		first := metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))
		if err := backups.patchStatus(testCtx(t), b, func(s *v1.BackupStatus) {
			s.Phase, s.StartTimestamp = v1.BackupPhaseInProgress, &first
		}); err != nil {
			t.Fatal(err)
		}
		now := metav1.Now()
		err := backups.patchStatus(testCtx(t), second, func(s *v1.BackupStatus) {
			s.Phase, s.StartTimestamp = v1.BackupPhaseInProgress, &now
		})
		if !apierrors.IsConflict(err) {
			t.Errorf("second start: %v, want a conflict", err)
		}
		if cur := stored(t, b); !cur.Status.StartTimestamp.Equal(&first) {
			t.Errorf("start time %v, want the first server's %v", cur.Status.StartTimestamp, first)
		}
		if second.Status.Phase != "" {
			t.Errorf("the refused writer's copy says %q; it must stay as read so later writes through it are refused too", second.Status.Phase)
		}
	})

	t.Run("CheckpointOverANewerAttempt", func(t *testing.T) {
		requests := &DeleteBackupRequestReconciler{Client: h.c, APIReader: h.c, Log: testLog()}
		dbr := &v1.DeleteBackupRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: h.name("del")}, Spec: v1.DeleteBackupRequestSpec{BackupName: "bk"}}
		if err := h.c.Create(testCtx(t), dbr); err != nil {
			t.Fatal(err)
		}
		if err := requests.patchStatus(testCtx(t), dbr, func(s *v1.DeleteBackupRequestStatus) {
			s.Phase, s.Attempts = v1.DeleteBackupRequestPhaseInProgress, 1
		}); err != nil {
			t.Fatal(err)
		}
		stale := dbr.DeepCopy()
		// Another server took the request on: attempt 2, further along.
		if err := requests.patchStatus(testCtx(t), dbr, func(s *v1.DeleteBackupRequestStatus) {
			s.Attempts = 2
			applyDeletionState(s, deletion.State{Checkpoint: v1.DeletionCheckpoint{Actions: []v1.DeletionProgress{{Name: "a", Watermark: 10, Succeeded: 10}}}})
		}); err != nil {
			t.Fatal(err)
		}
		err := requests.patchStatus(testCtx(t), stale, func(s *v1.DeleteBackupRequestStatus) {
			applyDeletionState(s, deletion.State{Checkpoint: v1.DeletionCheckpoint{Actions: []v1.DeletionProgress{{Name: "a", Watermark: 3, Succeeded: 3}}}})
		})
		if !apierrors.IsConflict(err) {
			t.Errorf("stale checkpoint write: %v, want a conflict", err)
		}
		var cur v1.DeleteBackupRequest
		if err := h.c.Get(testCtx(t), client.ObjectKeyFromObject(dbr), &cur); err != nil {
			t.Fatal(err)
		}
		if cur.Status.Attempts != 2 || cur.Status.Checkpoint == nil || cur.Status.Checkpoint.Actions[0].Watermark != 10 {
			t.Errorf("stored request: attempts %d checkpoint %+v; want attempt 2's checkpoint (watermark 10)", cur.Status.Attempts, cur.Status.Checkpoint)
		}
	})

	t.Run("OutcomeAfterALabelWasAdded", func(t *testing.T) {
		running := inProgress(t)
		other := stored(t, running)
		orig := other.DeepCopy()
		metav1.SetMetaDataLabel(&other.ObjectMeta, "team", "shop")
		if err := h.c.Patch(testCtx(t), other, client.MergeFrom(orig)); err != nil {
			t.Fatal(err)
		}
		if err := backups.patchStatus(testCtx(t), running, func(s *v1.BackupStatus) { s.Phase = v1.BackupPhaseCompleted }); err != nil {
			t.Fatalf("outcome write after a label change: %v; a metadata change is no reason to refuse it", err)
		}
		cur := stored(t, running)
		if cur.Status.Phase != v1.BackupPhaseCompleted || cur.Labels["team"] != "shop" || running.ResourceVersion != cur.ResourceVersion {
			t.Errorf("stored: phase %s labels %v rv %s (writer's copy rv %s); want Completed, the label kept, the copy current",
				cur.Status.Phase, cur.Labels, cur.ResourceVersion, running.ResourceVersion)
		}
	})

	t.Run("OutcomeAfterTheSpecChanged", func(t *testing.T) {
		running := inProgress(t)
		other := stored(t, running)
		orig := other.DeepCopy()
		other.Spec.TTL = metav1.Duration{Duration: 3 * time.Second}
		if err := h.c.Patch(testCtx(t), other, client.MergeFrom(orig)); err != nil {
			t.Fatal(err)
		}
		err := backups.patchStatus(testCtx(t), running, func(s *v1.BackupStatus) { s.Phase = v1.BackupPhaseCompleted })
		if !apierrors.IsConflict(err) {
			t.Errorf("outcome write after a spec change: %v, want a conflict (the run used the old spec)", err)
		}
	})

	t.Run("WithoutAReaderEveryConflictIsRefused", func(t *testing.T) {
		running := inProgress(t)
		other := stored(t, running)
		orig := other.DeepCopy()
		metav1.SetMetaDataLabel(&other.ObjectMeta, "team", "shop")
		if err := h.c.Patch(testCtx(t), other, client.MergeFrom(orig)); err != nil {
			t.Fatal(err)
		}
		err := writeStatus(testCtx(t), h.c, nil, running, func() { running.Status.Phase = v1.BackupPhaseCompleted })
		if !apierrors.IsConflict(err) {
			t.Errorf("write from a stale copy with no reader: %v, want a conflict", err)
		}
	})

	t.Run("WrittenWhileTheServerStops", func(t *testing.T) {
		running := inProgress(t)
		ctx, cancel := context.WithCancel(testCtx(t))
		cancel()
		if err := backups.patchStatus(ctx, running, func(s *v1.BackupStatus) { s.Phase = v1.BackupPhaseFailed }); err != nil {
			t.Fatalf("final write with a cancelled context: %v", err)
		}
		if cur := stored(t, running); cur.Status.Phase != v1.BackupPhaseFailed {
			t.Errorf("phase %s, want Failed recorded despite the shutdown", cur.Status.Phase)
		}
	})

	t.Run("GoneIsNotAnError", func(t *testing.T) {
		running := inProgress(t)
		if err := h.c.Delete(testCtx(t), running.DeepCopy(), &client.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
		if err := backups.patchStatus(testCtx(t), running, func(s *v1.BackupStatus) { s.Phase = v1.BackupPhaseCompleted }); err != nil {
			t.Errorf("write to a deleted backup: %v, want nil (nothing left to record)", err)
		}
	})
}

package controller

import (
	"context"
	"strconv"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/config/crd"
	"github.com/lifeboat-io/lifeboat/internal/deletion"
	"github.com/lifeboat-io/lifeboat/internal/testutil/velerocrds"
)

// crdShape is one set of velero.io CRDs a cluster may have installed.
type crdShape struct {
	name string
	crds func() ([]*apiextensionsv1.CustomResourceDefinition, error)
	// statusSubresource: status is written through /status, and the main
	// resource ignores it.
	statusSubresource bool
	// lifeboatFields: the schema keeps the status fields only Lifeboat
	// has (conditions, a deletion's attempts and checkpoint); Velero's
	// prunes them.
	lifeboatFields bool
}

// The shapes a Lifeboat server meets: Velero's own CRDs (a Velero install,
// or `velero install` run again after Lifeboat's), Lifeboat's, and the
// CRDs Lifeboat installed before it matched Velero's subresources (until
// `lifeboat install` replaces them).
var crdShapes = []crdShape{
	{name: "VelerosCRDs", crds: velerocrds.All},
	{name: "LifeboatsCRDs", crds: crd.All, lifeboatFields: true},
	{name: "OlderLifeboatCRDsWithAStatusSubresource", crds: func() ([]*apiextensionsv1.CustomResourceDefinition, error) {
		crds, err := crd.All()
		for _, c := range crds {
			for i := range c.Spec.Versions {
				c.Spec.Versions[i].Subresources = &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}}
			}
		}
		return crds, err
	}, statusSubresource: true, lifeboatFields: true},
}

// Status writes against a real API server with each shape of CRDs
// installed in turn (a user may switch back and forth), from a copy read
// before another writer (a second server, or this one through a stale read)
// wrote: a write lands, carries nothing but the status, never undoes the
// other writer's, and one that only met a metadata change (a label, a
// finalizer) still lands.
func TestStatusWritesNeverUndoAnotherWriter(t *testing.T) {
	h := startAPIHarness(t)
	ns := h.namespace(t, "status")
	backups := &BackupReconciler{Client: h.c, APIReader: h.c, Log: testLog()}
	requests := &DeleteBackupRequestReconciler{Client: h.c, APIReader: h.c, Log: testLog()}

	newBackup := func(t *testing.T) *v1.Backup {
		t.Helper()
		b := &v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: h.name("bk")}}
		if err := h.c.Create(testCtx(t), b); err != nil {
			t.Fatal(err)
		}
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
	// otherServer writes as another server would: from its own, current
	// read, through the same writer.
	otherServer := func(t *testing.T, b *v1.Backup, change func(*v1.BackupStatus)) {
		t.Helper()
		cur := stored(t, b)
		if err := writeStatus(testCtx(t), h.c, nil, cur, func() { change(&cur.Status) }); err != nil {
			t.Fatalf("another server's write: %v", err)
		}
	}
	inProgress := func(t *testing.T) *v1.Backup {
		t.Helper()
		b := newBackup(t)
		otherServer(t, b, func(s *v1.BackupStatus) { s.Phase = v1.BackupPhaseInProgress })
		return stored(t, b)
	}

	// carried was read under the previous shape and is written under the
	// next: switching CRDs does not change what is stored.
	var carried *v1.Backup
	for _, shape := range crdShapes {
		t.Run(shape.name, func(t *testing.T) {
			h.installCRDs(t, ns, shape)

			t.Run("ACopyReadBeforeTheCRDsChangedIsWritten", func(t *testing.T) {
				if carried == nil {
					carried = inProgress(t)
					return
				}
				phase := v1.BackupPhaseFinalizing
				if carried.Status.Phase == phase {
					phase = v1.BackupPhaseInProgress
				}
				if err := backups.patchStatus(testCtx(t), carried, func(s *v1.BackupStatus) { s.Phase = phase }); err != nil {
					t.Fatal(err)
				}
				if cur := stored(t, carried); cur.Status.Phase != phase {
					t.Errorf("phase %q, want %q", cur.Status.Phase, phase)
				}
			})

			t.Run("TheWriteLands", func(t *testing.T) {
				b := newBackup(t)
				start := metav1.NewTime(time.Now().Truncate(time.Second))
				if err := backups.patchStatus(testCtx(t), b, func(s *v1.BackupStatus) {
					s.Phase, s.StartTimestamp, s.Progress = v1.BackupPhaseInProgress, &start, &v1.BackupProgress{TotalItems: 9}
				}); err != nil {
					t.Fatal(err)
				}
				cur := stored(t, b)
				if cur.Status.Phase != v1.BackupPhaseInProgress || !cur.Status.StartTimestamp.Equal(&start) || cur.Status.Progress == nil || cur.Status.Progress.TotalItems != 9 {
					t.Errorf("stored status %+v; want the write", cur.Status)
				}
				if b.ResourceVersion != cur.ResourceVersion || b.Status.Phase != v1.BackupPhaseInProgress {
					t.Errorf("writer's copy at rv %s phase %q, stored rv %s: the copy must be what is stored", b.ResourceVersion, b.Status.Phase, cur.ResourceVersion)
				}
				completed := meta.FindStatusCondition(cur.Status.Conditions, ConditionCompleted)
				if shape.lifeboatFields != (completed != nil) {
					t.Errorf("conditions %+v: Lifeboat's own status fields must be kept exactly where the schema has them", cur.Status.Conditions)
				}
			})

			t.Run("OnlyTheStatusIsWritten", func(t *testing.T) {
				b := newBackup(t)
				if err := writeStatus(testCtx(t), h.c, nil, b, func() {
					b.Status.Phase = v1.BackupPhaseInProgress
					// Not the writer's business: never sent.
					metav1.SetMetaDataLabel(&b.ObjectMeta, "stray", "label")
					b.Spec.TTL = metav1.Duration{Duration: time.Second}
				}); err != nil {
					t.Fatal(err)
				}
				cur := stored(t, b)
				if cur.Status.Phase != v1.BackupPhaseInProgress || cur.Labels["stray"] != "" || cur.Spec.TTL.Duration != 0 {
					t.Errorf("stored phase %q labels %v ttl %s; want the status written and nothing else", cur.Status.Phase, cur.Labels, cur.Spec.TTL.Duration)
				}
			})

			t.Run("OutcomeOverAnotherServersFailure", func(t *testing.T) {
				// The server running the backup read it InProgress; another
				// server, taking it for abandoned, failed it since.
				running := inProgress(t)
				otherServer(t, running, func(s *v1.BackupStatus) {
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
				b := newBackup(t)
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
				if !shape.lifeboatFields {
					t.Skip("Velero's schema has no attempts or checkpoint")
				}
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
				if cur := stored(t, running); cur.Spec.TTL.Duration != 3*time.Second || cur.Status.Phase != v1.BackupPhaseInProgress {
					t.Errorf("stored ttl %s phase %s; want the other writer's spec, the status untouched", cur.Spec.TTL.Duration, cur.Status.Phase)
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

			t.Run("PatchObjectWritesNoStatus", func(t *testing.T) {
				running := inProgress(t)
				if err := patchObject(testCtx(t), h.c, running, func() {
					running.Finalizers = append(running.Finalizers, v1.BackupFinalizer)
					running.Status.Phase = v1.BackupPhaseCompleted
				}); err != nil {
					t.Fatal(err)
				}
				cur := stored(t, running)
				if len(cur.Finalizers) != 1 || cur.Status.Phase != v1.BackupPhaseInProgress {
					t.Errorf("stored finalizers %v phase %s; want the finalizer and the status as it was", cur.Finalizers, cur.Status.Phase)
				}
				orig := cur.DeepCopy()
				cur.Finalizers = nil
				if err := h.c.Patch(testCtx(t), cur, client.MergeFrom(orig)); err != nil {
					t.Fatal(err)
				}
			})

			// Velero's server writes status through the main resource.
			t.Run("AVeleroServersWriteLands", func(t *testing.T) {
				b := newBackup(t)
				if err := h.c.Patch(testCtx(t), b, client.RawPatch(types.MergePatchType, []byte(`{"status":{"phase":"Completed"}}`))); err != nil {
					t.Fatal(err)
				}
				got := stored(t, b).Status.Phase
				switch {
				case shape.statusSubresource && got != "":
					t.Errorf("phase %q: with a status subresource the API server drops what Velero writes (the reason Lifeboat's CRDs have none)", got)
				case !shape.statusSubresource && got != v1.BackupPhaseCompleted:
					t.Errorf("phase %q, want Velero's write kept", got)
				}
			})
		})
	}
}

// installCRDs replaces the velero.io CRDs with shape's and waits until the
// API server serves them: the status subresource there or not, and
// Lifeboat's own status fields kept or pruned as the shape says.
func (h *apiHarness) installCRDs(t *testing.T, ns string, shape crdShape) {
	t.Helper()
	crds, err := shape.crds()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range crds {
		var cur apiextensionsv1.CustomResourceDefinition
		err := h.c.Get(testCtx(t), client.ObjectKey{Name: want.Name}, &cur)
		switch {
		case apierrors.IsNotFound(err):
			err = h.c.Create(testCtx(t), want)
		case err == nil:
			cur.Spec = want.Spec
			err = h.c.Update(testCtx(t), &cur)
		}
		if err != nil {
			t.Fatalf("installing CRD %s: %v", want.Name, err)
		}
	}
	probe := &v1.DeleteBackupRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: h.name("probe")}, Spec: v1.DeleteBackupRequestSpec{BackupName: "probe"}}
	if err := h.c.Create(testCtx(t), probe); err != nil {
		t.Fatal(err)
	}
	bprobe := &v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: h.name("probe")}}
	if err := h.c.Create(testCtx(t), bprobe); err != nil {
		t.Fatal(err)
	}
	attempts := int32(0)
	served := func(ctx context.Context) (bool, error) {
		for _, obj := range []client.Object{probe, bprobe} {
			err := h.c.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(`{}`)))
			if apierrors.IsNotFound(err) == shape.statusSubresource {
				return false, nil
			}
			if err != nil && !apierrors.IsNotFound(err) {
				return false, err
			}
		}
		// Each probe writes values not written before, so that what was
		// stored under the last shape cannot pass for this one's.
		attempts++
		n := strconv.Itoa(int(attempts))
		for _, p := range []struct {
			obj   client.Object
			patch string
		}{
			{probe, `{"status":{"attempts":` + n + `}}`},
			{bprobe, `{"status":{"conditions":[{"type":"Probe","status":"True","reason":"Probe","message":"` + n + `","lastTransitionTime":"2020-01-01T00:00:00Z"}]}}`},
		} {
			patch := client.RawPatch(types.MergePatchType, []byte(p.patch))
			var err error
			if shape.statusSubresource {
				err = h.c.Status().Patch(ctx, p.obj, patch)
			} else {
				err = h.c.Patch(ctx, p.obj, patch)
			}
			if err != nil {
				return false, err
			}
		}
		var cur v1.DeleteBackupRequest
		if err := h.c.Get(ctx, client.ObjectKeyFromObject(probe), &cur); err != nil {
			return false, err
		}
		var curb v1.Backup
		if err := h.c.Get(ctx, client.ObjectKeyFromObject(bprobe), &curb); err != nil {
			return false, err
		}
		kept := cur.Status.Attempts == attempts
		keptb := len(curb.Status.Conditions) == 1 && curb.Status.Conditions[0].Message == n
		return kept == shape.lifeboatFields && keptb == shape.lifeboatFields, nil
	}
	if err := wait.PollUntilContextTimeout(testCtx(t), 50*time.Millisecond, 30*time.Second, true, served); err != nil {
		t.Fatalf("the API server does not serve the %s as installed: %v", shape.name, err)
	}
}

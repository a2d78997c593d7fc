package controller

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/deletion"
)

// patchStatus applies change to dbr's status, with the conditions derived
// from the phase, and writes it (writeStatus), and records the new phase
// as an Event.
func (r *DeleteBackupRequestReconciler) patchStatus(ctx context.Context, dbr *v1.DeleteBackupRequest, change func(*v1.DeleteBackupRequestStatus)) error {
	before := string(dbr.Status.Phase)
	err := writeStatus(ctx, r.Client, r.APIReader, dbr, func() {
		change(&dbr.Status)
		setRequestConditions(dbr)
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("updating status of deletion request %s/%s: %w", dbr.Namespace, dbr.Name, err)
	}
	recordPhaseChange(r.Events, dbr, before)
	return nil
}

// setRequestConditions derives Processed and Failed from the phase.
func setRequestConditions(dbr *v1.DeleteBackupRequest) {
	s := &dbr.Status
	reason := string(cmp.Or(s.Phase, v1.DeleteBackupRequestPhaseNew))
	msg := ""
	if len(s.Errors) > 0 {
		msg = s.Errors[0]
	}
	if s.HandledBy != "" && requestFinished(s.Phase) {
		msg = strings.TrimSpace("handled by deletion request " + s.HandledBy + " " + msg)
	}
	setCondition(&s.Conditions, dbr.Generation, ConditionProcessed, s.Phase == v1.DeleteBackupRequestPhaseProcessed, reason, msg)
	setCondition(&s.Conditions, dbr.Generation, ConditionFailed, s.Phase == v1.DeleteBackupRequestPhaseFailed, reason, msg)
}

// setWaiting sets the Waiting condition: True with reason and message, or
// False when reason is empty.
func setWaiting(dbr *v1.DeleteBackupRequest, reason, msg string) {
	if reason == "" {
		setCondition(&dbr.Status.Conditions, dbr.Generation, ConditionWaiting, false, "NotWaiting", "")
		return
	}
	setCondition(&dbr.Status.Conditions, dbr.Generation, ConditionWaiting, true, reason, msg)
}

// stateOf is the engine's state as the request's status holds it.
func deletionStateOf(dbr *v1.DeleteBackupRequest) deletion.State {
	s := dbr.Status
	st := deletion.State{SnapshotsDeleted: s.SnapshotsDeleted, RestoresDeleted: s.RestoresDeleted, KeysRemoved: s.KeysRemoved,
		UnfinishedUploadsRemoved: s.UnfinishedUploadsRemoved, PodVolumeSnapshotsForgotten: s.PodVolumeSnapshotsForgotten}
	if s.Checkpoint != nil {
		st.Checkpoint = *s.Checkpoint.DeepCopy()
	}
	if s.Report != nil {
		st.Warnings = slices.Clone(s.Report.Warnings)
		st.Skipped, st.SkippedCount = slices.Clone(s.Report.SkippedItems), s.Report.SkippedCount
	}
	return st
}

// applyState writes the engine's state into the status.
func applyDeletionState(s *v1.DeleteBackupRequestStatus, st deletion.State) {
	cp := st.Checkpoint
	s.Checkpoint = &cp
	s.SnapshotsDeleted, s.RestoresDeleted, s.KeysRemoved = st.SnapshotsDeleted, st.RestoresDeleted, st.KeysRemoved
	s.UnfinishedUploadsRemoved = st.UnfinishedUploadsRemoved
	s.PodVolumeSnapshotsForgotten = st.PodVolumeSnapshotsForgotten
	if len(st.Warnings) > 0 || st.SkippedCount > 0 {
		if s.Report == nil {
			s.Report = &v1.DeletionReport{}
		}
		s.Report.Warnings = slices.Clone(st.Warnings)
		s.Report.SkippedItems, s.Report.SkippedCount = slices.Clone(st.Skipped), st.SkippedCount
	}
}

func deletionBackupKey(dbr *v1.DeleteBackupRequest) string {
	return dbr.Namespace + "/" + dbr.Spec.BackupName
}

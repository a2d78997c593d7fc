package controller

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// Condition types Lifeboat sets, so `kubectl wait --for=condition=...` works.
const (
	// ConditionCompleted is True once a backup or restore has run to the end
	// (Completed or PartiallyFailed).
	ConditionCompleted = "Completed"
	// ConditionFailed is True when it failed or failed validation.
	ConditionFailed = "Failed"
	// ConditionAvailable is True while a storage location can be used.
	ConditionAvailable = "Available"
	// ConditionProcessed is True once a request has been answered.
	ConditionProcessed = "Processed"
)

func setCondition(conds *[]metav1.Condition, generation int64, typ string, ok bool, reason, msg string) {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	setStatusCondition(conds, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: generation,
	})
}

// setStatusCondition sets cond as meta.SetStatusCondition does, but leaves
// a condition that already says the same (status, reason and message)
// exactly as it is, its observedGeneration included. Without a status
// subresource (Velero's CRDs, and so Lifeboat's) the API server increments
// metadata.generation on every status write; a condition stamped with the
// generation on each write would change with each write it causes, and
// the controllers that run on their own updates (deletions, item
// operations) would write for ever.
func setStatusCondition(conds *[]metav1.Condition, cond metav1.Condition) {
	if cur := meta.FindStatusCondition(*conds, cond.Type); cur != nil &&
		cur.Status == cond.Status && cur.Reason == cond.Reason && cur.Message == cond.Message {
		return
	}
	meta.SetStatusCondition(conds, cond)
}

// setBackupConditions derives the conditions from the phase, so the two can
// never disagree.
func setBackupConditions(b *v1.Backup) {
	phase := b.Status.Phase
	reason := string(phase)
	if reason == "" {
		reason = string(v1.BackupPhaseNew)
	}
	msg := b.Status.FailureReason
	if msg == "" && len(b.Status.ValidationErrors) > 0 {
		msg = b.Status.ValidationErrors[0]
	}
	done := phase == v1.BackupPhaseCompleted || phase == v1.BackupPhasePartiallyFailed
	failed := phase == v1.BackupPhaseFailed || phase == v1.BackupPhaseFailedValidation
	setCondition(&b.Status.Conditions, b.Generation, ConditionCompleted, done, reason, msg)
	setCondition(&b.Status.Conditions, b.Generation, ConditionFailed, failed, reason, msg)
}

// setRestoreConditions derives a restore's conditions from its phase, as
// setBackupConditions does for backups.
func setRestoreConditions(rs *v1.Restore) {
	phase := rs.Status.Phase
	reason := string(phase)
	if reason == "" {
		reason = string(v1.RestorePhaseNew)
	}
	msg := rs.Status.FailureReason
	if msg == "" && len(rs.Status.ValidationErrors) > 0 {
		msg = rs.Status.ValidationErrors[0]
	}
	done := phase == v1.RestorePhaseCompleted || phase == v1.RestorePhasePartiallyFailed
	failed := phase == v1.RestorePhaseFailed || phase == v1.RestorePhaseFailedValidation
	setCondition(&rs.Status.Conditions, rs.Generation, ConditionCompleted, done, reason, msg)
	setCondition(&rs.Status.Conditions, rs.Generation, ConditionFailed, failed, reason, msg)
}

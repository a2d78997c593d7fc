package controller

import (
	"fmt"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// Kubernetes Events: each phase a Backup, Restore or DeleteBackupRequest
// reaches, and each failed deletion attempt, is recorded as an Event on
// the object, so that `kubectl describe backup NAME` and `kubectl get
// events` say what happened without the server's log. The event follows
// from the status just written (phaseEvent), so that it can never say
// something else than the object.

// Event actions (events.k8s.io/v1 requires one).
const (
	actionBackup   = "Backup"
	actionRestore  = "Restore"
	actionDelete   = "Delete"
	actionValidate = "Validate"
)

// maxEventNote is the API server's limit on an event's note.
const maxEventNote = 1024

// kubeEvent is one Event to record.
type kubeEvent struct {
	warning              bool
	reason, action, note string
}

// recordPhaseChange records the event of obj's phase when it is not
// before, the phase obj had before its status was written. A nil recorder
// records nothing (controllers built by unit tests).
func recordPhaseChange(rec events.EventRecorder, obj runtime.Object, before string) {
	if rec == nil || phaseOf(obj) == before {
		return
	}
	if ev, ok := phaseEvent(obj); ok {
		record(rec, obj, ev)
	}
}

func record(rec events.EventRecorder, obj runtime.Object, ev kubeEvent) {
	if rec == nil {
		return
	}
	typ := corev1.EventTypeNormal
	if ev.warning {
		typ = corev1.EventTypeWarning
	}
	rec.Eventf(obj, nil, typ, ev.reason, ev.action, "%s", truncateNote(ev.note))
}

func phaseOf(obj runtime.Object) string {
	switch o := obj.(type) {
	case *v1.Backup:
		return string(o.Status.Phase)
	case *v1.Restore:
		return string(o.Status.Phase)
	case *v1.DeleteBackupRequest:
		return string(o.Status.Phase)
	}
	return ""
}

// phaseEvent is the event of the phase obj is in; false for phases that
// have none (New).
func phaseEvent(obj runtime.Object) (kubeEvent, bool) {
	switch o := obj.(type) {
	case *v1.Backup:
		return backupEvent(o)
	case *v1.Restore:
		return restoreEvent(o)
	case *v1.DeleteBackupRequest:
		return deletionEvent(o)
	}
	return kubeEvent{}, false
}

func backupEvent(b *v1.Backup) (kubeEvent, bool) {
	s := &b.Status
	name := b.Namespace + "/" + b.Name
	items := 0
	if s.Progress != nil {
		items = s.Progress.ItemsBackedUp
	}
	switch s.Phase {
	case v1.BackupPhaseInProgress:
		return kubeEvent{reason: "BackupStarted", action: actionBackup,
			note: fmt.Sprintf("backup %s started, to storage location %s", name, b.Spec.StorageLocation)}, true
	case v1.BackupPhaseWaitingForPluginOperations, v1.BackupPhaseWaitingForPluginOperationsPartiallyFailed:
		return kubeEvent{reason: "BackupWaitingForPluginOperations", action: actionBackup,
			note: fmt.Sprintf("backup %s stored %d items and waits for %d asynchronous plugin operations to end (%d errors so far)",
				name, items, s.BackupItemOperationsAttempted, s.Errors)}, true
	case v1.BackupPhaseCompleted:
		return kubeEvent{reason: "BackupCompleted", action: actionBackup,
			note: fmt.Sprintf("backup %s completed: %d items backed up, %d warnings", name, items, s.Warnings)}, true
	case v1.BackupPhasePartiallyFailed:
		return kubeEvent{warning: true, reason: "BackupPartiallyFailed", action: actionBackup,
			note: fmt.Sprintf("backup %s partially failed: %d items backed up, %d errors, %d warnings; `lifeboat backup logs %s` shows them",
				name, items, s.Errors, s.Warnings, b.Name)}, true
	case v1.BackupPhaseFailed:
		return kubeEvent{warning: true, reason: "BackupFailed", action: actionBackup,
			note: fmt.Sprintf("backup %s failed: %s", name, orUnknown(s.FailureReason))}, true
	case v1.BackupPhaseFailedValidation:
		return kubeEvent{warning: true, reason: "BackupFailedValidation", action: actionValidate,
			note: fmt.Sprintf("backup %s failed validation: %s", name, strings.Join(s.ValidationErrors, "; "))}, true
	}
	return kubeEvent{}, false
}

func restoreEvent(rs *v1.Restore) (kubeEvent, bool) {
	s := &rs.Status
	name := rs.Namespace + "/" + rs.Name
	of := ""
	if rs.Spec.BackupName != "" {
		of = " of backup " + rs.Spec.BackupName
	}
	items := 0
	if s.Progress != nil {
		items = s.Progress.ItemsRestored
	}
	switch s.Phase {
	case v1.RestorePhaseInProgress:
		return kubeEvent{reason: "RestoreStarted", action: actionRestore, note: fmt.Sprintf("restore %s%s started", name, of)}, true
	case v1.RestorePhaseCompleted:
		return kubeEvent{reason: "RestoreCompleted", action: actionRestore,
			note: fmt.Sprintf("restore %s%s completed: %d items restored, %d warnings", name, of, items, s.Warnings)}, true
	case v1.RestorePhasePartiallyFailed:
		return kubeEvent{warning: true, reason: "RestorePartiallyFailed", action: actionRestore,
			note: fmt.Sprintf("restore %s%s partially failed: %d items restored, %d errors, %d warnings; `lifeboat restore logs %s` shows them",
				name, of, items, s.Errors, s.Warnings, rs.Name)}, true
	case v1.RestorePhaseFailed:
		return kubeEvent{warning: true, reason: "RestoreFailed", action: actionRestore,
			note: fmt.Sprintf("restore %s%s failed: %s", name, of, orUnknown(s.FailureReason))}, true
	case v1.RestorePhaseFailedValidation:
		return kubeEvent{warning: true, reason: "RestoreFailedValidation", action: actionValidate,
			note: fmt.Sprintf("restore %s%s failed validation: %s", name, of, strings.Join(s.ValidationErrors, "; "))}, true
	}
	return kubeEvent{}, false
}

func deletionEvent(dbr *v1.DeleteBackupRequest) (kubeEvent, bool) {
	s := &dbr.Status
	backup := dbr.Namespace + "/" + dbr.Spec.BackupName
	switch s.Phase {
	case v1.DeleteBackupRequestPhaseInProgress:
		return kubeEvent{reason: "DeletionStarted", action: actionDelete, note: fmt.Sprintf("deletion of backup %s started", backup)}, true
	case v1.DeleteBackupRequestPhaseFailed:
		return kubeEvent{warning: true, reason: "DeletionFailed", action: actionDelete,
			note: fmt.Sprintf("deletion of backup %s failed after %d attempts: %s", backup, s.Attempts, strings.Join(s.Errors, "; "))}, true
	case v1.DeleteBackupRequestPhaseProcessed:
		switch {
		case len(s.Errors) > 0:
			return kubeEvent{warning: true, reason: "DeletionFailed", action: actionDelete,
				note: fmt.Sprintf("deletion of backup %s ended with errors: %s", backup, strings.Join(s.Errors, "; "))}, true
		case s.Plan != nil:
			return kubeEvent{reason: "DeletionPlanned", action: actionDelete,
				note: fmt.Sprintf("dry run: the plan to delete backup %s is in the request's status.plan; nothing was deleted", backup)}, true
		}
		r := s.Report
		if r == nil {
			r = &v1.DeletionReport{}
		}
		return kubeEvent{reason: "BackupDeleted", action: actionDelete,
			note: fmt.Sprintf("backup %s deleted: %d keys removed, %d snapshots and %d restores deleted",
				backup, r.KeysRemoved, r.SnapshotsDeleted, r.RestoresDeleted)}, true
	}
	return kubeEvent{}, false
}

func orUnknown(reason string) string {
	if reason == "" {
		return "no reason recorded"
	}
	return reason
}

// truncateNote keeps a note within the API server's limit, on a rune
// boundary.
func truncateNote(note string) string {
	if len(note) <= maxEventNote {
		return note
	}
	const more = " ..."
	cut := maxEventNote - len(more)
	for cut > 0 && !utf8.RuneStart(note[cut]) {
		cut--
	}
	return note[:cut] + more
}

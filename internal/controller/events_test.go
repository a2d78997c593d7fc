package controller

import (
	"strings"
	"testing"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// TestPhaseEvents: each phase has its reason and type, and the note names
// the object and says what went wrong.
func TestPhaseEvents(t *testing.T) {
	meta := metav1.ObjectMeta{Namespace: "velero", Name: "nightly-1"}
	backup := func(s v1.BackupStatus) *v1.Backup {
		return &v1.Backup{ObjectMeta: meta, Spec: v1.BackupSpec{StorageLocation: "default"}, Status: s}
	}
	restore := func(s v1.RestoreStatus) *v1.Restore {
		return &v1.Restore{ObjectMeta: meta, Spec: v1.RestoreSpec{BackupName: "b1"}, Status: s}
	}
	request := func(s v1.DeleteBackupRequestStatus) *v1.DeleteBackupRequest {
		return &v1.DeleteBackupRequest{ObjectMeta: meta, Spec: v1.DeleteBackupRequestSpec{BackupName: "b1"}, Status: s}
	}
	for _, tt := range []struct {
		obj     runtime.Object
		want    string // "Type Reason"
		mention []string
	}{
		{backup(v1.BackupStatus{Phase: v1.BackupPhaseInProgress}), "Normal BackupStarted", []string{"velero/nightly-1", "default"}},
		{backup(v1.BackupStatus{Phase: v1.BackupPhaseCompleted, Progress: &v1.BackupProgress{ItemsBackedUp: 7}}), "Normal BackupCompleted", []string{"velero/nightly-1", "7 items"}},
		{backup(v1.BackupStatus{Phase: v1.BackupPhasePartiallyFailed, Errors: 2}), "Warning BackupPartiallyFailed", []string{"velero/nightly-1", "2 errors", "backup logs nightly-1"}},
		{backup(v1.BackupStatus{Phase: v1.BackupPhaseFailed, FailureReason: "storage location \"broken\" is not usable"}), "Warning BackupFailed", []string{"velero/nightly-1", `"broken" is not usable`}},
		{backup(v1.BackupStatus{Phase: v1.BackupPhaseFailedValidation, ValidationErrors: []string{"spec.a: bad", "spec.b: worse"}}), "Warning BackupFailedValidation", []string{"velero/nightly-1", "spec.a: bad; spec.b: worse"}},
		{backup(v1.BackupStatus{Phase: v1.BackupPhaseWaitingForPluginOperations, BackupItemOperationsAttempted: 3}), "Normal BackupWaitingForPluginOperations", []string{"3 asynchronous"}},
		{restore(v1.RestoreStatus{Phase: v1.RestorePhaseInProgress}), "Normal RestoreStarted", []string{"velero/nightly-1", "backup b1"}},
		{restore(v1.RestoreStatus{Phase: v1.RestorePhaseCompleted, Progress: &v1.RestoreProgress{ItemsRestored: 4}}), "Normal RestoreCompleted", []string{"4 items restored"}},
		{restore(v1.RestoreStatus{Phase: v1.RestorePhasePartiallyFailed, Errors: 1}), "Warning RestorePartiallyFailed", []string{"1 errors", "restore logs nightly-1"}},
		{restore(v1.RestoreStatus{Phase: v1.RestorePhaseFailed, FailureReason: "archive corrupt"}), "Warning RestoreFailed", []string{"backup b1", "archive corrupt"}},
		{restore(v1.RestoreStatus{Phase: v1.RestorePhaseFailedValidation, ValidationErrors: []string{"spec.backupName: backup \"b1\" not found"}}), "Warning RestoreFailedValidation", []string{"not found"}},
		{request(v1.DeleteBackupRequestStatus{Phase: v1.DeleteBackupRequestPhaseInProgress}), "Normal DeletionStarted", []string{"velero/b1"}},
		{request(v1.DeleteBackupRequestStatus{Phase: v1.DeleteBackupRequestPhaseProcessed, Report: &v1.DeletionReport{KeysRemoved: 9}}), "Normal BackupDeleted", []string{"velero/b1", "9 keys"}},
		{request(v1.DeleteBackupRequestStatus{Phase: v1.DeleteBackupRequestPhaseProcessed, Errors: []string{"backup is in progress"}}), "Warning DeletionFailed", []string{"velero/b1", "backup is in progress"}},
		{request(v1.DeleteBackupRequestStatus{Phase: v1.DeleteBackupRequestPhaseFailed, Attempts: 5, Errors: []string{"store down"}}), "Warning DeletionFailed", []string{"5 attempts", "store down"}},
		{request(v1.DeleteBackupRequestStatus{Phase: v1.DeleteBackupRequestPhaseProcessed, Plan: &v1.DeletionPlan{}}), "Normal DeletionPlanned", []string{"dry run"}},
	} {
		rec := events.NewFakeRecorder(2)
		recordPhaseChange(rec, tt.obj, "New")
		select {
		case got := <-rec.Events:
			if !strings.HasPrefix(got, tt.want+" ") {
				t.Errorf("%s: event %q, want %s", phaseOf(tt.obj), got, tt.want)
			}
			for _, m := range tt.mention {
				if !strings.Contains(got, m) {
					t.Errorf("%s: event %q does not mention %q", phaseOf(tt.obj), got, m)
				}
			}
		default:
			t.Errorf("%s: no event recorded, want %s", phaseOf(tt.obj), tt.want)
		}
	}
}

// TestNoEventWithoutPhaseChange: progress writes and New make no events.
func TestNoEventWithoutPhaseChange(t *testing.T) {
	rec := events.NewFakeRecorder(2)
	recordPhaseChange(rec, &v1.Backup{Status: v1.BackupStatus{Phase: v1.BackupPhaseInProgress}}, string(v1.BackupPhaseInProgress))
	recordPhaseChange(rec, &v1.DeleteBackupRequest{Status: v1.DeleteBackupRequestStatus{Phase: v1.DeleteBackupRequestPhaseNew}}, "")
	recordPhaseChange(nil, &v1.Backup{Status: v1.BackupStatus{Phase: v1.BackupPhaseCompleted}}, "")
	if len(rec.Events) != 0 {
		t.Errorf("events recorded: %q", <-rec.Events)
	}
}

func TestTruncateNote(t *testing.T) {
	long := strings.Repeat("é", 1000) // 2000 bytes
	got := truncateNote(long)
	if len(got) > maxEventNote || !utf8.ValidString(got) || !strings.HasSuffix(got, " ...") {
		t.Errorf("truncateNote: %d bytes, valid UTF-8 %v, suffix %q", len(got), utf8.ValidString(got), got[len(got)-4:])
	}
	if short := "backup failed"; truncateNote(short) != short {
		t.Error("a short note was changed")
	}
}

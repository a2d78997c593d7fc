package v1

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StoredNothing reports whether b is known to have written nothing to its
// storage location: it failed validation, which comes before anything is
// written, or its Stored condition is False. Deleting such a Backup must
// leave the location alone: whatever is stored under its name is another
// backup's.
func (b *Backup) StoredNothing() bool {
	if b.Status.Phase == BackupPhaseFailedValidation {
		return true
	}
	return meta.IsStatusConditionFalse(b.Status.Conditions, BackupConditionStored)
}

// NewDeleteBackupRequest is the request that asks for b's deletion, as the
// CLI and garbage collection make it: named after the backup, labelled
// with its name and UID as Velero labels them, so that tools find the
// requests of a backup, and of this very backup rather than an earlier
// one of the same name.
func NewDeleteBackupRequest(b *Backup) *DeleteBackupRequest {
	return &DeleteBackupRequest{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:    b.Namespace,
			GenerateName: b.Name + "-",
			Labels:       map[string]string{BackupNameLabel: LabelValue(b.Name), BackupUIDLabel: string(b.UID)},
		},
		Spec: DeleteBackupRequestSpec{BackupName: b.Name},
	}
}

package v1

import "k8s.io/apimachinery/pkg/api/meta"

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

package deletion

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/storage"
)

// IdentityError says that the data stored under a backup's name was not
// written by the Backup being deleted: deleting it would delete another
// backup. Nothing is deleted, and trying again does not help.
type IdentityError struct {
	Backup, UID, Location string
	// StoredUID is the UID velero-backup.json records; empty with Problem
	// when it could not be read.
	StoredUID string
	Problem   string
}

func (e *IdentityError) Error() string {
	marker := "backups/" + e.Backup + "/" + storage.BackupMetadataFile
	what := fmt.Sprintf("%s in storage location %q was written by another backup named %s (uid %s), not by this Backup (uid %s)",
		marker, e.Location, e.Backup, e.StoredUID, e.UID)
	if e.Problem != "" {
		what = fmt.Sprintf("%s in storage location %q cannot be shown to belong to this Backup (uid %s): %s", marker, e.Location, e.UID, e.Problem)
	}
	return what + "; nothing was deleted. Remove only this Backup object with `lifeboat backup delete " + e.Backup + " --force`: " +
		"the data stays with the backup that wrote it. If this Backup does stand for that data (Velero's sync created it, say), " +
		"the next sync brings it back from the location with the identity it was stored with, and it can then be deleted."
}

// checkIdentity makes sure the backup stored under b's name in store was
// written by b: its velero-backup.json records b's UID, or, for a Backup
// the sync created, the UID on b's StoredUIDAnnotation. A store holding no
// velero-backup.json under the name has no finished backup there: what
// is left is a run that never finished, which deleting may remove.
//
// It returns the UID the stored backup records ("" when there is no
// velero-backup.json): the UID its data was written under, which pod volume
// snapshots carry in their backup-uid tag.
func checkIdentity(ctx context.Context, store *storage.BackupStore, b *v1.Backup) (string, error) {
	data, err := store.GetBackupMetadata(ctx, b.Name)
	if errors.Is(err, storage.ErrNotFound) {
		return "", nil
	}
	idErr := &IdentityError{Backup: b.Name, UID: string(b.UID), Location: b.Spec.StorageLocation}
	var stored struct {
		Metadata struct {
			UID string `json:"uid"`
		} `json:"metadata"`
	}
	switch {
	case errors.Is(err, storage.ErrMetadataTooLarge):
		idErr.Problem = storage.ErrMetadataTooLarge.Error()
	case err != nil:
		return "", fmt.Errorf("reading %s to check whose backup it is: %w", storage.BackupMetadataFile, err)
	case json.Unmarshal(data, &stored) != nil:
		idErr.Problem = "it is not a Backup in JSON"
	case stored.Metadata.UID == "":
		idErr.Problem = "it records no metadata.uid"
	}
	if idErr.Problem != "" {
		return "", idErr
	}
	uid := stored.Metadata.UID
	if uid == string(b.UID) || uid == b.Annotations[v1.StoredUIDAnnotation] {
		return uid, nil
	}
	idErr.StoredUID = uid
	return "", idErr
}

// dataUID is the UID b's data was written under: the one velero-backup.json
// records (stored, from checkIdentity) when there is one; else, for a run
// that never finished, the Backup's own (or, for a Backup the sync created,
// the stored UID it was created with).
func dataUID(b *v1.Backup, stored string) string {
	return cmp.Or(stored, b.Annotations[v1.StoredUIDAnnotation], string(b.UID))
}

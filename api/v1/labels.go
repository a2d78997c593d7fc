package v1

import (
	"crypto/sha256"
	"encoding/hex"
)

// Labels and annotations shared with Velero. Their values are part of the
// compatibility contract: Velero's tools select objects by them.
const (
	// BackupNameLabel marks objects that belong to a backup (requests, restored items).
	BackupNameLabel = "velero.io/backup-name"
	// BackupUIDLabel is the UID of the backup an object belongs to.
	BackupUIDLabel = "velero.io/backup-uid"
	// RestoreNameLabel marks objects created by a restore.
	RestoreNameLabel = "velero.io/restore-name"
	// StorageLocationLabel names the BackupStorageLocation a backup is stored in.
	StorageLocationLabel = "velero.io/storage-location"
	// ScheduleNameLabel marks backups created by a schedule.
	ScheduleNameLabel = "velero.io/schedule-name"
	// GCFailureLabel says why garbage collection could not delete an expired backup.
	GCFailureLabel = "velero.io/gc-failure"

	// BackupFinalizer keeps a Backup object until its deletion has run:
	// deleting the object (kubectl delete backup) starts the same deletion
	// as a DeleteBackupRequest, and the deletion controller removes the
	// finalizer as its last step. `lifeboat backup delete --force` removes
	// it without deleting anything else. Lifeboat's own, not Velero's.
	BackupFinalizer = "lifeboat.io/backup-data"

	// SyncedAnnotation marks a Backup created by the sync from a storage
	// location (its value is the location). Between its creation and the
	// write of its status (a separate call: where the CRD has a status
	// subresource, a create drops the status) the Backup may have no
	// phase; the backup controller must not mistake it for a new backup to
	// run. Lifeboat's own.
	SyncedAnnotation = "lifeboat.io/synced-from-location"

	// StoredUIDAnnotation is put on a Backup that the sync created from a
	// storage location: the UID its velero-backup.json records, that is
	// the UID of the Backup object that wrote the data. The deletion of a
	// Backup checks the stored UID against the object's own UID or this
	// annotation, so that it never deletes another backup's data stored
	// under the same name. Lifeboat's own.
	StoredUIDAnnotation = "lifeboat.io/stored-uid"

	// PVCNameAnnotation names the claim of a PodVolumeBackup's volume
	// (Velero's): the snapshot source of a claim's data is keyed by it, so
	// that its backups stay incremental across the pods that mount it.
	PVCNameAnnotation = "velero.io/pvc-name"

	// DigestsAnnotation on a Backup is the sha256 of the digests file the
	// backup wrote beside its files (docs/integrity.md): a record of what
	// was stored kept outside the bucket. Lifeboat's own.
	DigestsAnnotation = "lifeboat.io/digests-sha256"

	// IgnoreIntegrityAnnotation on a Restore, "true", restores a backup
	// whose files differ from their digests, the differences becoming the
	// restore's warnings; without it such a restore fails before anything
	// is created. Lifeboat's own.
	IgnoreIntegrityAnnotation = "lifeboat.io/ignore-integrity"

	// VerifyRequestAnnotation on a Backup asks the server to verify it
	// (`lifeboat backup verify`); its value is a token of the request (the
	// CLI writes the time). VerifiedRequestAnnotation is the token the
	// server last answered, VerificationAnnotation the answer in one line
	// ("<time> <reason>: <summary>"), kept where Velero's CRDs, which have
	// no conditions, keep it too. Lifeboat's own.
	VerifyRequestAnnotation   = "lifeboat.io/verify-requested"
	VerifiedRequestAnnotation = "lifeboat.io/verified-request"
	VerificationAnnotation    = "lifeboat.io/verification"

	// VerifyBackupsAnnotation on a Schedule, "true", has every backup the
	// schedule creates verified once it ends. Lifeboat's own.
	VerifyBackupsAnnotation = "lifeboat.io/verify-backups"

	// VerifyDryRunAnnotation on a Backup (or on a Schedule, whose backups
	// carry its annotations) adds a restore dry run to its verification:
	// "true" into the backup's own namespaces, or a namespace mapping
	// ("src:dst,src2:dst2") into others. The dry run is a Restore of its
	// own (VerifyRestoreAnnotation on it names the request it answers),
	// kept for `restore describe`. Lifeboat's own.
	VerifyDryRunAnnotation = "lifeboat.io/verify-dry-run"
	// VerifyRestoreAnnotation on a dry-run Restore made by a verification
	// is the request's token; VerifyIntegrityAnnotation on the Backup
	// keeps "<token> <reason>: <summary>" of the integrity check while
	// the dry run runs, so that it is not read twice.
	VerifyRestoreAnnotation   = "lifeboat.io/verify-request"
	VerifyIntegrityAnnotation = "lifeboat.io/verify-integrity"

	// BackupConditionVerified is the outcome of the latest verification
	// of a Backup: True when every stored file and tarball entry matched
	// the digests it wrote, False when something differs (the message
	// says what) or the backup has no digests (reason NoDigests).
	BackupConditionVerified = "Verified"

	// Reasons of the Verified condition, which the verification
	// annotation and metric carry too.
	VerificationVerified  = "Verified"
	VerificationDiffers   = "Differs"
	VerificationNoDigests = "NoDigests"
	VerificationNotStored = "NotStored"
	VerificationError     = "Error"
	// VerificationRestoreWouldFail: the files match, but the restore dry
	// run found items that would fail (or could not run).
	VerificationRestoreWouldFail = "RestoreWouldFail"
	// VerificationSnapshotsMissing: the files match, but the CSI driver no
	// longer has some of the backup's snapshots.
	VerificationSnapshotsMissing = "SnapshotsMissing"

	// BackupConditionStored is a Backup condition that Lifeboat sets to
	// False when a backup wrote nothing at all to its storage location
	// (its name was taken there by another backup, or the location could
	// not be used): deleting such a Backup leaves the location alone.
	BackupConditionStored = "Stored"

	// DefaultNamespace is where the server and its objects live unless told otherwise.
	DefaultNamespace = "velero"
	// DefaultBackupTTL is how long a backup is kept when spec.ttl is not set.
	DefaultBackupTTLHours = 720
	// BackupFormatVersion is the version of the tarball layout, written to
	// metadata/version and status.formatVersion.
	BackupFormatVersion = "1.1.0"
)

// LabelValue turns an object name into a valid label value the way Velero
// does (names over 63 characters keep 57 of them and 6 hex digits of the
// name's SHA-256), so that Velero's tools and Lifeboat select the same
// objects by these labels.
func LabelValue(name string) string {
	const maxLen = 63
	if len(name) <= maxLen {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return name[:maxLen-6] + hex.EncodeToString(sum[:])[:6]
}

// ClusterOnlyAnnotations are a Backup's records of this cluster's own
// (what it saw written, what it verified). They are not written into
// velero-backup.json, and a Backup synced from a bucket does not take them
// from there: a record kept in the bucket is not a record kept outside it.
var ClusterOnlyAnnotations = []string{DigestsAnnotation, VerifyRequestAnnotation, VerifiedRequestAnnotation, VerificationAnnotation, VerifyIntegrityAnnotation}

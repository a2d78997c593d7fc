package api

import (
	"io"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// ObjectStore stores backups. Init is called once with the
// BackupStorageLocation's config (Velero adds "bucket" and "prefix").
type ObjectStore interface {
	Init(config map[string]string) error
	PutObject(bucket, key string, body io.Reader) error
	ObjectExists(bucket, key string) (bool, error)
	GetObject(bucket, key string) (io.ReadCloser, error)
	ListCommonPrefixes(bucket, prefix, delimiter string) ([]string, error)
	ListObjects(bucket, prefix string) ([]string, error)
	DeleteObject(bucket, key string) error
	CreateSignedURL(bucket, key string, ttl time.Duration) (string, error)
}

// VolumeSnapshotter takes and removes native snapshots of persistent
// volumes, and creates volumes from them.
type VolumeSnapshotter interface {
	Init(config map[string]string) error
	CreateVolumeFromSnapshot(snapshotID, volumeType, volumeAZ string, iops *int64) (volumeID string, err error)
	GetVolumeInfo(volumeID, volumeAZ string) (volumeType string, iops *int64, err error)
	CreateSnapshot(volumeID, volumeAZ string, tags map[string]string) (snapshotID string, err error)
	DeleteSnapshot(snapshotID string) error
	GetVolumeID(pv runtime.Unstructured) (string, error)
	SetVolumeID(pv runtime.Unstructured, volumeID string) (runtime.Unstructured, error)
}

// BackupItemAction changes an item before it is backed up, or names more
// items to back up with it.
type BackupItemAction interface {
	AppliesTo() (ResourceSelector, error)
	Execute(item runtime.Unstructured, backup *v1.Backup) (runtime.Unstructured, []ResourceIdentifier, error)
}

// BackupItemActionV2 is a BackupItemAction that may start an asynchronous
// operation (returning its ID), which the server then polls.
type BackupItemActionV2 interface {
	Name() string
	AppliesTo() (ResourceSelector, error)
	Execute(item runtime.Unstructured, backup *v1.Backup) (updated runtime.Unstructured, additional []ResourceIdentifier,
		operationID string, postOperationItems []ResourceIdentifier, err error)
	Progress(operationID string, backup *v1.Backup) (OperationProgress, error)
	Cancel(operationID string, backup *v1.Backup) error
}

// RestoreItemActionExecuteInput is what a RestoreItemAction gets.
type RestoreItemActionExecuteInput struct {
	// Item is the item about to be restored, already changed by earlier actions.
	Item runtime.Unstructured
	// ItemFromBackup is the item as stored in the backup.
	ItemFromBackup runtime.Unstructured
	Restore        *v1.Restore
}

// RestoreItemActionExecuteOutput is what a RestoreItemAction returns.
type RestoreItemActionExecuteOutput struct {
	UpdatedItem     runtime.Unstructured
	AdditionalItems []ResourceIdentifier
	// SkipRestore leaves the item out of the restore.
	SkipRestore bool
	// OperationID names an asynchronous operation the server polls (v2).
	OperationID string
	// WaitForAdditionalItems makes the server wait until the additional
	// items are ready before restoring this one (v2).
	WaitForAdditionalItems      bool
	AdditionalItemsReadyTimeout time.Duration
}

// RestoreItemAction changes an item before it is restored.
type RestoreItemAction interface {
	AppliesTo() (ResourceSelector, error)
	Execute(input *RestoreItemActionExecuteInput) (*RestoreItemActionExecuteOutput, error)
}

// RestoreItemActionV2 is a RestoreItemAction with asynchronous operations.
type RestoreItemActionV2 interface {
	Name() string
	AppliesTo() (ResourceSelector, error)
	Execute(input *RestoreItemActionExecuteInput) (*RestoreItemActionExecuteOutput, error)
	Progress(operationID string, restore *v1.Restore) (OperationProgress, error)
	Cancel(operationID string, restore *v1.Restore) error
	AreAdditionalItemsReady(additionalItems []ResourceIdentifier, restore *v1.Restore) (bool, error)
}

// DeleteItemActionExecuteInput is what a DeleteItemAction gets: one item
// stored in the backup being deleted, and that backup.
type DeleteItemActionExecuteInput struct {
	Item   runtime.Unstructured
	Backup *v1.Backup
}

// DeleteItemAction cleans up, when a backup is deleted, what was created
// for one of its items outside the backup (snapshots in an external system,
// custom resources). An error keeps the backup and its data in place; the
// deletion is retried.
type DeleteItemAction interface {
	AppliesTo() (ResourceSelector, error)
	Execute(input *DeleteItemActionExecuteInput) error
}

// ItemBlockAction names items that must be backed up together with an item.
type ItemBlockAction interface {
	Name() string
	AppliesTo() (ResourceSelector, error)
	GetRelatedItems(item runtime.Unstructured, backup *v1.Backup) ([]ResourceIdentifier, error)
}

package v1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// DeleteBackupRequestSpec names the backup to delete.
type DeleteBackupRequestSpec struct {
	BackupName string `json:"backupName"`
	// DryRun asks for the deletion's plan only: the server fills
	// status.plan and ends the request Processed without changing anything.
	// Lifeboat's; Velero has no dry run.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`
	// SkipFailedActions is the operator's consent to go on past the items
	// whose DeleteItemAction keeps failing: each such item is recorded in
	// status.report.skippedItems with its error and counted done, and the
	// deletion carries on with the later steps. Without it (the default,
	// and always for garbage collection) a failing DeleteItemAction keeps
	// the backup. A request that waits for another one for the same
	// backup (status.handledBy) lends that one its consent.
	// Lifeboat's; Velero has no such option.
	// +optional
	SkipFailedActions bool `json:"skipFailedActions,omitempty"`
}

// DeletionPlanMaxItems bounds the items a plan lists, over all actions, so
// that the request stays small whatever the size of the backup; the counts
// are always complete.
const DeletionPlanMaxItems = 5000

// DeletionPlanAction is what one DeleteItemAction would receive.
type DeletionPlanAction struct {
	Name string `json:"name"`
	// Count is the number of items the action would be called for.
	Count int64 `json:"count"`
	// Items are those items, in the order they would be passed, as
	// "<resource.group> <namespace>/<name>" ("<resource.group> <name>" for
	// cluster-scoped ones); cut short when the plan is (see Truncated).
	// +optional
	Items []string `json:"items,omitempty"`
}

// DeletionPlan is what a deletion would do, step by step.
type DeletionPlan struct {
	// +optional
	Actions []DeletionPlanAction `json:"actions,omitempty"`
	// Snapshots are the native snapshots to delete, as
	// "<location>/<snapshot ID> (<persistent volume>)".
	// +optional
	Snapshots []string `json:"snapshots,omitempty"`
	// PodVolumeSnapshots are the kopia snapshots of pod volumes to forget,
	// as "<volume namespace>/<snapshot ID> (pod <pod>, volume <volume>)".
	// +optional
	PodVolumeSnapshots []string `json:"podVolumeSnapshots,omitempty"`
	// PodVolumeRepositories are the repositories the backup's
	// PodVolumeBackups used, as "namespace <volume namespace> in location
	// <location> (backup-uid <uid>)": after the snapshots above, every other
	// pod volume snapshot tagged with the backup's UID (checkpoints of
	// uploads that failed, snapshots no PodVolumeBackup recorded) is
	// forgotten in each.
	// +optional
	PodVolumeRepositories []string `json:"podVolumeRepositories,omitempty"`
	// Restores are the Restores of the backup, deleted with their files.
	// +optional
	Restores []string `json:"restores,omitempty"`
	// Keys counts the object store keys to remove (the backup's and its
	// restores').
	// +optional
	Keys int64 `json:"keys,omitempty"`
	// KeyList lists them, cut short when the plan is.
	// +optional
	KeyList []string `json:"keyList,omitempty"`
	// Warnings are what the deletion would go on without (a missing
	// tarball, say).
	// +optional
	Warnings []string `json:"warnings,omitempty"`
	// Truncated says some lists were cut at DeletionPlanMaxItems entries.
	// +optional
	Truncated bool `json:"truncated,omitempty"`
}

// DeleteBackupRequestPhase is where a deletion request is in its life.
// +kubebuilder:validation:Enum=New;InProgress;Processed;Failed
type DeleteBackupRequestPhase string

// Deletion request phases. New, InProgress and Processed are Velero's;
// Failed is Lifeboat's: every attempt failed, the backup and whatever the
// failed step had not removed are still there, and status.errors says why.
// Velero ends such a request Processed with errors; a client that only
// knows Velero's phases sees Failed as "not Processed yet".
const (
	DeleteBackupRequestPhaseNew        DeleteBackupRequestPhase = "New"
	DeleteBackupRequestPhaseInProgress DeleteBackupRequestPhase = "InProgress"
	DeleteBackupRequestPhaseProcessed  DeleteBackupRequestPhase = "Processed"
	DeleteBackupRequestPhaseFailed     DeleteBackupRequestPhase = "Failed"
)

// DeletionStep is one step of a backup deletion. Steps run in this order,
// and a step runs only once every step before it has succeeded, so that
// nothing a later step needs (the tarball, the snapshots' records, the
// backup's marker file) is removed while an earlier one can still fail.
// +kubebuilder:validation:Enum=DeleteItemActions;VolumeSnapshots;PodVolumeSnapshots;Restores;BackupData;Backup
type DeletionStep string

// Deletion steps, in the order they run.
const (
	// DeletionStepItemActions calls the DeleteItemActions on the items of
	// the backup's tarball.
	DeletionStepItemActions DeletionStep = "DeleteItemActions"
	// DeletionStepVolumeSnapshots deletes the native volume snapshots.
	DeletionStepVolumeSnapshots DeletionStep = "VolumeSnapshots"
	// DeletionStepPodVolumeSnapshots forgets the kopia snapshots of the
	// backup's PodVolumeBackups (file-system backup) and deletes those
	// objects; the repository's maintenance reclaims the data.
	DeletionStepPodVolumeSnapshots DeletionStep = "PodVolumeSnapshots"
	// DeletionStepRestores deletes the Restores of the backup and their
	// files under restores/<name>/.
	DeletionStepRestores DeletionStep = "Restores"
	// DeletionStepBackupData removes every key under backups/<name>/,
	// velero-backup.json last.
	DeletionStepBackupData DeletionStep = "BackupData"
	// DeletionStepBackup removes the Backup object.
	DeletionStepBackup DeletionStep = "Backup"
)

// DeletionProgress records how far one DeleteItemAction (or the snapshot
// step) got through the backup, so that a retried or resumed deletion does
// not start over. Items are numbered by their position in the backup's
// tarball, which never changes: the n-th item file that a DeleteItemAction
// can receive has position n, starting at 0.
type DeletionProgress struct {
	// Name is the DeleteItemAction's name; empty for the snapshot step.
	// +optional
	Name string `json:"name,omitempty"`
	// Watermark: every position below it is done.
	Watermark int64 `json:"watermark"`
	// Done lists positions at or above the watermark that are done too,
	// sorted. The server keeps it short (at most 1,000 entries): it does
	// not hand an action an item that far past the action's first
	// unfinished one.
	// +optional
	Done []int64 `json:"done,omitempty"`
	// Succeeded counts successful calls over all attempts (for the snapshot
	// step: snapshots deleted).
	// +optional
	Succeeded int64 `json:"succeeded,omitempty"`
}

// DeletionCheckpoint is what a deletion has done so far, written while it
// runs. A deletion resumed from it (after a failed attempt, or a server
// restart) skips completed steps and never passes an item recorded as done
// to that action again. What was done after the last write is not recorded
// and is done again: a checkpoint is written every 100 ms (sooner after 1,000
// calls) and at the end of each step, so that window is small, but
// DeleteItemActions must tolerate being called twice for an item.
type DeletionCheckpoint struct {
	// CompletedSteps lists the steps that have succeeded, in order.
	// +optional
	CompletedSteps []DeletionStep `json:"completedSteps,omitempty"`
	// Actions holds one entry per DeleteItemAction that has started, by name.
	// +optional
	Actions []DeletionProgress `json:"actions,omitempty"`
	// Snapshots is the progress of the snapshot step, the snapshots taken
	// in the order of the backup's volume snapshots file.
	// +optional
	// +nullable
	Snapshots *DeletionProgress `json:"snapshots,omitempty"`
	// PodVolumeSnapshots is the progress of the pod volume snapshot step,
	// the snapshots in the order the deletion plan lists them.
	// +optional
	// +nullable
	PodVolumeSnapshots *DeletionProgress `json:"podVolumeSnapshots,omitempty"`
}

// DeletionError is one failure of a deletion, with what failed.
type DeletionError struct {
	// Step is the step that failed.
	// +optional
	Step DeletionStep `json:"step,omitempty"`
	// Plugin is the plugin that failed, when one did.
	// +optional
	Plugin string `json:"plugin,omitempty"`
	// Resource is the item's group-resource ("configmaps",
	// "deployments.apps"), when the failure concerns one item.
	// +optional
	Resource string `json:"resource,omitempty"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Name is the item's name (or the snapshot's, restore's or key's).
	// +optional
	Name    string `json:"name,omitempty"`
	Message string `json:"message"`
}

// DeletionActionReport says what one DeleteItemAction did.
type DeletionActionReport struct {
	Name string `json:"name"`
	// Items counts the items the action was called for successfully, over
	// all attempts.
	// +optional
	Items int64 `json:"items,omitempty"`
	// Failed counts the items it failed on in the last attempt.
	// +optional
	Failed int64 `json:"failed,omitempty"`
	// Skipped counts the items it failed on that the deletion went past
	// (spec.skipFailedActions), in the last attempt.
	// +optional
	Skipped int64 `json:"skipped,omitempty"`
}

// DeletionSkippedItemsMax bounds the skipped items a report lists (each
// message cut to 256 bytes), so the request stays small; SkippedCount
// counts all of them, and the server logs every one.
const DeletionSkippedItemsMax = 1000

// DeletionReport sums up a deletion once it has ended.
type DeletionReport struct {
	// +optional
	Actions []DeletionActionReport `json:"actions,omitempty"`
	// +optional
	SnapshotsDeleted int64 `json:"snapshotsDeleted,omitempty"`
	// PodVolumeSnapshotsForgotten counts the kopia snapshots of pod volumes
	// forgotten (file-system backup).
	// +optional
	PodVolumeSnapshotsForgotten int64 `json:"podVolumeSnapshotsForgotten,omitempty"`
	// RestoresDeleted counts the Restores deleted with the backup.
	// +optional
	RestoresDeleted int64 `json:"restoresDeleted,omitempty"`
	// KeysRemoved counts the object store keys removed, the backup's and
	// its restores'.
	// +optional
	KeysRemoved int64 `json:"keysRemoved,omitempty"`
	// UnfinishedUploadsRemoved counts the uploads into the backup's and its
	// restores' directories that a stopped server never finished, removed
	// with them: not keys, so not in KeysRemoved.
	// +optional
	UnfinishedUploadsRemoved int64 `json:"unfinishedUploadsRemoved,omitempty"`
	// Warnings are things the deletion went on without, e.g. a tarball
	// that was not in the store.
	// +optional
	Warnings []string `json:"warnings,omitempty"`
	// LeftBehind names what is still there (keys, snapshots, restores)
	// after a failed deletion; the first few only.
	// +optional
	LeftBehind []string `json:"leftBehind,omitempty"`
	// SkippedItems are the items whose DeleteItemAction failed and that the
	// deletion went past with the operator's consent
	// (spec.skipFailedActions), each with the action and its error; the
	// first DeletionSkippedItemsMax only.
	// +optional
	SkippedItems []DeletionError `json:"skippedItems,omitempty"`
	// SkippedCount counts every skipped item.
	// +optional
	SkippedCount int64 `json:"skippedCount,omitempty"`
}

// DeleteBackupRequestStatus records the outcome of a deletion. Phase and
// Errors are Velero's; everything else is Lifeboat's. Every list is
// bounded, so the object stays small whatever the size of the backup.
type DeleteBackupRequestStatus struct {
	// +optional
	Phase DeleteBackupRequestPhase `json:"phase,omitempty"`
	// Errors lists what went wrong, one message per failure (the first 20).
	// +optional
	// +nullable
	Errors []string `json:"errors,omitempty"`
	// ErrorDetails holds the same failures with the plugin and item
	// involved (the first 20).
	// +optional
	ErrorDetails []DeletionError `json:"errorDetails,omitempty"`
	// StartTimestamp is when the first attempt started.
	// +optional
	// +nullable
	StartTimestamp *metav1.Time `json:"startTimestamp,omitempty"`
	// CompletionTimestamp is when the request ended (Processed or Failed).
	// +optional
	// +nullable
	CompletionTimestamp *metav1.Time `json:"completionTimestamp,omitempty"`
	// Attempts counts the attempts started so far.
	// +optional
	Attempts int32 `json:"attempts,omitempty"`
	// NextAttemptTime is when the next attempt starts, after a failed one.
	// +optional
	// +nullable
	NextAttemptTime *metav1.Time `json:"nextAttemptTime,omitempty"`
	// BackupPhaseBefore is the backup's phase before this request set it
	// to Deleting; a failed attempt puts it back.
	// +optional
	BackupPhaseBefore BackupPhase `json:"backupPhaseBefore,omitempty"`
	// Checkpoint is how far the deletion got, to resume from.
	// +optional
	// +nullable
	Checkpoint *DeletionCheckpoint `json:"checkpoint,omitempty"`
	// SnapshotsDeleted counts the native volume snapshots deleted so far.
	// +optional
	SnapshotsDeleted int64 `json:"snapshotsDeleted,omitempty"`
	// PodVolumeSnapshotsForgotten counts the kopia snapshots of pod volumes
	// forgotten (file-system backup).
	// +optional
	PodVolumeSnapshotsForgotten int64 `json:"podVolumeSnapshotsForgotten,omitempty"`
	// RestoresDeleted counts the Restores deleted so far.
	// +optional
	RestoresDeleted int64 `json:"restoresDeleted,omitempty"`
	// KeysRemoved counts the object store keys removed so far.
	// +optional
	KeysRemoved int64 `json:"keysRemoved,omitempty"`
	// UnfinishedUploadsRemoved counts the unfinished uploads removed so far.
	// +optional
	UnfinishedUploadsRemoved int64 `json:"unfinishedUploadsRemoved,omitempty"`
	// Report sums up the deletion once it has ended.
	// +optional
	// +nullable
	Report *DeletionReport `json:"report,omitempty"`
	// SkipFailedActions is true once the request's attempts go past the
	// items whose DeleteItemAction fails: its own spec asks for it, or a
	// request waiting for it does.
	// +optional
	SkipFailedActions bool `json:"skipFailedActions,omitempty"`
	// HandledBy names the request that did the work when this one arrived
	// while another request for the same backup was running: this request
	// waited for it and ended with its outcome.
	// +optional
	HandledBy string `json:"handledBy,omitempty"`
	// Plan is what the deletion would do, for a dry run.
	// +optional
	// +nullable
	Plan *DeletionPlan `json:"plan,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// DeleteBackupRequest asks the server to delete a backup and everything it
// created: its data in object storage, its snapshots and its restores.
//
// Subresources and printer columns are Velero's (see Backup).
//
// +kubebuilder:object:root=true
// +kubebuilder:printcolumn:name="BackupName",type=string,JSONPath=`.spec.backupName`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.phase`
type DeleteBackupRequest struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// +optional
	Spec DeleteBackupRequestSpec `json:"spec,omitempty"`
	// +optional
	Status DeleteBackupRequestStatus `json:"status,omitempty"`
}

// DeleteBackupRequestList is a list of DeleteBackupRequests.
//
// +kubebuilder:object:root=true
type DeleteBackupRequestList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DeleteBackupRequest `json:"items"`
}

// DownloadTargetKind names a file of a backup or restore.
// +kubebuilder:validation:Enum=BackupLog;BackupContents;BackupVolumeSnapshots;BackupItemOperations;BackupResourceList;BackupResults;RestoreLog;RestoreResults;RestoreResourceList;RestoreItemOperations;CSIBackupVolumeSnapshots;CSIBackupVolumeSnapshotContents;BackupVolumeInfos;RestoreVolumeInfo;LifeboatBackupItemDigests
type DownloadTargetKind string

// Download targets, as Velero names them.
const (
	DownloadTargetKindBackupLog                 DownloadTargetKind = "BackupLog"
	DownloadTargetKindBackupContents            DownloadTargetKind = "BackupContents"
	DownloadTargetKindBackupVolumeSnapshots     DownloadTargetKind = "BackupVolumeSnapshots"
	DownloadTargetKindBackupItemOperations      DownloadTargetKind = "BackupItemOperations"
	DownloadTargetKindBackupResourceList        DownloadTargetKind = "BackupResourceList"
	DownloadTargetKindBackupResults             DownloadTargetKind = "BackupResults"
	DownloadTargetKindRestoreLog                DownloadTargetKind = "RestoreLog"
	DownloadTargetKindRestoreResults            DownloadTargetKind = "RestoreResults"
	DownloadTargetKindRestoreResourceList       DownloadTargetKind = "RestoreResourceList"
	DownloadTargetKindRestoreItemOperations     DownloadTargetKind = "RestoreItemOperations"
	DownloadTargetKindCSIVolumeSnapshots        DownloadTargetKind = "CSIBackupVolumeSnapshots"
	DownloadTargetKindCSIVolumeSnapshotContents DownloadTargetKind = "CSIBackupVolumeSnapshotContents"
	DownloadTargetKindBackupVolumeInfos         DownloadTargetKind = "BackupVolumeInfos"
	DownloadTargetKindRestoreVolumeInfo         DownloadTargetKind = "RestoreVolumeInfo"
	// DownloadTargetKindBackupItemDigests is Lifeboat's: the digest of
	// every tarball entry of a backup (docs/integrity.md), read by
	// `backup diff`. Velero's CRD refuses it.
	DownloadTargetKindBackupItemDigests DownloadTargetKind = "LifeboatBackupItemDigests"
)

// DownloadTarget is the file to download.
type DownloadTarget struct {
	Kind DownloadTargetKind `json:"kind"`
	// Name is the backup or restore the file belongs to.
	Name string `json:"name"`
}

// DownloadRequestSpec names the file a client wants to read.
type DownloadRequestSpec struct {
	Target DownloadTarget `json:"target"`
}

// DownloadRequestPhase is where a download request is in its life.
// +kubebuilder:validation:Enum=New;Processed
type DownloadRequestPhase string

// Download request phases.
const (
	DownloadRequestPhaseNew       DownloadRequestPhase = "New"
	DownloadRequestPhaseProcessed DownloadRequestPhase = "Processed"
)

// DownloadRequestStatus carries the URL the file can be read from.
type DownloadRequestStatus struct {
	// +optional
	Phase DownloadRequestPhase `json:"phase,omitempty"`
	// DownloadURL is a signed URL (or, for the filesystem store, a file:// URL).
	// +optional
	DownloadURL string `json:"downloadURL,omitempty"`
	// Expiration is when the URL stops working and the request is deleted.
	// +optional
	// +nullable
	Expiration *metav1.Time `json:"expiration,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// DownloadRequest asks the server for a URL to read a backup's or restore's file.
//
// Like Velero's, the CRD has no status subresource (see Backup).
//
// +kubebuilder:object:root=true
type DownloadRequest struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// +optional
	Spec DownloadRequestSpec `json:"spec,omitempty"`
	// +optional
	Status DownloadRequestStatus `json:"status,omitempty"`
}

// DownloadRequestList is a list of DownloadRequests.
//
// +kubebuilder:object:root=true
type DownloadRequestList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DownloadRequest `json:"items"`
}

// ServerStatusRequestSpec is empty: a request asks for the server's status.
type ServerStatusRequestSpec struct{}

// ServerStatusRequestPhase is where a status request is in its life.
// +kubebuilder:validation:Enum=New;Processed
type ServerStatusRequestPhase string

// Status request phases.
const (
	ServerStatusRequestPhaseNew       ServerStatusRequestPhase = "New"
	ServerStatusRequestPhaseProcessed ServerStatusRequestPhase = "Processed"
)

// PluginInfo names a plugin the server can run.
type PluginInfo struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Binary is Lifeboat's addition: the plugin's executable, or
	// "(built-in)".
	// +optional
	Binary string `json:"binary,omitempty"`
}

// ServerStatusRequestStatus is the server's answer.
type ServerStatusRequestStatus struct {
	// +optional
	Phase ServerStatusRequestPhase `json:"phase,omitempty"`
	// +optional
	// +nullable
	ProcessedTimestamp *metav1.Time `json:"processedTimestamp,omitempty"`
	// +optional
	ServerVersion string `json:"serverVersion,omitempty"`
	// +optional
	// +nullable
	Plugins []PluginInfo `json:"plugins,omitempty"`
}

// ServerStatusRequest asks a running server for its version and plugins.
//
// Like Velero's, the CRD has no status subresource (see Backup).
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=ssr
type ServerStatusRequest struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// +optional
	Spec ServerStatusRequestSpec `json:"spec,omitempty"`
	// +optional
	Status ServerStatusRequestStatus `json:"status,omitempty"`
}

// ServerStatusRequestList is a list of ServerStatusRequests.
//
// +kubebuilder:object:root=true
type ServerStatusRequestList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ServerStatusRequest `json:"items"`
}

func init() {
	SchemeBuilder.Register(&DeleteBackupRequest{}, &DeleteBackupRequestList{},
		&DownloadRequest{}, &DownloadRequestList{},
		&ServerStatusRequest{}, &ServerStatusRequestList{})
}

package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Metadata holds labels that the server copies onto what a backup creates.
type Metadata struct {
	Labels map[string]string `json:"labels,omitempty"`
}

// BackupSpec says what a backup contains and where it is stored.
type BackupSpec struct {
	// +optional
	Metadata `json:"metadata,omitempty"`

	// IncludedNamespaces lists the namespaces to back up; empty or "*" means all.
	// +optional
	// +nullable
	IncludedNamespaces []string `json:"includedNamespaces,omitempty"`
	// ExcludedNamespaces lists namespaces left out; it wins over IncludedNamespaces.
	// +optional
	// +nullable
	ExcludedNamespaces []string `json:"excludedNamespaces,omitempty"`
	// IncludedResources lists resource types to back up; empty or "*" means all.
	// +optional
	// +nullable
	IncludedResources []string `json:"includedResources,omitempty"`
	// ExcludedResources lists resource types left out; it wins over IncludedResources.
	// +optional
	// +nullable
	ExcludedResources []string `json:"excludedResources,omitempty"`
	// IncludedClusterScopedResources lists cluster-scoped types to back up
	// ("*" for all). Cannot be combined with IncludedResources/ExcludedResources/IncludeClusterResources.
	// +optional
	// +nullable
	IncludedClusterScopedResources []string `json:"includedClusterScopedResources,omitempty"`
	// ExcludedClusterScopedResources lists cluster-scoped types left out.
	// +optional
	// +nullable
	ExcludedClusterScopedResources []string `json:"excludedClusterScopedResources,omitempty"`
	// IncludedNamespaceScopedResources lists namespaced types to back up; empty means all.
	// +optional
	// +nullable
	IncludedNamespaceScopedResources []string `json:"includedNamespaceScopedResources,omitempty"`
	// ExcludedNamespaceScopedResources lists namespaced types left out.
	// +optional
	// +nullable
	ExcludedNamespaceScopedResources []string `json:"excludedNamespaceScopedResources,omitempty"`

	// LabelSelector keeps only items whose labels match.
	// +optional
	// +nullable
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
	// OrLabelSelectors keeps items matching any of the selectors; not with LabelSelector.
	// +optional
	// +nullable
	OrLabelSelectors []*metav1.LabelSelector `json:"orLabelSelectors,omitempty"`

	// SnapshotVolumes asks for native snapshots of the volumes in the backup.
	// +optional
	// +nullable
	SnapshotVolumes *bool `json:"snapshotVolumes,omitempty"`
	// TTL is how long the backup is kept (default 720h).
	// +optional
	TTL metav1.Duration `json:"ttl,omitempty"`
	// IncludeClusterResources: nil backs up cluster-scoped resources only when
	// every namespace is included; true always; false never.
	// +optional
	// +nullable
	IncludeClusterResources *bool `json:"includeClusterResources,omitempty"`

	// Hooks run commands in pods around the backup of an item.
	// +optional
	Hooks BackupHooks `json:"hooks,omitempty"`

	// StorageLocation names the BackupStorageLocation; empty means the default one.
	// +optional
	StorageLocation string `json:"storageLocation,omitempty"`
	// VolumeSnapshotLocations names the locations for native volume snapshots.
	// +optional
	VolumeSnapshotLocations []string `json:"volumeSnapshotLocations,omitempty"`

	// DefaultVolumesToRestic is Velero's deprecated name for DefaultVolumesToFsBackup.
	// +optional
	// +nullable
	DefaultVolumesToRestic *bool `json:"defaultVolumesToRestic,omitempty"`
	// DefaultVolumesToFsBackup backs up every pod volume with file-system backup by default.
	// +optional
	// +nullable
	DefaultVolumesToFsBackup *bool `json:"defaultVolumesToFsBackup,omitempty"`

	// OrderedResources fixes the order of named objects per resource type.
	// +optional
	// +nullable
	OrderedResources map[string]string `json:"orderedResources,omitempty"`

	// CSISnapshotTimeout bounds the wait for a CSI VolumeSnapshot to be ready.
	// +optional
	CSISnapshotTimeout metav1.Duration `json:"csiSnapshotTimeout,omitempty"`
	// ItemOperationTimeout bounds asynchronous plugin operations.
	// +optional
	ItemOperationTimeout metav1.Duration `json:"itemOperationTimeout,omitempty"`
	// ResourcePolicy names the ConfigMap holding resource policies.
	// +optional
	ResourcePolicy *corev1.TypedLocalObjectReference `json:"resourcePolicy,omitempty"`

	// SnapshotMoveData asks for snapshot data to be moved to the storage location.
	// +optional
	// +nullable
	SnapshotMoveData *bool `json:"snapshotMoveData,omitempty"`
	// DataMover names the data mover for SnapshotMoveData.
	// +optional
	DataMover string `json:"datamover,omitempty"`
	// UploaderConfig tunes the file-system uploader.
	// +optional
	// +nullable
	UploaderConfig *UploaderConfigForBackup `json:"uploaderConfig,omitempty"`
	// VolumeGroupSnapshotLabelKey groups volumes for CSI volume group snapshots.
	// +optional
	VolumeGroupSnapshotLabelKey string `json:"volumeGroupSnapshotLabelKey,omitempty"`
}

// UploaderConfigForBackup tunes the file-system uploader of a backup.
type UploaderConfigForBackup struct {
	// ParallelFilesUpload is how many files the uploader sends at once.
	// +optional
	ParallelFilesUpload int `json:"parallelFilesUpload,omitempty"`
}

// BackupHooks are the commands a backup runs in pods.
type BackupHooks struct {
	// Resources lists the hooks and the pods each applies to.
	// +optional
	// +nullable
	Resources []BackupResourceHookSpec `json:"resources,omitempty"`
}

// BackupResourceHookSpec names hooks and the pods they run in, selected as
// a backup selects items.
type BackupResourceHookSpec struct {
	// Name identifies the hook in logs and results.
	Name string `json:"name"`
	// +optional
	// +nullable
	IncludedNamespaces []string `json:"includedNamespaces,omitempty"`
	// +optional
	// +nullable
	ExcludedNamespaces []string `json:"excludedNamespaces,omitempty"`
	// +optional
	// +nullable
	IncludedResources []string `json:"includedResources,omitempty"`
	// +optional
	// +nullable
	ExcludedResources []string `json:"excludedResources,omitempty"`
	// LabelSelector keeps only pods whose labels match.
	// +optional
	// +nullable
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
	// PreHooks run before the pod is backed up.
	// +optional
	PreHooks []BackupResourceHook `json:"pre,omitempty"`
	// PostHooks run after the pod is backed up.
	// +optional
	PostHooks []BackupResourceHook `json:"post,omitempty"`
}

// BackupResourceHook is one hook of a backup.
type BackupResourceHook struct {
	// Exec runs a command in a container of the pod.
	Exec *ExecHook `json:"exec"`
}

// ExecHook is a command run in a pod's container.
type ExecHook struct {
	// Container is the container to run it in; empty means the pod's first.
	// +optional
	Container string `json:"container,omitempty"`
	// Command and its arguments, run without a shell.
	// +kubebuilder:validation:MinItems=1
	Command []string `json:"command"`
	// OnError says what a failing command does to the backup: Fail or
	// Continue.
	// +optional
	OnError HookErrorMode `json:"onError,omitempty"`
	// Timeout bounds the command.
	// +optional
	Timeout metav1.Duration `json:"timeout,omitempty"`
}

// HookErrorMode says what a failing hook does to the backup or restore.
// +kubebuilder:validation:Enum=Continue;Fail
type HookErrorMode string

// Hook error modes.
const (
	HookErrorModeContinue HookErrorMode = "Continue"
	HookErrorModeFail     HookErrorMode = "Fail"
)

// BackupPhase is where a backup is in its life.
// +kubebuilder:validation:Enum=New;Queued;ReadyToStart;FailedValidation;InProgress;WaitingForPluginOperations;WaitingForPluginOperationsPartiallyFailed;Finalizing;FinalizingPartiallyFailed;Completed;PartiallyFailed;Failed;Deleting
type BackupPhase string

// Backup phases, as Velero names them.
const (
	BackupPhaseNew                                       BackupPhase = "New"
	BackupPhaseQueued                                    BackupPhase = "Queued"
	BackupPhaseReadyToStart                              BackupPhase = "ReadyToStart"
	BackupPhaseFailedValidation                          BackupPhase = "FailedValidation"
	BackupPhaseInProgress                                BackupPhase = "InProgress"
	BackupPhaseWaitingForPluginOperations                BackupPhase = "WaitingForPluginOperations"
	BackupPhaseWaitingForPluginOperationsPartiallyFailed BackupPhase = "WaitingForPluginOperationsPartiallyFailed"
	BackupPhaseFinalizing                                BackupPhase = "Finalizing"
	BackupPhaseFinalizingPartiallyFailed                 BackupPhase = "FinalizingPartiallyFailed"
	BackupPhaseCompleted                                 BackupPhase = "Completed"
	BackupPhasePartiallyFailed                           BackupPhase = "PartiallyFailed"
	BackupPhaseFailed                                    BackupPhase = "Failed"
	BackupPhaseDeleting                                  BackupPhase = "Deleting"
)

// IsTerminal reports whether a backup in this phase will not change any more
// (other than being deleted).
func (p BackupPhase) IsTerminal() bool {
	switch p {
	case BackupPhaseCompleted, BackupPhasePartiallyFailed, BackupPhaseFailed, BackupPhaseFailedValidation:
		return true
	}
	return false
}

// BackupProgress counts items while a backup runs.
type BackupProgress struct {
	// TotalItems is the number of items the backup expects to store; it grows
	// while resource types are listed.
	// +optional
	TotalItems int `json:"totalItems,omitempty"`
	// ItemsBackedUp is the number of items stored so far.
	// +optional
	ItemsBackedUp int `json:"itemsBackedUp,omitempty"`
}

// HookStatus counts hook executions.
type HookStatus struct {
	// +optional
	HooksAttempted int `json:"hooksAttempted,omitempty"`
	// +optional
	HooksFailed int `json:"hooksFailed,omitempty"`
}

// BackupStatus is what the server observed while running the backup.
type BackupStatus struct {
	// Version is the deprecated major format version.
	// +optional
	Version int `json:"version,omitempty"`
	// FormatVersion is the version of the tarball layout.
	// +optional
	FormatVersion string `json:"formatVersion,omitempty"`
	// Expiration is when the backup becomes eligible for garbage collection.
	// +optional
	// +nullable
	Expiration *metav1.Time `json:"expiration,omitempty"`
	// +optional
	Phase BackupPhase `json:"phase,omitempty"`
	// QueuePosition is Velero's place of the backup in its queue of
	// backups waiting to run; Lifeboat does not queue backups and never
	// sets it.
	// +optional
	QueuePosition int `json:"queuePosition,omitempty"`
	// ValidationErrors says why the spec was refused, one message per problem.
	// +optional
	// +nullable
	ValidationErrors []string `json:"validationErrors,omitempty"`
	// +optional
	// +nullable
	StartTimestamp *metav1.Time `json:"startTimestamp,omitempty"`
	// +optional
	// +nullable
	CompletionTimestamp *metav1.Time `json:"completionTimestamp,omitempty"`
	// +optional
	VolumeSnapshotsAttempted int `json:"volumeSnapshotsAttempted,omitempty"`
	// +optional
	VolumeSnapshotsCompleted int `json:"volumeSnapshotsCompleted,omitempty"`
	// FailureReason is the error that failed the whole backup.
	// +optional
	FailureReason string `json:"failureReason,omitempty"`
	// Warnings counts warnings; the messages are in the results file.
	// +optional
	Warnings int `json:"warnings,omitempty"`
	// Errors counts per-item errors; the messages are in the results file.
	// +optional
	Errors int `json:"errors,omitempty"`
	// +optional
	// +nullable
	Progress *BackupProgress `json:"progress,omitempty"`
	// +optional
	CSIVolumeSnapshotsAttempted int `json:"csiVolumeSnapshotsAttempted,omitempty"`
	// +optional
	CSIVolumeSnapshotsCompleted int `json:"csiVolumeSnapshotsCompleted,omitempty"`
	// +optional
	BackupItemOperationsAttempted int `json:"backupItemOperationsAttempted,omitempty"`
	// +optional
	BackupItemOperationsCompleted int `json:"backupItemOperationsCompleted,omitempty"`
	// +optional
	BackupItemOperationsFailed int `json:"backupItemOperationsFailed,omitempty"`
	// +optional
	// +nullable
	HookStatus *HookStatus `json:"hookStatus,omitempty"`

	// Conditions is Lifeboat's addition so that `kubectl wait` works
	// (types Ready, Completed, Failed).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Backup is a request to back up a cluster's resources to object storage,
// and the record of that backup.
//
// Like Velero's, the CRD has no status subresource and no printer columns:
// Velero's server writes status through the main resource, and the CRD must
// be the one either server works with (see docs/migrating-from-velero.md).
//
// +kubebuilder:object:root=true
type Backup struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// +optional
	Spec BackupSpec `json:"spec,omitempty"`
	// +optional
	Status BackupStatus `json:"status,omitempty"`
}

// BackupList is a list of Backups.
//
// +kubebuilder:object:root=true
type BackupList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Backup `json:"items"`
}

func init() { SchemeBuilder.Register(&Backup{}, &BackupList{}) }

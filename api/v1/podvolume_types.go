package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The kinds in this file are Velero's file-system backup records
// (PodVolumeBackup, PodVolumeRestore) and its repositories of such data
// (BackupRepository), with Velero's schemas (config/crd's comparison test
// holds them to it), so that Velero's tools, which list them (`velero
// backup describe`, `restore describe`, `repo get`, `backup-location
// delete`), work against a Lifeboat install and objects a Velero install
// made keep every field. Lifeboat's node agent carries out PodVolumeBackups
// and PodVolumeRestores, and its server sets up and maintains
// BackupRepositories (docs/fs-backup.md).

// DataMoveOperationProgress counts the bytes a data transfer has moved.
type DataMoveOperationProgress struct {
	// +optional
	TotalBytes int64 `json:"totalBytes,omitempty"`
	// +optional
	BytesDone int64 `json:"bytesDone,omitempty"`
}

// PodVolumeBackupSpec names the pod volume to back up and where to.
type PodVolumeBackupSpec struct {
	// Node runs the pod.
	Node string `json:"node"`
	// Pod holds the volume.
	Pod corev1.ObjectReference `json:"pod"`
	// Volume is the volume's name in the pod.
	Volume string `json:"volume"`
	// BackupStorageLocation names the location the data goes to.
	BackupStorageLocation string `json:"backupStorageLocation"`
	// RepoIdentifier names the repository in that location.
	RepoIdentifier string `json:"repoIdentifier"`
	// UploaderType is the uploader (kopia or restic).
	// +kubebuilder:validation:Enum=kopia;restic;""
	// +optional
	UploaderType string `json:"uploaderType,omitempty"`
	// Tags are attached to the stored snapshot.
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// UploaderSettings tune the uploader.
	// +optional
	// +nullable
	UploaderSettings map[string]string `json:"uploaderSettings,omitempty"`
	// Cancel asks for the transfer to stop.
	// +optional
	Cancel bool `json:"cancel,omitempty"`
}

// PodVolumePhase is where a pod volume backup or restore is in its life.
// +kubebuilder:validation:Enum=New;Accepted;Prepared;InProgress;Canceling;Canceled;Completed;Failed
type PodVolumePhase string

// Pod volume phases, as Velero names them.
const (
	PodVolumePhaseNew        PodVolumePhase = "New"
	PodVolumePhaseAccepted   PodVolumePhase = "Accepted"
	PodVolumePhasePrepared   PodVolumePhase = "Prepared"
	PodVolumePhaseInProgress PodVolumePhase = "InProgress"
	PodVolumePhaseCanceling  PodVolumePhase = "Canceling"
	PodVolumePhaseCanceled   PodVolumePhase = "Canceled"
	PodVolumePhaseCompleted  PodVolumePhase = "Completed"
	PodVolumePhaseFailed     PodVolumePhase = "Failed"
)

// PodVolumeBackupStatus is what the transfer observed.
type PodVolumeBackupStatus struct {
	// +optional
	Phase PodVolumePhase `json:"phase,omitempty"`
	// Path is the volume's directory on the node.
	// +optional
	Path string `json:"path,omitempty"`
	// SnapshotID identifies the stored snapshot.
	// +optional
	SnapshotID string `json:"snapshotID,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
	// +optional
	// +nullable
	StartTimestamp *metav1.Time `json:"startTimestamp,omitempty"`
	// +optional
	// +nullable
	CompletionTimestamp *metav1.Time `json:"completionTimestamp,omitempty"`
	// +optional
	Progress DataMoveOperationProgress `json:"progress,omitempty"`
	// IncrementalBytes counts the bytes this snapshot added.
	// +optional
	IncrementalBytes int64 `json:"incrementalBytes,omitempty"`
	// +optional
	// +nullable
	AcceptedTimestamp *metav1.Time `json:"acceptedTimestamp,omitempty"`
}

// PodVolumeBackup is Velero's record of a pod volume's file-system backup,
// carried out by the node agent of the pod's node.
//
// +kubebuilder:object:root=true
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Started",type=date,JSONPath=`.status.startTimestamp`
// +kubebuilder:printcolumn:name="Bytes Done",type=integer,format=int64,JSONPath=`.status.progress.bytesDone`
// +kubebuilder:printcolumn:name="Total Bytes",type=integer,format=int64,JSONPath=`.status.progress.totalBytes`
// +kubebuilder:printcolumn:name="Incremental Bytes",type=integer,format=int64,JSONPath=`.status.incrementalBytes`,priority=10
// +kubebuilder:printcolumn:name="Storage Location",type=string,JSONPath=`.spec.backupStorageLocation`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.status.node`
// +kubebuilder:printcolumn:name="Uploader",type=string,JSONPath=`.spec.uploaderType`
type PodVolumeBackup struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// +optional
	Spec PodVolumeBackupSpec `json:"spec,omitempty"`
	// +optional
	Status PodVolumeBackupStatus `json:"status,omitempty"`
}

// PodVolumeBackupList is a list of PodVolumeBackups.
//
// +kubebuilder:object:root=true
type PodVolumeBackupList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PodVolumeBackup `json:"items"`
}

// PodVolumeRestoreSpec names the pod volume to restore and from what.
type PodVolumeRestoreSpec struct {
	// Pod holds the volume.
	Pod corev1.ObjectReference `json:"pod"`
	// Volume is the volume's name in the pod.
	Volume string `json:"volume"`
	// BackupStorageLocation names the location the data is read from.
	BackupStorageLocation string `json:"backupStorageLocation"`
	// RepoIdentifier names the repository in that location.
	RepoIdentifier string `json:"repoIdentifier"`
	// UploaderType is the uploader (kopia or restic).
	// +kubebuilder:validation:Enum=kopia;restic;""
	// +optional
	UploaderType string `json:"uploaderType,omitempty"`
	// SnapshotID identifies the stored snapshot.
	SnapshotID string `json:"snapshotID"`
	// SourceNamespace is the namespace the volume was backed up from.
	SourceNamespace string `json:"sourceNamespace"`
	// UploaderSettings tune the uploader.
	// +optional
	// +nullable
	UploaderSettings map[string]string `json:"uploaderSettings,omitempty"`
	// Cancel asks for the transfer to stop.
	// +optional
	Cancel bool `json:"cancel,omitempty"`
	// SnapshotSize is the snapshot's size in bytes.
	// +optional
	SnapshotSize int64 `json:"snapshotSize,omitempty"`
}

// PodVolumeRestoreStatus is what the transfer observed.
type PodVolumeRestoreStatus struct {
	// +optional
	Phase PodVolumePhase `json:"phase,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
	// +optional
	// +nullable
	StartTimestamp *metav1.Time `json:"startTimestamp,omitempty"`
	// +optional
	// +nullable
	CompletionTimestamp *metav1.Time `json:"completionTimestamp,omitempty"`
	// +optional
	Progress DataMoveOperationProgress `json:"progress,omitempty"`
	// +optional
	// +nullable
	AcceptedTimestamp *metav1.Time `json:"acceptedTimestamp,omitempty"`
	// Node ran the transfer.
	// +optional
	Node string `json:"node,omitempty"`
}

// PodVolumeRestore is Velero's record of a pod volume's file-system
// restore, carried out by the node agent of the pod's node.
//
// +kubebuilder:object:root=true
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Started",type=date,JSONPath=`.status.startTimestamp`
// +kubebuilder:printcolumn:name="Bytes Done",type=integer,format=int64,JSONPath=`.status.progress.bytesDone`
// +kubebuilder:printcolumn:name="Total Bytes",type=integer,format=int64,JSONPath=`.status.progress.totalBytes`
// +kubebuilder:printcolumn:name="Storage Location",type=string,JSONPath=`.spec.backupStorageLocation`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.status.node`
// +kubebuilder:printcolumn:name="Uploader Type",type=string,JSONPath=`.spec.uploaderType`
type PodVolumeRestore struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// +optional
	Spec PodVolumeRestoreSpec `json:"spec,omitempty"`
	// +optional
	Status PodVolumeRestoreStatus `json:"status,omitempty"`
}

// PodVolumeRestoreList is a list of PodVolumeRestores.
//
// +kubebuilder:object:root=true
type PodVolumeRestoreList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PodVolumeRestore `json:"items"`
}

// BackupRepositorySpec names a repository of file-system backup data.
type BackupRepositorySpec struct {
	// VolumeNamespace is the namespace whose volumes the repository holds.
	VolumeNamespace string `json:"volumeNamespace"`
	// BackupStorageLocation names the location holding it.
	BackupStorageLocation string `json:"backupStorageLocation"`
	// RepositoryType is the repository's format (kopia or restic).
	// +kubebuilder:validation:Enum=kopia;restic;""
	// +optional
	RepositoryType string `json:"repositoryType,omitempty"`
	// ResticIdentifier is the full restic repository identifier.
	// +optional
	ResticIdentifier string `json:"resticIdentifier,omitempty"`
	// MaintenanceFrequency is how often the repository is maintained.
	MaintenanceFrequency metav1.Duration `json:"maintenanceFrequency"`
	// RepositoryConfig tunes the repository.
	// +optional
	// +nullable
	RepositoryConfig map[string]string `json:"repositoryConfig,omitempty"`
}

// BackupRepositoryPhase says whether a repository can be used.
// +kubebuilder:validation:Enum=New;Ready;NotReady
type BackupRepositoryPhase string

// BackupRepositoryMaintenanceResult is how a maintenance run ended.
// +kubebuilder:validation:Enum=Succeeded;Failed
type BackupRepositoryMaintenanceResult string

// BackupRepositoryMaintenanceStatus is one maintenance run.
type BackupRepositoryMaintenanceStatus struct {
	// +optional
	Result BackupRepositoryMaintenanceResult `json:"result,omitempty"`
	// +optional
	// +nullable
	StartTimestamp *metav1.Time `json:"startTimestamp,omitempty"`
	// +optional
	// +nullable
	CompleteTimestamp *metav1.Time `json:"completeTimestamp,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
}

// BackupRepositoryStatus is the repository's state.
type BackupRepositoryStatus struct {
	// +optional
	Phase BackupRepositoryPhase `json:"phase,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
	// +optional
	// +nullable
	LastMaintenanceTime *metav1.Time `json:"lastMaintenanceTime,omitempty"`
	// RecentMaintenance lists the last maintenance runs.
	// +optional
	RecentMaintenance []BackupRepositoryMaintenanceStatus `json:"recentMaintenance,omitempty"`
}

// BackupRepository is Velero's record of a repository of file-system backup
// data: one per (volume namespace, storage location), set up and
// maintained by the server.
//
// +kubebuilder:object:root=true
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Repository Type",type=string,JSONPath=`.spec.repositoryType`
type BackupRepository struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// +optional
	Spec BackupRepositorySpec `json:"spec,omitempty"`
	// +optional
	Status BackupRepositoryStatus `json:"status,omitempty"`
}

// BackupRepositoryList is a list of BackupRepositories.
//
// +kubebuilder:object:root=true
type BackupRepositoryList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BackupRepository `json:"items"`
}

func init() {
	SchemeBuilder.Register(&PodVolumeBackup{}, &PodVolumeBackupList{},
		&PodVolumeRestore{}, &PodVolumeRestoreList{},
		&BackupRepository{}, &BackupRepositoryList{})
}

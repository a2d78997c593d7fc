package v1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// DeleteBackupRequestSpec names the backup to delete.
type DeleteBackupRequestSpec struct {
	BackupName string `json:"backupName"`
}

// DeleteBackupRequestPhase is where a deletion request is in its life.
// +kubebuilder:validation:Enum=New;InProgress;Processed
type DeleteBackupRequestPhase string

// Deletion request phases, as Velero names them.
const (
	DeleteBackupRequestPhaseNew        DeleteBackupRequestPhase = "New"
	DeleteBackupRequestPhaseInProgress DeleteBackupRequestPhase = "InProgress"
	DeleteBackupRequestPhaseProcessed  DeleteBackupRequestPhase = "Processed"
)

// DeleteBackupRequestStatus records the outcome of a deletion.
type DeleteBackupRequestStatus struct {
	// +optional
	Phase DeleteBackupRequestPhase `json:"phase,omitempty"`
	// Errors lists what went wrong, one message per failure.
	// +optional
	// +nullable
	Errors []string `json:"errors,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// DeleteBackupRequest asks the server to delete a backup and everything it
// created: its data in object storage, its snapshots and its restores.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
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
// +kubebuilder:validation:Enum=BackupLog;BackupContents;BackupVolumeSnapshots;BackupItemOperations;BackupResourceList;BackupResults;RestoreLog;RestoreResults;RestoreResourceList;RestoreItemOperations;CSIBackupVolumeSnapshots;CSIBackupVolumeSnapshotContents;BackupVolumeInfos;RestoreVolumeInfo
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
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
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
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
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

package v2alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// DataUploadSpec names the snapshot whose data is moved to a location.
type DataUploadSpec struct {
	// SnapshotType is the kind of snapshot (CSI).
	SnapshotType SnapshotType `json:"snapshotType"`
	// CSISnapshot names a CSI snapshot to move.
	// +optional
	// +nullable
	CSISnapshot *CSISnapshotSpec `json:"csiSnapshot,omitempty"`
	// SourcePVC is the claim that was snapshotted.
	SourcePVC string `json:"sourcePVC"`
	// DataMover names the data mover.
	// +optional
	DataMover string `json:"datamover,omitempty"`
	// BackupStorageLocation names the location the data goes to.
	BackupStorageLocation string `json:"backupStorageLocation"`
	// SourceNamespace is the claim's namespace.
	SourceNamespace string `json:"sourceNamespace"`
	// DataMoverConfig tunes the data mover.
	// +optional
	// +nullable
	DataMoverConfig map[string]string `json:"dataMoverConfig,omitempty"`
	// Cancel asks for the transfer to stop.
	// +optional
	Cancel bool `json:"cancel,omitempty"`
	// OperationTimeout bounds the transfer.
	OperationTimeout metav1.Duration `json:"operationTimeout"`
}

// SnapshotType is the kind of snapshot a DataUpload moves.
type SnapshotType string

// CSISnapshotSpec names a CSI snapshot.
type CSISnapshotSpec struct {
	// VolumeSnapshot is the VolumeSnapshot's name.
	VolumeSnapshot string `json:"volumeSnapshot"`
	// StorageClass is the snapshotted claim's storage class.
	StorageClass string `json:"storageClass"`
	// SnapshotClass is the VolumeSnapshotClass.
	// +optional
	SnapshotClass string `json:"snapshotClass,omitempty"`
	// Driver is the CSI driver.
	// +optional
	Driver string `json:"driver,omitempty"`
}

// Phase is where a data transfer is in its life.
// +kubebuilder:validation:Enum=New;Accepted;Prepared;InProgress;Canceling;Canceled;Completed;Failed
type Phase string

// NodeOS is the operating system of the nodes a transfer may run on.
// +kubebuilder:validation:Enum=auto;linux;windows
type NodeOS string

// DataUploadStatus is what the transfer observed.
type DataUploadStatus struct {
	// +optional
	Phase Phase `json:"phase,omitempty"`
	// Path is the volume's directory on the node.
	// +optional
	Path string `json:"path,omitempty"`
	// SnapshotID identifies the stored data.
	// +optional
	SnapshotID string `json:"snapshotID,omitempty"`
	// DataMoverResult is what the data mover reports.
	// +optional
	// +nullable
	DataMoverResult *map[string]string `json:"dataMoverResult,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
	// +optional
	// +nullable
	StartTimestamp *metav1.Time `json:"startTimestamp,omitempty"`
	// +optional
	// +nullable
	CompletionTimestamp *metav1.Time `json:"completionTimestamp,omitempty"`
	// +optional
	Progress v1.DataMoveOperationProgress `json:"progress,omitempty"`
	// IncrementalBytes counts the bytes this transfer added.
	// +optional
	IncrementalBytes int64 `json:"incrementalBytes,omitempty"`
	// Node ran the transfer.
	// +optional
	Node string `json:"node,omitempty"`
	// +optional
	NodeOS NodeOS `json:"nodeOS,omitempty"`
	// AcceptedByNode took the transfer on.
	// +optional
	AcceptedByNode string `json:"acceptedByNode,omitempty"`
	// +optional
	// +nullable
	AcceptedTimestamp *metav1.Time `json:"acceptedTimestamp,omitempty"`
}

// DataUpload is Velero's record of a snapshot's data moved to a location.
// Lifeboat never creates one (see the package comment).
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
type DataUpload struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// +optional
	Spec DataUploadSpec `json:"spec,omitempty"`
	// +optional
	Status DataUploadStatus `json:"status,omitempty"`
}

// DataUploadList is a list of DataUploads.
//
// +kubebuilder:object:root=true
type DataUploadList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DataUpload `json:"items"`
}

// DataDownloadSpec names the stored data to restore into a volume.
type DataDownloadSpec struct {
	// TargetVolume is the volume the data goes to.
	TargetVolume TargetVolumeSpec `json:"targetVolume"`
	// BackupStorageLocation names the location the data is read from.
	BackupStorageLocation string `json:"backupStorageLocation"`
	// DataMover names the data mover.
	// +optional
	DataMover string `json:"datamover,omitempty"`
	// SnapshotID identifies the stored data.
	SnapshotID string `json:"snapshotID"`
	// SourceNamespace is the namespace the data was backed up from.
	SourceNamespace string `json:"sourceNamespace"`
	// DataMoverConfig tunes the data mover.
	// +optional
	DataMoverConfig map[string]string `json:"dataMoverConfig,omitempty"`
	// Cancel asks for the transfer to stop.
	// +optional
	Cancel bool `json:"cancel,omitempty"`
	// OperationTimeout bounds the transfer.
	OperationTimeout metav1.Duration `json:"operationTimeout"`
	// +optional
	NodeOS NodeOS `json:"nodeOS,omitempty"`
	// SnapshotSize is the stored data's size in bytes.
	// +optional
	SnapshotSize int64 `json:"snapshotSize,omitempty"`
}

// TargetVolumeSpec names a claim and its volume.
type TargetVolumeSpec struct {
	PVC       string `json:"pvc"`
	PV        string `json:"pv"`
	Namespace string `json:"namespace"`
}

// DataDownloadStatus is what the transfer observed.
type DataDownloadStatus struct {
	// +optional
	Phase Phase `json:"phase,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
	// +optional
	// +nullable
	StartTimestamp *metav1.Time `json:"startTimestamp,omitempty"`
	// +optional
	// +nullable
	CompletionTimestamp *metav1.Time `json:"completionTimestamp,omitempty"`
	// +optional
	Progress v1.DataMoveOperationProgress `json:"progress,omitempty"`
	// Node ran the transfer.
	// +optional
	Node string `json:"node,omitempty"`
	// AcceptedByNode took the transfer on.
	// +optional
	AcceptedByNode string `json:"acceptedByNode,omitempty"`
	// +optional
	// +nullable
	AcceptedTimestamp *metav1.Time `json:"acceptedTimestamp,omitempty"`
}

// DataDownload is Velero's record of moved data restored into a volume.
// Lifeboat never creates one (see the package comment).
//
// +kubebuilder:object:root=true
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Started",type=date,JSONPath=`.status.startTimestamp`
// +kubebuilder:printcolumn:name="Bytes Done",type=integer,format=int64,JSONPath=`.status.progress.bytesDone`
// +kubebuilder:printcolumn:name="Total Bytes",type=integer,format=int64,JSONPath=`.status.progress.totalBytes`
// +kubebuilder:printcolumn:name="Storage Location",type=string,JSONPath=`.spec.backupStorageLocation`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.status.node`
type DataDownload struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// +optional
	Spec DataDownloadSpec `json:"spec,omitempty"`
	// +optional
	Status DataDownloadStatus `json:"status,omitempty"`
}

// DataDownloadList is a list of DataDownloads.
//
// +kubebuilder:object:root=true
type DataDownloadList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DataDownload `json:"items"`
}

func init() {
	SchemeBuilder.Register(&DataUpload{}, &DataUploadList{}, &DataDownload{}, &DataDownloadList{})
}

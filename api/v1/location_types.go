package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ObjectStorageLocation is the bucket and prefix a location stores backups under.
type ObjectStorageLocation struct {
	// Bucket is the bucket (or, for the filesystem store, the directory under config.path).
	Bucket string `json:"bucket"`
	// Prefix is the path inside the bucket.
	// +optional
	Prefix string `json:"prefix,omitempty"`
	// CACert is a PEM bundle to trust when connecting to the store.
	// Velero deprecates it for CACertRef; at most one of the two may be set.
	// +optional
	CACert []byte `json:"caCert,omitempty"`
	// CACertRef names a key of a Secret in the location's namespace holding
	// the PEM bundle to trust when connecting to the store.
	// +optional
	CACertRef *corev1.SecretKeySelector `json:"caCertRef,omitempty"`
}

// StorageType holds the kind of storage a location uses; only object storage exists.
type StorageType struct {
	// +optional
	// +nullable
	ObjectStorage *ObjectStorageLocation `json:"objectStorage"`
}

// BackupStorageLocationAccessMode says whether backups may be written to a location.
// +kubebuilder:validation:Enum=ReadOnly;ReadWrite
type BackupStorageLocationAccessMode string

// Access modes of a BackupStorageLocation.
const (
	BackupStorageLocationAccessModeReadOnly  BackupStorageLocationAccessMode = "ReadOnly"
	BackupStorageLocationAccessModeReadWrite BackupStorageLocationAccessMode = "ReadWrite"
)

// BackupStorageLocationSpec says where and how backups are stored.
type BackupStorageLocationSpec struct {
	// Provider is the object store: "aws" (any S3-compatible store),
	// "lifeboat.io/filesystem", or the name of an ObjectStore plugin.
	Provider string `json:"provider"`
	// Config holds provider settings (for aws: region, s3Url, s3ForcePathStyle, ...).
	// +optional
	Config map[string]string `json:"config,omitempty"`
	// Credential names the secret key holding the store's credentials.
	// +optional
	Credential *corev1.SecretKeySelector `json:"credential,omitempty"`

	StorageType `json:",inline"`

	// Default marks the location used when a backup names none.
	// +optional
	Default bool `json:"default,omitempty"`
	// AccessMode is ReadWrite (default) or ReadOnly.
	// +optional
	AccessMode BackupStorageLocationAccessMode `json:"accessMode,omitempty"`
	// BackupSyncPeriod is how often backups in the store are synced into the cluster.
	// +optional
	// +nullable
	BackupSyncPeriod *metav1.Duration `json:"backupSyncPeriod,omitempty"`
	// ValidationFrequency is how often the location is checked.
	// +optional
	// +nullable
	ValidationFrequency *metav1.Duration `json:"validationFrequency,omitempty"`
}

// BackupStorageLocationPhase says whether a location can be used.
// +kubebuilder:validation:Enum=Available;Unavailable
type BackupStorageLocationPhase string

// Location phases.
const (
	BackupStorageLocationPhaseAvailable   BackupStorageLocationPhase = "Available"
	BackupStorageLocationPhaseUnavailable BackupStorageLocationPhase = "Unavailable"
)

// BackupStorageLocationStatus is the last observed state of a location.
type BackupStorageLocationStatus struct {
	// +optional
	Phase BackupStorageLocationPhase `json:"phase,omitempty"`
	// +optional
	// +nullable
	LastSyncedTime *metav1.Time `json:"lastSyncedTime,omitempty"`
	// +optional
	// +nullable
	LastValidationTime *metav1.Time `json:"lastValidationTime,omitempty"`
	// Message says why the location is unavailable.
	// +optional
	Message string `json:"message,omitempty"`
	// LastSyncedRevision is a field Velero deprecated and no longer sets
	// (the revision of the store's contents at the last sync); kept for
	// objects that have it, never set by Lifeboat.
	// +optional
	LastSyncedRevision types.UID `json:"lastSyncedRevision,omitempty"`
	// AccessMode is a field Velero deprecated and no longer sets (the
	// access mode is spec.accessMode); kept for objects that have it, never
	// set by Lifeboat.
	// +optional
	AccessMode BackupStorageLocationAccessMode `json:"accessMode,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// BackupStorageLocation is an object store that backups are written to.
//
// Subresources and printer columns are Velero's (see Backup).
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=bsl
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Last Validated",type=date,JSONPath=`.status.lastValidationTime`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Default",type=boolean,JSONPath=`.spec.default`
type BackupStorageLocation struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// +optional
	Spec BackupStorageLocationSpec `json:"spec,omitempty"`
	// +optional
	Status BackupStorageLocationStatus `json:"status,omitempty"`
}

// BackupStorageLocationList is a list of BackupStorageLocations.
//
// +kubebuilder:object:root=true
type BackupStorageLocationList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BackupStorageLocation `json:"items"`
}

// VolumeSnapshotLocationSpec says which snapshotter takes native volume snapshots.
type VolumeSnapshotLocationSpec struct {
	// Provider names the VolumeSnapshotter plugin.
	Provider string `json:"provider"`
	// +optional
	Config map[string]string `json:"config,omitempty"`
	// +optional
	Credential *corev1.SecretKeySelector `json:"credential,omitempty"`
}

// VolumeSnapshotLocationPhase says whether a snapshot location can be used.
// +kubebuilder:validation:Enum=Available;Unavailable
type VolumeSnapshotLocationPhase string

// VolumeSnapshotLocationStatus is the last observed state of a snapshot location.
type VolumeSnapshotLocationStatus struct {
	// +optional
	Phase VolumeSnapshotLocationPhase `json:"phase,omitempty"`
}

// VolumeSnapshotLocation is where native volume snapshots are taken.
//
// Like Velero's, the CRD has no status subresource (see Backup).
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=vsl
type VolumeSnapshotLocation struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// +optional
	Spec VolumeSnapshotLocationSpec `json:"spec,omitempty"`
	// +optional
	Status VolumeSnapshotLocationStatus `json:"status,omitempty"`
}

// VolumeSnapshotLocationList is a list of VolumeSnapshotLocations.
//
// +kubebuilder:object:root=true
type VolumeSnapshotLocationList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VolumeSnapshotLocation `json:"items"`
}

func init() {
	SchemeBuilder.Register(&BackupStorageLocation{}, &BackupStorageLocationList{},
		&VolumeSnapshotLocation{}, &VolumeSnapshotLocationList{})
}

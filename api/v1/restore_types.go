package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// PolicyType says what a restore does with an object that already exists.
// +kubebuilder:validation:Enum=none;update
type PolicyType string

// Existing-resource policies.
const (
	PolicyTypeNone   PolicyType = "none"
	PolicyTypeUpdate PolicyType = "update"
)

// RestoreStatusSpec selects resources whose status is restored too.
type RestoreStatusSpec struct {
	// +optional
	// +nullable
	IncludedResources []string `json:"includedResources,omitempty"`
	// +optional
	// +nullable
	ExcludedResources []string `json:"excludedResources,omitempty"`
}

// RestoreSpec says which backup to restore and what to take from it.
type RestoreSpec struct {
	// BackupName is the backup to restore from.
	// +optional
	BackupName string `json:"backupName,omitempty"`
	// ScheduleName restores the schedule's newest completed backup.
	// +optional
	ScheduleName string `json:"scheduleName,omitempty"`
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
	// NamespaceMapping restores objects of one namespace into another.
	// +optional
	NamespaceMapping map[string]string `json:"namespaceMapping,omitempty"`
	// +optional
	// +nullable
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
	// +optional
	// +nullable
	OrLabelSelectors []*metav1.LabelSelector `json:"orLabelSelectors,omitempty"`
	// RestorePVs restores volumes from their snapshots.
	// +optional
	// +nullable
	RestorePVs *bool `json:"restorePVs,omitempty"`
	// RestoreStatus selects resources whose status is restored.
	// +optional
	// +nullable
	RestoreStatus *RestoreStatusSpec `json:"restoreStatus,omitempty"`
	// PreserveNodePorts keeps the node ports of restored services.
	// +optional
	// +nullable
	PreserveNodePorts *bool `json:"preserveNodePorts,omitempty"`
	// +optional
	// +nullable
	IncludeClusterResources *bool `json:"includeClusterResources,omitempty"`
	// Hooks run commands in restored pods.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Hooks *runtime.RawExtension `json:"hooks,omitempty"`
	// ExistingResourcePolicy is "none" (keep live objects) or "update" (patch them).
	// +optional
	// +nullable
	ExistingResourcePolicy PolicyType `json:"existingResourcePolicy,omitempty"`
	// +optional
	ItemOperationTimeout metav1.Duration `json:"itemOperationTimeout,omitempty"`
	// ResourceModifier names a ConfigMap of resource modifier rules.
	// +optional
	// +nullable
	ResourceModifier *corev1.TypedLocalObjectReference `json:"resourceModifier,omitempty"`
	// +optional
	// +nullable
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	UploaderConfig *runtime.RawExtension `json:"uploaderConfig,omitempty"`
}

// RestorePhase is where a restore is in its life.
// +kubebuilder:validation:Enum=New;FailedValidation;InProgress;WaitingForPluginOperations;WaitingForPluginOperationsPartiallyFailed;Finalizing;FinalizingPartiallyFailed;Completed;PartiallyFailed;Failed
type RestorePhase string

// Restore phases, as Velero names them.
const (
	RestorePhaseNew                                       RestorePhase = "New"
	RestorePhaseFailedValidation                          RestorePhase = "FailedValidation"
	RestorePhaseInProgress                                RestorePhase = "InProgress"
	RestorePhaseWaitingForPluginOperations                RestorePhase = "WaitingForPluginOperations"
	RestorePhaseWaitingForPluginOperationsPartiallyFailed RestorePhase = "WaitingForPluginOperationsPartiallyFailed"
	RestorePhaseFinalizing                                RestorePhase = "Finalizing"
	RestorePhaseFinalizingPartiallyFailed                 RestorePhase = "FinalizingPartiallyFailed"
	RestorePhaseCompleted                                 RestorePhase = "Completed"
	RestorePhasePartiallyFailed                           RestorePhase = "PartiallyFailed"
	RestorePhaseFailed                                    RestorePhase = "Failed"
)

// RestoreProgress counts items while a restore runs.
type RestoreProgress struct {
	// +optional
	TotalItems int `json:"totalItems,omitempty"`
	// +optional
	ItemsRestored int `json:"itemsRestored,omitempty"`
}

// RestoreStatus is what the server observed while running the restore.
type RestoreStatus struct {
	// +optional
	Phase RestorePhase `json:"phase,omitempty"`
	// +optional
	// +nullable
	ValidationErrors []string `json:"validationErrors,omitempty"`
	// +optional
	Warnings int `json:"warnings,omitempty"`
	// +optional
	Errors int `json:"errors,omitempty"`
	// +optional
	FailureReason string `json:"failureReason,omitempty"`
	// +optional
	// +nullable
	StartTimestamp *metav1.Time `json:"startTimestamp,omitempty"`
	// +optional
	// +nullable
	CompletionTimestamp *metav1.Time `json:"completionTimestamp,omitempty"`
	// +optional
	// +nullable
	Progress *RestoreProgress `json:"progress,omitempty"`
	// +optional
	RestoreItemOperationsAttempted int `json:"restoreItemOperationsAttempted,omitempty"`
	// +optional
	RestoreItemOperationsCompleted int `json:"restoreItemOperationsCompleted,omitempty"`
	// +optional
	RestoreItemOperationsFailed int `json:"restoreItemOperationsFailed,omitempty"`
	// +optional
	// +nullable
	HookStatus *HookStatus `json:"hookStatus,omitempty"`
	// Conditions is Lifeboat's addition so that `kubectl wait` works.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Restore brings the contents of a backup back into the cluster.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Backup",type=string,JSONPath=`.spec.backupName`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Restore struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// +optional
	Spec RestoreSpec `json:"spec,omitempty"`
	// +optional
	Status RestoreStatus `json:"status,omitempty"`
}

// RestoreList is a list of Restores.
//
// +kubebuilder:object:root=true
type RestoreList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Restore `json:"items"`
}

func init() { SchemeBuilder.Register(&Restore{}, &RestoreList{}) }

package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// PolicyType says what a restore does with an object that already exists.
// The CRD takes any value, as Velero's does; the server refuses any but
// none and update, naming the field.
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
	Hooks RestoreHooks `json:"hooks,omitempty"`
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
	// UploaderConfig tunes the file-system restore.
	// +optional
	// +nullable
	UploaderConfig *UploaderConfigForRestore `json:"uploaderConfig,omitempty"`
	// ResourcePolicy names the ConfigMap of resource policies the restore
	// applies to volumes.
	// +optional
	// +nullable
	ResourcePolicy *corev1.TypedLocalObjectReference `json:"resourcePolicy,omitempty"`
	// DryRun runs the whole restore (filters, mappings, restore item
	// actions, ordering, existingResourcePolicy) with every create and
	// patch sent as a server-side dry run, so the API server checks each
	// item (schema, admission, quota, conflicts) and nothing is written;
	// status.dryRun holds what each item would come to. Lifeboat's:
	// Velero has no dry run, and a Velero server, or Velero's CRD, would
	// take such a Restore as a real one.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`
}

// UploaderConfigForRestore tunes the file-system restore.
type UploaderConfigForRestore struct {
	// WriteSparseFiles writes files with holes as sparse files.
	// +optional
	// +nullable
	WriteSparseFiles *bool `json:"writeSparseFiles,omitempty"`
	// ParallelFilesDownload is how many files are fetched at once.
	// +optional
	ParallelFilesDownload int `json:"parallelFilesDownload,omitempty"`
}

// RestoreHooks are the hooks a restore runs in restored pods.
type RestoreHooks struct {
	// Resources lists the hooks and the pods each applies to.
	// +optional
	Resources []RestoreResourceHookSpec `json:"resources,omitempty"`
}

// RestoreResourceHookSpec names hooks and the restored pods they apply to,
// selected as a restore selects items.
type RestoreResourceHookSpec struct {
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
	// PostHooks run once the pod is restored.
	// +optional
	PostHooks []RestoreResourceHook `json:"postHooks,omitempty"`
}

// RestoreResourceHook is one hook of a restore: a command, or init
// containers added to the pod.
type RestoreResourceHook struct {
	// +optional
	Exec *ExecRestoreHook `json:"exec,omitempty"`
	// +optional
	Init *InitRestoreHook `json:"init,omitempty"`
}

// ExecRestoreHook is a command run in a restored pod's container.
type ExecRestoreHook struct {
	// Container is the container to run it in; empty means the pod's first.
	// +optional
	Container string `json:"container,omitempty"`
	// Command and its arguments, run without a shell.
	// +kubebuilder:validation:MinItems=1
	Command []string `json:"command"`
	// OnError says what a failing command does to the restore.
	// +optional
	OnError HookErrorMode `json:"onError,omitempty"`
	// ExecTimeout bounds the command.
	// +optional
	ExecTimeout metav1.Duration `json:"execTimeout,omitempty"`
	// WaitTimeout bounds the wait for the container to run.
	// +optional
	WaitTimeout metav1.Duration `json:"waitTimeout,omitempty"`
	// WaitForReady waits for the container to be ready, not only running.
	// +optional
	// +nullable
	WaitForReady *bool `json:"waitForReady,omitempty"`
}

// InitRestoreHook adds init containers to a restored pod.
type InitRestoreHook struct {
	// InitContainers are containers (core/v1 Container objects) put first
	// among the pod's init containers.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	InitContainers []runtime.RawExtension `json:"initContainers,omitempty"`
	// Timeout bounds the wait for the init containers.
	// +optional
	Timeout metav1.Duration `json:"timeout,omitempty"`
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
	// DryRun is what a dry run (spec.dryRun) found. Lifeboat's.
	// +optional
	// +nullable
	DryRun *RestoreDryRun `json:"dryRun,omitempty"`
}

// RestoreDryRunMaxItems bounds the items status.dryRun lists, so that the
// Restore stays small whatever the size of the backup; the counts are
// always complete, and the restore's resource list (restore describe
// --details) names every item.
const RestoreDryRunMaxItems = 1000

// DryRunOutcome is what a restore would do with one item.
type DryRunOutcome string

// The outcomes of a dry run's items.
const (
	// DryRunCreate: the item would be created.
	DryRunCreate DryRunOutcome = "Create"
	// DryRunUpdate: the item exists and would be patched to the backup's
	// state (existingResourcePolicy update).
	DryRunUpdate DryRunOutcome = "Update"
	// DryRunSkip: the item would be left as it is (it exists, or the
	// spec or an action leaves it out); the message says why.
	DryRunSkip DryRunOutcome = "Skip"
	// DryRunFail: restoring the item would fail; the message is the error.
	DryRunFail DryRunOutcome = "Fail"
)

// RestoreDryRun counts a dry run's items by outcome and lists the notable
// ones.
type RestoreDryRun struct {
	// +optional
	WouldCreate int `json:"wouldCreate,omitempty"`
	// +optional
	WouldUpdate int `json:"wouldUpdate,omitempty"`
	// +optional
	WouldSkip int `json:"wouldSkip,omitempty"`
	// +optional
	WouldFail int `json:"wouldFail,omitempty"`
	// Unchecked counts the items counted under wouldCreate that the API
	// server could not check: their namespace, or the
	// CustomResourceDefinition of their type, would be created by the
	// restore itself, and a dry run creates neither.
	// +optional
	Unchecked int `json:"unchecked,omitempty"`
	// Items are the items that would fail, be skipped, be updated or go
	// unchecked, then those that would simply be created, at most
	// RestoreDryRunMaxItems in all (see Truncated).
	// +optional
	// +nullable
	Items []RestoreDryRunItem `json:"items,omitempty"`
	// Truncated is true when Items leaves some items out.
	// +optional
	Truncated bool `json:"truncated,omitempty"`
}

// RestoreDryRunItem is one item of a dry run.
type RestoreDryRunItem struct {
	// Resource is the item's type as resource.group ("configmaps",
	// "deployments.apps").
	Resource string `json:"resource"`
	// Namespace and Name are where the restore would put the item.
	// +optional
	Namespace string        `json:"namespace,omitempty"`
	Name      string        `json:"name"`
	Outcome   DryRunOutcome `json:"outcome"`
	// Message is the API server's error for Fail, the reason for Skip,
	// and why the item went unchecked for an unchecked Create.
	// +optional
	Message string `json:"message,omitempty"`
}

// Restore brings the contents of a backup back into the cluster.
//
// Like Velero's, the CRD has no status subresource and no printer columns
// (see Backup).
//
// +kubebuilder:object:root=true
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

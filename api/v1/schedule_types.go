package v1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// ScheduleSpec is a backup template run on a cron schedule.
type ScheduleSpec struct {
	// Template is the spec of each backup the schedule creates.
	Template BackupSpec `json:"template"`
	// Schedule is a cron expression.
	Schedule string `json:"schedule"`
	// UseOwnerReferencesInBackup makes the schedule own its backups.
	// +optional
	// +nullable
	UseOwnerReferencesInBackup *bool `json:"useOwnerReferencesInBackup,omitempty"`
	// Paused stops the schedule from creating backups.
	// +optional
	Paused bool `json:"paused,omitempty"`
	// SkipImmediately skips the first run after the schedule is created or unpaused.
	// +optional
	// +nullable
	SkipImmediately *bool `json:"skipImmediately,omitempty"`
}

// SchedulePhase is the state of a schedule.
// +kubebuilder:validation:Enum=New;Enabled;FailedValidation
type SchedulePhase string

// Schedule phases, as Velero names them.
const (
	SchedulePhaseNew              SchedulePhase = "New"
	SchedulePhaseEnabled          SchedulePhase = "Enabled"
	SchedulePhaseFailedValidation SchedulePhase = "FailedValidation"
)

// ScheduleStatus records the schedule's last runs.
type ScheduleStatus struct {
	// +optional
	Phase SchedulePhase `json:"phase,omitempty"`
	// +optional
	// +nullable
	LastBackup *metav1.Time `json:"lastBackup,omitempty"`
	// +optional
	// +nullable
	LastSkipped *metav1.Time `json:"lastSkipped,omitempty"`
	// +optional
	ValidationErrors []string `json:"validationErrors,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Schedule creates backups periodically.
//
// Subresources and printer columns are Velero's (see Backup).
//
// +kubebuilder:object:root=true
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.schedule`
// +kubebuilder:printcolumn:name="LastBackup",type=date,JSONPath=`.status.lastBackup`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Paused",type=boolean,JSONPath=`.spec.paused`
type Schedule struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// +optional
	Spec ScheduleSpec `json:"spec,omitempty"`
	// +optional
	Status ScheduleStatus `json:"status,omitempty"`
}

// ScheduleList is a list of Schedules.
//
// +kubebuilder:object:root=true
type ScheduleList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Schedule `json:"items"`
}

func init() { SchemeBuilder.Register(&Schedule{}, &ScheduleList{}) }

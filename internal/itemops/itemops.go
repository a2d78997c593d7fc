// Package itemops holds the asynchronous operations that v2 item actions
// start, in the shape of Velero's `<backup>-itemoperations.json.gz`, and
// the rules for following them to an end.
package itemops

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

// Phase is where an operation is.
type Phase string

// Operation phases, as Velero names them.
const (
	PhaseNew        Phase = "New"
	PhaseInProgress Phase = "InProgress"
	PhaseCompleted  Phase = "Completed"
	PhaseFailed     Phase = "Failed"
)

// DefaultTimeout is how long an operation may run when the backup sets no
// spec.itemOperationTimeout (Velero's default).
const DefaultTimeout = 4 * time.Hour

// BackupOperation is one operation started by a BackupItemAction.
type BackupOperation struct {
	Spec   BackupOperationSpec `json:"spec"`
	Status Status              `json:"status"`
}

// BackupOperationSpec says which action started what for which item.
type BackupOperationSpec struct {
	BackupName         string                   `json:"backupName"`
	BackupUID          string                   `json:"backupUID"`
	BackupItemAction   string                   `json:"backupItemAction"`
	ResourceIdentifier api.ResourceIdentifier   `json:"resourceIdentifier"`
	OperationID        string                   `json:"operationID"`
	PostOperationItems []api.ResourceIdentifier `json:"postOperationItems"`
}

// Status is the last known progress of an operation.
type Status struct {
	Phase          Phase        `json:"phase,omitempty"`
	Error          string       `json:"error,omitempty"`
	NCompleted     int64        `json:"nCompleted,omitempty"`
	NTotal         int64        `json:"nTotal,omitempty"`
	OperationUnits string       `json:"operationUnits,omitempty"`
	Description    string       `json:"description,omitempty"`
	Created        *metav1.Time `json:"created,omitempty"`
	Started        *metav1.Time `json:"started,omitempty"`
	Updated        *metav1.Time `json:"updated,omitempty"`
}

// Done reports whether the operation has ended.
func (s Status) Done() bool { return s.Phase == PhaseCompleted || s.Phase == PhaseFailed }

// Apply records a progress report; a report with an error fails the operation.
func (s *Status) Apply(p api.OperationProgress, now time.Time) {
	s.NCompleted, s.NTotal = p.NCompleted, p.NTotal
	s.OperationUnits, s.Description = p.OperationUnits, p.Description
	if !p.Started.IsZero() {
		t := metav1.NewTime(p.Started)
		s.Started = &t
	}
	u := metav1.NewTime(now)
	if !p.Updated.IsZero() {
		u = metav1.NewTime(p.Updated)
	}
	s.Updated = &u
	switch {
	case p.Err != "":
		s.Phase, s.Error = PhaseFailed, p.Err
	case p.Completed:
		s.Phase = PhaseCompleted
	default:
		s.Phase = PhaseInProgress
	}
}

// Counts tallies operations by outcome.
func Counts(ops []BackupOperation) (attempted, completed, failed int) {
	for _, op := range ops {
		attempted++
		switch op.Status.Phase {
		case PhaseCompleted:
			completed++
		case PhaseFailed:
			failed++
		}
	}
	return
}

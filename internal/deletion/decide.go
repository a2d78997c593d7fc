package deletion

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/locations"
)

// Verdict is what to do with a DeleteBackupRequest now.
type Verdict string

const (
	// Start the request's first attempt (New) or its next one (InProgress).
	Start Verdict = "Start"
	// Wait: not now, for Reason; no attempt is used up.
	Wait Verdict = "Wait"
	// Later: the next attempt is not due yet; look again After.
	Later Verdict = "Later"
	// Refuse ends the request Processed with Messages, as Velero does
	// with a request it cannot carry out.
	Refuse Verdict = "Refuse"
	// Follow: the request Leader deletes the backup; this one ends with
	// its outcome.
	Follow Verdict = "Follow"
	// DryRun answers a dry run with the plan.
	DryRun Verdict = "DryRun"
	// Fail: an attempt that fails before it starts (its location went or
	// became ReadOnly since the request started); it counts.
	Fail Verdict = "Fail"
	// Gone: the backup the request was deleting is not there any more.
	Gone Verdict = "Gone"
)

// Decision is a Verdict with what it needs.
type Decision struct {
	Verdict Verdict
	// Reason and Message say why a request waits (the Waiting condition).
	Reason, Message string
	// Messages are a refusal's or a failure's errors.
	Messages []string
	// Leader is the request a follower waits for.
	Leader string
	// After is when a Later request is due.
	After time.Duration
}

// Facts are what a decision is made from, read by the caller around any
// cache: the request, its backup (nil: not found), the backup's storage
// location (nil: none of that name), and the namespace's restores and
// deletion requests.
type Facts struct {
	Request  *v1.DeleteBackupRequest
	Backup   *v1.Backup
	Location *v1.BackupStorageLocation
	Restores []v1.Restore
	Requests []v1.DeleteBackupRequest
	Now      time.Time
}

// Wait reasons.
const (
	WaitBackupInProgress    = "BackupInProgress"
	WaitRestoreInProgress   = "RestoreInProgress"
	WaitLocationUnavailable = "LocationUnavailable"
	WaitOtherRequest        = "OtherRequest"
)

// Decide is the one place the deletion controller's choices are made: it
// reads nothing and changes nothing, so every rule is tested by table and
// by sequence (decide_test.go, testdata/decide.golden).
func Decide(f Facts) Decision {
	dbr := f.Request
	switch dbr.Status.Phase {
	case "", v1.DeleteBackupRequestPhaseNew:
		return decideNew(f)
	case v1.DeleteBackupRequestPhaseInProgress:
		return decideInProgress(f)
	}
	return Decision{Verdict: Refuse, Messages: []string{fmt.Sprintf("request is %s already", dbr.Status.Phase)}}
}

func decideNew(f Facts) Decision {
	dbr, name := f.Request, f.Request.Spec.BackupName
	if name == "" {
		return refuse("spec.backupName: name the backup to delete")
	}
	if dbr.Spec.DryRun {
		return Decision{Verdict: DryRun}
	}
	if dbr.Status.HandledBy != "" {
		return Decision{Verdict: Follow, Leader: dbr.Status.HandledBy}
	}
	if leader := leaderOf(dbr, f.Requests); leader != "" {
		return Decision{Verdict: Follow, Leader: leader, Reason: WaitOtherRequest,
			Message: fmt.Sprintf("deletion request %s is deleting backup %s; this request ends with its outcome", leader, name)}
	}
	b := f.Backup
	if b == nil {
		return refuse(fmt.Sprintf("spec.backupName: backup %q not found in namespace %q", name, dbr.Namespace))
	}
	if loc := b.Spec.StorageLocation; loc != "" {
		switch problem, msg := locations.Writable(loc, f.Location); problem {
		case locations.Missing:
			return refuse(fmt.Sprintf("spec.backupName: backup %q is stored in BackupStorageLocation %q, which does not exist; recreate the location to delete the backup's data", name, loc))
		case locations.ReadOnly:
			return refuse(fmt.Sprintf("spec.backupName: backup %q is stored in BackupStorageLocation %q, which is ReadOnly; set its spec.accessMode to ReadWrite to delete backups from it", name, loc))
		case locations.NotAvailable:
			return wait(WaitLocationUnavailable, msg+"; the deletion starts once it is Available")
		}
	}
	if d, busy := busy(f); busy {
		return d
	}
	return Decision{Verdict: Start}
}

func decideInProgress(f Facts) Decision {
	dbr, b := f.Request, f.Backup
	if next := dbr.Status.NextAttemptTime; next != nil {
		if after := next.Sub(f.Now); after > 0 {
			return Decision{Verdict: Later, After: after}
		}
	}
	// The label records which backup of that name the request started on;
	// a new Backup of the same name is not it.
	if b == nil || (dbr.Labels[v1.BackupUIDLabel] != "" && string(b.UID) != dbr.Labels[v1.BackupUIDLabel]) {
		return Decision{Verdict: Gone}
	}
	if d, busy := busy(f); busy {
		return d
	}
	if loc := b.Spec.StorageLocation; loc != "" {
		switch problem, msg := locations.Writable(loc, f.Location); problem {
		case locations.Missing, locations.ReadOnly:
			return Decision{Verdict: Fail, Messages: []string{fmt.Sprintf("%s (backup %q)", msg, b.Name)}}
		case locations.NotAvailable:
			return wait(WaitLocationUnavailable, msg)
		}
	}
	return Decision{Verdict: Start}
}

// busy says what the deletion of the backup waits for, if anything: the
// backup itself until its run has ended (one not started yet included:
// it is about to write what the deletion would miss), or a restore that
// reads its tarball. Every attempt asks again, since both can start
// between attempts.
func busy(f Facts) (Decision, bool) {
	b := f.Backup
	if BackupRunning(b.Status.Phase) {
		return wait(WaitBackupInProgress, fmt.Sprintf("backup %s is %s; the deletion starts once it has ended",
			b.Name, cmp.Or(string(b.Status.Phase), "not started yet"))), true
	}
	if names := RunningRestores(f.Restores, b.Name); len(names) > 0 {
		return wait(WaitRestoreInProgress, fmt.Sprintf("restore %s of the backup is running; the deletion starts once it has ended",
			strings.Join(names, ", "))), true
	}
	return Decision{}, false
}

// BackupRunning reports phases in which a backup is still being written,
// or is about to be.
func BackupRunning(p v1.BackupPhase) bool {
	switch p {
	case "", v1.BackupPhaseNew, v1.BackupPhaseInProgress, v1.BackupPhaseWaitingForPluginOperations,
		v1.BackupPhaseWaitingForPluginOperationsPartiallyFailed, v1.BackupPhaseFinalizing, v1.BackupPhaseFinalizingPartiallyFailed:
		return true
	}
	return false
}

// RunningRestores names, sorted, the restores of backup that have not
// ended: a deletion would pull the tarball from under them.
func RunningRestores(restores []v1.Restore, backup string) []string {
	var out []string
	for _, rs := range restores {
		if rs.Spec.BackupName != backup {
			continue
		}
		switch rs.Status.Phase {
		case "", v1.RestorePhaseNew, v1.RestorePhaseInProgress:
			out = append(out, rs.Name)
		}
	}
	slices.Sort(out)
	return out
}

// leaderOf returns the request dbr must wait for: one InProgress for the
// same backup, or the oldest waiting one that waits for nobody. Ties break
// by name, so two requests made at once agree on which goes first.
func leaderOf(dbr *v1.DeleteBackupRequest, requests []v1.DeleteBackupRequest) string {
	before := func(a, b *v1.DeleteBackupRequest) bool {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c < 0
		}
		return a.Name < b.Name
	}
	var oldest *v1.DeleteBackupRequest
	for i := range requests {
		o := &requests[i]
		if o.Name == dbr.Name || o.Spec.BackupName != dbr.Spec.BackupName || o.Spec.DryRun {
			continue
		}
		if o.Status.Phase == v1.DeleteBackupRequestPhaseInProgress {
			return o.Name
		}
		waiting := o.Status.Phase == "" || o.Status.Phase == v1.DeleteBackupRequestPhaseNew
		if waiting && o.Status.HandledBy == "" && before(o, dbr) && (oldest == nil || before(o, oldest)) {
			oldest = o
		}
	}
	if oldest != nil {
		return oldest.Name
	}
	return ""
}

func refuse(msgs ...string) Decision { return Decision{Verdict: Refuse, Messages: msgs} }

func wait(reason, msg string) Decision { return Decision{Verdict: Wait, Reason: reason, Message: msg} }

// maxRetryDelay caps the backoff between attempts.
const maxRetryDelay = time.Hour

// Retry is what follows a failed attempt.
type Retry struct {
	// Final: no attempt follows; the request ends Failed.
	Final bool
	// Reason is the Backup's DeletionFailed condition reason.
	Reason string
	// After is the wait before the next attempt: base after the first
	// failure, doubling after each further one, at most an hour.
	After time.Duration
}

// AfterFailure decides what follows the failed attempt number attempt (from
// 1) of at most maxAttempts. Another backup's data is never deleted, so an
// IdentityError ends the request at once.
func AfterFailure(err error, attempt, maxAttempts int, base time.Duration) Retry {
	var idErr *IdentityError
	switch {
	case errors.As(err, &idErr):
		return Retry{Final: true, Reason: "NotThisBackupsData"}
	case attempt >= maxAttempts:
		return Retry{Final: true, Reason: "AttemptsExhausted"}
	}
	d := base
	for i := 1; i < attempt && d < maxRetryDelay; i++ {
		d *= 2
	}
	return Retry{Reason: "AttemptFailed", After: min(d, maxRetryDelay)}
}

// SkipConsent says whether dbr may go past items whose DeleteItemAction
// fails: its own spec says so, or a request waiting for it does (an
// operator's `backup delete --skip-failed-actions` while garbage
// collection's request keeps failing).
func SkipConsent(dbr *v1.DeleteBackupRequest, requests []v1.DeleteBackupRequest) bool {
	if dbr.Spec.SkipFailedActions || dbr.Status.SkipFailedActions {
		return true
	}
	return slices.ContainsFunc(requests, func(o v1.DeleteBackupRequest) bool {
		return o.Status.HandledBy == dbr.Name && o.Spec.SkipFailedActions &&
			o.Status.Phase != v1.DeleteBackupRequestPhaseProcessed && o.Status.Phase != v1.DeleteBackupRequestPhaseFailed
	})
}

package deletion

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

var update = flag.Bool("update", false, "rewrite the golden files from what the code does now")

var t0 = time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)

// facts builds a world: backup "nightly" (Completed, uid-1) in location
// "default" (Available), no restores, the request "del-1" (New) alone.
func facts() Facts {
	return Facts{
		Request: &v1.DeleteBackupRequest{
			ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: "del-1", CreationTimestamp: metav1.NewTime(t0)},
			Spec:       v1.DeleteBackupRequestSpec{BackupName: "nightly"},
		},
		Backup: &v1.Backup{
			ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: "nightly", UID: types.UID("uid-1")},
			Spec:       v1.BackupSpec{StorageLocation: "default"},
			Status:     v1.BackupStatus{Phase: v1.BackupPhaseCompleted},
		},
		Location: &v1.BackupStorageLocation{
			ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: "default"},
			Status:     v1.BackupStorageLocationStatus{Phase: v1.BackupStorageLocationPhaseAvailable},
		},
		Now: t0.Add(time.Minute),
	}
}

func request(name string, created time.Time, phase v1.DeleteBackupRequestPhase) v1.DeleteBackupRequest {
	return v1.DeleteBackupRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: name, CreationTimestamp: metav1.NewTime(created)},
		Spec:       v1.DeleteBackupRequestSpec{BackupName: "nightly"},
		Status:     v1.DeleteBackupRequestStatus{Phase: phase},
	}
}

func restore(name string, phase v1.RestorePhase) v1.Restore {
	return v1.Restore{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: name},
		Spec: v1.RestoreSpec{BackupName: "nightly"}, Status: v1.RestoreStatus{Phase: phase}}
}

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Facts)
		want   Verdict
		reason string
		// in is a piece of the message or of the first of the messages.
		in string
	}{
		{"a completed backup in an available location starts", nil, Start, "", ""},
		{"no backup named", func(f *Facts) { f.Request.Spec.BackupName = "" }, Refuse, "", "spec.backupName: name the backup"},
		{"dry run", func(f *Facts) { f.Request.Spec.DryRun = true }, DryRun, "", ""},
		{"backup not found", func(f *Facts) { f.Backup = nil }, Refuse, "", `backup "nightly" not found`},
		{"location gone", func(f *Facts) { f.Location = nil }, Refuse, "", "which does not exist"},
		{"location read-only", func(f *Facts) {
			f.Location.Spec.AccessMode = v1.BackupStorageLocationAccessModeReadOnly
		}, Refuse, "", "ReadOnly"},
		{"location unavailable", func(f *Facts) {
			f.Location.Status.Phase, f.Location.Status.Message = v1.BackupStorageLocationPhaseUnavailable, "bucket gone"
		}, Wait, WaitLocationUnavailable, "bucket gone"},
		{"location not checked yet", func(f *Facts) { f.Location.Status.Phase = "" }, Wait, WaitLocationUnavailable, "not validated yet"},
		{"backup without location", func(f *Facts) { f.Backup.Spec.StorageLocation, f.Location = "", nil }, Start, "", ""},
		{"backup not started", func(f *Facts) { f.Backup.Status.Phase = "" }, Wait, WaitBackupInProgress, "not started yet"},
		{"backup running", func(f *Facts) { f.Backup.Status.Phase = v1.BackupPhaseInProgress }, Wait, WaitBackupInProgress, "InProgress"},
		{"backup finalizing", func(f *Facts) {
			f.Backup.Status.Phase = v1.BackupPhaseFinalizingPartiallyFailed
		}, Wait, WaitBackupInProgress, "FinalizingPartiallyFailed"},
		{"restore running", func(f *Facts) {
			f.Restores = []v1.Restore{restore("r-done", v1.RestorePhaseCompleted), restore("r-2", v1.RestorePhaseInProgress), restore("r-1", "")}
		}, Wait, WaitRestoreInProgress, "restore r-1, r-2 of the backup"},
		{"another request in progress", func(f *Facts) {
			f.Requests = []v1.DeleteBackupRequest{request("del-0", t0.Add(time.Hour), v1.DeleteBackupRequestPhaseInProgress)}
		}, Follow, WaitOtherRequest, "del-0"},
		{"an older waiting request", func(f *Facts) {
			f.Requests = []v1.DeleteBackupRequest{request("del-0", t0.Add(-time.Second), v1.DeleteBackupRequestPhaseNew)}
		}, Follow, WaitOtherRequest, "del-0"},
		{"a same-second request with a smaller name goes first", func(f *Facts) {
			f.Requests = []v1.DeleteBackupRequest{request("del-0", t0, "")}
		}, Follow, WaitOtherRequest, "del-0"},
		{"a newer waiting request waits for this one", func(f *Facts) {
			f.Requests = []v1.DeleteBackupRequest{request("del-2", t0.Add(time.Second), "")}
		}, Start, "", ""},
		{"dry runs and other backups' requests are not leaders", func(f *Facts) {
			dry := request("del-0", t0.Add(-time.Hour), v1.DeleteBackupRequestPhaseInProgress)
			dry.Spec.DryRun = true
			other := request("del-00", t0.Add(-time.Hour), v1.DeleteBackupRequestPhaseInProgress)
			other.Spec.BackupName = "weekly"
			f.Requests = []v1.DeleteBackupRequest{dry, other}
		}, Start, "", ""},
		{"in progress, next attempt not due", func(f *Facts) {
			f.Request.Status.Phase = v1.DeleteBackupRequestPhaseInProgress
			f.Request.Status.NextAttemptTime = &metav1.Time{Time: f.Now.Add(time.Minute)}
		}, Later, "", ""},
		{"in progress, backup gone", func(f *Facts) {
			f.Request.Status.Phase = v1.DeleteBackupRequestPhaseInProgress
			f.Backup = nil
		}, Gone, "", ""},
		{"in progress, a new backup of the name", func(f *Facts) {
			f.Request.Status.Phase = v1.DeleteBackupRequestPhaseInProgress
			f.Request.Labels = map[string]string{v1.BackupUIDLabel: "uid-0"}
		}, Gone, "", ""},
		{"in progress, a restore started between attempts", func(f *Facts) {
			f.Request.Status.Phase = v1.DeleteBackupRequestPhaseInProgress
			f.Restores = []v1.Restore{restore("r-1", v1.RestorePhaseNew)}
		}, Wait, WaitRestoreInProgress, "r-1"},
		{"in progress, location gone since", func(f *Facts) {
			f.Request.Status.Phase = v1.DeleteBackupRequestPhaseInProgress
			f.Location = nil
		}, Fail, "", `"default" does not exist`},
		{"in progress, location unavailable", func(f *Facts) {
			f.Request.Status.Phase = v1.DeleteBackupRequestPhaseInProgress
			f.Location.Status.Phase = v1.BackupStorageLocationPhaseUnavailable
		}, Wait, WaitLocationUnavailable, "Unavailable"},
		{"in progress, due", func(f *Facts) {
			f.Request.Status.Phase = v1.DeleteBackupRequestPhaseInProgress
			f.Request.Status.NextAttemptTime = &metav1.Time{Time: f.Now.Add(-time.Second)}
		}, Start, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := facts()
			if tc.change != nil {
				tc.change(&f)
			}
			d := Decide(f)
			text := d.Message
			if len(d.Messages) > 0 {
				text = d.Messages[0]
			}
			if d.Verdict != tc.want || d.Reason != tc.reason || !strings.Contains(text, tc.in) {
				t.Errorf("decision %+v; want %s %q with %q", d, tc.want, tc.reason, tc.in)
			}
		})
	}
}

// A scenario is what happens to one request, step by step; the golden file
// holds the decision taken at each step, so a change to any rule shows as
// a change to whole sequences.
type scenario struct {
	name  string
	steps []step
}

type step struct {
	what   string
	change func(*Facts)
}

func inProgress(f *Facts) { f.Request.Status.Phase = v1.DeleteBackupRequestPhaseInProgress }

var scenarios = []scenario{
	{"a deletion asked for before its backup ran", []step{
		{"request made, backup New", func(f *Facts) { f.Backup.Status.Phase = v1.BackupPhaseNew }},
		{"backup runs", func(f *Facts) { f.Backup.Status.Phase = v1.BackupPhaseInProgress }},
		{"backup waits for plugin operations", func(f *Facts) { f.Backup.Status.Phase = v1.BackupPhaseWaitingForPluginOperations }},
		{"backup completes", func(f *Facts) { f.Backup.Status.Phase = v1.BackupPhaseCompleted }},
		{"request in progress", inProgress},
	}},
	{"a deletion that fails, waits out its backoff and a restore, then runs", []step{
		{"request made", nil},
		{"first attempt failed, next one in 30s", func(f *Facts) {
			inProgress(f)
			f.Request.Status.NextAttemptTime = &metav1.Time{Time: f.Now.Add(30 * time.Second)}
		}},
		{"a restore of the backup starts, next attempt due", func(f *Facts) {
			f.Now = f.Now.Add(time.Minute)
			f.Restores = []v1.Restore{restore("r-1", v1.RestorePhaseInProgress)}
		}},
		{"the restore ends", func(f *Facts) { f.Restores[0].Status.Phase = v1.RestorePhaseCompleted }},
		{"the location goes down", func(f *Facts) {
			f.Location.Status.Phase, f.Location.Status.Message = v1.BackupStorageLocationPhaseUnavailable, "timeout"
		}},
		{"the location is made read-only", func(f *Facts) {
			f.Location.Status.Phase, f.Location.Status.Message = v1.BackupStorageLocationPhaseAvailable, ""
			f.Location.Spec.AccessMode = v1.BackupStorageLocationAccessModeReadOnly
		}},
		{"the backup is removed by hand", func(f *Facts) { f.Backup = nil }},
	}},
	{"three requests for one backup", []step{
		{"del-1 arrives after del-0, both New", func(f *Facts) {
			f.Requests = []v1.DeleteBackupRequest{request("del-0", t0.Add(-time.Second), v1.DeleteBackupRequestPhaseNew)}
		}},
		{"del-0 starts", func(f *Facts) { f.Requests[0].Status.Phase = v1.DeleteBackupRequestPhaseInProgress }},
		{"del-1 recorded as del-0's follower", func(f *Facts) { f.Request.Status.HandledBy = "del-0" }},
		{"del-0 ends; del-2 (newer) arrives and del-1 leaves", func(f *Facts) {
			f.Requests[0].Status.Phase = v1.DeleteBackupRequestPhaseProcessed
			f.Request = &v1.DeleteBackupRequest{
				ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: "del-2", CreationTimestamp: metav1.NewTime(t0.Add(time.Hour))},
				Spec:       v1.DeleteBackupRequestSpec{BackupName: "nightly"},
			}
		}},
	}},
}

func TestDecideSequences(t *testing.T) {
	var out strings.Builder
	for _, sc := range scenarios {
		fmt.Fprintf(&out, "== %s\n", sc.name)
		f := facts()
		for _, st := range sc.steps {
			if st.change != nil {
				st.change(&f)
			}
			fmt.Fprintf(&out, "%-55s -> %s\n", st.what, render(Decide(f)))
		}
	}
	golden := filepath.Join("testdata", "decide.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test -run TestDecideSequences -update writes it)", err)
	}
	if got := out.String(); got != string(want) {
		t.Errorf("decisions differ from %s (go test -update rewrites it after a deliberate change):\n%s", golden, got)
	}
}

func render(d Decision) string {
	s := string(d.Verdict)
	switch {
	case d.Leader != "":
		s += " " + d.Leader
	case d.After > 0:
		s += " in " + d.After.String()
	}
	if d.Reason != "" {
		s += " [" + d.Reason + "]"
	}
	if d.Message != "" {
		s += ": " + d.Message
	}
	if len(d.Messages) > 0 {
		s += ": " + strings.Join(d.Messages, "; ")
	}
	return s
}

func TestAfterFailureBacksOffUpToAnHourThenEnds(t *testing.T) {
	var got []time.Duration
	for a := 1; a <= 9; a++ {
		r := AfterFailure(errors.New("boom"), a, 10, 30*time.Second)
		if r.Final || r.Reason != "AttemptFailed" {
			t.Fatalf("attempt %d: %+v, want a retry", a, r)
		}
		got = append(got, r.After)
	}
	want := []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute,
		16 * time.Minute, 32 * time.Minute, time.Hour, time.Hour}
	if !slices.Equal(got, want) {
		t.Errorf("backoff %v, want %v", got, want)
	}
	if r := AfterFailure(errors.New("boom"), 10, 10, time.Second); !r.Final || r.Reason != "AttemptsExhausted" {
		t.Errorf("last attempt: %+v", r)
	}
	idErr := fmt.Errorf("step: %w", &IdentityError{Backup: "nightly"})
	if r := AfterFailure(idErr, 1, 10, time.Second); !r.Final || r.Reason != "NotThisBackupsData" {
		t.Errorf("another backup's data: %+v, want the end at once", r)
	}
}

func TestSkipConsent(t *testing.T) {
	own := facts().Request
	own.Spec.SkipFailedActions = true
	if !SkipConsent(own, nil) {
		t.Error("a request's own consent is not taken")
	}
	leader := facts().Request
	follower := request("del-2", t0, v1.DeleteBackupRequestPhaseNew)
	follower.Status.HandledBy = leader.Name
	if SkipConsent(leader, []v1.DeleteBackupRequest{follower}) {
		t.Error("consent taken from a follower that gives none")
	}
	follower.Spec.SkipFailedActions = true
	if !SkipConsent(leader, []v1.DeleteBackupRequest{follower}) {
		t.Error("a waiting follower's consent is not lent to its leader")
	}
	follower.Status.Phase = v1.DeleteBackupRequestPhaseFailed
	if SkipConsent(leader, []v1.DeleteBackupRequest{follower}) {
		t.Error("a finished follower's consent still counts")
	}
	other := request("del-3", t0, v1.DeleteBackupRequestPhaseNew)
	other.Spec.SkipFailedActions = true
	if SkipConsent(leader, []v1.DeleteBackupRequest{other}) {
		t.Error("consent taken from a request that follows nobody")
	}
}

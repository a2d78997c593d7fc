package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// runWithInput is run with stdin given: without SetIn a command reads the
// test binary's own stdin, which may be a terminal.
func runWithInput(t *testing.T, f *Factory, stdin io.Reader, args ...string) (string, error) {
	t.Helper()
	cmd := newRootCommand(f)
	var out bytes.Buffer
	cmd.SetIn(stdin)
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := cmd.ExecuteContext(ctx)
	return out.String(), err
}

func deletableBackup(name string) *v1.Backup {
	return &v1.Backup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: v1.DefaultNamespace, Finalizers: []string{v1.BackupFinalizer}},
		Spec:       v1.BackupSpec{StorageLocation: "default", VolumeSnapshotLocations: []string{"files"}},
		Status:     v1.BackupStatus{Phase: v1.BackupPhaseCompleted, VolumeSnapshotsAttempted: 2, VolumeSnapshotsCompleted: 2},
	}
}

func TestBackupDeleteWithoutATerminalNeedsConfirm(t *testing.T) {
	c := newFakeBuilder(t, deletableBackup("nightly"), deletableBackup("weekly")).Build()
	f := newTestFactory(c)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// A "yes" on a pipe answers no question anyone saw.
	if _, err := w.WriteString("y\n"); err != nil {
		t.Fatal(err)
	}
	w.Close()
	for _, tc := range []struct {
		args []string
		what string
	}{
		{[]string{"backup", "delete", "nightly"}, "refusing to delete backup nightly without --confirm"},
		{[]string{"backup", "delete", "nightly", "--force"}, "refusing to delete backup nightly without --confirm"},
		{[]string{"backup", "delete", "--all"}, "refusing to delete 2 backups (nightly, weekly) without --confirm"},
	} {
		_, err := runWithInput(t, f, r, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.what) || !strings.Contains(err.Error(), "not a terminal") {
			t.Errorf("%v: error %v, want %q and why", tc.args, err, tc.what)
		}
	}
	var reqs v1.DeleteBackupRequestList
	if err := c.List(context.Background(), &reqs); err != nil || len(reqs.Items) != 0 {
		t.Errorf("deletion requests after refusals: %d (%v)", len(reqs.Items), err)
	}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: v1.DefaultNamespace, Name: "nightly"}, &v1.Backup{}); err != nil {
		t.Errorf("backup after refusals: %v", err)
	}
}

func TestBackupDeleteForceSaysWhatIsLeftBehind(t *testing.T) {
	restore := func(name, backup string) *v1.Restore {
		return &v1.Restore{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: v1.DefaultNamespace}, Spec: v1.RestoreSpec{BackupName: backup}}
	}
	c := newFakeBuilder(t, deletableBackup("nightly"), restore("nightly-2", "nightly"), restore("nightly-1", "nightly"), restore("other", "weekly")).Build()
	out, err := runWithInput(t, newTestFactory(c), strings.NewReader(""), "backup", "delete", "nightly", "--force", "--confirm")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{
		"Backup nightly removed; nothing else was deleted.",
		"its files under backups/nightly/ in storage location default",
		"2 native volume snapshots (in its volume snapshot locations files)",
		"its restores nightly-1, nightly-2 (",
		"no DeleteItemAction ran",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "other") {
		t.Errorf("output names a restore of another backup:\n%s", out)
	}
	err = c.Get(context.Background(), client.ObjectKey{Namespace: v1.DefaultNamespace, Name: "nightly"}, &v1.Backup{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("backup after --force: %v, want it gone", err)
	}
}

// The dry run says, under the pod volume step, which repositories are
// searched for the backup's snapshots nothing records, on lines that are
// not list items (scripts count the step's "- " lines as snapshots).
func TestPrintPlanNamesTheRepositoriesSearchedForUnrecordedSnapshots(t *testing.T) {
	var out bytes.Buffer
	printPlan(&out, "nightly", &v1.DeletionPlan{
		PodVolumeSnapshots:    []string{"shop/k1 (pod db-0, volume data)"},
		PodVolumeRepositories: []string{"namespace shop in location default (backup-uid uid-1)", "namespace crm in location default (backup-uid uid-1)"},
	})
	want := "3. forget 1 pod volume snapshot\n" +
		"     - shop/k1 (pod db-0, volume data)\n" +
		"   then every other pod volume snapshot of the backup (checkpoints of failed uploads, unrecorded ones) in the repository of namespace shop in location default (backup-uid uid-1)\n" +
		"   then every other pod volume snapshot of the backup (checkpoints of failed uploads, unrecorded ones) in the repository of namespace crm in location default (backup-uid uid-1)\n" +
		"4. delete 0 restores\n"
	if !strings.Contains(out.String(), want) {
		t.Errorf("dry run:\n%s\nwant it to hold:\n%s", out.String(), want)
	}
}

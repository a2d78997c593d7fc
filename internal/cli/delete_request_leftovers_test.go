package cli

import (
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// Uploads a killed server left are not keys; a report that removed some
// says so, both in the progress and in the report, rather than showing only
// keys and "Left behind: <none>".
func TestDeleteRequestDescribeCountsUnfinishedUploads(t *testing.T) {
	dbr := &v1.DeleteBackupRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly-x", Namespace: v1.DefaultNamespace},
		Spec:       v1.DeleteBackupRequestSpec{BackupName: "nightly"},
		Status: v1.DeleteBackupRequestStatus{
			Phase: v1.DeleteBackupRequestPhaseProcessed, Attempts: 1,
			Checkpoint:  &v1.DeletionCheckpoint{CompletedSteps: []v1.DeletionStep{v1.DeletionStepBackupData}},
			KeysRemoved: 7, UnfinishedUploadsRemoved: 2,
			Report: &v1.DeletionReport{KeysRemoved: 7, UnfinishedUploadsRemoved: 2},
		},
	}
	c := newFakeBuilder(t, dbr).Build()
	out, err := runWithInput(t, newTestFactory(c), strings.NewReader(""), "delete-request", "describe", "nightly-x")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if n := len(regexp.MustCompile(`(?m)^  Unfinished uploads removed:\s+2$`).FindAllString(out, -1)); n != 2 {
		t.Errorf("want the 2 unfinished uploads in the progress and in the report, found %d lines:\n%s", n, out)
	}
}

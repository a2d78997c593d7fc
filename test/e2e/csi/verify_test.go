package csi

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/snapshotcheck"
	"github.com/lifeboat-io/lifeboat/internal/testutil/clitest"
	"github.com/lifeboat-io/lifeboat/internal/testutil/testenv"
	"github.com/lifeboat-io/lifeboat/internal/volumefiles"
)

// TestVerifyLooksUpCSISnapshots: `backup verify` asks the CSI driver, through
// the real csi-snapshotter, whether each of the backup's snapshots is still
// there: all found, then, with one deleted behind the backup's back, that
// one named missing. The check leaves the snapshots and the cluster as
// they were.
func TestVerifyLooksUpCSISnapshots(t *testing.T) {
	ns := env.NewNamespace(t, "vsnap")
	for _, name := range []string{"a", "b"} {
		writeVolume(t, boundClaim(t, ns, name), "f.txt", name)
	}
	bsl, bucketDir := env.FilesystemLocation(t, env.Name("fs"))
	b := &v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: env.Name("vsnap")},
		Spec: v1.BackupSpec{IncludedNamespaces: []string{ns}, StorageLocation: bsl.Name}}
	env.Create(t, b)
	b = env.WaitBackup(t, b.Name, 3*time.Minute)
	if b.Status.Phase != v1.BackupPhaseCompleted || b.Status.CSIVolumeSnapshotsCompleted != 2 {
		t.Fatalf("backup status %+v", b.Status)
	}
	var handles []string
	for _, in := range volumeInfo(t, bucketDir, b.Name) {
		if in.BackupMethod == volumefiles.CSISnapshot && in.CSISnapshotInfo != nil {
			handles = append(handles, in.CSISnapshotInfo.SnapshotHandle)
		}
	}
	if len(handles) != 2 {
		t.Fatalf("snapshot handles %v", handles)
	}

	out := clitest.Must(t, env.Kubeconfig, "-n", env.Namespace, "backup", "verify", b.Name)
	if !strings.Contains(out, " Verified: ") || !strings.Contains(out, "CSI snapshots: 2 of 2 found") {
		t.Fatalf("verify with both snapshots there:\n%s", out)
	}

	// The driver loses one snapshot.
	gone := handles[0]
	if err := os.RemoveAll(filepath.Join(env.CSI.StateDir, "snapshots", gone)); err != nil {
		t.Fatal(err)
	}
	out, err := clitest.Run(env.Kubeconfig, nil, "-n", env.Namespace, "backup", "verify", b.Name)
	if err == nil || !strings.Contains(out, " SnapshotsMissing: ") || !strings.Contains(out, "CSI snapshots: 1 of 2 found, missing: "+gone) {
		t.Fatalf("verify with a snapshot gone: err %v\n%s", err, out)
	}
	var got v1.Backup
	if err := env.Client.Get(testenv.Ctx(t), client.ObjectKeyFromObject(b), &got); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(got.Status.Conditions, func(c metav1.Condition) bool {
		return c.Type == v1.BackupConditionVerified && c.Status == metav1.ConditionFalse && c.Reason == v1.VerificationSnapshotsMissing
	}) {
		t.Errorf("conditions %+v", got.Status.Conditions)
	}

	// The other snapshot is still in the driver, and no content made for
	// the check is left.
	snaps, err := env.CSI.Snapshots()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(snaps, handles[1]) {
		t.Errorf("the check lost snapshot %s: the driver has %v", handles[1], snaps)
	}
	var contents snapshotv1.VolumeSnapshotContentList
	if err := env.CSI.Client.List(testenv.Ctx(t), &contents, client.HasLabels{snapshotcheck.ProbeLabel}); err != nil {
		t.Fatal(err)
	}
	if len(contents.Items) != 0 {
		t.Errorf("contents made for the check are left: %d", len(contents.Items))
	}
}

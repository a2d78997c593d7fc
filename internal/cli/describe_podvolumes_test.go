package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

func testPVB(name, pod, volume string, phase v1.PodVolumePhase, total, done, incremental int64) *v1.PodVolumeBackup {
	return &v1.PodVolumeBackup{
		ObjectMeta: objMeta(name, map[string]string{v1.BackupNameLabel: "web"}),
		Spec: v1.PodVolumeBackupSpec{Node: "node-1", Volume: volume, UploaderType: "kopia",
			Pod: corev1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: pod}},
		Status: v1.PodVolumeBackupStatus{Phase: phase, SnapshotID: "snap-" + name, IncrementalBytes: incremental,
			Progress: v1.DataMoveOperationProgress{TotalBytes: total, BytesDone: done}},
	}
}

// Velero's status.backupVolumes.podVolumeBackups, key for key, as its
// describePodVolumeBackupsInSF writes it (its tests' expectations).
func TestVeleroPodVolumeBackupsShape(t *testing.T) {
	if got := veleroPodVolumeBackups(nil, true); got != "<none included>" {
		t.Errorf("no PodVolumeBackups: %v", got)
	}
	pvbs := []v1.PodVolumeBackup{
		*testPVB("a", "db-0", "data", v1.PodVolumePhaseCompleted, 4096, 4096, 0),
		*testPVB("b", "db-0", "logs", v1.PodVolumePhaseCompleted, 100, 100, 10),
		*testPVB("c", "web-0", "cache", v1.PodVolumePhaseInProgress, 400, 100, 0),
		*testPVB("d", "web-1", "tmp", v1.PodVolumePhaseFailed, 0, 0, 0),
		*testPVB("e", "web-2", "tmp", "", 0, 0, 0),
	}
	for _, tc := range []struct {
		details bool
		want    string
	}{
		{false, `{"podVolumeBackupsDetails":{"Completed":2,"Failed":1,"In Progress":1,"New":1},"uploderType":"kopia"}`},
		{true, `{"podVolumeBackupsDetails":{` +
			`"Completed":[{"shop/db-0":"data (size: 4096), logs (size: 100, incremental size: 10)"}],` +
			`"Failed":[{"shop/web-1":"tmp"}],"In Progress":[{"shop/web-0":"cache (25.00%)"}],"New":[{"shop/web-2":"tmp"}]},` +
			`"uploderType":"kopia"}`},
	} {
		b, err := json.Marshal(veleroPodVolumeBackups(pvbs, tc.details))
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tc.want {
			t.Errorf("details %v:\n got %s\nwant %s", tc.details, b, tc.want)
		}
	}
}

// backup and restore describe -o json|yaml carry the pod volumes the
// text description shows: Velero's entry in status, and with --details
// one entry per PodVolumeBackup or PodVolumeRestore (the golden file).
func TestDescribeStructuredPodVolumes(t *testing.T) {
	web, _ := sampleBackups()
	pvr := &v1.PodVolumeRestore{
		ObjectMeta: objMeta("r-x1", map[string]string{v1.RestoreNameLabel: "r"}),
		Spec: v1.PodVolumeRestoreSpec{Volume: "data", UploaderType: "kopia", SnapshotID: "snap-a", SourceNamespace: "shop",
			Pod: corev1.ObjectReference{Kind: "Pod", Namespace: "shop2", Name: "db-0"}},
		Status: v1.PodVolumeRestoreStatus{Phase: v1.PodVolumePhaseCompleted, Node: "node-1", Progress: v1.DataMoveOperationProgress{TotalBytes: 4096, BytesDone: 4096}},
	}
	other := &v1.PodVolumeRestore{ObjectMeta: objMeta("other-x", map[string]string{v1.RestoreNameLabel: "other"})}
	rs := &v1.Restore{ObjectMeta: objMeta("r", nil), Spec: v1.RestoreSpec{BackupName: "web"}, Status: v1.RestoreStatus{Phase: v1.RestorePhaseCompleted}}
	plain := &v1.Restore{ObjectMeta: objMeta("plain", nil), Spec: v1.RestoreSpec{BackupName: "web"}, Status: v1.RestoreStatus{Phase: v1.RestorePhaseCompleted}}
	c := newFakeBuilder(t, web, rs, plain, pvr, other,
		testPVB("web-a", "db-0", "data", v1.PodVolumePhaseCompleted, 4096, 4096, 512),
		testPVB("web-b", "db-0", "logs", v1.PodVolumePhaseFailed, 0, 0, 0)).WithInterceptorFuncs(serveDownloads(fileStore(t.TempDir()))).Build()
	f := newTestFactory(c)

	// Without --details: Velero's counts, no per-volume entries.
	out, _, err := run(t, f, "backup", "describe", "web", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var b map[string]any
	if err := json.Unmarshal([]byte(out), &b); err != nil {
		t.Fatal(err)
	}
	status, _ := b["status"].(map[string]any)
	vols, _ := status["backupVolumes"].(map[string]any)
	pv, _ := vols["podVolumeBackups"].(map[string]any)
	details, _ := pv["podVolumeBackupsDetails"].(map[string]any)
	if pv["uploderType"] != "kopia" || details["Completed"] != 1.0 || details["Failed"] != 1.0 || b["podVolumeBackups"] != nil || status["phase"] != "Completed" {
		t.Errorf("backup describe -o json without --details:\n%s", out)
	}

	var got strings.Builder
	for _, args := range [][]string{
		{"backup", "describe", "web", "--details", "-o", "yaml"},
		{"restore", "describe", "r", "--details", "-o", "yaml"},
		{"restore", "describe", "plain", "-o", "yaml"},
	} {
		out, _, err := run(t, f, args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		// Only the pod volume parts: the rest has golden tests of its own.
		var m map[string]any
		if err := yaml.Unmarshal([]byte(out), &m); err != nil {
			t.Fatal(err)
		}
		st, _ := m["status"].(map[string]any)
		part := map[string]any{
			"status.backupVolumes":     st["backupVolumes"],
			"status.podVolumeRestores": st["podVolumeRestores"],
			"podVolumeBackups":         m["podVolumeBackups"],
			"podVolumeRestores":        m["podVolumeRestores"],
		}
		y, err := yaml.Marshal(part)
		if err != nil {
			t.Fatal(err)
		}
		got.WriteString("# " + strings.Join(args, " ") + "\n" + string(y))
	}
	golden := filepath.Join("testdata", "describe-podvolumes.golden.yaml")
	if os.Getenv("UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(golden, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != string(want) {
		t.Errorf("pod volumes in describe -o yaml:\n%s\nwant (%s):\n%s", got.String(), golden, want)
	}
}

package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// describe -o json is a structured description: the text description's
// content as data, not the bare object (that is `get -o json`).
func TestDescribeStructured(t *testing.T) {
	dir := t.TempDir()
	writeGzip(t, dir, "web-resource-list.json.gz", []byte(`{"v1/ConfigMap":["shop/settings"]}`))
	web, _ := sampleBackups()
	req := v1.NewDeleteBackupRequest(web)
	req.Name = "web-del"
	req.Status.Phase = v1.DeleteBackupRequestPhaseInProgress
	req.Status.Attempts = 2
	s := &v1.Schedule{ObjectMeta: objMeta("nightly", nil), Spec: v1.ScheduleSpec{Schedule: "0 3 * * *"}}
	rs := &v1.Restore{ObjectMeta: objMeta("r", nil), Spec: v1.RestoreSpec{BackupName: "web"}, Status: v1.RestoreStatus{Phase: v1.RestorePhaseCompleted}}
	c := newFakeBuilder(t, web, req, s, rs).WithInterceptorFuncs(serveDownloads(fileStore(dir))).Build()
	f := newTestFactory(c)

	out, _, err := run(t, f, "backup", "describe", "web", "--details", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var b map[string]any
	if err := json.Unmarshal([]byte(out), &b); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	meta, _ := b["metadata"].(map[string]any)
	status, _ := b["status"].(map[string]any)
	spec, _ := b["spec"].(map[string]any)
	list, _ := b["resourceList"].(map[string]any)
	dels, _ := b["deleteBackupRequests"].([]any)
	if b["kind"] != "BackupDescription" || meta["name"] != "web" || b["phase"] != "Completed" || spec["storageLocation"] != "default" ||
		status["formatVersion"] != "1.1.0" || list["v1/ConfigMap"] == nil || len(dels) != 1 || b["volumesError"] == nil {
		t.Errorf("backup description:\n%s", out)
	}
	if d, _ := dels[0].(map[string]any); d["name"] != "web-del" || d["phase"] != "InProgress" {
		t.Errorf("deletion: %v", dels[0])
	}
	// Without --details, nothing is downloaded and the fields are absent.
	out, _, err = run(t, f, "backup", "describe", "web", "-o", "json")
	if err != nil || strings.Contains(out, "resourceList") {
		t.Errorf("without --details: %v\n%s", err, out)
	}

	out, _, err = run(t, f, "schedule", "describe", "nightly", "-o", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	var sd scheduleDescription
	if err := yaml.Unmarshal([]byte(out), &sd); err != nil {
		t.Fatal(err)
	}
	if sd.Kind != "ScheduleDescription" || sd.Spec.Schedule != "0 3 * * *" || (sd.NextBackup == nil && !sd.Due) {
		t.Errorf("schedule description:\n%s", out)
	}

	out, _, err = run(t, f, "restore", "describe", "r", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var rd restoreDescription
	if err := json.Unmarshal([]byte(out), &rd); err != nil {
		t.Fatal(err)
	}
	if rd.Kind != "RestoreDescription" || rd.Spec.BackupName != "web" || rd.Phase != v1.RestorePhaseCompleted {
		t.Errorf("restore description:\n%s", out)
	}
	assertNoDownloadRequests(t, c)
}

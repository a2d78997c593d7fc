package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// printed runs a create command with -o json and decodes what it printed.
func printed[T any](t *testing.T, f *Factory, args ...string) *T {
	t.Helper()
	out, _, err := run(t, f, append(args, "-o", "json")...)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	v := new(T)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out)
	}
	return v
}

func TestBackupCreateVeleroFilterAndTimeoutFlags(t *testing.T) {
	f := newTestFactory(nil)
	for _, verb := range [][]string{{"backup", "create", "b"}, {"schedule", "create", "s", "--schedule", "@daily"}} {
		args := append(append([]string{}, verb...),
			"--include-cluster-scoped-resources", "storageclasses.storage.k8s.io,persistentvolumes",
			"--exclude-cluster-scoped-resources", "nodes",
			"--include-namespace-scoped-resources", "deployments.apps,configmaps",
			"--exclude-namespace-scoped-resources", "secrets",
			"--csi-snapshot-timeout", "20m", "--item-operation-timeout", "2h")
		want := v1.BackupSpec{
			IncludedClusterScopedResources:   []string{"storageclasses.storage.k8s.io", "persistentvolumes"},
			ExcludedClusterScopedResources:   []string{"nodes"},
			IncludedNamespaceScopedResources: []string{"deployments.apps", "configmaps"},
			ExcludedNamespaceScopedResources: []string{"secrets"},
			CSISnapshotTimeout:               metav1.Duration{Duration: 20 * time.Minute},
			ItemOperationTimeout:             metav1.Duration{Duration: 2 * time.Hour},
		}
		var got v1.BackupSpec
		if verb[0] == "backup" {
			got = printed[v1.Backup](t, f, args...).Spec
		} else {
			got = printed[v1.Schedule](t, f, args...).Spec.Template
		}
		if !equalJSON(t, got, want) {
			t.Errorf("%s create: spec %+v, want %+v", verb[0], got, want)
		}
		// Old and new filters together are refused, as in Velero.
		_, _, err := run(t, f, append(append([]string{}, verb...), "--include-resources", "pods", "--exclude-namespace-scoped-resources", "secrets", "-o", "json")...)
		if err == nil || !strings.Contains(err.Error(), "cannot be combined") {
			t.Errorf("%s create with old and new filters: %v", verb[0], err)
		}
	}
	rs := printed[v1.Restore](t, f, "restore", "create", "--from-backup", "b", "--item-operation-timeout", "90m")
	if rs.Spec.ItemOperationTimeout.Duration != 90*time.Minute {
		t.Errorf("restore --item-operation-timeout: %v", rs.Spec.ItemOperationTimeout)
	}
}

func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	ja, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(ja) == string(jb)
}

func TestBackupCreateFromSchedule(t *testing.T) {
	s := &v1.Schedule{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: v1.DefaultNamespace, UID: "uid-1",
			Labels: map[string]string{"team": "shop"}, Annotations: map[string]string{"note": "n"}},
		Spec: v1.ScheduleSpec{
			Schedule:                   "@daily",
			UseOwnerReferencesInBackup: ptr.To(true),
			Template: v1.BackupSpec{IncludedNamespaces: []string{"shop"}, StorageLocation: "default",
				TTL: metav1.Duration{Duration: time.Hour}},
		},
	}
	c := newFakeBuilder(t, s, location("default")).Build()
	f := newTestFactory(c)

	b := printed[v1.Backup](t, f, "backup", "create", "--from-schedule", "nightly", "--include-namespaces", "ignored")
	if b.Name != "nightly-20260301120000" {
		t.Errorf("name %q, want the schedule's name and the time", b.Name)
	}
	if !equalJSON(t, b.Spec, s.Spec.Template) {
		t.Errorf("spec %+v, want the template", b.Spec)
	}
	if b.Labels["team"] != "shop" || b.Labels[v1.ScheduleNameLabel] != "nightly" || b.Labels[v1.StorageLocationLabel] != "default" || b.Annotations["note"] != "n" {
		t.Errorf("metadata %+v", b.ObjectMeta)
	}
	if len(b.OwnerReferences) != 1 || b.OwnerReferences[0].UID != "uid-1" || b.OwnerReferences[0].Kind != "Schedule" {
		t.Errorf("owner %+v", b.OwnerReferences)
	}

	out, _, err := run(t, f, "backup", "create", "manual", "--from-schedule", "nightly")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "Creating backup from schedule nightly, all other filters are ignored.") || !strings.Contains(out, `Backup request "manual" submitted successfully.`) {
		t.Errorf("output:\n%s", out)
	}
	if !exists(t, c, &v1.Backup{}, "manual") {
		t.Error("backup not created")
	}

	for _, args := range [][]string{{"--from-schedule", "nosuch"}, {"--from-schedule", " "}, {}} {
		_, _, err := run(t, f, append([]string{"backup", "create"}, args...)...)
		if err == nil {
			t.Errorf("backup create %v: no error", args)
		}
	}
}

// Velero's flags for fields the server refuses (or that only Velero's
// file-system paths use) write the same spec fields Velero's CLI writes.
func TestVeleroOnlyFlagsWriteVelerosFields(t *testing.T) {
	f := newTestFactory(nil)
	b := printed[v1.Backup](t, f, "backup", "create", "b", "--annotations", "a=1", "--ordered-resources", "pods=ns/p1,ns/p2;persistentvolumes=pv1",
		"--snapshot-move-data", "--data-mover", "velero", "--parallel-files-upload", "4")
	if b.Annotations["a"] != "1" || b.Spec.OrderedResources["pods"] != "ns/p1,ns/p2" || b.Spec.OrderedResources["persistentvolumes"] != "pv1" ||
		b.Spec.SnapshotMoveData == nil || !*b.Spec.SnapshotMoveData || b.Spec.DataMover != "velero" || b.Spec.UploaderConfig == nil ||
		b.Spec.UploaderConfig.ParallelFilesUpload != 4 {
		t.Errorf("backup %+v", b)
	}
	if _, _, err := run(t, f, "backup", "create", "b", "--ordered-resources", "pods", "-o", "json"); err == nil || !strings.Contains(err.Error(), "--ordered-resources") {
		t.Errorf("bad --ordered-resources: %v", err)
	}
	s := printed[v1.Schedule](t, f, "schedule", "create", "s", "--schedule", "@daily", "--annotations", "a=1")
	if s.Annotations["a"] != "1" {
		t.Errorf("schedule annotations %v", s.Annotations)
	}
	rs := printed[v1.Restore](t, f, "restore", "create", "--from-backup", "b", "--annotations", "a=1", "--resource-policies-configmap", "pol",
		"--resource-modifier-configmap", "mod", "--status-include-resources", "widgets.example.com", "--status-exclude-resources", "pods",
		"--write-sparse-files", "--parallel-files-download", "3")
	if rs.Annotations["a"] != "1" || rs.Spec.ResourcePolicy == nil || rs.Spec.ResourcePolicy.Name != "pol" || rs.Spec.ResourceModifier == nil ||
		rs.Spec.ResourceModifier.Kind != "configmap" || rs.Spec.ResourceModifier.Name != "mod" || rs.Spec.RestoreStatus == nil ||
		rs.Spec.RestoreStatus.IncludedResources[0] != "widgets.example.com" || rs.Spec.RestoreStatus.ExcludedResources[0] != "pods" ||
		rs.Spec.UploaderConfig == nil || rs.Spec.UploaderConfig.ParallelFilesDownload != 3 || !*rs.Spec.UploaderConfig.WriteSparseFiles {
		t.Errorf("restore %+v", rs)
	}
	// Without those flags, none of the fields is set.
	plain := printed[v1.Restore](t, f, "restore", "create", "--from-backup", "b")
	if plain.Spec.UploaderConfig != nil || plain.Spec.RestoreStatus != nil || plain.Spec.ResourceModifier != nil || plain.Annotations != nil {
		t.Errorf("plain restore %+v", plain.Spec)
	}
}

// --allow-partially-failed picks the newest Completed or PartiallyFailed
// backup of the schedule on the client, as Velero's CLI does.
func TestRestoreAllowPartiallyFailed(t *testing.T) {
	mk := func(name string, phase v1.BackupPhase, age time.Duration) *v1.Backup {
		b := &v1.Backup{ObjectMeta: objMeta(name, map[string]string{v1.ScheduleNameLabel: "nightly"})}
		b.Status.Phase = phase
		b.Status.StartTimestamp = timePtr(testNow.Add(-age))
		return b
	}
	c := newFakeBuilder(t, mk("old", v1.BackupPhaseCompleted, 3*time.Hour), mk("newer", v1.BackupPhasePartiallyFailed, 2*time.Hour),
		mk("newest", v1.BackupPhaseFailed, time.Hour)).Build()
	if _, _, err := run(t, newTestFactory(c), "restore", "create", "r", "--from-schedule", "nightly", "--allow-partially-failed"); err != nil {
		t.Fatal(err)
	}
	rs := &v1.Restore{}
	if !exists(t, c, rs, "r") || rs.Spec.BackupName != "newer" || rs.Spec.ScheduleName != "" {
		t.Errorf("restore spec %+v, want backup newer", rs.Spec)
	}
}

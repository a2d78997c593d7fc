package cli

import (
	"encoding/json"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// sampleBackups are a finished backup and one the server has not seen yet.
func sampleBackups() (*v1.Backup, *v1.Backup) {
	started := testNow.Add(-2 * time.Hour)
	web := &v1.Backup{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web", Namespace: "velero",
			Labels:            map[string]string{v1.StorageLocationLabel: "default"},
			CreationTimestamp: metav1.NewTime(started),
		},
		Spec: v1.BackupSpec{
			IncludedNamespaces: []string{"shop"},
			LabelSelector:      &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			StorageLocation:    "default",
			TTL:                metav1.Duration{Duration: 720 * time.Hour},
		},
		Status: v1.BackupStatus{
			Phase:               v1.BackupPhaseCompleted,
			FormatVersion:       "1.1.0",
			StartTimestamp:      timePtr(started),
			CompletionTimestamp: timePtr(started.Add(90 * time.Second)),
			Expiration:          timePtr(started.Add(720 * time.Hour)),
			Progress:            &v1.BackupProgress{TotalItems: 10, ItemsBackedUp: 10},
			Warnings:            1,
			Conditions: []metav1.Condition{{
				Type: "Completed", Status: metav1.ConditionTrue, Reason: "BackupCompleted",
				LastTransitionTime: metav1.NewTime(started.Add(90 * time.Second)), Message: "10 items",
			}},
		},
	}
	fresh := &v1.Backup{
		ObjectMeta: metav1.ObjectMeta{
			Name: "db", Namespace: "velero",
			CreationTimestamp: metav1.NewTime(testNow.Add(-time.Minute)),
		},
	}
	return web, fresh
}

func TestBackupGetTable(t *testing.T) {
	web, fresh := sampleBackups()
	c := newFakeBuilder(t, web, fresh).Build()
	out, _, err := run(t, newTestFactory(c), "backup", "get")
	if err != nil {
		t.Fatal(err)
	}
	want := "" +
		"NAME   STATUS      ERRORS   WARNINGS   CREATED                         EXPIRES   STORAGE LOCATION   SELECTOR\n" +
		"db     New         0        0          2026-03-01 11:59:00 +0000 UTC   n/a                          <none>\n" +
		"web    Completed   0        1          2026-03-01 10:00:00 +0000 UTC   29d       default            app=web\n"
	if out != want {
		t.Errorf("table:\n%s\nwant:\n%s", out, want)
	}
}

func TestBackupGetEmpty(t *testing.T) {
	c := newFakeBuilder(t).Build()
	out, errOut, err := run(t, newTestFactory(c), "backup", "get")
	if err != nil {
		t.Fatal(err)
	}
	if out != "" || !strings.Contains(errOut, `No backups found in namespace "velero"`) {
		t.Errorf("stdout %q, stderr %q", out, errOut)
	}
}

func TestBackupGetSelector(t *testing.T) {
	web, fresh := sampleBackups()
	c := newFakeBuilder(t, web, fresh).Build()
	out, _, err := run(t, newTestFactory(c), "backup", "get", "-l", v1.StorageLocationLabel+"=default")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "web") || strings.Contains(out, "db ") {
		t.Errorf("selector did not filter:\n%s", out)
	}
	if _, _, err := run(t, newTestFactory(c), "backup", "get", "-l", "a in (b"); err == nil || !strings.Contains(err.Error(), "--selector") {
		t.Errorf("bad selector error = %v, want it to name --selector", err)
	}
}

func TestBackupGetEncoded(t *testing.T) {
	web, fresh := sampleBackups()
	c := newFakeBuilder(t, web, fresh).Build()
	f := newTestFactory(c)

	out, _, err := run(t, f, "backup", "get", "web", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var one v1.Backup
	if err := json.Unmarshal([]byte(out), &one); err != nil {
		t.Fatal(err)
	}
	if one.APIVersion != "velero.io/v1" || one.Kind != "Backup" || one.Name != "web" || one.Status.Phase != v1.BackupPhaseCompleted {
		t.Errorf("single backup printed as %s/%s %s %s", one.APIVersion, one.Kind, one.Name, one.Status.Phase)
	}
	if len(one.ManagedFields) > 0 {
		t.Error("managed fields are printed")
	}

	out, _, err = run(t, f, "backup", "get", "-o", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	var list v1.BackupList
	if err := yaml.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	if list.APIVersion != "velero.io/v1" || list.Kind != "BackupList" || len(list.Items) != 2 {
		t.Fatalf("list printed as %s/%s with %d items", list.APIVersion, list.Kind, len(list.Items))
	}
	for _, item := range list.Items {
		if item.APIVersion != "velero.io/v1" || item.Kind != "Backup" {
			t.Errorf("item %s printed as %s/%s", item.Name, item.APIVersion, item.Kind)
		}
	}
}

func TestBackupGetNotFound(t *testing.T) {
	web, _ := sampleBackups()
	c := newFakeBuilder(t, web).Build()
	for _, verb := range []string{"get", "describe", "logs", "download"} {
		_, _, err := run(t, newTestFactory(c), "backup", verb, "nope")
		if err == nil || !strings.Contains(err.Error(), `backup "nope" not found in namespace "velero"`) {
			t.Errorf("backup %s nope: error = %v, want it to name the backup", verb, err)
		}
	}
}

// squeeze collapses the alignment padding so tests check content, not columns.
var spaces = regexp.MustCompile(` {2,}`)

func squeeze(s string) string { return spaces.ReplaceAllString(s, " ") }

func TestBackupDescribe(t *testing.T) {
	web, _ := sampleBackups()
	web.Status.Phase = v1.BackupPhasePartiallyFailed
	web.Status.Errors = 2
	c := newFakeBuilder(t, web).Build()
	out, _, err := run(t, newTestFactory(c), "backup", "describe", "web")
	if err != nil {
		t.Fatal(err)
	}
	got := squeeze(out)
	for _, want := range []string{
		"Name: web\n",
		"Namespace: velero\n",
		"Labels: velero.io/storage-location=default\n",
		"Phase: PartiallyFailed (run `lifeboat backup logs web` for more information)\n",
		"Errors: 2\nWarnings: 1\n",
		"Namespaces:\n Included: shop\n Excluded: <none>\n",
		" Cluster-scoped: auto\n",
		"Label selector: app=web\n",
		"Or label selector: <none>\n",
		"Storage Location: default\n",
		"TTL: 720h0m0s\n",
		"Backup Format Version: 1.1.0\n",
		"Started: 2026-03-01 10:00:00 +0000 UTC\n",
		"Completed: 2026-03-01 10:01:30 +0000 UTC\n",
		"Expiration: 2026-03-31 10:00:00 +0000 UTC\n",
		"Total items to be backed up: 10\nItems backed up: 10\n",
		" Completed True BackupCompleted 2026-03-01 10:01:30 +0000 UTC 10 items\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("description lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Resource List") {
		t.Error("resource list shown without --details")
	}
}

func TestBackupDescribeValidationErrors(t *testing.T) {
	b := &v1.Backup{
		ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: "velero"},
		Status: v1.BackupStatus{Phase: v1.BackupPhaseFailedValidation,
			ValidationErrors: []string{"spec.datamover is not supported by Lifeboat yet"}},
	}
	c := newFakeBuilder(t, b).Build()
	out, _, err := run(t, newTestFactory(c), "backup", "describe", "bad")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(squeeze(out), "Validation errors:\n - spec.datamover is not supported by Lifeboat yet\n") {
		t.Errorf("validation errors not described:\n%s", out)
	}
}

func TestBackupDescribeDetails(t *testing.T) {
	dir := t.TempDir()
	listFile := writeGzip(t, dir, "web-resource-list.json.gz",
		[]byte(`{"v1/ConfigMap":["shop/settings","shop/flags"],"apps/v1/Deployment":["shop/web"],"v1/Namespace":["shop"]}`))
	web, _ := sampleBackups()
	c := newFakeBuilder(t, web).WithInterceptorFuncs(serveDownloads(func(target v1.DownloadTarget) string {
		if target.Kind != v1.DownloadTargetKindBackupResourceList || target.Name != "web" {
			return "file:///nonexistent"
		}
		return (&url.URL{Scheme: "file", Path: listFile}).String()
	})).Build()
	out, _, err := run(t, newTestFactory(c), "backup", "describe", "web", "--details")
	if err != nil {
		t.Fatal(err)
	}
	want := "Resource List:\n" +
		" apps/v1/Deployment:\n - shop/web\n" +
		" v1/ConfigMap:\n - shop/settings\n - shop/flags\n" +
		" v1/Namespace:\n - shop\n"
	if !strings.Contains(squeeze(out), want) {
		t.Errorf("resource list not described; want\n%s\nin:\n%s", want, out)
	}
	assertNoDownloadRequests(t, c)
}

func TestBackupDescribeDetailsMissingList(t *testing.T) {
	web, _ := sampleBackups()
	missing := filepath.Join(t.TempDir(), "absent.json.gz")
	c := newFakeBuilder(t, web).WithInterceptorFuncs(serveDownloads(func(v1.DownloadTarget) string {
		return "file://" + missing
	})).Build()
	out, _, err := run(t, newTestFactory(c), "backup", "describe", "web", "--details")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(squeeze(out), "Resource List: <backup resource list not found>") {
		t.Errorf("missing list not reported:\n%s", out)
	}
}

func TestBackupDescribeEncoded(t *testing.T) {
	web, fresh := sampleBackups()
	c := newFakeBuilder(t, web, fresh).Build()
	out, _, err := run(t, newTestFactory(c), "backup", "describe", "web", "db", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var list []backupDescription
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Metadata.Name != "web" || list[1].Kind != "BackupDescription" {
		t.Errorf("describe -o json of two backups printed %s", out)
	}
}

package cli

import (
	"encoding/json"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/storage"
)

// sampleRestores are a restore that finished with problems and one the
// server has not picked up yet.
func sampleRestores() (*v1.Restore, *v1.Restore) {
	started := testNow.Add(-time.Hour)
	done := &v1.Restore{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-copy", Namespace: "velero",
			Labels:            map[string]string{v1.BackupNameLabel: "web"},
			CreationTimestamp: metav1.NewTime(started.Add(-time.Second)),
		},
		Spec: v1.RestoreSpec{
			BackupName:             "web",
			IncludedNamespaces:     []string{"shop"},
			NamespaceMapping:       map[string]string{"shop": "shop-copy", "blog": "blog-2"},
			LabelSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			RestorePVs:             ptr.To(false),
			ExistingResourcePolicy: v1.PolicyTypeUpdate,
		},
		Status: v1.RestoreStatus{
			Phase:               v1.RestorePhasePartiallyFailed,
			StartTimestamp:      timePtr(started),
			CompletionTimestamp: timePtr(started.Add(30 * time.Second)),
			Progress:            &v1.RestoreProgress{TotalItems: 12, ItemsRestored: 11},
			Errors:              1,
			Warnings:            2,
			Conditions: []metav1.Condition{{
				Type: "Completed", Status: metav1.ConditionTrue, Reason: "PartiallyFailed",
				LastTransitionTime: metav1.NewTime(started.Add(30 * time.Second)),
			}},
		},
	}
	fresh := &v1.Restore{
		ObjectMeta: metav1.ObjectMeta{
			Name: "db-20260301115900", Namespace: "velero",
			CreationTimestamp: metav1.NewTime(testNow.Add(-time.Minute)),
		},
		Spec: v1.RestoreSpec{BackupName: "db"},
	}
	return done, fresh
}

// restoreFileStore serves a restore's files from dir under the names the
// store gives them.
func restoreFileStore(dir string) func(v1.DownloadTarget) string {
	return func(target v1.DownloadTarget) string {
		var name string
		switch target.Kind {
		case v1.DownloadTargetKindRestoreLog:
			name = storage.RestoreLogFile(target.Name)
		case v1.DownloadTargetKindRestoreResults:
			name = storage.RestoreResultsFile(target.Name)
		case v1.DownloadTargetKindRestoreResourceList:
			name = storage.RestoreResourceListFile(target.Name)
		case v1.DownloadTargetKindRestoreVolumeInfo:
			name = storage.RestoreVolumeInfoFile(target.Name)
		default:
			name = "not-a-restore-file"
		}
		return (&url.URL{Scheme: "file", Path: filepath.Join(dir, name)}).String()
	}
}

func TestRestoreGetTable(t *testing.T) {
	done, fresh := sampleRestores()
	c := newFakeBuilder(t, done, fresh).Build()
	out, _, err := run(t, newTestFactory(c), "restore", "get")
	if err != nil {
		t.Fatal(err)
	}
	want := "" +
		"NAME                BACKUP   STATUS            STARTED                         COMPLETED                       ERRORS   WARNINGS   CREATED                         SELECTOR\n" +
		"db-20260301115900   db       New               <n/a>                           <n/a>                           0        0          2026-03-01 11:59:00 +0000 UTC   <none>\n" +
		"web-copy            web      PartiallyFailed   2026-03-01 11:00:00 +0000 UTC   2026-03-01 11:00:30 +0000 UTC   1        2          2026-03-01 10:59:59 +0000 UTC   app=web\n"
	if out != want {
		t.Errorf("table:\n%s\nwant:\n%s", out, want)
	}
}

func TestRestoreGetEmptyAndSelector(t *testing.T) {
	c := newFakeBuilder(t).Build()
	out, errOut, err := run(t, newTestFactory(c), "restore", "get")
	if err != nil {
		t.Fatal(err)
	}
	if out != "" || !strings.Contains(errOut, `No restores found in namespace "velero"`) {
		t.Errorf("stdout %q, stderr %q", out, errOut)
	}

	done, fresh := sampleRestores()
	c = newFakeBuilder(t, done, fresh).Build()
	out, _, err = run(t, newTestFactory(c), "restore", "get", "-l", v1.BackupNameLabel+"=web")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "web-copy") || strings.Contains(out, "db-2026") {
		t.Errorf("selector did not filter:\n%s", out)
	}
	if _, _, err := run(t, newTestFactory(c), "restore", "get", "-l", "a in (b"); err == nil || !strings.Contains(err.Error(), "--selector") {
		t.Errorf("bad selector error = %v, want it to name --selector", err)
	}
	if _, _, err := run(t, newTestFactory(c), "restore", "get", "web-copy", "-l", "a=b"); err == nil || !strings.Contains(err.Error(), "--selector") {
		t.Errorf("names with a selector: error = %v, want a refusal", err)
	}
}

func TestRestoreGetEncoded(t *testing.T) {
	done, fresh := sampleRestores()
	c := newFakeBuilder(t, done, fresh).Build()
	out, _, err := run(t, newTestFactory(c), "restore", "get", "web-copy", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var one v1.Restore
	if err := json.Unmarshal([]byte(out), &one); err != nil {
		t.Fatal(err)
	}
	if one.APIVersion != "velero.io/v1" || one.Kind != "Restore" || one.Name != "web-copy" || one.Status.Phase != v1.RestorePhasePartiallyFailed {
		t.Errorf("single restore printed as %s/%s %s %s", one.APIVersion, one.Kind, one.Name, one.Status.Phase)
	}
	out, _, err = run(t, newTestFactory(c), "restore", "get", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var list v1.RestoreList
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	if list.Kind != "RestoreList" || len(list.Items) != 2 || list.Items[0].Kind != "Restore" {
		t.Errorf("list printed as %s with %d items", list.Kind, len(list.Items))
	}
}

func TestRestoreNotFound(t *testing.T) {
	done, _ := sampleRestores()
	c := newFakeBuilder(t, done).Build()
	for _, verb := range []string{"get", "describe", "logs"} {
		_, _, err := run(t, newTestFactory(c), "restore", verb, "nope")
		if err == nil || !strings.Contains(err.Error(), `restore "nope" not found in namespace "velero"`) {
			t.Errorf("restore %s nope: error = %v, want it to name the restore", verb, err)
		}
	}
}

func TestRestoreDescribe(t *testing.T) {
	done, _ := sampleRestores()
	c := newFakeBuilder(t, done).Build()
	out, _, err := run(t, newTestFactory(c), "restore", "describe", "web-copy")
	if err != nil {
		t.Fatal(err)
	}
	got := squeeze(out)
	for _, want := range []string{
		"Name: web-copy\n",
		"Namespace: velero\n",
		"Labels: velero.io/backup-name=web\n",
		"Phase: PartiallyFailed (run `lifeboat restore logs web-copy` for more information)\n",
		"Total items to be restored: 12\nItems restored: 11\n",
		"Started: 2026-03-01 11:00:00 +0000 UTC\nCompleted: 2026-03-01 11:00:30 +0000 UTC\n",
		"Errors: 1\nWarnings: 2\n",
		"Backup: web\n",
		"Namespaces:\n Included: shop\n Excluded: <none>\n",
		"Resources:\n Included: *\n Excluded: <none>\n Cluster-scoped: auto\n",
		"Namespace mappings: blog:blog-2,shop:shop-copy\n",
		"Label selector: app=web\nOr label selector: <none>\n",
		"Restore PVs: false\n",
		"Existing resource policy: update\n",
		"Preserve Service NodePorts: auto\n",
		" Completed True PartiallyFailed 2026-03-01 11:00:30 +0000 UTC <none>\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("description lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Resource List") || strings.Contains(out, "Namespaces:\n shop") {
		t.Errorf("details shown without --details:\n%s", out)
	}
}

// The restore's resource policy is named, as backup describe names its.
func TestRestoreDescribeResourcePolicy(t *testing.T) {
	done, _ := sampleRestores()
	done.Spec.ResourcePolicy = &corev1.TypedLocalObjectReference{Kind: "configmap", Name: "restore-filters"}
	c := newFakeBuilder(t, done).Build()
	out, _, err := run(t, newTestFactory(c), "restore", "describe", "web-copy")
	if err != nil {
		t.Fatal(err)
	}
	if got := squeeze(out); !strings.Contains(got, "Or label selector: <none>\nResource policies: configmap restore-filters\n") {
		t.Errorf("description lacks the resource policy:\n%s", out)
	}
}

func TestRestoreDescribeNewAndInvalid(t *testing.T) {
	_, fresh := sampleRestores()
	bad := &v1.Restore{
		ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: "velero"},
		Spec:       v1.RestoreSpec{ScheduleName: "nightly"},
		Status: v1.RestoreStatus{Phase: v1.RestorePhaseFailedValidation,
			ValidationErrors: []string{`spec.scheduleName: schedule "nightly" has no Completed backup`}},
	}
	c := newFakeBuilder(t, fresh, bad).Build()
	out, _, err := run(t, newTestFactory(c), "restore", "describe", "db-20260301115900", "bad")
	if err != nil {
		t.Fatal(err)
	}
	got := squeeze(out)
	for _, want := range []string{
		"Phase: New\n",
		"Started: <n/a>\n",
		"Namespaces:\n Included: all namespaces found in the backup\n",
		"Name: bad\n",
		"Phase: FailedValidation\n",
		"Validation errors:\n - spec.scheduleName: schedule \"nightly\" has no Completed backup\n",
		"Backup: <none>\nSchedule: nightly\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("description lacks %q:\n%s", want, out)
		}
	}
}

func TestRestoreDescribeDetails(t *testing.T) {
	dir := t.TempDir()
	writeGzip(t, dir, storage.RestoreResultsFile("web-copy"), []byte(`{
		"errors": {"namespaces": {"shop-copy": ["error restoring deployments.apps/shop-copy/web: admission webhook denied the request"]}},
		"warnings": {"cluster": ["could not restore namespaces/shop-copy: already exists"],
		             "namespaces": {"shop-copy": ["configmaps/shop-copy/settings exists and differs; kept (existingResourcePolicy none)"]}}
	}`))
	writeGzip(t, dir, storage.RestoreResourceListFile("web-copy"),
		[]byte(`{"v1/ConfigMap":["shop-copy/settings(skipped)","shop-copy/flags(created)"],"apps/v1/Deployment":["shop-copy/web(failed)"]}`))
	writeGzip(t, dir, storage.RestoreVolumeInfoFile("web-copy"), []byte(`[{"pvcName":"data","pvcNamespace":"shop-copy","restoreMethod":"CSISnapshot",
		"snapshotDataMoved":false,"csiSnapshotInfo":{"snapshotHandle":"snap-1","size":1048576,"driver":"hostpath.csi.lifeboat.io","vscName":"9f3c"}}]`))
	done, _ := sampleRestores()
	c := newFakeBuilder(t, done).WithInterceptorFuncs(serveDownloads(restoreFileStore(dir))).Build()
	out, _, err := run(t, newTestFactory(c), "restore", "describe", "web-copy", "--details")
	if err != nil {
		t.Fatal(err)
	}
	got := squeeze(out)
	for _, want := range []string{
		"Errors: 1\n Velero: <none>\n Cluster: <none>\n Namespaces:\n shop-copy:\n" +
			" - error restoring deployments.apps/shop-copy/web: admission webhook denied the request\n",
		"Warnings: 2\n Velero: <none>\n Cluster:\n - could not restore namespaces/shop-copy: already exists\n Namespaces:\n shop-copy:\n" +
			" - configmaps/shop-copy/settings exists and differs; kept (existingResourcePolicy none)\n",
		"Resource List:\n apps/v1/Deployment:\n - shop-copy/web(failed)\n v1/ConfigMap:\n - shop-copy/settings(skipped)\n - shop-copy/flags(created)\n",
		"Volumes: 1 from CSI snapshots, 0 from native snapshots\n VOLUME RESTORED FROM\n" +
			" pvc shop-copy/data CSI snapshot snap-1 (content 9f3c, driver hostpath.csi.lifeboat.io, 1048576 bytes)\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("description lacks %q:\n%s", want, out)
		}
	}
	assertNoDownloadRequests(t, c)
}

func TestRestoreDescribeDetailsMissingFiles(t *testing.T) {
	done, _ := sampleRestores()
	c := newFakeBuilder(t, done).WithInterceptorFuncs(serveDownloads(restoreFileStore(t.TempDir()))).Build()
	out, _, err := run(t, newTestFactory(c), "restore", "describe", "web-copy", "--details")
	if err != nil {
		t.Fatal(err)
	}
	got := squeeze(out)
	for _, want := range []string{
		"Errors: 1\nWarnings: 2\nResults: <restore results not found>\n",
		"Resource List: <restore resource list not found>\n",
		"Volumes: <restore volume information not found>\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("description lacks %q:\n%s", want, out)
		}
	}
	assertNoDownloadRequests(t, c)
}

func TestRestoreLogsFromFileURL(t *testing.T) {
	dir := t.TempDir()
	log := "level=info msg=\"restore started\"\nlevel=info msg=\"restore completed\" items=11\n"
	writeGzip(t, dir, storage.RestoreLogFile("web-copy"), []byte(log))
	done, _ := sampleRestores()
	c := newFakeBuilder(t, done).WithInterceptorFuncs(serveDownloads(restoreFileStore(dir))).Build()
	out, _, err := run(t, newTestFactory(c), "restore", "logs", "web-copy")
	if err != nil {
		t.Fatal(err)
	}
	if out != log {
		t.Errorf("logs = %q, want %q", out, log)
	}
	assertNoDownloadRequests(t, c)
}

func TestRestoreLogsUnavailable(t *testing.T) {
	done, fresh := sampleRestores()
	invalid := &v1.Restore{
		ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: "velero"},
		Status:     v1.RestoreStatus{Phase: v1.RestorePhaseFailedValidation},
	}
	c := newFakeBuilder(t, done, fresh, invalid).WithInterceptorFuncs(serveDownloads(restoreFileStore(t.TempDir()))).Build()
	_, _, err := run(t, newTestFactory(c), "restore", "logs", "db-20260301115900")
	if err == nil || !strings.Contains(err.Error(), `restore "db-20260301115900" has no log yet`) {
		t.Errorf("error = %v, want it to say the log is not there yet", err)
	}
	_, _, err = run(t, newTestFactory(c), "restore", "logs", "bad")
	if err == nil || !strings.Contains(err.Error(), "failed validation and has no log") || !strings.Contains(err.Error(), "lifeboat restore describe bad") {
		t.Errorf("error = %v, want it to point at describe", err)
	}
	assertNoDownloadRequests(t, c)
}

package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/server"
	"github.com/lifeboat-io/lifeboat/internal/testutil/testenv"
)

// The deletion tests need plugins the package's server does not run (the
// cleanup example and a DeleteItemAction steered by files) and retries in
// seconds rather than the default 30s. Each test therefore runs its own
// Lifeboat server, in process, on its own namespace of the shared cluster:
// it can stop and restart that server, and nothing it does reaches the
// package's server or the other tests.

const (
	recordDeletes = "e2e.lifeboat.io/record-deletes"
	cleanupAction = "example.io/cleanup"
	receiptLabel  = "example.lifeboat.io/receipt"
)

// receiptListGVK lists the cleanup example's receipts (receipt-crd.yaml).
var receiptListGVK = schema.GroupVersionKind{Group: "example.lifeboat.io", Version: "v1", Kind: "ReceiptList"}

var (
	delPluginsOnce sync.Once
	delPluginDir   string
	delPluginsErr  error
)

// deletionPlugins builds, once, a plugin dir with the cleanup example and
// the record-deletes test plugin.
func deletionPlugins(t *testing.T) string {
	t.Helper()
	delPluginsOnce.Do(func() {
		dir, err := os.MkdirTemp("", "lifeboat-e2e-delete-plugins-")
		if err != nil {
			delPluginsErr = err
			return
		}
		delPluginDir = dir
		cmd := exec.Command("go", "build", "-o", dir+"/", "../../examples/plugins/cleanup", "./testdata/deleteplugin")
		if out, err := cmd.CombinedOutput(); err != nil {
			delPluginsErr = fmt.Errorf("building the deletion test plugins: %w\n%s", err, out)
		}
	})
	if delPluginsErr != nil {
		t.Fatal(delPluginsErr)
	}
	return delPluginDir
}

// removeDeletionPlugins removes what deletionPlugins built (TestMain).
func removeDeletionPlugins() {
	if delPluginDir != "" {
		_ = os.RemoveAll(delPluginDir)
	}
}

// delWorld is one test's server, namespace, storage location and the test
// plugin's state dir.
type delWorld struct {
	t *testing.T
	// ns is where the server and its objects live; app is the namespace
	// the test backs up.
	ns, app string
	state   string
	bsl     *v1.BackupStorageLocation
	bucket  string
	opts    server.Options

	stop func()
}

func newDelWorld(t *testing.T, tune func(*server.Options)) *delWorld {
	t.Helper()
	w := &delWorld{t: t, ns: env.NewNamespace(t, "del"), app: env.NewNamespace(t, "delapp"), state: t.TempDir()}
	ensureReceiptCRD(t)
	// Plugin processes inherit the server's environment: the cleanup
	// example reads KUBECONFIG, the test plugin its state dir.
	t.Setenv("KUBECONFIG", env.Kubeconfig)
	t.Setenv("DELETE_PLUGIN_STATE_DIR", w.state)

	w.opts = server.DefaultOptions()
	w.opts.Namespace = w.ns
	w.opts.MetricsAddress, w.opts.HealthAddress = "0", "0"
	w.opts.StoreValidationFrequency = time.Second
	w.opts.BackupSyncPeriod = 0
	w.opts.LogLevel = "warn"
	w.opts.PluginDir = deletionPlugins(t)
	w.opts.DeletionRetryBase = time.Second
	w.opts.DeletionMaxAttempts = 5
	if tune != nil {
		tune(&w.opts)
	}
	w.startServer()
	t.Cleanup(w.stopServer)
	w.createLocation()
	return w
}

// createLocation creates the world's storage location, over a fresh
// directory of the store root, and waits until its server finds it
// Available.
func (w *delWorld) createLocation() {
	w.t.Helper()
	t := w.t
	name := env.Name("fs")
	w.bucket = filepath.Join(env.StoreRoot, name)
	if err := os.MkdirAll(w.bucket, 0o755); err != nil {
		t.Fatal(err)
	}
	w.bsl = &v1.BackupStorageLocation{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name},
		Spec: v1.BackupStorageLocationSpec{
			Provider:    "lifeboat.io/filesystem",
			Config:      map[string]string{"path": env.StoreRoot},
			StorageType: v1.StorageType{ObjectStorage: &v1.ObjectStorageLocation{Bucket: name, Prefix: "lifeboat"}},
		},
	}
	env.Create(t, w.bsl)
	w.poll("the location to be Available", time.Minute, func(ctx context.Context) (bool, error) {
		var bsl v1.BackupStorageLocation
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(w.bsl), &bsl); err != nil {
			return false, err
		}
		return bsl.Status.Phase == v1.BackupStorageLocationPhaseAvailable, nil
	})
}

func (w *delWorld) startServer() {
	cfg, err := env.ServerConfig(w.opts.Namespace)
	if err != nil {
		w.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- server.Run(ctx, cfg, w.opts) }()
	w.stop = func() {
		cancel()
		if err := <-done; !testenv.IsCleanExit(err) {
			w.t.Errorf("deletion test server: %v", err)
		}
	}
}

func (w *delWorld) stopServer() {
	if w.stop != nil {
		w.stop()
		w.stop = nil
	}
}

func (w *delWorld) poll(what string, timeout time.Duration, cond func(context.Context) (bool, error)) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, cond); err != nil {
		w.t.Fatalf("waiting for %s: %v", what, err)
	}
}

// configMaps creates ConfigMaps in the app namespace.
func (w *delWorld) configMaps(names ...string) {
	w.t.Helper()
	for _, n := range names {
		env.Create(w.t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: w.app, Name: n}, Data: map[string]string{"k": n}})
	}
}

// backup backs up the app namespace and waits for it to complete.
func (w *delWorld) backup() *v1.Backup {
	w.t.Helper()
	b := &v1.Backup{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: env.Name("bk")},
		Spec:       v1.BackupSpec{StorageLocation: w.bsl.Name, IncludedNamespaces: []string{w.app}},
	}
	env.Create(w.t, b)
	w.poll("backup "+b.Name, 2*time.Minute, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return b.Status.Phase.IsTerminal(), nil
	})
	if b.Status.Phase != v1.BackupPhaseCompleted {
		w.t.Fatalf("backup %s: phase %s (%s)", b.Name, b.Status.Phase, b.Status.FailureReason)
	}
	return b
}

// request creates a DeleteBackupRequest for backup, as a user would (no
// labels: the server adds them).
func (w *delWorld) request(backup string) *v1.DeleteBackupRequest {
	w.t.Helper()
	dbr := &v1.DeleteBackupRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: env.Name("del")},
		Spec:       v1.DeleteBackupRequestSpec{BackupName: backup},
	}
	env.Create(w.t, dbr)
	return dbr
}

// waitRequest waits until ok holds for the request and returns it.
func (w *delWorld) waitRequest(dbr *v1.DeleteBackupRequest, what string, timeout time.Duration, ok func(*v1.DeleteBackupRequest) bool) *v1.DeleteBackupRequest {
	w.t.Helper()
	var cur v1.DeleteBackupRequest
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(dbr), &cur); err != nil {
			return false, err
		}
		return ok(&cur), nil
	})
	if err != nil {
		w.t.Fatalf("deletion request %s: waiting for %s: %v (status %+v)", dbr.Name, what, err, cur.Status)
	}
	return &cur
}

func (w *delWorld) waitEnded(dbr *v1.DeleteBackupRequest) *v1.DeleteBackupRequest {
	w.t.Helper()
	return w.waitRequest(dbr, "it to end", 2*time.Minute, func(d *v1.DeleteBackupRequest) bool {
		return d.Status.Phase == v1.DeleteBackupRequestPhaseProcessed || d.Status.Phase == v1.DeleteBackupRequestPhaseFailed
	})
}

// keys lists the files under the backup's (or a restore's) directory.
func (w *delWorld) keys(dir string) []string {
	w.t.Helper()
	var out []string
	root := filepath.Join(w.bucket, "lifeboat", dir)
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			out = append(out, strings.TrimPrefix(p, root+"/"))
		}
		return nil
	})
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		w.t.Fatal(err)
	}
	return out
}

// calls counts the test plugin's calls by "<outcome> <ns>/<name>".
func (w *delWorld) calls() map[string]int {
	w.t.Helper()
	out := map[string]int{}
	f, err := os.Open(filepath.Join(w.state, "calls"))
	if errors.Is(err, os.ErrNotExist) {
		return out
	}
	if err != nil {
		w.t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 3 {
			out[fields[0]+" "+fields[2]]++
		}
	}
	return out
}

func (w *delWorld) setFile(name, content string) {
	w.t.Helper()
	if err := os.WriteFile(filepath.Join(w.state, name), []byte(content), 0o600); err != nil {
		w.t.Fatal(err)
	}
}

func (w *delWorld) removeFile(name string) {
	w.t.Helper()
	if err := os.Remove(filepath.Join(w.state, name)); err != nil {
		w.t.Fatal(err)
	}
}

// receipts names the cleanup example's receipts in the app namespace.
func (w *delWorld) receipts() []string {
	w.t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(receiptListGVK)
	if err := env.Client.List(testenv.Ctx(w.t), list, client.InNamespace(w.app), client.HasLabels{receiptLabel}); err != nil {
		w.t.Fatal(err)
	}
	var out []string
	for _, r := range list.Items {
		out = append(out, r.GetName())
	}
	return out
}

func (w *delWorld) backupGone(b *v1.Backup) bool {
	w.t.Helper()
	err := env.Client.Get(testenv.Ctx(w.t), client.ObjectKeyFromObject(b), &v1.Backup{})
	if err != nil && !apierrors.IsNotFound(err) {
		w.t.Fatal(err)
	}
	return apierrors.IsNotFound(err)
}

// metric reads a counter from the metrics registry the servers register on.
func metric(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue next
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

func actionReport(rep *v1.DeletionReport, name string) (v1.DeletionActionReport, bool) {
	if rep == nil {
		return v1.DeletionActionReport{}, false
	}
	for _, a := range rep.Actions {
		if a.Name == name {
			return a, true
		}
	}
	return v1.DeletionActionReport{}, false
}

func TestDeleteBackupRequestDeletesEverything(t *testing.T) {
	w := newDelWorld(t, nil)
	w.configMaps("settings", "features")
	b := w.backup()
	if got := w.receipts(); len(got) != 2 {
		t.Fatalf("receipts after the backup: %v, want one per ConfigMap (cleanup example)", got)
	}
	rs := &v1.Restore{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: env.Name("rs")},
		Spec:       v1.RestoreSpec{BackupName: b.Name, NamespaceMapping: map[string]string{w.app: env.Name("restored")}},
	}
	env.Create(t, rs)
	w.poll("restore "+rs.Name, 2*time.Minute, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(rs), rs); err != nil {
			return false, err
		}
		return rs.Status.Phase != "" && rs.Status.Phase != v1.RestorePhaseNew && rs.Status.Phase != v1.RestorePhaseInProgress, nil
	})
	backupKeys, restoreKeys := w.keys("backups/"+b.Name), w.keys("restores/"+rs.Name)
	if !slices.Contains(backupKeys, "velero-backup.json") || len(restoreKeys) == 0 {
		t.Fatalf("before: backup keys %v, restore keys %v", backupKeys, restoreKeys)
	}
	// A dry run plans and changes nothing.
	dry := &v1.DeleteBackupRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: env.Name("dry")},
		Spec:       v1.DeleteBackupRequestSpec{BackupName: b.Name, DryRun: true},
	}
	env.Create(t, dry)
	dry = w.waitEnded(dry)
	if dry.Status.Phase != v1.DeleteBackupRequestPhaseProcessed || dry.Status.Plan == nil {
		t.Fatalf("dry run: phase %s plan %+v errors %v", dry.Status.Phase, dry.Status.Plan, dry.Status.Errors)
	}
	var planned []string
	for _, a := range dry.Status.Plan.Actions {
		if a.Name == cleanupAction {
			planned = a.Items
		}
	}
	if want := []string{"configmaps " + w.app + "/features", "configmaps " + w.app + "/settings"}; !slices.Equal(slices.Sorted(slices.Values(planned)), want) {
		t.Errorf("dry run plans %v for %s, want %v", planned, cleanupAction, want)
	}
	if p := dry.Status.Plan; p.Keys != int64(len(backupKeys)+len(restoreKeys)) || !slices.Equal(p.Restores, []string{rs.Name}) {
		t.Errorf("dry run plans %d keys and restores %v, want %d and [%s]", p.Keys, p.Restores, len(backupKeys)+len(restoreKeys), rs.Name)
	}
	if w.backupGone(b) || len(w.receipts()) != 2 || len(w.calls()) != 0 || !slices.Equal(w.keys("backups/"+b.Name), backupKeys) {
		t.Fatal("the dry run changed something")
	}

	successBefore := metric(t, "velero_backup_deletion_success_total", map[string]string{"schedule": ""})
	cleanupBefore := metric(t, "lifeboat_delete_item_action_calls_total", map[string]string{"plugin": cleanupAction, "result": "success"})

	dbr := w.waitEnded(w.request(b.Name))

	if dbr.Status.Phase != v1.DeleteBackupRequestPhaseProcessed || len(dbr.Status.Errors) != 0 {
		t.Fatalf("request ended %s with errors %v", dbr.Status.Phase, dbr.Status.Errors)
	}
	if got := w.receipts(); len(got) != 0 {
		t.Errorf("receipts left: %v; example.io/cleanup should have removed them", got)
	}
	if got := w.keys("backups/" + b.Name); len(got) != 0 {
		t.Errorf("keys left under backups/%s/: %v", b.Name, got)
	}
	if got := w.keys("restores/" + rs.Name); len(got) != 0 {
		t.Errorf("keys left under restores/%s/: %v", rs.Name, got)
	}
	if !w.backupGone(b) {
		t.Error("the Backup object is still there")
	}
	if err := env.Client.Get(testenv.Ctx(t), client.ObjectKeyFromObject(rs), &v1.Restore{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Restore of the backup is still there (%v)", err)
	}
	if dbr.Labels[v1.BackupNameLabel] != b.Name || dbr.Labels[v1.BackupUIDLabel] != string(b.UID) {
		t.Errorf("request labels %v, want Velero's backup-name and backup-uid", dbr.Labels)
	}
	rep := dbr.Status.Report
	if rep == nil {
		t.Fatal("no report")
	}
	if a, ok := actionReport(rep, cleanupAction); !ok || a.Items != 2 {
		t.Errorf("report for %s: %+v (found %v), want 2 items", cleanupAction, a, ok)
	}
	if a, ok := actionReport(rep, recordDeletes); !ok || a.Items != 2 {
		t.Errorf("report for %s: %+v (found %v), want 2 items", recordDeletes, a, ok)
	}
	if rep.RestoresDeleted != 1 || rep.KeysRemoved != int64(len(backupKeys)+len(restoreKeys)) {
		t.Errorf("report: restores %d keys %d, want 1 and %d", rep.RestoresDeleted, rep.KeysRemoved, len(backupKeys)+len(restoreKeys))
	}
	if dbr.Status.Attempts != 1 || dbr.Status.CompletionTimestamp == nil || !hasCondition(dbr.Status.Conditions, "Processed", metav1.ConditionTrue) {
		t.Errorf("status: attempts %d completion %v conditions %+v", dbr.Status.Attempts, dbr.Status.CompletionTimestamp, dbr.Status.Conditions)
	}
	if got := metric(t, "velero_backup_deletion_success_total", map[string]string{"schedule": ""}); got != successBefore+1 {
		t.Errorf("velero_backup_deletion_success_total went from %v to %v", successBefore, got)
	}
	if got := metric(t, "lifeboat_delete_item_action_calls_total", map[string]string{"plugin": cleanupAction, "result": "success"}); got != cleanupBefore+2 {
		t.Errorf("cleanup calls metric went from %v to %v, want +2", cleanupBefore, got)
	}
	calls := w.calls()
	if calls["ok "+w.app+"/settings"] != 1 || calls["ok "+w.app+"/features"] != 1 || len(calls) != 2 {
		t.Errorf("record-deletes calls %v, want each ConfigMap once", calls)
	}
}

func TestDeleteItemActionFailureKeepsTheBackupAndTheRetryResumes(t *testing.T) {
	w := newDelWorld(t, nil)
	w.configMaps("settings", "features", "flags")
	b := w.backup()
	keys := w.keys("backups/" + b.Name)
	w.setFile("fail-"+w.app+"_settings", "")
	failuresBefore := metric(t, "velero_backup_deletion_failure_total", map[string]string{"schedule": ""})
	dbr := w.request(b.Name)

	failed := w.waitRequest(dbr, "a failed attempt", time.Minute, func(d *v1.DeleteBackupRequest) bool {
		return len(d.Status.ErrorDetails) > 0
	})
	// The fail file goes at once: the next attempt is a second away.
	w.removeFile("fail-" + w.app + "_settings")

	if failed.Status.Phase != v1.DeleteBackupRequestPhaseInProgress || failed.Status.NextAttemptTime == nil {
		t.Errorf("after a failed attempt: phase %s next attempt %v; want InProgress with a next attempt", failed.Status.Phase, failed.Status.NextAttemptTime)
	}
	de := failed.Status.ErrorDetails[0]
	if de.Plugin != recordDeletes || de.Resource != "configmaps" || de.Namespace != w.app || de.Name != "settings" || !strings.Contains(de.Message, "refusing to clean up") {
		t.Errorf("error detail %+v: want the plugin, the item and the plugin's message", de)
	}
	if len(failed.Status.Errors) == 0 || !strings.Contains(failed.Status.Errors[0], recordDeletes) || !strings.Contains(failed.Status.Errors[0], "configmaps "+w.app+"/settings") {
		t.Errorf("errors %v: want a line naming plugin and item", failed.Status.Errors)
	}
	if failed.Status.BackupPhaseBefore != v1.BackupPhaseCompleted {
		t.Errorf("backupPhaseBefore %q", failed.Status.BackupPhaseBefore)
	}
	if cp := failed.Status.Checkpoint; cp == nil || len(cp.Actions) == 0 {
		t.Errorf("no checkpoint recorded: %+v", cp)
	}
	// While the retry waits, the backup is back as it was, with the reason.
	var cur v1.Backup
	if err := env.Client.Get(testenv.Ctx(t), client.ObjectKeyFromObject(b), &cur); err != nil {
		t.Fatalf("the backup is gone after a failed DeleteItemAction: %v", err)
	}
	if failed.Status.NextAttemptTime != nil && time.Until(failed.Status.NextAttemptTime.Time) > 200*time.Millisecond {
		if cur.Status.Phase != v1.BackupPhaseCompleted {
			t.Errorf("backup phase %s between attempts, want Completed again", cur.Status.Phase)
		}
	}
	c := meta.FindStatusCondition(cur.Status.Conditions, "DeletionFailed")
	if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "settings") {
		t.Errorf("backup condition DeletionFailed = %+v", c)
	}
	if got := w.keys("backups/" + b.Name); len(got) < len(keys) {
		t.Errorf("keys removed after a failed DeleteItemAction: %v, had %v", got, keys)
	}
	if got := metric(t, "velero_backup_deletion_failure_total", map[string]string{"schedule": ""}); got < failuresBefore+1 {
		t.Errorf("velero_backup_deletion_failure_total %v, was %v", got, failuresBefore)
	}

	dbr = w.waitEnded(dbr)
	if dbr.Status.Phase != v1.DeleteBackupRequestPhaseProcessed || len(dbr.Status.Errors) != 0 {
		t.Fatalf("request ended %s with errors %v after the plugin recovered", dbr.Status.Phase, dbr.Status.Errors)
	}
	if dbr.Status.Attempts < 2 {
		t.Errorf("attempts %d, want a retry", dbr.Status.Attempts)
	}
	if !w.backupGone(b) || len(w.keys("backups/"+b.Name)) != 0 {
		t.Errorf("backup or keys left after the retry succeeded")
	}
	calls := w.calls()
	// Items done in the first attempt were not passed again; the failed
	// one was passed until it succeeded.
	for _, name := range []string{"features", "flags"} {
		if n := calls["ok "+w.app+"/"+name]; n != 1 || calls["fail "+w.app+"/"+name] != 0 {
			t.Errorf("%s passed %d times (calls %v); done in the first attempt, it must not be passed again", name, n, calls)
		}
	}
	if calls["ok "+w.app+"/settings"] != 1 || calls["fail "+w.app+"/settings"] < 1 {
		t.Errorf("settings: calls %v, want failures then exactly one success", calls)
	}
	if a, ok := actionReport(dbr.Status.Report, recordDeletes); !ok || a.Items != 3 {
		t.Errorf("report for %s: %+v, want 3 items over all attempts", recordDeletes, a)
	}
}

func TestDeletionFailsVisiblyAfterTheLastAttempt(t *testing.T) {
	w := newDelWorld(t, func(o *server.Options) { o.DeletionMaxAttempts = 2 })
	w.configMaps("settings", "features")
	b := w.backup()
	w.setFile("fail-"+w.app+"_settings", "")
	dbr := w.waitEnded(w.request(b.Name))
	if dbr.Status.Phase != v1.DeleteBackupRequestPhaseFailed || dbr.Status.Attempts != 2 {
		t.Fatalf("phase %s after %d attempts, want Failed after 2", dbr.Status.Phase, dbr.Status.Attempts)
	}
	if len(dbr.Status.Errors) == 0 || !strings.Contains(strings.Join(dbr.Status.Errors, "\n"), "settings") {
		t.Errorf("errors %v: the reason must stay visible", dbr.Status.Errors)
	}
	if !hasCondition(dbr.Status.Conditions, "Failed", metav1.ConditionTrue) {
		t.Errorf("conditions %+v, want Failed=True", dbr.Status.Conditions)
	}
	var cur v1.Backup
	if err := env.Client.Get(testenv.Ctx(t), client.ObjectKeyFromObject(b), &cur); err != nil {
		t.Fatal(err)
	}
	c := meta.FindStatusCondition(cur.Status.Conditions, "DeletionFailed")
	if cur.Status.Phase != v1.BackupPhaseCompleted || c == nil || c.Reason != "AttemptsExhausted" {
		t.Errorf("backup phase %s, DeletionFailed %+v; want Completed with AttemptsExhausted", cur.Status.Phase, c)
	}
	if !slices.Contains(w.keys("backups/"+b.Name), "velero-backup.json") {
		t.Error("the backup's marker is gone although the deletion failed")
	}
	if calls := w.calls(); calls["fail "+w.app+"/settings"] != 2 || calls["ok "+w.app+"/features"] != 1 {
		t.Errorf("calls %v, want the failing item tried once per attempt, the other passed once", calls)
	}

	// A new request for the backup carries on from the failed one's
	// checkpoint: what was done is not passed again.
	w.removeFile("fail-" + w.app + "_settings")
	again := w.waitEnded(w.request(b.Name))
	if again.Status.Phase != v1.DeleteBackupRequestPhaseProcessed || len(again.Status.Errors) != 0 {
		t.Fatalf("new request ended %s: %v", again.Status.Phase, again.Status.Errors)
	}
	if calls := w.calls(); calls["ok "+w.app+"/settings"] != 1 || calls["ok "+w.app+"/features"] != 1 {
		t.Errorf("calls %v, want each item passed successfully once over both requests", calls)
	}
	if !w.backupGone(b) {
		t.Error("backup still there")
	}
	// The failed request is cleaned up once the backup is gone, before
	// the request that deleted it is Processed: read right after, it must
	// be gone already (it once was deleted after, and this raced).
	err := env.Client.Get(testenv.Ctx(t), client.ObjectKeyFromObject(dbr), &v1.DeleteBackupRequest{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("the failed request is still there after a later one succeeded (%v)", err)
	}
}

func TestDeleteBackupRequestsForOneBackupRunAsOne(t *testing.T) {
	// One worker and a slow plugin: the deletion takes over a second, so
	// the second request surely arrives while the first runs.
	w := newDelWorld(t, func(o *server.Options) { o.DeleteItemActionWorkers = 1 })
	w.configMaps("a", "b", "c", "d")
	b := w.backup()
	w.setFile("delay", "300ms")
	first := w.request(b.Name)
	second := w.request(b.Name)
	first, second = w.waitEnded(first), w.waitEnded(second)
	// Which one did the work depends on creation order; the other follows.
	leader, follower := first, second
	if first.Status.HandledBy != "" {
		leader, follower = second, first
	}
	if leader.Status.Phase != v1.DeleteBackupRequestPhaseProcessed || leader.Status.HandledBy != "" || leader.Status.Attempts != 1 {
		t.Errorf("leader %s: phase %s handledBy %q attempts %d", leader.Name, leader.Status.Phase, leader.Status.HandledBy, leader.Status.Attempts)
	}
	if follower.Status.Phase != v1.DeleteBackupRequestPhaseProcessed || follower.Status.HandledBy != leader.Name || follower.Status.Attempts != 0 {
		t.Errorf("follower %s: phase %s handledBy %q attempts %d; want Processed pointing at %s without attempts of its own",
			follower.Name, follower.Status.Phase, follower.Status.HandledBy, follower.Status.Attempts, leader.Name)
	}
	if a, ok := actionReport(follower.Status.Report, recordDeletes); !ok || a.Items != 4 {
		t.Errorf("follower's report %+v: want the leader's", follower.Status.Report)
	}
	for _, n := range []string{"a", "b", "c", "d"} {
		if got := w.calls()["ok "+w.app+"/"+n]; got != 1 {
			t.Errorf("%s passed %d times; two requests must delete once", n, got)
		}
	}
	if !w.backupGone(b) {
		t.Error("backup still there")
	}
}

// A server stopped in the middle of a deletion leaves the request
// InProgress with its checkpoint; the next server resumes it, and no item
// done before the stop is passed again.
func TestDeletionResumesAfterTheServerRestarts(t *testing.T) {
	// One worker, so the stop comes with most items still to do.
	w := newDelWorld(t, func(o *server.Options) { o.DeleteItemActionWorkers = 1 })
	var names []string
	for i := range 12 {
		names = append(names, fmt.Sprintf("cm-%02d", i))
	}
	w.configMaps(names...)
	b := w.backup()
	w.setFile("delay", "250ms")
	dbr := w.request(b.Name)
	w.poll("a few items to be passed", time.Minute, func(context.Context) (bool, error) {
		n := 0
		for k, c := range w.calls() {
			if strings.HasPrefix(k, "ok ") {
				n += c
			}
		}
		return n >= 3, nil
	})
	w.stopServer()

	mid := w.waitRequest(dbr, "the stopped state", 10*time.Second, func(*v1.DeleteBackupRequest) bool { return true })
	if mid.Status.Phase != v1.DeleteBackupRequestPhaseInProgress || mid.Status.Checkpoint == nil {
		t.Fatalf("after the stop: phase %s checkpoint %+v; want InProgress with a checkpoint", mid.Status.Phase, mid.Status.Checkpoint)
	}
	var done int64
	for _, a := range mid.Status.Checkpoint.Actions {
		if a.Name == recordDeletes {
			done = a.Succeeded
		}
	}
	passed := 0
	for k, c := range w.calls() {
		if strings.HasPrefix(k, "ok ") {
			passed += c
		}
	}
	if done == 0 || done != int64(passed) || passed >= len(names) {
		t.Errorf("checkpoint records %d items done, the plugin saw %d of %d; want them equal, mid-way", done, passed, len(names))
	}
	if mid.Status.Attempts != 0 {
		t.Errorf("attempts %d after an interrupted attempt; a shutdown is not held against the request", mid.Status.Attempts)
	}

	w.removeFile("delay")
	w.startServer()
	dbr = w.waitEnded(dbr)
	if dbr.Status.Phase != v1.DeleteBackupRequestPhaseProcessed {
		t.Fatalf("resumed request ended %s: %v", dbr.Status.Phase, dbr.Status.Errors)
	}
	calls := w.calls()
	for _, n := range names {
		if got := calls["ok "+w.app+"/"+n]; got != 1 {
			t.Errorf("%s passed %d times across the restart, want once", n, got)
		}
	}
	if !w.backupGone(b) {
		t.Error("backup still there")
	}
}

func TestDeleteBackupRequestValidation(t *testing.T) {
	w := newDelWorld(t, nil)
	dbr := w.waitEnded(w.request("no-such-backup"))
	if dbr.Status.Phase != v1.DeleteBackupRequestPhaseProcessed || len(dbr.Status.Errors) != 1 ||
		!strings.Contains(dbr.Status.Errors[0], `spec.backupName: backup "no-such-backup" not found`) {
		t.Errorf("phase %s errors %v", dbr.Status.Phase, dbr.Status.Errors)
	}

	// A read-only location refuses deletions, as in Velero.
	w.configMaps("settings")
	b := w.backup()
	if err := env.Client.Get(testenv.Ctx(t), client.ObjectKeyFromObject(w.bsl), w.bsl); err != nil {
		t.Fatal(err)
	}
	orig := w.bsl.DeepCopy()
	w.bsl.Spec.AccessMode = v1.BackupStorageLocationAccessModeReadOnly
	if err := env.Client.Patch(testenv.Ctx(t), w.bsl, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	dbr = w.waitEnded(w.request(b.Name))
	if len(dbr.Status.Errors) != 1 || !strings.Contains(dbr.Status.Errors[0], "ReadOnly") {
		t.Errorf("errors %v, want the ReadOnly location named", dbr.Status.Errors)
	}
	if w.backupGone(b) {
		t.Error("backup deleted from a ReadOnly location")
	}
}

// A deletion asked for before its backup has even started waits for the
// backup to end, then deletes all of it: nothing the run writes after the
// request arrived is left behind in the store.
func TestDeletionOfABackupNotStartedYetWaitsForIt(t *testing.T) {
	w := newDelWorld(t, nil)
	w.configMaps("settings", "features")
	w.stopServer()
	b := &v1.Backup{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: env.Name("bk")},
		Spec:       v1.BackupSpec{StorageLocation: w.bsl.Name, IncludedNamespaces: []string{w.app}},
	}
	env.Create(t, b)
	dbr := w.request(b.Name)
	w.startServer()

	dbr = w.waitEnded(dbr)
	if dbr.Status.Phase != v1.DeleteBackupRequestPhaseProcessed || len(dbr.Status.Errors) != 0 {
		t.Fatalf("request ended %s with errors %v", dbr.Status.Phase, dbr.Status.Errors)
	}
	if !w.backupGone(b) {
		t.Error("the Backup object is still there")
	}
	if rep := dbr.Status.Report; rep == nil || rep.KeysRemoved == 0 {
		t.Errorf("report %+v: want the keys the backup wrote removed (the deletion ran before the backup did)", rep)
	}
	if a, ok := actionReport(dbr.Status.Report, cleanupAction); !ok || a.Items != 2 {
		t.Errorf("%s report %+v, want its 2 ConfigMaps", cleanupAction, a)
	}
	// Whatever the backup's run could still write would show up by now.
	time.Sleep(2 * time.Second)
	if keys := w.keys("backups/" + b.Name); len(keys) != 0 {
		t.Errorf("keys left in the store: %v", keys)
	}
	if got := w.receipts(); len(got) != 0 {
		t.Errorf("receipts left: %v", got)
	}
}

// A DeleteItemAction that fails on an item for good keeps the backup,
// attempt after attempt, until the operator consents to go past it: the
// CLI's --skip-failed-actions, given while that deletion waits for its next
// attempt, lends it the consent, and the deletion completes at once with
// the item listed.
func TestSkipFailedActionsCompletesAStuckDeletion(t *testing.T) {
	w := newDelWorld(t, func(o *server.Options) { o.DeletionRetryBase = time.Hour })
	w.configMaps("settings", "features")
	b := w.backup()
	w.setFile("fail-"+w.app+"_settings", "")
	stuck := w.request(b.Name)
	w.waitRequest(stuck, "a failed attempt", time.Minute, func(d *v1.DeleteBackupRequest) bool {
		return d.Status.NextAttemptTime != nil
	})

	out, err := lifeboat(t, "-n", w.ns, "backup", "delete", b.Name, "--skip-failed-actions", "--confirm", "--wait", "--timeout", "1m")
	if err != nil {
		t.Fatalf("backup delete --skip-failed-actions: %v\n%s", err, out)
	}
	for _, want := range []string{"Skipped", "configmaps " + w.app + "/settings", recordDeletes, "refusing to clean up"} {
		if !strings.Contains(out, want) {
			t.Errorf("the CLI's report does not mention %q:\n%s", want, out)
		}
	}
	done := w.waitEnded(stuck)
	if done.Status.Phase != v1.DeleteBackupRequestPhaseProcessed || !done.Status.SkipFailedActions || done.Status.Attempts != 2 {
		t.Fatalf("the stuck request: %s after %d attempts, skipping %v; want Processed by a second attempt that went past the item",
			done.Status.Phase, done.Status.Attempts, done.Status.SkipFailedActions)
	}
	rep := done.Status.Report
	if rep == nil || rep.SkippedCount != 1 || len(rep.SkippedItems) != 1 || rep.SkippedItems[0].Name != "settings" ||
		rep.SkippedItems[0].Plugin != recordDeletes || !strings.Contains(rep.SkippedItems[0].Message, "refusing to clean up") {
		t.Errorf("report %+v: want the one skipped item with the plugin's error", rep)
	}
	if !w.backupGone(b) || len(w.keys("backups/"+b.Name)) != 0 {
		t.Error("the backup or its keys are still there")
	}
	if calls := w.calls(); calls["ok "+w.app+"/features"] != 1 {
		t.Errorf("calls %v: features was done in the first attempt and must not be passed again", calls)
	}
}

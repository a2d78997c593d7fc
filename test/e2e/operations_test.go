package e2e

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/itemops"
	"github.com/lifeboat-io/lifeboat/internal/storage"
	"github.com/lifeboat-io/lifeboat/internal/testutil/testenv"
)

// A v2 BackupItemAction (a real plugin process) starts asynchronous
// operations: the backup waits for them, records their progress in the
// item operations file, and ends Completed or PartiallyFailed with them.
func TestBackupWaitsForAsynchronousOperations(t *testing.T) {
	bsl, _ := env.FilesystemLocation(t, env.Name("fs"))
	store := openStore(t, bsl)
	for _, outcome := range []string{"ok", "fail"} {
		t.Run(outcome, func(t *testing.T) {
			ns := env.NewNamespace(t, "async")
			env.Create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "slow", Labels: map[string]string{"async": outcome}}})
			env.Create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plain"}})

			b := &v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: env.Name("async")},
				Spec: v1.BackupSpec{IncludedNamespaces: []string{ns}, StorageLocation: bsl.Name}}
			env.Create(t, b)
			sawWaiting := false
			var got v1.Backup
			deadline := time.Now().Add(time.Minute)
			for time.Now().Before(deadline) {
				if err := env.Client.Get(testenv.Ctx(t), clientKey(b.Name), &got); err != nil {
					t.Fatal(err)
				}
				if got.Status.Phase == v1.BackupPhaseWaitingForPluginOperations {
					sawWaiting = true
				}
				if got.Status.Phase.IsTerminal() {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			want := v1.BackupPhaseCompleted
			if outcome == "fail" {
				want = v1.BackupPhasePartiallyFailed
			}
			if got.Status.Phase != want || !sawWaiting {
				t.Fatalf("phase %s (saw waiting: %v), want %s through WaitingForPluginOperations", got.Status.Phase, sawWaiting, want)
			}
			if got.Status.BackupItemOperationsAttempted != 1 {
				t.Errorf("operations attempted %d", got.Status.BackupItemOperationsAttempted)
			}
			var ops []itemops.BackupOperation
			if err := store.GetGzipJSON(testenv.Ctx(t), store.BackupKey(b.Name, storage.BackupItemOperationsFile(b.Name)), &ops); err != nil {
				t.Fatal(err)
			}
			if len(ops) != 1 || ops[0].Spec.BackupItemAction != "e2e.lifeboat.io/async" || ops[0].Spec.ResourceIdentifier.Name != "slow" || ops[0].Spec.OperationID == "" {
				t.Fatalf("item operations %+v", ops)
			}
			if outcome == "fail" {
				if ops[0].Status.Phase != itemops.PhaseFailed || !strings.Contains(ops[0].Status.Error, "failed on purpose") {
					t.Errorf("operation status %+v", ops[0].Status)
				}
			} else if ops[0].Status.Phase != itemops.PhaseCompleted || ops[0].Status.NCompleted != 2 {
				t.Errorf("operation status %+v", ops[0].Status)
			}
			// The stored metadata follows the cluster's final word.
			meta, err := store.GetBackupMetadata(testenv.Ctx(t), b.Name)
			if err != nil || !strings.Contains(string(meta), `"phase":"`+string(want)+`"`) {
				t.Errorf("velero-backup.json does not say %s: %v", want, err)
			}
			// And so do its Events: the wait, then the end.
			end := "Normal BackupCompleted"
			if outcome == "fail" {
				end = "Warning BackupPartiallyFailed"
			}
			waitForEvents(t, env.Namespace, map[string][]string{"Backup/" + b.Name: {"Normal BackupStarted", "Normal BackupWaitingForPluginOperations", end}}, nil)
		})
	}
}

// A plugin that crashes on an item, and one that hangs, cost the backup
// those items (PartiallyFailed, with an error naming plugin and item), not
// the backup itself or the server. (Each in its own backup: a crash also
// breaks the calls other items have in flight in the same process.)
func TestCrashingAndHangingPluginsFailOnlyTheirItems(t *testing.T) {
	bsl, _ := env.FilesystemLocation(t, env.Name("fs"))
	store := openStore(t, bsl)
	for behaviour, why := range map[string]string{"crash": "crashed twice", "hang": "did not answer within 3s"} {
		t.Run(behaviour, func(t *testing.T) {
			ns := env.NewNamespace(t, "faulty")
			env.Create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad", Labels: map[string]string{"faulty": behaviour}}})
			env.Create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "good"}})
			b := newBackup(t, bsl.Name, v1.BackupSpec{IncludedNamespaces: []string{ns}})
			if b.Status.Phase != v1.BackupPhasePartiallyFailed || b.Status.Errors != 1 {
				t.Fatalf("phase %s errors %d, want PartiallyFailed with 1 error", b.Status.Phase, b.Status.Errors)
			}
			out := mustLifeboat(t, "backup", "logs", b.Name)
			for _, want := range []string{"e2e.lifeboat.io/faulty", "name=bad", why} {
				if !strings.Contains(out, want) {
					t.Errorf("backup log lacks %q:\n%s", want, out)
				}
			}
			items := strings.Join(backedUp(t, store, b.Name), "\n")
			if !strings.Contains(items, "configmaps/"+ns+"/good") || strings.Contains(items, "configmaps/"+ns+"/bad") {
				t.Errorf("stored items:\n%s", items)
			}
			// The server is healthy: the next backup runs normally.
			if b2 := newBackup(t, bsl.Name, v1.BackupSpec{IncludedNamespaces: []string{ns}, IncludedResources: []string{"secrets"}}); b2.Status.Phase != v1.BackupPhaseCompleted {
				t.Errorf("next backup: %s", b2.Status.Phase)
			}
		})
	}
}

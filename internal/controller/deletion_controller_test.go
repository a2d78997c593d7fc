package controller

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/deletion"
)

func TestAPIPlanKeepsCountsAndBoundsLists(t *testing.T) {
	p := &deletion.Plan{BackupKeys: []string{"backups/b/b.tar.gz", "backups/b/velero-backup.json"}}
	var items []deletion.Item
	for i := range v1.DeletionPlanMaxItems + 10 {
		items = append(items, deletion.Item{Position: int64(i), Resource: "configmaps", Namespace: "shop", Name: fmt.Sprintf("cm-%d", i)})
	}
	p.Actions = []deletion.ActionPlan{
		{Name: "example.io/a", Items: items[:3]},
		{Name: "example.io/b", Items: items},
	}
	p.Actions[0].Items[0] = deletion.Item{Resource: "namespaces", Name: "shop"}
	p.Restores = []deletion.RestorePlan{{Name: "r1", Keys: []string{"restores/r1/restore-r1-logs.gz"}}}
	out := apiPlan(p)
	if out.Actions[0].Count != 3 || out.Actions[1].Count != int64(len(items)) {
		t.Errorf("counts %d and %d, want complete counts", out.Actions[0].Count, out.Actions[1].Count)
	}
	if out.Actions[0].Items[0] != "namespaces shop" || out.Actions[0].Items[1] != "configmaps shop/cm-1" {
		t.Errorf("items rendered as %v", out.Actions[0].Items[:2])
	}
	total := len(out.Actions[0].Items) + len(out.Actions[1].Items) + len(out.Restores) + len(out.KeyList)
	if total != v1.DeletionPlanMaxItems || !out.Truncated {
		t.Errorf("%d entries listed (truncated %v), want exactly %d and truncated", total, out.Truncated, v1.DeletionPlanMaxItems)
	}
	if out.Keys != 3 {
		t.Errorf("keys %d, want 3 (counted even when not listed)", out.Keys)
	}
}

// newTestDeletionReconciler returns a reconciler over a fake API server holding
// objs; its engine has no plugins and a cluster access that fails the test
// if the engine gets that far.
func newTestDeletionReconciler(t *testing.T, objs ...client.Object) (*DeleteBackupRequestReconciler, client.Client) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	// No status subresource, as the velero.io CRDs (Velero's and
	// Lifeboat's) have none.
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	return &DeleteBackupRequestReconciler{
		Client: c, APIReader: c, Engine: &deletion.Engine{},
		Log: slog.New(slog.DiscardHandler), RetryBase: time.Second,
	}, c
}

func testBackup(location string) *v1.Backup {
	return &v1.Backup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: "nightly", UID: "uid-1"},
		Spec:       v1.BackupSpec{StorageLocation: location},
		Status:     v1.BackupStatus{Phase: v1.BackupPhaseCompleted},
	}
}

func testRequest(name string, created time.Time) *v1.DeleteBackupRequest {
	return &v1.DeleteBackupRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: name, CreationTimestamp: metav1.NewTime(created)},
		Spec:       v1.DeleteBackupRequestSpec{BackupName: "nightly"},
	}
}

func reconcileRequest(t *testing.T, r *DeleteBackupRequestReconciler, c client.Client, name string) (ctrl.Result, *v1.DeleteBackupRequest) {
	t.Helper()
	key := client.ObjectKey{Namespace: "velero", Name: name}
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key})
	if err != nil {
		t.Fatalf("reconcile %s: %v", name, err)
	}
	var got v1.DeleteBackupRequest
	if err := c.Get(context.Background(), key, &got); err != nil {
		t.Fatal(err)
	}
	return res, &got
}

func TestDeletionWaitsForAnUnavailableLocationWithoutUsingAttempts(t *testing.T) {
	bsl := &v1.BackupStorageLocation{
		ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: "default"},
		Status:     v1.BackupStorageLocationStatus{Phase: v1.BackupStorageLocationPhaseUnavailable, Message: "bucket gone"},
	}
	r, c := newTestDeletionReconciler(t, testBackup("default"), bsl, testRequest("del-1", time.Now()))
	res, got := reconcileRequest(t, r, c, "del-1")
	if got.Status.Phase != v1.DeleteBackupRequestPhaseNew || got.Status.Attempts != 0 || res.RequeueAfter != time.Second {
		t.Errorf("phase %s attempts %d requeue %v; want New, no attempt, retried after the base delay", got.Status.Phase, got.Status.Attempts, res.RequeueAfter)
	}
	cond := meta.FindStatusCondition(got.Status.Conditions, ConditionWaiting)
	if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != "LocationUnavailable" {
		t.Errorf("Waiting condition %+v", cond)
	}
	var b v1.Backup
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "velero", Name: "nightly"}, &b); err != nil || b.Status.Phase != v1.BackupPhaseCompleted {
		t.Errorf("backup phase %q (%v), want it untouched", b.Status.Phase, err)
	}
}

// A backup still being written, or not started yet, is waited for: its
// deletion starts once the backup has ended, so nothing the run is about
// to write is missed.
func TestDeletionWaitsForARunningBackup(t *testing.T) {
	for _, phase := range []v1.BackupPhase{"", v1.BackupPhaseNew, v1.BackupPhaseInProgress,
		v1.BackupPhaseWaitingForPluginOperations, v1.BackupPhaseFinalizingPartiallyFailed} {
		t.Run(cmp.Or(string(phase), "no phase"), func(t *testing.T) {
			b := testBackup("default")
			b.Status.Phase = phase
			bsl := &v1.BackupStorageLocation{
				ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: "default"},
				Status:     v1.BackupStorageLocationStatus{Phase: v1.BackupStorageLocationPhaseAvailable},
			}
			r, c := newTestDeletionReconciler(t, b, bsl, testRequest("del-1", time.Now()))
			_, got := reconcileRequest(t, r, c, "del-1")
			cond := meta.FindStatusCondition(got.Status.Conditions, ConditionWaiting)
			if got.Status.Phase != v1.DeleteBackupRequestPhaseNew || got.Status.Attempts != 0 || cond == nil ||
				cond.Status != metav1.ConditionTrue || cond.Reason != "BackupInProgress" {
				t.Errorf("phase %s attempts %d waiting %+v; want New, waiting for the backup", got.Status.Phase, got.Status.Attempts, cond)
			}
			var cur v1.Backup
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(b), &cur); err != nil || cur.Status.Phase != phase {
				t.Errorf("backup phase %q (%v), want it untouched", cur.Status.Phase, err)
			}
		})
	}
}

func TestDeletionRefusesReadOnlyLocations(t *testing.T) {
	for _, tc := range []struct {
		name   string
		phase  v1.BackupPhase
		access v1.BackupStorageLocationAccessMode
		want   string
	}{
		{"read-only location", v1.BackupPhaseCompleted, v1.BackupStorageLocationAccessModeReadOnly, "ReadOnly"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := testBackup("default")
			b.Status.Phase = tc.phase
			bsl := &v1.BackupStorageLocation{
				ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: "default"},
				Spec:       v1.BackupStorageLocationSpec{AccessMode: tc.access},
				Status:     v1.BackupStorageLocationStatus{Phase: v1.BackupStorageLocationPhaseAvailable},
			}
			r, c := newTestDeletionReconciler(t, b, bsl, testRequest("del-1", time.Now()))
			_, got := reconcileRequest(t, r, c, "del-1")
			if got.Status.Phase != v1.DeleteBackupRequestPhaseProcessed || len(got.Status.Errors) != 1 ||
				!strings.Contains(got.Status.Errors[0], tc.want) || !strings.Contains(got.Status.Errors[0], "spec.backupName") {
				t.Errorf("phase %s errors %v; want Processed with an error naming the field and %q", got.Status.Phase, got.Status.Errors, tc.want)
			}
		})
	}
}

func TestTwoNewRequestsForOneBackupAgreeOnWhoGoesFirst(t *testing.T) {
	// The location is unavailable, so the leader waits in New: the test
	// sees the decision without running a deletion.
	bsl := &v1.BackupStorageLocation{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: "default"}}
	now := time.Now().Truncate(time.Second)
	r, c := newTestDeletionReconciler(t, testBackup("default"), bsl,
		testRequest("del-b", now), testRequest("del-a", now), testRequest("del-c", now.Add(-time.Second)))
	// Reconciled newest first: each must still follow the oldest, with
	// names breaking the tie between del-a and del-b.
	_, b := reconcileRequest(t, r, c, "del-b")
	_, a := reconcileRequest(t, r, c, "del-a")
	_, cc := reconcileRequest(t, r, c, "del-c")
	if b.Status.HandledBy != "del-c" || a.Status.HandledBy != "del-c" || cc.Status.HandledBy != "" {
		t.Errorf("handledBy: del-a %q, del-b %q, del-c %q; want del-a and del-b following del-c", a.Status.HandledBy, b.Status.HandledBy, cc.Status.HandledBy)
	}
	// The leader ends; its followers end with its outcome.
	now2 := metav1.Now()
	orig := cc.DeepCopy()
	cc.Status.Phase = v1.DeleteBackupRequestPhaseProcessed
	cc.Status.Report = &v1.DeletionReport{KeysRemoved: 7}
	cc.Status.CompletionTimestamp = &now2
	if err := c.Patch(context.Background(), cc, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	_, a = reconcileRequest(t, r, c, "del-a")
	if a.Status.Phase != v1.DeleteBackupRequestPhaseProcessed || a.Status.Report == nil || a.Status.Report.KeysRemoved != 7 {
		t.Errorf("follower after the leader ended: phase %s report %+v; want the leader's outcome", a.Status.Phase, a.Status.Report)
	}
	if cond := meta.FindStatusCondition(a.Status.Conditions, ConditionProcessed); cond == nil || !strings.Contains(cond.Message, "del-c") {
		t.Errorf("Processed condition %+v, want it to name the request that did the work", cond)
	}
}

func TestDryRunRequestNeverDeletes(t *testing.T) {
	b := testBackup("") // no location: the plan needs no store
	dbr := testRequest("dry", time.Now())
	dbr.Spec.DryRun = true
	r, c := newTestDeletionReconciler(t, b, dbr)
	r.Engine = &deletion.Engine{Cluster: failingCluster{t}}
	_, got := reconcileRequest(t, r, c, "dry")
	if got.Status.Phase != v1.DeleteBackupRequestPhaseProcessed || got.Status.Plan == nil || got.Status.Attempts != 0 {
		t.Fatalf("dry run: phase %s plan %+v attempts %d", got.Status.Phase, got.Status.Plan, got.Status.Attempts)
	}
	var cur v1.Backup
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(b), &cur); err != nil || cur.Status.Phase != v1.BackupPhaseCompleted {
		t.Errorf("backup after a dry run: %v, phase %q", err, cur.Status.Phase)
	}
}

// failingCluster lets Plan list restores and fails the test on anything
// that would change the cluster.
type failingCluster struct{ t *testing.T }

func (failingCluster) SnapshotLocation(context.Context, string) (string, map[string]string, error) {
	return "", nil, nil
}
func (failingCluster) Restores(context.Context, string) ([]string, error) { return nil, nil }
func (f failingCluster) DeleteRestore(context.Context, string) error {
	f.t.Error("a dry run deleted a restore")
	return nil
}
func (f failingCluster) RemoveBackup(context.Context, *v1.Backup) error {
	f.t.Error("a dry run removed the backup")
	return nil
}

// A restore that ends wakes the unfinished deletion requests of its
// backup, so a deletion that waited for it need not wait for its next look.
func TestARestoreThatEndsWakesItsBackupsDeletions(t *testing.T) {
	req := func(name, backup string, phase v1.DeleteBackupRequestPhase) *v1.DeleteBackupRequest {
		return &v1.DeleteBackupRequest{
			ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: name, Labels: map[string]string{v1.BackupNameLabel: backup}},
			Spec:       v1.DeleteBackupRequestSpec{BackupName: backup},
			Status:     v1.DeleteBackupRequestStatus{Phase: phase},
		}
	}
	r, _ := newTestDeletionReconciler(t,
		req("waiting", "nightly", v1.DeleteBackupRequestPhaseNew),
		req("done", "nightly", v1.DeleteBackupRequestPhaseProcessed),
		req("other", "weekly", v1.DeleteBackupRequestPhaseNew),
	)
	restore := func(phase v1.RestorePhase) *v1.Restore {
		return &v1.Restore{
			ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: "r"},
			Spec:       v1.RestoreSpec{BackupName: "nightly"},
			Status:     v1.RestoreStatus{Phase: phase},
		}
	}
	if got := r.waitingOnRestore(context.Background(), restore(v1.RestorePhaseInProgress)); len(got) != 0 {
		t.Errorf("a running restore woke %v", got)
	}
	got := r.waitingOnRestore(context.Background(), restore(v1.RestorePhaseCompleted))
	if len(got) != 1 || got[0].Name != "waiting" {
		t.Errorf("an ended restore woke %v, want the one unfinished request of its backup", got)
	}
}

func TestAPIPlanListsPodVolumeSnapshots(t *testing.T) {
	p := &deletion.Plan{PodVolumeSnapshots: []deletion.PodVolumeSnapshotPlan{
		{SnapshotID: "k1", VolumeNamespace: "shop", Location: "default", Pod: "db-0", Volume: "data"},
	}, PodVolumeRepositories: []deletion.PodVolumeRepositoryPlan{
		{VolumeNamespace: "shop", Location: "default", BackupUID: "uid-1"},
	}}
	out := apiPlan(p)
	if !slices.Equal(out.PodVolumeSnapshots, []string{"shop/k1 (pod db-0, volume data)"}) {
		t.Errorf("pod volume snapshots %v", out.PodVolumeSnapshots)
	}
	if !slices.Equal(out.PodVolumeRepositories, []string{"namespace shop in location default (backup-uid uid-1)"}) {
		t.Errorf("pod volume repositories %v", out.PodVolumeRepositories)
	}
}

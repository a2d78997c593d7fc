package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/server"
	"github.com/lifeboat-io/lifeboat/internal/testutil/testenv"
)

// deleteRequestFor waits until a DeleteBackupRequest labelled for b exists
// and returns it with the moment it was seen.
func deleteRequestFor(t *testing.T, b *v1.Backup, timeout time.Duration) (*v1.DeleteBackupRequest, time.Time) {
	t.Helper()
	var found *v1.DeleteBackupRequest
	var seen time.Time
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var list v1.DeleteBackupRequestList
		if err := env.Client.List(ctx, &list, client.InNamespace(b.Namespace),
			client.MatchingLabels{v1.BackupNameLabel: v1.LabelValue(b.Name), v1.BackupUIDLabel: string(b.UID)}); err != nil {
			return false, err
		}
		if len(list.Items) == 0 {
			return false, nil
		}
		found, seen = &list.Items[0], time.Now()
		return true, nil
	})
	if err != nil {
		t.Fatalf("no DeleteBackupRequest for backup %s within %s: %v", b.Name, timeout, err)
	}
	return found, seen
}

// releaseBackup removes the finalizer if the Backup is still there (the
// deletion controller may have done it already) and waits until it is gone.
func releaseBackup(t *testing.T, b *v1.Backup) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var cur v1.Backup
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(b), &cur); err != nil {
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		}
		if cur.DeletionTimestamp != nil && len(cur.Finalizers) > 0 {
			orig := cur.DeepCopy()
			cur.Finalizers = slices.DeleteFunc(cur.Finalizers, func(f string) bool { return f == v1.BackupFinalizer })
			if err := env.Client.Patch(ctx, &cur, client.MergeFrom(orig)); err != nil && !apierrors.IsNotFound(err) {
				return false, err
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("backup %s is still there: %v", b.Name, err)
	}
}

func TestExpiredBackupIsGarbageCollectedWithinSeconds(t *testing.T) {
	ns := env.NewNamespace(t, "gc")
	env.Create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"}, Data: map[string]string{"k": "v"}})
	bsl, _ := env.FilesystemLocation(t, env.Name("gc"))
	b := newBackup(t, bsl.Name, v1.BackupSpec{IncludedNamespaces: []string{ns}, TTL: metav1.Duration{Duration: 5 * time.Second}})
	if b.Status.Phase != v1.BackupPhaseCompleted || b.Status.Expiration == nil {
		t.Fatalf("backup: phase %q expiration %v, want Completed with an expiration", b.Status.Phase, b.Status.Expiration)
	}
	// The backup may have taken longer than its TTL on a busy machine; then
	// it is due the moment it completes.
	due := b.Status.Expiration.Time
	if c := b.Status.CompletionTimestamp; c != nil && c.After(due) {
		due = c.Time
	}
	dbr, seen := deleteRequestFor(t, b, 30*time.Second)
	late := seen.Sub(due)
	t.Logf("deletion request %s seen %v after the backup was due", dbr.Name, late)
	if late > 5*time.Second {
		t.Errorf("deletion requested %v after expiration; want within seconds", late)
	}
	if dbr.CreationTimestamp.Before(b.Status.Expiration) {
		t.Errorf("deletion requested at %v, before the expiration %v", dbr.CreationTimestamp, b.Status.Expiration)
	}
	if dbr.Spec.BackupName != b.Name {
		t.Errorf("request for backup %q, want %q", dbr.Spec.BackupName, b.Name)
	}
}

// By default deleting a Backup object means what it means in Velero: the
// object goes, its data stays in the store, and nothing Lifeboat keeps on
// the object is written into velero-backup.json.
func TestDeletingABackupObjectKeepsItsDataByDefault(t *testing.T) {
	ns := env.NewNamespace(t, "gc-nofin")
	env.Create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"}, Data: map[string]string{"k": "v"}})
	bsl, dir := env.FilesystemLocation(t, env.Name("nofin"))
	b := newBackup(t, bsl.Name, v1.BackupSpec{IncludedNamespaces: []string{ns}})
	if len(b.Finalizers) != 0 {
		t.Fatalf("backup finalizers %v, want none (--backup-finalizer is off)", b.Finalizers)
	}
	marker := filepath.Join(dir, "lifeboat", "backups", b.Name, "velero-backup.json")
	data, err := os.ReadFile(marker)
	if err != nil {
		t.Fatal(err)
	}
	var stored v1.Backup
	if err := json.Unmarshal(data, &stored); err != nil {
		t.Fatal(err)
	}
	if len(stored.Finalizers) != 0 || stored.UID != b.UID {
		t.Errorf("velero-backup.json: finalizers %v uid %s, want none and the Backup's uid %s", stored.Finalizers, stored.UID, b.UID)
	}
	if err := env.Client.Delete(testenv.Ctx(t), b); err != nil {
		t.Fatal(err)
	}
	releaseBackup(t, b)
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the backup's data went with the object: %v", err)
	}
	if got := requestsFor(t, b); len(got) != 0 {
		t.Errorf("deletion requests %v, want none", got)
	}
}

// With --backup-finalizer, deleting the object deletes the data too.
func TestDeletingABackupObjectWithTheFinalizerDeletesItsData(t *testing.T) {
	w := newDelWorld(t, func(o *server.Options) { o.BackupFinalizer = true })
	w.configMaps("settings")
	b := w.backup()
	if !slices.Contains(b.Finalizers, v1.BackupFinalizer) {
		t.Fatalf("backup finalizers %v, want %s", b.Finalizers, v1.BackupFinalizer)
	}
	if data, err := os.ReadFile(filepath.Join(w.bucket, "lifeboat", "backups", b.Name, "velero-backup.json")); err != nil || strings.Contains(string(data), v1.BackupFinalizer) {
		t.Fatalf("velero-backup.json (%v) names the finalizer: Velero would never finish deleting a Backup synced from it", err)
	}
	if err := env.Client.Delete(testenv.Ctx(t), b); err != nil {
		t.Fatal(err)
	}
	var cur v1.Backup
	if err := env.Client.Get(testenv.Ctx(t), client.ObjectKeyFromObject(b), &cur); err != nil {
		t.Fatalf("the Backup went at once (%v); its finalizer should keep it until its data is deleted", err)
	}
	if cur.DeletionTimestamp == nil {
		t.Error("the deleted Backup has no deletionTimestamp")
	}
	w.poll("the backup and its data to go", time.Minute, func(context.Context) (bool, error) {
		return w.backupGone(b) && len(w.keys("backups/"+b.Name)) == 0, nil
	})
}

// requestsFor lists the DeleteBackupRequests for b in the package server's namespace.
func requestsFor(t *testing.T, b *v1.Backup) []string {
	t.Helper()
	var list v1.DeleteBackupRequestList
	if err := env.Client.List(testenv.Ctx(t), &list, client.InNamespace(b.Namespace)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range list.Items {
		if d.Spec.BackupName == b.Name {
			out = append(out, d.Name)
		}
	}
	return out
}

// A backup that expired while it was only in the bucket is collected on
// arrival.
func TestSyncedExpiredBackupIsCollected(t *testing.T) {
	location := env.Name("gc-sync")
	name := env.Name("old")
	dir := filepath.Join(env.StoreRoot, location, "velero", "backups", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	started := metav1.NewTime(time.Now().Add(-48 * time.Hour).UTC().Truncate(time.Second))
	expired := metav1.NewTime(started.Add(24 * time.Hour))
	meta, _ := json.Marshal(&v1.Backup{
		TypeMeta:   metav1.TypeMeta{APIVersion: "velero.io/v1", Kind: "Backup"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: name, UID: "uid-in-another-cluster"},
		Spec:       v1.BackupSpec{TTL: metav1.Duration{Duration: 24 * time.Hour}},
		Status: v1.BackupStatus{Phase: v1.BackupPhaseCompleted, Version: 1, FormatVersion: "1.1.0",
			StartTimestamp: &started, CompletionTimestamp: &started, Expiration: &expired},
	})
	if err := os.WriteFile(filepath.Join(dir, "velero-backup.json"), meta, 0o600); err != nil {
		t.Fatal(err)
	}
	env.Create(t, &v1.BackupStorageLocation{
		ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: location},
		Spec: v1.BackupStorageLocationSpec{
			Provider:    "lifeboat.io/filesystem",
			Config:      map[string]string{"path": env.StoreRoot},
			StorageType: v1.StorageType{ObjectStorage: &v1.ObjectStorageLocation{Bucket: location, Prefix: "velero"}},
		},
	})
	b := env.WaitBackup(t, name, 30*time.Second)
	deleteRequestFor(t, b, 10*time.Second)
}

func TestBuiltInDeleteItemActionsAreListed(t *testing.T) {
	out := mustLifeboat(t, "plugin", "get")
	for _, name := range []string{"lifeboat.io/csi-snapshot-cleanup", "lifeboat.io/labelled-resource-cleanup"} {
		found := false
		for line := range strings.SplitSeq(out, "\n") {
			if strings.Contains(line, name) && strings.Contains(line, "DeleteItemAction") && strings.Contains(line, "(built-in)") {
				found = true
			}
		}
		if !found {
			t.Errorf("plugin get lists no built-in DeleteItemAction %s:\n%s", name, out)
		}
	}
}

// backup delete, all the way: the deletion runs the built-in
// labelled-resource cleanup, and the Backup goes once its data has.
func TestDeletingABackupRunsTheLabelledResourceCleanup(t *testing.T) {
	ns := env.NewNamespace(t, "gc-labelled")
	env.Create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"}, Data: map[string]string{"k": "v"}})
	bsl, _ := env.FilesystemLocation(t, env.Name("labelled"))
	b := newBackup(t, bsl.Name, v1.BackupSpec{IncludedNamespaces: []string{ns}})
	if b.Status.Phase != v1.BackupPhaseCompleted {
		t.Fatalf("backup phase %q", b.Status.Phase)
	}
	// Made for the backup after it ran (as a plugin would), so not in it.
	env.Create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "export",
		Labels: map[string]string{v1.BackupNameLabel: v1.LabelValue(b.Name)}}})
	env.Create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other-export",
		Labels: map[string]string{v1.BackupNameLabel: "some-other-backup"}}})
	config := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: env.Name("cleanup"),
			Labels: map[string]string{"lifeboat.io/cleanup-resources": "true"}},
		Data: map[string]string{"resources": "configmaps\n"},
	}
	env.Create(t, config)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), config) })

	mustLifeboat(t, "backup", "delete", b.Name, "--confirm", "--wait", "--timeout", "1m")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(b), &v1.Backup{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if err != nil {
		t.Fatalf("the deleted Backup is still there: %v", err)
	}
	for name, want := range map[string]bool{"export": false, "other-export": true, "settings": true} {
		err := env.Client.Get(testenv.Ctx(t), clientKeyIn(ns, name), &corev1.ConfigMap{})
		if got := err == nil; got != want {
			t.Errorf("ConfigMap %s/%s there = %v (%v), want %v", ns, name, got, err, want)
		}
	}
}

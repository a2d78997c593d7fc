package controller

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/deletion"
	"github.com/lifeboat-io/lifeboat/internal/locations"
	"github.com/lifeboat-io/lifeboat/internal/storage"
	"github.com/lifeboat-io/lifeboat/internal/storage/filesystem"
)

// Velero's DeleteBackupRequest CRD has neither Lifeboat's deletion state
// (attempts, checkpoint) nor spec.dryRun: a `backup delete --dry-run`
// request reaches the server as a real deletion. With it installed, the
// server deletes nothing and says what to do.
func TestDeletionRefusesVelerosRequestCRD(t *testing.T) {
	h := startAPIHarness(t)
	ns := h.namespace(t, "velero-dbr")
	h.installCRDs(t, ns, crdShapes[0])

	dir := t.TempDir()
	marker := filepath.Join(dir, "bucket", "backups", "nightly", storage.BackupMetadataFile)
	if err := os.MkdirAll(filepath.Dir(marker), 0o700); err != nil {
		t.Fatal(err)
	}
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	bsl := &v1.BackupStorageLocation{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"},
		Spec: v1.BackupStorageLocationSpec{
			Provider: "lifeboat.io/filesystem", Config: map[string]string{filesystem.PathKey: dir},
			StorageType: v1.StorageType{ObjectStorage: &v1.ObjectStorageLocation{Bucket: "bucket"}},
		},
	}
	check(h.c.Create(testCtx(t), bsl))
	check(writeStatus(testCtx(t), h.c, nil, bsl, func() { bsl.Status.Phase = v1.BackupStorageLocationPhaseAvailable }))
	b := &v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly"}, Spec: v1.BackupSpec{StorageLocation: "default"}}
	check(h.c.Create(testCtx(t), b))
	check(writeStatus(testCtx(t), h.c, nil, b, func() { b.Status.Phase = v1.BackupPhaseCompleted }))
	stored, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(marker, stored, 0o600); err != nil {
		t.Fatal(err)
	}
	dbr := v1.NewDeleteBackupRequest(b)
	dbr.Spec.DryRun = true
	check(h.c.Create(testCtx(t), dbr))
	if dbr.Spec.DryRun {
		t.Fatal("Velero's CRD kept spec.dryRun; this test needs the CRD that drops it")
	}

	r := &DeleteBackupRequestReconciler{
		Client: h.c, APIReader: h.c, Engine: &deletion.Engine{}, Log: testLog(), RetryBase: time.Second,
		Locations: &locations.Resolver{Client: h.c, SecretReader: h.c, Namespace: ns},
	}
	ctx, cancel := context.WithTimeout(testCtx(t), 30*time.Second)
	defer cancel()
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(dbr)}); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Get(testCtx(t), client.ObjectKeyFromObject(dbr), dbr); err != nil {
		t.Fatal(err)
	}
	if dbr.Status.Phase != v1.DeleteBackupRequestPhaseProcessed || len(dbr.Status.Errors) != 1 ||
		!strings.Contains(dbr.Status.Errors[0], "lifeboat install --crds-only") {
		t.Errorf("request phase %q errors %q; want Processed with an error saying to install Lifeboat's CRDs", dbr.Status.Phase, dbr.Status.Errors)
	}
	if err := h.c.Get(testCtx(t), client.ObjectKeyFromObject(b), b); err != nil {
		t.Fatal(err)
	}
	if b.Status.Phase != v1.BackupPhaseCompleted {
		t.Errorf("backup phase %q, want it untouched (Completed)", b.Status.Phase)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the backup's data: %v, want it kept", err)
	}
}

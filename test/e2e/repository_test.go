package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/locations"
	"github.com/lifeboat-io/lifeboat/internal/podvolume"
	"github.com/lifeboat-io/lifeboat/internal/podvolume/kopiapath"
	"github.com/lifeboat-io/lifeboat/internal/podvolume/repository"
)

// The server (its own service account and RBAC) sets up the BackupRepository
// of an S3 location asked for with the ensurer: the kopia repository is
// created with the location's credentials from its Secret and the password
// Secret the server creates; a data path of another process (the node
// agent's role) then backs up into it and restores from it.
func TestBackupRepositoryIsSetUpByTheServer(t *testing.T) {
	bsl, _ := env.S3Location(t, env.Name("repo"))
	ens := &repository.Ensurer{Client: env.Client, Namespace: env.Namespace, Timeout: time.Minute}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	br, err := ens.Ensure(ctx, "app", bsl.Name)
	if err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	if br.Status.Phase != repository.PhaseReady || br.Spec.MaintenanceFrequency.Duration != time.Hour {
		t.Errorf("BackupRepository %s: phase %q, maintenanceFrequency %v", br.Name, br.Status.Phase, br.Spec.MaintenanceFrequency)
	}
	var secret corev1.Secret
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: repository.PasswordSecretName}, &secret); err != nil {
		t.Fatalf("the server did not create the password Secret: %v", err)
	}

	resolver := &locations.Resolver{Client: env.Client, SecretReader: env.Client, Namespace: env.Namespace}
	mgr := &repository.Manager{Storage: resolver, Secrets: env.Client, Namespace: env.Namespace, WorkDir: t.TempDir()}
	defer mgr.Close(context.Background())
	dp := &kopiapath.DataPath{Repositories: mgr}
	var loc v1.BackupStorageLocation
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(bsl), &loc); err != nil {
		t.Fatal(err)
	}
	repo := podvolume.Repository{Location: &loc, VolumeNamespace: "app"}
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "data"), []byte("volume data"), 0o640); err != nil {
		t.Fatal(err)
	}
	res, err := dp.Backup(ctx, podvolume.BackupRequest{Repository: repo, Path: src,
		Tags: map[string]string{"backup": "b", "ns": "app", "pod": "p", "volume": "v"}})
	if err != nil {
		t.Fatalf("Backup into the server's repository: %v", err)
	}
	dst := t.TempDir()
	if _, err := dp.Restore(ctx, podvolume.RestoreRequest{Repository: repo, SnapshotID: res.SnapshotID, Path: dst}); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(dst, "data")); err != nil || string(got) != "volume data" {
		t.Errorf("restored %q, %v", got, err)
	}
}

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kopia/kopia/repo/manifest"
	"github.com/kopia/kopia/snapshot"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/locations"
	"github.com/lifeboat-io/lifeboat/internal/podvolume"
	"github.com/lifeboat-io/lifeboat/internal/podvolume/kopiapath"
	"github.com/lifeboat-io/lifeboat/internal/podvolume/repository"
	"github.com/lifeboat-io/lifeboat/internal/testutil/testenv"
)

// snapshotManifests lists the snapshot manifests of a repository through a
// Manager of its own, opened now, so nothing it cached earlier hides what
// another process (the server) changed.
func snapshotManifests(t *testing.T, repo podvolume.Repository) []manifest.ID {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resolver := &locations.Resolver{Client: env.Client, SecretReader: env.Client, Namespace: env.Namespace}
	mgr := &repository.Manager{Storage: resolver, Secrets: env.Client, Namespace: env.Namespace, WorkDir: t.TempDir()}
	defer mgr.Close(context.Background())
	rep, release, err := mgr.Open(ctx, repo)
	if err != nil {
		t.Fatalf("opening the repository: %v", err)
	}
	defer release()
	ids, err := snapshot.ListSnapshotManifests(ctx, rep, nil, nil)
	if err != nil {
		t.Fatalf("listing snapshot manifests: %v", err)
	}
	return ids
}

// Deleting a backup forgets the kopia snapshots its PodVolumeBackups name,
// in the repository the server set up, as Velero's deletion does: a
// directory stored by the data path (as the node agent stores a volume),
// named by the backup's stored podvolumebackups file and by a
// PodVolumeBackup in the cluster, is gone from the repository after
// `lifeboat backup delete`, and so are the backup's files and its
// PodVolumeBackup object. Another snapshot in the same repository stays.
func TestDeletingABackupForgetsItsPodVolumeSnapshots(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bsl, _ := env.S3Location(t, env.Name("fsdel"))
	env.WaitLocationPhase(t, bsl.Name, v1.BackupStorageLocationPhaseAvailable, time.Minute)
	ens := &repository.Ensurer{Client: env.Client, Namespace: env.Namespace, Timeout: time.Minute}
	if _, err := ens.Ensure(ctx, "app", bsl.Name); err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	var loc v1.BackupStorageLocation
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(bsl), &loc); err != nil {
		t.Fatal(err)
	}
	repo := podvolume.Repository{Location: &loc, VolumeNamespace: "app"}

	// The data path of another process stores two volumes, as node agents do.
	resolver := &locations.Resolver{Client: env.Client, SecretReader: env.Client, Namespace: env.Namespace}
	mgr := &repository.Manager{Storage: resolver, Secrets: env.Client, Namespace: env.Namespace, WorkDir: t.TempDir()}
	dp := &kopiapath.DataPath{Repositories: mgr}
	store := func(pod, content string) string {
		src := t.TempDir()
		if err := os.WriteFile(filepath.Join(src, "data"), []byte(content), 0o640); err != nil {
			t.Fatal(err)
		}
		res, err := dp.Backup(ctx, podvolume.BackupRequest{Repository: repo, Path: src,
			Tags: map[string]string{"backup": "b", "ns": "app", "pod": pod, "volume": "data"}})
		if err != nil {
			t.Fatalf("storing the volume of pod %s: %v", pod, err)
		}
		return res.SnapshotID
	}
	mine, other := store("db-0", "the backup's volume"), store("keep-0", "another backup's volume")
	_ = mgr.Close(ctx)
	if ids := snapshotManifests(t, repo); !slices.Contains(ids, manifest.ID(mine)) || !slices.Contains(ids, manifest.ID(other)) {
		t.Fatalf("manifests %v: want %s and %s", ids, mine, other)
	}

	// A finished backup whose PodVolumeBackup names the snapshot, in the
	// store and in the cluster.
	b := newBackup(t, bsl.Name, v1.BackupSpec{IncludedNamespaces: []string{env.Name("empty")}})
	pvb := &v1.PodVolumeBackup{ObjectMeta: metav1.ObjectMeta{
		Namespace: env.Namespace, Name: b.Name + "-db",
		Labels: map[string]string{v1.BackupNameLabel: v1.LabelValue(b.Name), v1.BackupUIDLabel: string(b.UID)},
	}}
	pvb.Spec.Pod = corev1.ObjectReference{Kind: "Pod", Namespace: "app", Name: "db-0"}
	pvb.Spec.Volume = "data"
	pvb.Spec.BackupStorageLocation = bsl.Name
	pvb.Spec.UploaderType = "kopia"
	pvb.Spec.Node = "node-1"
	pvb.Status.SnapshotID = mine
	pvb.Status.Phase = v1.PodVolumePhaseCompleted
	// The CRD has no status subresource (as Velero's), so the status is
	// created with the object.
	env.Create(t, pvb.DeepCopy())
	bs := openStore(t, bsl)
	if err := bs.PutPodVolumeBackups(ctx, b.Name, []v1.PodVolumeBackup{*pvb}); err != nil {
		t.Fatal(err)
	}
	var live v1.PodVolumeBackup

	out, err := lifeboat(t, "backup", "delete", b.Name, "--dry-run")
	if err != nil || !strings.Contains(out, "1 pod volume snapshot") || !strings.Contains(out, mine) {
		t.Errorf("dry run: %v\n%s", err, out)
	}
	out, err = lifeboat(t, "backup", "delete", b.Name, "--confirm", "--wait", "--timeout", "2m")
	if err != nil {
		t.Fatalf("backup delete: %v\n%s", err, out)
	}

	ids := snapshotManifests(t, repo)
	if slices.Contains(ids, manifest.ID(mine)) {
		t.Errorf("snapshot %s of the deleted backup is still in the repository (%v)", mine, ids)
	}
	if !slices.Contains(ids, manifest.ID(other)) {
		t.Errorf("snapshot %s of another backup was forgotten too (%v)", other, ids)
	}
	keys, err := bs.ObjectStore().ListObjects(testenv.Ctx(t), bs.Bucket(), bs.BackupDir(b.Name))
	if err != nil || len(keys) != 0 {
		t.Errorf("backup keys left: %v, %v", keys, err)
	}
	err = env.Client.Get(ctx, client.ObjectKeyFromObject(pvb), &live)
	if !apierrors.IsNotFound(err) {
		t.Errorf("the backup's PodVolumeBackup is still there (%v)", err)
	}
}

package deletion

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kopia/kopia/repo"
	"github.com/kopia/kopia/repo/manifest"
	"github.com/kopia/kopia/snapshot"
	"github.com/kopia/kopia/snapshot/upload"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/locations"
	"github.com/lifeboat-io/lifeboat/internal/podvolume"
	"github.com/lifeboat-io/lifeboat/internal/podvolume/kopiapath"
	"github.com/lifeboat-io/lifeboat/internal/podvolume/repository"
)

// ownStorage resolves a location to its own spec (what locations.Resolver
// does, without Secrets).
type ownStorage struct{}

func (ownStorage) ResolveStorage(_ context.Context, bsl *v1.BackupStorageLocation) (*locations.ResolvedStorage, error) {
	return &locations.ResolvedStorage{Provider: bsl.Spec.Provider, Config: bsl.Spec.Config}, nil
}

// kopiaLocation is fakePodVolumes whose locations are one real filesystem
// location holding kopia repositories.
type kopiaLocation struct {
	*fakePodVolumes
	bsl *v1.BackupStorageLocation
}

func (k kopiaLocation) StorageLocation(_ context.Context, name string) (*v1.BackupStorageLocation, error) {
	bsl := k.bsl.DeepCopy()
	bsl.Name = name
	return bsl, nil
}

// The deletion of a backup whose upload failed after kopia had saved a
// checkpoint, against real repositories: the recorded snapshot and the
// checkpoint (tagged with the backup, as the data path tags it) are
// forgotten; another backup's snapshot and an untagged checkpoint (an
// older upload's, or Velero's, which cannot be told to be this backup's)
// stay.
func TestCheckpointOfAFailedUploadIsForgottenWithItsBackup(t *testing.T) {
	w := newWorld(t)
	w.putTarball(nil)
	w.putBackupFiles(nil)

	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "repos"), 0o700); err != nil {
		t.Fatal(err)
	}
	bsl := &v1.BackupStorageLocation{
		ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: "default", ResourceVersion: "1"},
		Spec: v1.BackupStorageLocationSpec{
			Provider:    "lifeboat.io/filesystem",
			Config:      map[string]string{"path": root},
			StorageType: v1.StorageType{ObjectStorage: &v1.ObjectStorageLocation{Bucket: "repos", Prefix: "lb"}},
			AccessMode:  "ReadWrite",
		},
	}
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	secrets := fake.NewClientBuilder().WithScheme(scheme).WithObjects(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: repository.PasswordSecretName},
		Data:       map[string][]byte{repository.PasswordSecretKey: []byte(repository.DefaultPassword)},
	}).Build()
	mgr := &repository.Manager{Storage: ownStorage{}, Secrets: secrets, Namespace: "velero", WorkDir: t.TempDir()}
	t.Cleanup(func() { _ = mgr.Close(context.Background()) })
	r := podvolume.Repository{Location: bsl, VolumeNamespace: "shop"}
	if err := mgr.Prepare(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	dp := &kopiapath.DataPath{Repositories: mgr}

	vol := t.TempDir()
	if err := os.WriteFile(filepath.Join(vol, "f"), []byte("rows"), 0o644); err != nil {
		t.Fatal(err)
	}
	tagsOf := func(backup, uid, pod string) map[string]string {
		return map[string]string{"backup": backup, "backup-uid": uid, "pod": pod, "pod-uid": pod + "-uid", "ns": "shop", "volume": "data"}
	}
	recorded, err := dp.Backup(t.Context(), podvolume.BackupRequest{Repository: r, Path: vol, Tags: tagsOf("nightly", "uid-1", "db-0")})
	if err != nil {
		t.Fatal(err)
	}
	other, err := dp.Backup(t.Context(), podvolume.BackupRequest{Repository: r, Path: vol, Tags: tagsOf("weekly", "uid-other", "db-0")})
	if err != nil {
		t.Fatal(err)
	}

	// The checkpoints kopia's uploader saves mid-upload, of web-0's volume
	// whose transfer then failed: one as the data path tags it, one
	// without tags.
	rep, release, err := mgr.Open(t.Context(), r)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	base, err := snapshot.LoadSnapshot(t.Context(), rep, manifest.ID(recorded.SnapshotID))
	if err != nil {
		t.Fatal(err)
	}
	checkpoint := func(tags map[string]string) manifest.ID {
		m := &snapshot.Manifest{
			Source:    snapshot.SourceInfo{UserName: repository.UserName, Host: repository.Hostname, Path: kopiapath.SourcePath(tagsOf("nightly", "uid-1", "web-0"), "")},
			StartTime: base.StartTime, EndTime: base.EndTime, RootEntry: base.RootEntry,
			IncompleteReason: upload.IncompleteReasonCheckpoint, Tags: tags,
		}
		var id manifest.ID
		err := repo.WriteSession(t.Context(), rep, repo.WriteSessionOptions{Purpose: "test checkpoint"}, func(ctx context.Context, w repo.RepositoryWriter) error {
			var err error
			id, err = snapshot.SaveSnapshot(ctx, w, m)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	tagged := maps.Clone(tagsOf("nightly", "uid-1", "web-0"))
	tagged["snapshot-requester"], tagged["snapshot-uploader"] = kopiapath.Requester, kopiapath.UploaderType
	checkpoint(tagged)
	untagged := checkpoint(nil)

	mine := map[string]string{v1.BackupNameLabel: "nightly", v1.BackupUIDLabel: "uid-1"}
	w.putPodVolumeBackups([]v1.PodVolumeBackup{
		pvb("nightly-a", "shop", "db-0", "data", recorded.SnapshotID, mine),
		failedPVB("nightly-b", "shop", "web-0", "data", mine),
	})
	e := w.engine()
	e.PodVolumes, e.Forgetter = kopiaLocation{fakePodVolumes: &fakePodVolumes{}, bsl: bsl}, dp
	res := e.Run(t.Context(), Input{Backup: w.backup, Store: w.store})
	if res.Err != nil {
		t.Fatalf("%v (%v)", res.Err, res.Messages())
	}
	if res.Report.PodVolumeSnapshotsForgotten != 2 {
		t.Errorf("report counts %d forgotten, want 2 (the recorded snapshot, the checkpoint)", res.Report.PodVolumeSnapshotsForgotten)
	}

	fresh := &repository.Manager{Storage: ownStorage{}, Secrets: secrets, Namespace: "velero", WorkDir: t.TempDir()}
	t.Cleanup(func() { _ = fresh.Close(context.Background()) })
	frep, frelease, err := fresh.Open(t.Context(), r)
	if err != nil {
		t.Fatal(err)
	}
	defer frelease()
	ids, err := snapshot.ListSnapshotManifests(t.Context(), frep, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	left := []string{}
	for _, id := range ids {
		left = append(left, string(id))
	}
	slices.Sort(left)
	want := []string{other.SnapshotID, string(untagged)}
	slices.Sort(want)
	if !slices.Equal(left, want) {
		t.Errorf("snapshots left %v, want only the other backup's %s and the untagged checkpoint %s", left, other.SnapshotID, untagged)
	}
}

package kopiapath

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kopia/kopia/repo"
	"github.com/kopia/kopia/repo/maintenance"
	"github.com/kopia/kopia/repo/manifest"
	"github.com/kopia/kopia/snapshot"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/locations"
	"github.com/lifeboat-io/lifeboat/internal/podvolume"
	"github.com/lifeboat-io/lifeboat/internal/podvolume/repository"
	"github.com/lifeboat-io/lifeboat/internal/testutil/filetree"
	"github.com/lifeboat-io/lifeboat/internal/testutil/s3server"
)

const serverNS = "lifeboat"

// srv is one versitygw for the package's S3 tests; nil with -short.
var srv *s3server.Server

func TestMain(m *testing.M) { s3server.RunShared(m, &srv) }

// staticStorage resolves every location to its own spec, with creds as
// its credential file (what locations.Resolver does with Secrets).
type staticStorage struct{ creds []byte }

func (s staticStorage) ResolveStorage(_ context.Context, bsl *v1.BackupStorageLocation) (*locations.ResolvedStorage, error) {
	return &locations.ResolvedStorage{Provider: bsl.Spec.Provider, Config: bsl.Spec.Config, Credentials: s.creds}, nil
}

// passwordClient holds the password Secret (a fake client: the data path
// only reads one Secret).
func passwordClient(t *testing.T, password string) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	if password != "" {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: serverNS, Name: repository.PasswordSecretName},
			Data:       map[string][]byte{repository.PasswordSecretKey: []byte(password)},
		}
		if err := c.Create(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

type fixture struct {
	mgr  *repository.Manager
	dp   *DataPath
	repo podvolume.Repository
	root string // the filesystem location's root ("" for S3)
}

func filesystemLocation(t *testing.T) (*v1.BackupStorageLocation, string) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "bucket"), 0o700); err != nil {
		t.Fatal(err)
	}
	return &v1.BackupStorageLocation{
		ObjectMeta: metav1.ObjectMeta{Namespace: serverNS, Name: "default", ResourceVersion: "1"},
		Spec: v1.BackupStorageLocationSpec{
			Provider:    "lifeboat.io/filesystem",
			Config:      map[string]string{"path": root},
			StorageType: v1.StorageType{ObjectStorage: &v1.ObjectStorageLocation{Bucket: "bucket", Prefix: "backups"}},
			AccessMode:  "ReadWrite",
			Default:     true,
		},
	}, root
}

func newFixture(t *testing.T, bsl *v1.BackupStorageLocation, creds []byte, c client.Client) *fixture {
	t.Helper()
	return newFixtureCompressed(t, bsl, creds, c, "")
}

// newFixtureCompressed is newFixture with a manager that creates
// repositories with compressor (the server's --fs-backup-compression).
func newFixtureCompressed(t *testing.T, bsl *v1.BackupStorageLocation, creds []byte, c client.Client, compressor string) *fixture {
	t.Helper()
	mgr := &repository.Manager{
		Storage: staticStorage{creds: creds}, Secrets: c, Namespace: serverNS, WorkDir: t.TempDir(), Compression: compressor,
	}
	t.Cleanup(func() {
		if err := mgr.Close(context.Background()); err != nil {
			t.Errorf("closing repositories: %v", err)
		}
	})
	f := &fixture{mgr: mgr, dp: &DataPath{Repositories: mgr}, repo: podvolume.Repository{Location: bsl, VolumeNamespace: "app"}}
	if bsl.Spec.Provider == "lifeboat.io/filesystem" {
		f.root = bsl.Spec.Config["path"]
	}
	if err := mgr.Prepare(t.Context(), f.repo); err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	return f
}

// volume writes a directory of mixed files: modes, a symlink (dangling
// and not), an empty directory, nested directories, a 20 MiB file.
func volume(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	big := make([]byte, 20<<20)
	for i := range big {
		big[i] = byte(r.UintN(256))
	}
	must(os.WriteFile(filepath.Join(dir, "big.bin"), big, 0o644))
	must(os.MkdirAll(filepath.Join(dir, "a/b/c"), 0o755))
	must(os.MkdirAll(filepath.Join(dir, "empty"), 0o750))
	for i := range 50 {
		must(os.WriteFile(filepath.Join(dir, "a/b", fmt.Sprintf("f%02d.txt", i)), bytes.Repeat([]byte{byte('a' + i%26)}, i*37), 0o640))
	}
	must(os.WriteFile(filepath.Join(dir, "a/b/c/script.sh"), []byte("#!/bin/sh\necho hi\n"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "a/private"), []byte("secret"), 0o600))
	must(os.WriteFile(filepath.Join(dir, "zero"), nil, 0o644))
	must(os.Symlink("a/b/c/script.sh", filepath.Join(dir, "link")))
	must(os.Symlink("/nowhere/at/all", filepath.Join(dir, "dangling")))
	return dir
}

func tags(backup string) map[string]string {
	return map[string]string{"backup": backup, "backup-uid": "uid-" + backup, "pod": "web-0", "pod-uid": "pod-uid", "ns": "app", "volume": "data"}
}

func TestBackupRestoreFilesystem(t *testing.T) {
	bsl, root := filesystemLocation(t)
	f := newFixture(t, bsl, nil, passwordClient(t, repository.DefaultPassword))
	backupRestoreIncremental(t, f)
	// Velero's layout: <root>/<bucket>/<prefix>/kopia/<namespace>/, with
	// kopia's format blob and Velero's marker.
	for _, name := range []string{"kopia.repository.f", "udmrepo.Repository.f"} {
		if _, err := os.Stat(filepath.Join(root, "bucket", "backups", "kopia", "app", name)); err != nil {
			t.Errorf("repository layout: %v", err)
		}
	}
}

func TestBackupRestoreS3(t *testing.T) {
	if srv == nil {
		t.Skip("needs the S3 server, which -short does not start")
	}
	bucket := srv.NewBucket(t)
	bsl := &v1.BackupStorageLocation{
		ObjectMeta: metav1.ObjectMeta{Namespace: serverNS, Name: "s3", ResourceVersion: "1"},
		Spec: v1.BackupStorageLocationSpec{
			Provider:    "velero.io/aws",
			Config:      srv.BSLConfig(),
			StorageType: v1.StorageType{ObjectStorage: &v1.ObjectStorageLocation{Bucket: bucket, Prefix: "velero"}},
		},
	}
	f := newFixture(t, bsl, srv.CredentialsFile(), passwordClient(t, repository.DefaultPassword))
	backupRestoreIncremental(t, f)
}

func backupRestoreIncremental(t *testing.T, f *fixture) {
	src := volume(t)
	want := filetree.Describe(t, src)
	var mu sync.Mutex
	var last podvolume.Progress
	res, err := f.dp.Backup(t.Context(), podvolume.BackupRequest{
		Repository: f.repo, Path: src, Tags: tags("b1"),
		Progress: func(p podvolume.Progress) { mu.Lock(); last = p; mu.Unlock() },
	})
	if err != nil {
		t.Fatalf("Backup: %v", err)
	}
	if res.SnapshotID == "" || res.Empty {
		t.Fatalf("Backup: %+v, want a snapshot of a non-empty volume", res)
	}
	if last.BytesDone != res.TotalBytes || res.TotalBytes < 20<<20 {
		t.Errorf("last progress %+v, result %d bytes; want done = total >= 20 MiB", last, res.TotalBytes)
	}

	dst := t.TempDir()
	n, err := f.dp.Restore(t.Context(), podvolume.RestoreRequest{Repository: f.repo, SnapshotID: res.SnapshotID, Path: dst})
	if err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if n != res.TotalBytes {
		t.Errorf("Restore wrote %d bytes, backup had %d", n, res.TotalBytes)
	}
	filetree.Compare(t, want, filetree.Describe(t, dst))

	// Unchanged: the second backup finds the first as its parent and
	// reads no file again.
	res2, err := f.dp.Backup(t.Context(), podvolume.BackupRequest{Repository: f.repo, Path: src, Tags: tags("b2")})
	if err != nil {
		t.Fatalf("second Backup: %v", err)
	}
	rep, release, err := f.mgr.Open(t.Context(), f.repo)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	man, err := snapshot.LoadSnapshot(t.Context(), rep, manifestID(res2.SnapshotID))
	if err != nil {
		t.Fatal(err)
	}
	if man.Stats.NonCachedFiles != 0 || man.Stats.CachedFiles == 0 {
		t.Errorf("second backup: %d files read again, %d cached; want none read, all cached", man.Stats.NonCachedFiles, man.Stats.CachedFiles)
	}
	if man.Tags["backup"] != "b2" || man.Tags[tagRequester] != Requester || man.Tags[tagUploader] != UploaderType {
		t.Errorf("snapshot tags %v", man.Tags)
	}
	if man.Source.Path != "snapshot-pod-volume/kopia/app/web-0/data" || man.Source.UserName != "default" || man.Source.Host != "default" {
		t.Errorf("snapshot source %v", man.Source)
	}

	// Forget the first; maintenance may run; the second still restores.
	if err := f.dp.Forget(t.Context(), f.repo, res.SnapshotID); err != nil {
		t.Fatalf("Forget: %v", err)
	}
	if _, err := snapshot.LoadSnapshot(t.Context(), rep, manifestID(res.SnapshotID)); err == nil {
		t.Errorf("snapshot %s still loads after Forget", res.SnapshotID)
	}
	if err := f.mgr.Maintain(t.Context(), f.repo, maintenance.ModeFull); err != nil {
		t.Fatalf("Maintain: %v", err)
	}
	dst2 := t.TempDir()
	if _, err := f.dp.Restore(t.Context(), podvolume.RestoreRequest{Repository: f.repo, SnapshotID: res2.SnapshotID, Path: dst2}); err != nil {
		t.Fatalf("Restore after forget and maintenance: %v", err)
	}
	filetree.Compare(t, want, filetree.Describe(t, dst2))
}

func TestEmptyVolume(t *testing.T) {
	bsl, _ := filesystemLocation(t)
	f := newFixture(t, bsl, nil, passwordClient(t, repository.DefaultPassword))
	res, err := f.dp.Backup(t.Context(), podvolume.BackupRequest{Repository: f.repo, Path: t.TempDir(), Tags: tags("empty")})
	if err != nil {
		t.Fatalf("Backup: %v", err)
	}
	if !res.Empty || res.TotalBytes != 0 {
		t.Errorf("Backup of an empty volume: %+v, want Empty", res)
	}
	dst := t.TempDir()
	if _, err := f.dp.Restore(t.Context(), podvolume.RestoreRequest{Repository: f.repo, SnapshotID: res.SnapshotID, Path: dst}); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if got := filetree.Describe(t, dst); len(got) != 0 {
		t.Errorf("restored an empty volume as %v", got)
	}
}

func TestRestoreOverwrites(t *testing.T) {
	bsl, _ := filesystemLocation(t)
	f := newFixture(t, bsl, nil, passwordClient(t, repository.DefaultPassword))
	src := volume(t)
	want := filetree.Describe(t, src)
	res, err := f.dp.Backup(t.Context(), podvolume.BackupRequest{Repository: f.repo, Path: src, Tags: tags("b")})
	if err != nil {
		t.Fatal(err)
	}
	// The target already holds other content at the same names: as in
	// Velero, the snapshot's files win; files only in the target stay.
	dst := t.TempDir()
	if err := os.WriteFile(filepath.Join(dst, "zero"), []byte("old content"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("elsewhere", filepath.Join(dst, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dst, "extra"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := f.dp.Restore(t.Context(), podvolume.RestoreRequest{Repository: f.repo, SnapshotID: res.SnapshotID, Path: dst}); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	got := filetree.Describe(t, dst)
	if got["extra"] == "" {
		t.Errorf("a file only in the target was removed")
	}
	delete(got, "extra")
	filetree.Compare(t, want, got)
}

func TestCancelledBackup(t *testing.T) {
	bsl, _ := filesystemLocation(t)
	f := newFixture(t, bsl, nil, passwordClient(t, repository.DefaultPassword))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := f.dp.Backup(ctx, podvolume.BackupRequest{Repository: f.repo, Path: volume(t), Tags: tags("c")})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Backup with a cancelled context: %v, want context.Canceled", err)
	}
}

func TestWrongPassword(t *testing.T) {
	bsl, _ := filesystemLocation(t)
	f := newFixture(t, bsl, nil, passwordClient(t, repository.DefaultPassword))
	if _, err := f.dp.Backup(t.Context(), podvolume.BackupRequest{Repository: f.repo, Path: volume(t), Tags: tags("b")}); err != nil {
		t.Fatal(err)
	}
	other := &repository.Manager{
		Storage: staticStorage{}, Secrets: passwordClient(t, "not-the-password"), Namespace: serverNS, WorkDir: t.TempDir(),
	}
	defer other.Close(context.Background())
	err := other.Prepare(t.Context(), f.repo)
	if err == nil || !strings.Contains(err.Error(), "secret lifeboat/velero-repo-credentials") || !strings.Contains(err.Error(), "invalid repository password") {
		t.Fatalf("Prepare with a wrong password: %v; want an error naming the Secret", err)
	}
}

func TestMissingPasswordSecret(t *testing.T) {
	bsl, _ := filesystemLocation(t)
	mgr := &repository.Manager{Storage: staticStorage{}, Secrets: passwordClient(t, ""), Namespace: serverNS, WorkDir: t.TempDir()}
	err := mgr.Prepare(t.Context(), podvolume.Repository{Location: bsl, VolumeNamespace: "app"})
	if err == nil || !strings.Contains(err.Error(), "velero-repo-credentials") {
		t.Fatalf("Prepare without the password Secret: %v", err)
	}
}

func TestUnsupportedProvider(t *testing.T) {
	bsl, _ := filesystemLocation(t)
	bsl.Spec.Provider = "velero.io/azure"
	mgr := &repository.Manager{Storage: staticStorage{}, Secrets: passwordClient(t, "p"), Namespace: serverNS, WorkDir: t.TempDir()}
	err := mgr.Prepare(t.Context(), podvolume.Repository{Location: bsl, VolumeNamespace: "app"})
	if err == nil || !strings.Contains(err.Error(), `provider "velero.io/azure"`) || !strings.Contains(err.Error(), "lifeboat.io/filesystem") {
		t.Fatalf("Prepare on an Azure location: %v", err)
	}
}

func manifestID(s string) manifest.ID { return manifest.ID(s) }

// Volumes of one namespace share the repository: concurrent backups
// through one open repository, each restorable.
func TestConcurrentBackups(t *testing.T) {
	bsl, _ := filesystemLocation(t)
	f := newFixture(t, bsl, nil, passwordClient(t, repository.DefaultPassword))
	src := volume(t)
	want := filetree.Describe(t, src)
	ids := make([]string, 4)
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() {
			tg := tags("b")
			tg["pod"] = fmt.Sprintf("web-%d", i)
			res, err := f.dp.Backup(t.Context(), podvolume.BackupRequest{Repository: f.repo, Path: src, Tags: tg})
			ids[i], errs[i] = res.SnapshotID, err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("backup %d: %v", i, err)
		}
		dst := t.TempDir()
		if _, err := f.dp.Restore(t.Context(), podvolume.RestoreRequest{Repository: f.repo, SnapshotID: ids[i], Path: dst}); err != nil {
			t.Fatalf("restore %d: %v", i, err)
		}
		filetree.Compare(t, want, filetree.Describe(t, dst))
	}
}

// One connection per repository while the location's spec stays the same
// (its status changes on every validation); a new one when the spec
// changes, the old one still usable by whoever holds it.
func TestRepositoryConnectionReuse(t *testing.T) {
	bsl, _ := filesystemLocation(t)
	f := newFixture(t, bsl, nil, passwordClient(t, repository.DefaultPassword))
	r1, rel1, err := f.mgr.Open(t.Context(), f.repo)
	if err != nil {
		t.Fatal(err)
	}
	statusOnly := bsl.DeepCopy()
	statusOnly.ResourceVersion = "2"
	statusOnly.Status.Phase = v1.BackupStorageLocationPhaseAvailable
	r2, rel2, err := f.mgr.Open(t.Context(), podvolume.Repository{Location: statusOnly, VolumeNamespace: "app"})
	if err != nil {
		t.Fatal(err)
	}
	if r1 != r2 {
		t.Errorf("a status change of the location opened a second connection")
	}
	rel2()
	changed := bsl.DeepCopy()
	changed.Spec.Config = map[string]string{"path": bsl.Spec.Config["path"], "unrelated": "x"}
	r3, rel3, err := f.mgr.Open(t.Context(), podvolume.Repository{Location: changed, VolumeNamespace: "app"})
	if err != nil {
		t.Fatal(err)
	}
	defer rel3()
	if r3 == r1 {
		t.Errorf("a spec change of the location kept the old connection")
	}
	// The old holder can still use its connection until it releases it.
	if _, err := snapshot.ListSources(t.Context(), r1); err != nil {
		t.Errorf("old connection after the spec change: %v", err)
	}
	rel1()
}

// A server keeps its repositories open; the node agent, another process,
// writes snapshots into them afterwards. Forgetting one of those through
// the server's long-open repository must still delete it: a stale view
// would make the deletion a silent no-op.
func TestForgetASnapshotAnotherProcessWrote(t *testing.T) {
	bsl, _ := filesystemLocation(t)
	c := passwordClient(t, repository.DefaultPassword)
	server := newFixture(t, bsl, nil, c)
	_, release, err := server.mgr.Open(t.Context(), server.repo)
	if err != nil {
		t.Fatal(err)
	}
	release()
	agent := newFixture(t, bsl, nil, c)
	res, err := agent.dp.Backup(t.Context(), podvolume.BackupRequest{Repository: agent.repo, Path: volume(t), Tags: tags("b1")})
	if err != nil {
		t.Fatal(err)
	}
	if err := server.dp.Forget(t.Context(), server.repo, res.SnapshotID); err != nil {
		t.Fatalf("Forget: %v", err)
	}
	fresh := newFixture(t, bsl, nil, c)
	rep, release, err := fresh.mgr.Open(t.Context(), fresh.repo)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	ids, err := snapshot.ListSnapshotManifests(t.Context(), rep, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(ids, manifestID(res.SnapshotID)) {
		t.Errorf("snapshot %s is still in the repository after Forget", res.SnapshotID)
	}
}

// The node agent of one node keeps its repositories open while the node
// agent of another writes snapshots into them: restoring such a snapshot,
// and finding it as the parent of the next backup, must see it.
func TestRestoreAndParentOfASnapshotAnotherProcessWrote(t *testing.T) {
	bsl, _ := filesystemLocation(t)
	c := passwordClient(t, repository.DefaultPassword)
	nodeB := newFixture(t, bsl, nil, c)
	_, release, err := nodeB.mgr.Open(t.Context(), nodeB.repo)
	if err != nil {
		t.Fatal(err)
	}
	release()
	nodeA := newFixture(t, bsl, nil, c)
	src := volume(t)
	res, err := nodeA.dp.Backup(t.Context(), podvolume.BackupRequest{Repository: nodeA.repo, Path: src, Tags: tags("b1")})
	if err != nil {
		t.Fatal(err)
	}

	dst := t.TempDir()
	if _, err := nodeB.dp.Restore(t.Context(), podvolume.RestoreRequest{Repository: nodeB.repo, SnapshotID: res.SnapshotID, Path: dst}); err != nil {
		t.Fatalf("restoring another process's snapshot through a long-open repository: %v", err)
	}
	filetree.Compare(t, filetree.Describe(t, src), filetree.Describe(t, dst))

	res2, err := nodeB.dp.Backup(t.Context(), podvolume.BackupRequest{Repository: nodeB.repo, Path: src, Tags: tags("b2")})
	if err != nil {
		t.Fatal(err)
	}
	rep, release, err := nodeB.mgr.Open(t.Context(), nodeB.repo)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	man, err := snapshot.LoadSnapshot(t.Context(), rep, manifestID(res2.SnapshotID))
	if err != nil {
		t.Fatal(err)
	}
	if man.Stats.NonCachedFiles != 0 {
		t.Errorf("second backup read %d files again: it missed the other process's snapshot as its parent", man.Stats.NonCachedFiles)
	}
}

// Opening writes the connection's config as kopia's Connect would (it
// is not called: it would open the repository a second time), private
// to the process, and a location without the repository is ErrNotFound.
func TestOpenWritesTheConnectionConfigAndTellsAMissingRepository(t *testing.T) {
	bsl, root := filesystemLocation(t)
	f := newFixture(t, bsl, nil, passwordClient(t, repository.DefaultPassword))
	_, release, err := f.mgr.Open(t.Context(), f.repo)
	if err != nil {
		t.Fatal(err)
	}
	release()
	configs, _ := filepath.Glob(filepath.Join(f.mgr.WorkDir, "kopia", "*", "app", "repository.config"))
	if len(configs) != 1 {
		t.Fatalf("connection configs %v: want one under the work directory", configs)
	}
	fi, err := os.Stat(configs[0])
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("config %s: %v, %v; want mode 0600 (it holds the storage's credentials)", configs[0], fi, err)
	}
	lc, err := repo.LoadConfigFromFile(configs[0])
	if err != nil {
		t.Fatal(err)
	}
	if lc.Storage == nil || lc.Storage.Type != "filesystem" || lc.Username != repository.UserName || lc.Hostname != repository.Hostname ||
		lc.Caching == nil || !strings.HasPrefix(lc.Caching.CacheDirectory, f.mgr.WorkDir) || lc.Caching.ContentCacheSizeLimitBytes == 0 {
		t.Errorf("config %+v (caching %+v): want the filesystem storage, default@default, a bounded cache in the work directory", lc, lc.Caching)
	}

	// The storage exists, the repository does not.
	if err := os.MkdirAll(filepath.Join(root, "bucket", "backups", "kopia", "other"), 0o700); err != nil {
		t.Fatal(err)
	}
	_, _, err = f.mgr.Open(t.Context(), podvolume.Repository{Location: bsl, VolumeNamespace: "other"})
	if !errors.Is(err, repository.ErrNotFound) || !strings.Contains(err.Error(), `namespace "other"`) {
		t.Fatalf("opening a repository never created = %v, want ErrNotFound naming the namespace", err)
	}
}

// packBytes sums the repository's data packs (p blobs) on disk.
func packBytes(t *testing.T, root string) int64 {
	t.Helper()
	var n int64
	repoDir := filepath.Join(root, "bucket", "backups", "kopia", "app")
	err := filepath.WalkDir(repoDir, func(p string, d os.DirEntry, err error) error {
		// The filesystem storage shards blob p1234... under p12/34/...
		rel, _ := filepath.Rel(repoDir, p)
		if err != nil || d.IsDir() || !strings.HasPrefix(rel, "p") {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			n += fi.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// textVolume is a volume zstd shrinks several times: log-like lines.
func textVolume(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(3, 4))
	var b bytes.Buffer
	for b.Len() < 6<<20 {
		fmt.Fprintf(&b, "%d level=info msg=%q user=%d status=%d\n", 1_780_000_000+b.Len(), []string{"request handled", "cache miss", "job done"}[r.IntN(3)], r.IntN(1e6), 200+r.IntN(4)*100)
	}
	if err := os.WriteFile(filepath.Join(dir, "app.log"), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// --fs-backup-compression: a repository the server creates with a
// compressor has it in its global policy, and the data path compresses
// with it (and restores byte for byte); a repository that existed before
// (Velero's, made without one) keeps uploading uncompressed, as Velero's
// own uploader does.
func TestCompressionOfNewRepositories(t *testing.T) {
	src := textVolume(t)
	want := filetree.Describe(t, src)

	plainLoc, plainRoot := filesystemLocation(t)
	plain := newFixture(t, plainLoc, nil, passwordClient(t, repository.DefaultPassword))
	if _, err := plain.dp.Backup(t.Context(), podvolume.BackupRequest{Repository: plain.repo, Path: src, Tags: tags("b1")}); err != nil {
		t.Fatal(err)
	}
	zLoc, zRoot := filesystemLocation(t)
	z := newFixtureCompressed(t, zLoc, nil, passwordClient(t, repository.DefaultPassword), "zstd-fastest")
	res, err := z.dp.Backup(t.Context(), podvolume.BackupRequest{Repository: z.repo, Path: src, Tags: tags("b1")})
	if err != nil {
		t.Fatal(err)
	}
	if p, c := packBytes(t, plainRoot), packBytes(t, zRoot); p < 6<<20 || c*3 > p {
		t.Errorf("packs: %d bytes uncompressed, %d with zstd-fastest; want the volume's 6 MiB, then a third of it or less", p, c)
	}
	dst := t.TempDir()
	if _, err := z.dp.Restore(t.Context(), podvolume.RestoreRequest{Repository: z.repo, SnapshotID: res.SnapshotID, Path: dst}); err != nil {
		t.Fatal(err)
	}
	filetree.Compare(t, want, filetree.Describe(t, dst))
	rep, release, err := z.mgr.Open(t.Context(), z.repo)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := repository.Compressor(t.Context(), rep); err != nil || c != "zstd-fastest" {
		t.Errorf("compressor of the new repository = %q, %v; want zstd-fastest", c, err)
	}
	release()

	// The uncompressed repository, met by a server started with the flag.
	again := &repository.Manager{Storage: staticStorage{}, Secrets: passwordClient(t, repository.DefaultPassword), Namespace: serverNS, WorkDir: t.TempDir(), Compression: "zstd-fastest"}
	t.Cleanup(func() { _ = again.Close(context.Background()) })
	if err := again.Prepare(t.Context(), plain.repo); err != nil {
		t.Fatal(err)
	}
	before := packBytes(t, plainRoot)
	dp := &DataPath{Repositories: again}
	if err := os.WriteFile(filepath.Join(src, "more.log"), bytes.Repeat([]byte("more of the same line\n"), 100_000), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := dp.Backup(t.Context(), podvolume.BackupRequest{Repository: plain.repo, Path: src, Tags: tags("b2")}); err != nil {
		t.Fatal(err)
	}
	if grown := packBytes(t, plainRoot) - before; grown < 2_000_000 {
		t.Errorf("existing repository grew by %d bytes for a new file of 2.2 MB: it compressed, want it to keep its policy", grown)
	}
	rep, release, err = again.Open(t.Context(), plain.repo)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if c, err := repository.Compressor(t.Context(), rep); err != nil || c != "" {
		t.Errorf("compressor of the existing repository = %q, %v; want none", c, err)
	}
}

func TestUnknownCompressor(t *testing.T) {
	for _, ok := range []string{"", "none", "zstd", "zstd-fastest", "s2-default"} {
		if err := repository.CheckCompression(ok); err != nil {
			t.Errorf("CheckCompression(%q) = %v", ok, err)
		}
	}
	err := repository.CheckCompression("zip")
	if err == nil || !strings.Contains(err.Error(), `"zip"`) || !strings.Contains(err.Error(), "zstd-fastest") {
		t.Fatalf("CheckCompression(zip) = %v, want an error naming it and the known compressors", err)
	}
	if err := repository.CheckCompression("lz4"); err == nil {
		t.Error("the deprecated lz4 was accepted")
	}
}

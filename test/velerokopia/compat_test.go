// Package velerokopia shows that file-system backup repositories and
// snapshots are shared with Velero: Velero's own code (test/compat's
// velerokopia, built from Velero v1.18.3's module with the kopia fork it
// uses) creates a repository in an S3 server and backs a directory up;
// Lifeboat's data path restores it byte for byte; and the other way
// round, in a repository Lifeboat created.
package velerokopia

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/kopia/kopia/repo/manifest"
	"github.com/kopia/kopia/snapshot"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/locations"
	"github.com/lifeboat-io/lifeboat/internal/podvolume"
	"github.com/lifeboat-io/lifeboat/internal/podvolume/kopiapath"
	"github.com/lifeboat-io/lifeboat/internal/podvolume/repository"
	"github.com/lifeboat-io/lifeboat/internal/testutil/filetree"
	"github.com/lifeboat-io/lifeboat/internal/testutil/s3server"
)

var (
	srv *s3server.Server
	bin string // velerokopia
)

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("skipping the Velero kopia compatibility tests in -short mode")
		os.Exit(0)
	}
	var err error
	if bin, err = build(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if srv, err = s3server.Launch(); err != nil {
		fmt.Fprintln(os.Stderr, "start S3 server:", err)
		os.Exit(1)
	}
	code := m.Run()
	srv.Close()
	os.Exit(code)
}

func build() (string, error) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	cmd := exec.Command(filepath.Join(root, "test", "compat", "build.sh"), "velerokopia")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building velerokopia (test/compat/build.sh velerokopia): %w\n%s", err, stderr.Bytes())
	}
	return string(bytes.TrimSpace(stdout.Bytes())), nil
}

const (
	serverNS = "velero"
	password = "static-passw0rd"
)

type side struct {
	t      *testing.T
	bucket string
	home   string // velerokopia's HOME
	creds  string // the credentials file
	bsl    *v1.BackupStorageLocation
	mgr    *repository.Manager
	dp     *kopiapath.DataPath
}

func newSide(t *testing.T) *side {
	t.Helper()
	s := &side{t: t, bucket: srv.NewBucket(t), home: t.TempDir()}
	s.creds = filepath.Join(t.TempDir(), "cloud")
	if err := os.WriteFile(s.creds, srv.CredentialsFile(), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := srv.BSLConfig()
	s.bsl = &v1.BackupStorageLocation{
		ObjectMeta: metav1.ObjectMeta{Namespace: serverNS, Name: "default", ResourceVersion: "1"},
		Spec: v1.BackupStorageLocationSpec{
			Provider:    "aws",
			Config:      cfg,
			StorageType: v1.StorageType{ObjectStorage: &v1.ObjectStorageLocation{Bucket: s.bucket, Prefix: "velero"}},
		},
	}
	s.mgr = &repository.Manager{
		Storage: staticStorage{creds: srv.CredentialsFile()}, Secrets: staticPassword(password),
		Namespace: serverNS, WorkDir: t.TempDir(),
	}
	t.Cleanup(func() { _ = s.mgr.Close(context.Background()) })
	s.dp = &kopiapath.DataPath{Repositories: s.mgr}
	return s
}

func (s *side) repo() podvolume.Repository {
	return podvolume.Repository{Location: s.bsl, VolumeNamespace: "app"}
}

// velero runs velerokopia against the side's bucket and decodes its JSON.
func (s *side) velero(args ...string) map[string]any {
	s.t.Helper()
	full := append([]string{
		"-s3url", s.bsl.Spec.Config["s3Url"], "-region", s.bsl.Spec.Config["region"],
		"-bucket", s.bucket, "-prefix", "velero", "-credentials", s.creds, "-password", password,
		"-namespace", "app", "-location", "default",
	}, args...)
	cmd := exec.Command(bin, full...)
	cmd.Env = append(os.Environ(), "HOME="+s.home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		s.t.Fatalf("velerokopia %v: %v\n%s", args, err, stderr.Bytes())
	}
	var out map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		s.t.Fatalf("velerokopia %v printed %q: %v", args, stdout.Bytes(), err)
	}
	return out
}

func TestVeleroWritesLifeboatRestores(t *testing.T) {
	s := newSide(t)
	src := volume(t)
	out := s.velero("backup", "-path", src, "-pod", "web-0", "-volume", "data", "-tag", "backup=b1")
	id, _ := out["snapshotID"].(string)
	if id == "" {
		t.Fatalf("Velero's backup printed %v", out)
	}
	dst := t.TempDir()
	if _, err := s.dp.Restore(t.Context(), podvolume.RestoreRequest{Repository: s.repo(), SnapshotID: id, Path: dst}); err != nil {
		t.Fatalf("Lifeboat restoring Velero's snapshot: %v", err)
	}
	filetree.Compare(t, filetree.Describe(t, src), filetree.Describe(t, dst))

	// Lifeboat's next backup of the same volume is incremental on
	// Velero's snapshot: same source, same requester and uploader.
	res, err := s.dp.Backup(t.Context(), podvolume.BackupRequest{Repository: s.repo(), Path: src,
		Tags: map[string]string{"backup": "b2", "ns": "app", "pod": "web-0", "volume": "data"}})
	if err != nil {
		t.Fatalf("Lifeboat backup after Velero's: %v", err)
	}
	rep, release, err := s.mgr.Open(t.Context(), s.repo())
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	man, err := snapshot.LoadSnapshot(t.Context(), rep, manifest.ID(res.SnapshotID))
	if err != nil {
		t.Fatal(err)
	}
	if res.SnapshotID == id || man.Stats.NonCachedFiles != 0 || man.Stats.CachedFiles == 0 {
		t.Errorf("Lifeboat's backup after Velero's (%s): snapshot %s read %d files again, %d cached; want none read, Velero's as parent",
			id, res.SnapshotID, man.Stats.NonCachedFiles, man.Stats.CachedFiles)
	}
}

func TestLifeboatWritesVeleroRestores(t *testing.T) {
	s := newSide(t)
	if err := s.mgr.Prepare(t.Context(), s.repo()); err != nil {
		t.Fatalf("Lifeboat creating the repository: %v", err)
	}
	src := volume(t)
	res, err := s.dp.Backup(t.Context(), podvolume.BackupRequest{Repository: s.repo(), Path: src,
		Tags: map[string]string{"backup": "b1", "ns": "app", "pod": "web-0", "volume": "data"}})
	if err != nil {
		t.Fatalf("Lifeboat backup: %v", err)
	}
	dst := t.TempDir()
	out := s.velero("restore", "-snapshot", res.SnapshotID, "-target", dst)
	if n, _ := out["bytes"].(float64); int64(n) != res.TotalBytes {
		t.Errorf("Velero restored %v bytes, Lifeboat stored %d", out["bytes"], res.TotalBytes)
	}
	filetree.Compare(t, filetree.Describe(t, src), filetree.Describe(t, dst))
	// And Velero backs up into Lifeboat's repository.
	if out := s.velero("backup", "-path", src, "-pod", "web-0", "-volume", "data", "-tag", "backup=b2"); out["snapshotID"] == "" {
		t.Errorf("Velero's backup into Lifeboat's repository printed %v", out)
	}
}

// staticStorage resolves the location to its own spec and the server's
// credentials.
type staticStorage struct{ creds []byte }

func (s staticStorage) ResolveStorage(_ context.Context, bsl *v1.BackupStorageLocation) (*locations.ResolvedStorage, error) {
	return &locations.ResolvedStorage{Provider: bsl.Spec.Provider, Config: bsl.Spec.Config, Credentials: s.creds}, nil
}

// staticPassword reads the password Secret as holding p.
type staticPassword string

func (p staticPassword) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	sec, ok := obj.(*corev1.Secret)
	if !ok {
		return fmt.Errorf("only Secrets")
	}
	sec.Name, sec.Namespace = key.Name, key.Namespace
	sec.Data = map[string][]byte{repository.PasswordSecretKey: []byte(p)}
	return nil
}

func (p staticPassword) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return fmt.Errorf("cannot list %v", schema.GroupResource{Resource: "secrets"})
}

// volume writes mixed files: modes, symlinks, an empty directory, nested
// directories and a 12 MiB file (several kopia chunks).
func volume(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	big := make([]byte, 12<<20)
	for i := range big {
		big[i] = byte(r.UintN(256))
	}
	must(os.WriteFile(filepath.Join(dir, "big.bin"), big, 0o644))
	must(os.MkdirAll(filepath.Join(dir, "d/e"), 0o755))
	must(os.MkdirAll(filepath.Join(dir, "empty"), 0o700))
	for i := range 30 {
		must(os.WriteFile(filepath.Join(dir, "d/e", fmt.Sprintf("f%02d", i)), bytes.Repeat([]byte{byte(i)}, i*101), 0o640))
	}
	must(os.WriteFile(filepath.Join(dir, "d/run.sh"), []byte("#!/bin/sh\n"), 0o755))
	must(os.Symlink("d/run.sh", filepath.Join(dir, "link")))
	return dir
}

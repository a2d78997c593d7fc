package repository

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/kopia/kopia/repo"
	"github.com/kopia/kopia/repo/blob/filesystem"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/locations"
	"github.com/lifeboat-io/lifeboat/internal/podvolume"
)

type specStorage struct{}

func (specStorage) ResolveStorage(_ context.Context, bsl *v1.BackupStorageLocation) (*locations.ResolvedStorage, error) {
	return &locations.ResolvedStorage{Provider: bsl.Spec.Provider, Config: bsl.Spec.Config}, nil
}

// serverUID is the server's user (install.ServerUID), whose the
// repositories of a filesystem location are.
const serverUID = 65532

// ownership walks dir: each entry's owner, and the directories in it.
func ownership(t *testing.T, dir string) (owners map[string][2]uint32, dirs int) {
	t.Helper()
	owners = map[string][2]uint32{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		owners[p] = [2]uint32{st.Uid, st.Gid}
		if d.IsDir() {
			dirs++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return owners, dirs
}

// The node agent runs as root and writes into repositories the server (uid
// 65532) created in a filesystem location: everything it writes, blobs and
// the shard directories kopia makes for them, must be the server's, or the
// server can no longer read the repository's index (deletions and
// maintenance fail with "permission denied") nor add and remove blobs.
func TestRootWritesIntoAnotherUsersFilesystemRepositoryAsThatUser(t *testing.T) {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "bucket"), 0o700); err != nil {
		t.Fatal(err)
	}
	bsl := &v1.BackupStorageLocation{
		ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: "default", ResourceVersion: "1"},
		Spec: v1.BackupStorageLocationSpec{
			Provider:    "lifeboat.io/filesystem",
			Config:      map[string]string{"path": root},
			StorageType: v1.StorageType{ObjectStorage: &v1.ObjectStorageLocation{Bucket: "bucket"}},
		},
	}
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	secrets := fake.NewClientBuilder().WithScheme(scheme).WithObjects(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: PasswordSecretName},
		Data:       map[string][]byte{PasswordSecretKey: []byte(DefaultPassword)},
	}).Build()
	r := podvolume.Repository{Location: bsl, VolumeNamespace: "app"}
	server := &Manager{Storage: specStorage{}, Secrets: secrets, Namespace: "velero", WorkDir: t.TempDir()}
	if err := server.Prepare(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	if err := server.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "bucket", filepath.FromSlash(Prefix(bsl, "app")))

	if os.Geteuid() != 0 {
		// Not root: nothing can be handed to another user, so the storage
		// is kopia's own.
		st, err := ownFilesystemStorage(t.Context(), &filesystem.Options{Path: dir}, false)
		if err != nil {
			t.Fatal(err)
		}
		if typ := st.ConnectionInfo().Type; typ != "filesystem" {
			t.Errorf("storage type %q for a process that is not root, want kopia's filesystem", typ)
		}
		return
	}

	// The repository as the server, running as its own user, made it.
	err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, serverUID, serverUID)
	})
	if err != nil {
		t.Fatal(err)
	}
	_, dirsBefore := ownership(t, dir)

	agent := &Manager{Storage: specStorage{}, Secrets: secrets, Namespace: "velero", WorkDir: t.TempDir()}
	t.Cleanup(func() { _ = agent.Close(context.Background()) })
	rep, release, err := agent.Open(t.Context(), r)
	if err != nil {
		t.Fatal(err)
	}
	// Enough manifests that kopia writes blobs into shard directories the
	// server never made.
	err = repo.WriteSession(t.Context(), rep, repo.WriteSessionOptions{Purpose: "test"}, func(ctx context.Context, w repo.RepositoryWriter) error {
		for i := range 50 {
			if _, err := w.PutManifest(ctx, map[string]string{"type": "test", "n": strconv.Itoa(i)}, map[string]int{"i": i}); err != nil {
				return err
			}
			if err := w.Flush(ctx); err != nil {
				return err
			}
		}
		return nil
	})
	release()
	if err != nil {
		t.Fatal(err)
	}
	// The connection config keeps the owner, so the repository opened
	// from it writes as its owner.
	cfg, err := os.ReadFile(filepath.Join(agent.dir(r), "repository.config"))
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.Close(t.Context()); err != nil {
		t.Fatal(err)
	}

	owners, dirsAfter := ownership(t, dir)
	if dirsAfter <= dirsBefore {
		t.Fatalf("the writes made no directory (%d before, %d after): nothing shows directories are handed over", dirsBefore, dirsAfter)
	}
	for p, o := range owners {
		if o != [2]uint32{serverUID, serverUID} {
			t.Errorf("%s is owned by %d:%d, want the repository's owner %d:%d", p, o[0], o[1], serverUID, serverUID)
		}
	}

	var lc struct {
		Storage struct {
			Type   string `json:"type"`
			Config struct {
				UID *int `json:"uid"`
			} `json:"config"`
		} `json:"storage"`
	}
	if err := json.Unmarshal(cfg, &lc); err != nil {
		t.Fatal(err)
	}
	if lc.Storage.Type != ownedFSType || lc.Storage.Config.UID == nil || *lc.Storage.Config.UID != serverUID {
		t.Errorf("connection config storage %+v: want %s with uid %d", lc.Storage, ownedFSType, serverUID)
	}
}

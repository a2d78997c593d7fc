package controller

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/locations"
	"github.com/lifeboat-io/lifeboat/internal/podvolume"
	"github.com/lifeboat-io/lifeboat/internal/podvolume/repository"
)

// BackupRepositories against a real API server, with the real kopia
// repositories in a filesystem location: the ensurer creates the object,
// the reconciler creates the repository and maintains it; a wrong password
// makes the object NotReady with a message naming the Secret.
func TestBackupRepositoryAgainstAPIServer(t *testing.T) {
	h := startAPIHarness(t)
	ns := h.namespace(t, "repos")
	root := t.TempDir()
	loc := func(name string) *v1.BackupStorageLocation {
		bsl := h.location(t, ns, name, v1.BackupStorageLocationAccessMode("ReadWrite"))
		orig := bsl.DeepCopy()
		bsl.Spec.Provider = "lifeboat.io/filesystem"
		bsl.Spec.Config = map[string]string{"path": root}
		bsl.Spec.ObjectStorage.Prefix = "pfx"
		if err := h.c.Patch(testCtx(t), bsl, client.MergeFrom(orig)); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(root, name), 0o700); err != nil {
			t.Fatal(err)
		}
		return bsl
	}
	loc("default")
	var mgr *repository.Manager
	h.startManager(t, ns, func(m ctrl.Manager, locs *locations.Resolver) error {
		mgr = &repository.Manager{Storage: locs, Secrets: m.GetAPIReader(), Namespace: ns, WorkDir: t.TempDir(), Log: testLog()}
		return (&BackupRepositoryReconciler{
			Client: m.GetClient(), Repositories: mgr,
			EnsurePassword:   func(ctx context.Context) error { return repository.EnsurePasswordSecret(ctx, m.GetClient(), ns) },
			DefaultFrequency: repository.DefaultMaintenanceFrequency, Log: testLog(),
		}).SetupWithManager(m)
	})
	t.Cleanup(func() { _ = mgr.Close(context.Background()) })
	ens := &repository.Ensurer{Client: h.c, Namespace: ns, Timeout: 30 * time.Second}

	t.Run("Ready", func(t *testing.T) {
		br, err := ens.Ensure(testCtx(t), "app", "default")
		if err != nil {
			t.Fatalf("Ensure: %v", err)
		}
		if br.Name != "app-default-kopia" || br.Spec.RepositoryType != "kopia" || br.Spec.VolumeNamespace != "app" ||
			br.Spec.BackupStorageLocation != "default" || br.Spec.MaintenanceFrequency.Duration != time.Hour {
			t.Errorf("BackupRepository %s: spec %+v", br.Name, br.Spec)
		}
		want := map[string]string{"velero.io/volume-namespace": "app", "velero.io/storage-location": "default", "velero.io/repository-type": "kopia"}
		for k, v := range want {
			if br.Labels[k] != v {
				t.Errorf("label %s = %q, want %q", k, br.Labels[k], v)
			}
		}
		if br.Status.LastMaintenanceTime == nil {
			t.Errorf("a new repository has no lastMaintenanceTime (Velero sets it at creation)")
		}
		var s corev1.Secret
		if err := h.c.Get(testCtx(t), client.ObjectKey{Namespace: ns, Name: "velero-repo-credentials"}, &s); err != nil {
			t.Fatalf("password Secret: %v", err)
		}
		if string(s.Data["repository-password"]) != "static-passw0rd" {
			t.Errorf("password Secret holds %q, want Velero's default", s.Data["repository-password"])
		}
		if _, err := os.Stat(filepath.Join(root, "default", "pfx", "kopia", "app", "kopia.repository.f")); err != nil {
			t.Errorf("kopia repository not where Velero keeps it: %v", err)
		}
		// A second call finds the same object.
		again, err := ens.Ensure(testCtx(t), "app", "default")
		if err != nil || again.UID != br.UID {
			t.Errorf("second Ensure: %v, %v", again, err)
		}
	})

	t.Run("Maintenance", func(t *testing.T) {
		if _, err := ens.Ensure(testCtx(t), "maint", "default"); err != nil {
			t.Fatal(err)
		}
		var br v1.BackupRepository
		key := client.ObjectKey{Namespace: ns, Name: "maint-default-kopia"}
		if err := h.c.Get(testCtx(t), key, &br); err != nil {
			t.Fatal(err)
		}
		orig := br.DeepCopy()
		br.Spec.MaintenanceFrequency = metav1.Duration{Duration: time.Second}
		if err := h.c.Patch(testCtx(t), &br, client.MergeFrom(orig)); err != nil {
			t.Fatal(err)
		}
		h.poll(t, 30*time.Second, "a maintenance run recorded", func() bool {
			if err := h.c.Get(testCtx(t), key, &br); err != nil {
				t.Fatal(err)
			}
			return len(br.Status.RecentMaintenance) > 0
		})
		run := br.Status.RecentMaintenance[0]
		if run.Result != "Succeeded" || run.StartTimestamp == nil || run.CompleteTimestamp == nil {
			t.Errorf("maintenance run %+v", run)
		}
	})

	t.Run("WrongPassword", func(t *testing.T) {
		// The repository exists (made with the default password); the
		// Secret now says otherwise.
		if _, err := ens.Ensure(testCtx(t), "locked", "default"); err != nil {
			t.Fatal(err)
		}
		var s corev1.Secret
		key := client.ObjectKey{Namespace: ns, Name: "velero-repo-credentials"}
		if err := h.c.Get(testCtx(t), key, &s); err != nil {
			t.Fatal(err)
		}
		orig := s.DeepCopy()
		s.Data["repository-password"] = []byte("wrong")
		if err := h.c.Patch(testCtx(t), &s, client.MergeFrom(orig)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			s.Data["repository-password"] = []byte("static-passw0rd")
			_ = h.c.Update(context.Background(), &s)
		})
		// A new location: its repository is created by this test with the
		// default password first, by another manager.
		loc("second")
		other := &repository.Manager{Storage: &locations.Resolver{Client: h.c, SecretReader: h.c, Namespace: ns}, Secrets: staticPassword("static-passw0rd"), Namespace: ns, WorkDir: t.TempDir()}
		var bsl v1.BackupStorageLocation
		if err := h.c.Get(testCtx(t), client.ObjectKey{Namespace: ns, Name: "second"}, &bsl); err != nil {
			t.Fatal(err)
		}
		if err := other.Prepare(testCtx(t), podvolumeRepo(&bsl, "locked")); err != nil {
			t.Fatalf("creating the repository with the default password: %v", err)
		}
		_ = other.Close(context.Background())

		_, err := ens.Ensure(testCtx(t), "locked", "second")
		if !errors.Is(err, repository.ErrNotReady) || !strings.Contains(err.Error(), "velero-repo-credentials") {
			t.Fatalf("Ensure with a wrong password: %v; want NotReady naming the Secret", err)
		}
		var br v1.BackupRepository
		if err := h.c.Get(testCtx(t), client.ObjectKey{Namespace: ns, Name: "locked-second-kopia"}, &br); err != nil {
			t.Fatal(err)
		}
		if br.Status.Phase != "NotReady" || !strings.Contains(br.Status.Message, "secret "+ns+"/velero-repo-credentials") {
			t.Errorf("status %+v", br.Status)
		}
	})

	t.Run("MissingLocation", func(t *testing.T) {
		_, err := ens.Ensure(testCtx(t), "app", "nowhere")
		if !errors.Is(err, repository.ErrNotReady) || !strings.Contains(err.Error(), `BackupStorageLocation "nowhere" does not exist`) {
			t.Fatalf("Ensure on a missing location: %v", err)
		}
	})
}

func podvolumeRepo(bsl *v1.BackupStorageLocation, ns string) podvolume.Repository {
	return podvolume.Repository{Location: bsl, VolumeNamespace: ns}
}

// staticPassword reads every Secret as the password Secret holding p.
type staticPassword string

func (p staticPassword) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return errors.New("staticPassword serves Secrets only")
	}
	s.Name, s.Namespace = key.Name, key.Namespace
	s.Data = map[string][]byte{repository.PasswordSecretKey: []byte(p)}
	return nil
}

func (p staticPassword) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("staticPassword cannot list")
}

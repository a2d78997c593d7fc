package install

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/config/crd"
	"github.com/lifeboat-io/lifeboat/internal/server"
)

// uninstallAll removes what install made in each namespace and waits for
// the CRDs to be gone, so that the next test starts from a cluster
// without them.
func uninstallAll(t *testing.T, namespaces ...string) {
	t.Helper()
	for _, ns := range namespaces {
		if out, err := lifeboat(t, "uninstall", "-n", ns, "--force"); err != nil {
			t.Errorf("uninstall -n %s: %v\n%s", ns, err, out)
		}
	}
	crds, err := crd.All()
	if err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, c := range crds {
			err := admin.Get(ctx, client.ObjectKey{Name: c.Name}, &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{
				APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"}})
			if !apierrors.IsNotFound(err) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Errorf("the CRDs are still there a minute after uninstall: %v", err)
	}
}

// waitFor polls obj until done says so.
func waitFor[T client.Object](t *testing.T, obj T, what string, done func(T) bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx(t), 100*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := admin.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return done(obj), nil
	})
	if err != nil {
		t.Fatalf("%s: %v (last seen: %+v)", what, err, obj)
	}
}

// TestServerWorksWithItsServiceAccount runs the real server with nothing
// but what install grants its service account: a backup, a restore that
// brings back RBAC objects, and a deletion.
func TestServerWorksWithItsServiceAccount(t *testing.T) {
	const ns, app, copyNS = "lb-srv", "shop", "shop-copy"
	store := filepath.Join(t.TempDir(), "store")
	mustLifeboat(t, "install", "-n", ns, "--use-filesystem", store)
	t.Cleanup(func() { uninstallAll(t, ns) })

	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: app}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: app, Name: "settings"}, Data: map[string]string{"a": "1"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: app, Name: "token"}, StringData: map[string]string{"k": "v"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: app, Name: "shop"}},
		// Restoring these takes escalate and bind: the server may not
		// update or delete ConfigMaps itself. (The built-in edit role has
		// no rules here: no controller aggregates them on this server.)
		&rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Namespace: app, Name: "shop-manager"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"*"}}},
		},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: app, Name: "shop-manager"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "shop-manager"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: app, Name: "shop"}},
		},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: app, Name: "shop-edit"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: app, Name: "shop"}},
		},
	} {
		if err := admin.Create(ctx(t), obj); err != nil {
			t.Fatal(err)
		}
	}

	opts := server.DefaultOptions()
	opts.Namespace = ns
	opts.MetricsAddress, opts.HealthAddress = "0", "0"
	opts.PluginDir = t.TempDir()
	opts.WorkDir = t.TempDir()
	opts.LogLevel = "warn"
	opts.BackupFinalizer = true
	opts.StoreValidationFrequency = time.Second
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- server.Run(runCtx, serverConfig(ns), opts) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
	})

	waitFor(t, &v1.BackupStorageLocation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}}, "location available",
		func(l *v1.BackupStorageLocation) bool {
			return l.Status.Phase == v1.BackupStorageLocationPhaseAvailable
		})

	b := &v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop-1"}, Spec: v1.BackupSpec{IncludedNamespaces: []string{app}}}
	if err := admin.Create(ctx(t), b); err != nil {
		t.Fatal(err)
	}
	waitFor(t, b, "backup done", func(b *v1.Backup) bool { return b.Status.Phase.IsTerminal() })
	if b.Status.Phase != v1.BackupPhaseCompleted || b.Status.Errors > 0 {
		t.Fatalf("backup ended %s with %d errors, %d warnings:\n%s", b.Status.Phase, b.Status.Errors, b.Status.Warnings, mustLifeboat(t, "-n", ns, "backup", "logs", b.Name))
	}

	rs := &v1.Restore{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop-1-copy"},
		Spec: v1.RestoreSpec{BackupName: b.Name, NamespaceMapping: map[string]string{app: copyNS}}}
	if err := admin.Create(ctx(t), rs); err != nil {
		t.Fatal(err)
	}
	waitFor(t, rs, "restore done", func(r *v1.Restore) bool {
		return r.Status.Phase != "" && r.Status.Phase != v1.RestorePhaseNew && r.Status.Phase != v1.RestorePhaseInProgress
	})
	if rs.Status.Phase != v1.RestorePhaseCompleted || rs.Status.Errors > 0 || rs.Status.Warnings > 0 {
		t.Fatalf("restore ended %s with %d errors, %d warnings:\n%s", rs.Status.Phase, rs.Status.Errors, rs.Status.Warnings,
			mustLifeboat(t, "-n", ns, "restore", "describe", rs.Name, "--details"))
	}
	for _, obj := range []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: copyNS, Name: "settings"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: copyNS, Name: "token"}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: copyNS, Name: "shop-edit"}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: copyNS, Name: "shop-manager"}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: copyNS, Name: "shop-manager"}},
	} {
		if err := admin.Get(ctx(t), client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Errorf("restored %T %s: %v", obj, obj.GetName(), err)
		}
	}

	// Deleting the Backup object (the finalizer is on) deletes the backup:
	// its restore, its files, then the object.
	waitFor(t, b, "finalizer added", func(b *v1.Backup) bool { return len(b.Finalizers) > 0 })
	if err := admin.Delete(ctx(t), b); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx(t), 100*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		err := admin.Get(ctx, client.ObjectKeyFromObject(b), &v1.Backup{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if err != nil {
		reqs := &v1.DeleteBackupRequestList{}
		_ = admin.List(ctx(t), reqs, client.InNamespace(ns))
		t.Fatalf("the backup was not deleted: %v\nrequests: %+v", err, reqs.Items)
	}
	if err := admin.Get(ctx(t), client.ObjectKeyFromObject(rs), &v1.Restore{}); !apierrors.IsNotFound(err) {
		t.Errorf("the backup's Restore is still there: %v", err)
	}
}

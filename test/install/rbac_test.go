package install

import (
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/cluster"
	"github.com/lifeboat-io/lifeboat/internal/install"
)

// serverConfig is cfg acting as the server's service account in ns, as
// the server's pod does.
func serverConfig(ns string) *rest.Config { return install.ServiceAccountConfig(cfg, ns) }

func serverClient(t *testing.T, ns string) client.Client {
	t.Helper()
	acc, err := cluster.New(serverConfig(ns))
	if err != nil {
		t.Fatal(err)
	}
	return acc.Client
}

func allowed(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Errorf("the server cannot %s: %v", what, err)
	}
}

func refused(t *testing.T, what string, err error) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Errorf("the server can %s (error %v, want Forbidden)", what, err)
	}
}

// may asks the API server whether the client's user may do a thing that
// needs objects this cluster lacks (such as VolumeSnapshots).
func may(t *testing.T, c client.Client, attrs authorizationv1.ResourceAttributes) bool {
	t.Helper()
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs}}
	if err := c.Create(ctx(t), review); err != nil {
		t.Fatal(err)
	}
	return review.Status.Allowed
}

func TestServerServiceAccountHasWhatItNeedsAndNoMore(t *testing.T) {
	const ns, other, app = "lb-rbac", "lb-norbac", "app-rbac"
	mustLifeboat(t, "install", "-n", ns)
	mustLifeboat(t, "install", "-n", other, "--restore-rbac=false")
	t.Cleanup(func() { uninstallAll(t, ns, other) })
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: app}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: app, Name: "token"}, StringData: map[string]string{"k": "v"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: app, Name: "settings"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "location-credentials"}, StringData: map[string]string{"cloud": "x"}},
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "someone-else"}},
		&v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "b1"}},
		&v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "b1"}},
	} {
		if err := admin.Create(ctx(t), obj); err != nil {
			t.Fatal(err)
		}
	}
	sc := serverClient(t, ns)

	t.Run("what the server needs works", func(t *testing.T) {
		// Backups list every kind, cluster-wide.
		for _, gvk := range []schema.GroupVersionKind{
			{Version: "v1", Kind: "ConfigMapList"}, {Version: "v1", Kind: "SecretList"}, {Version: "v1", Kind: "NamespaceList"},
			{Group: "apps", Version: "v1", Kind: "DeploymentList"}, {Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinitionList"},
			{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBindingList"},
		} {
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(gvk)
			allowed(t, "list "+gvk.Kind+" cluster-wide", sc.List(ctx(t), list))
		}
		// Restores create in any namespace, and patch what exists.
		allowed(t, "create a Namespace", sc.Create(ctx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "restored-rbac"}}))
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: app, Name: "restored"}, Data: map[string]string{"a": "1"}}
		allowed(t, "create a ConfigMap in another namespace", sc.Create(ctx(t), cm))
		allowed(t, "patch a ConfigMap in another namespace", sc.Patch(ctx(t), cm, client.RawPatch("application/merge-patch+json", []byte(`{"data":{"a":"2"}}`))))
		// Restoring RBAC (--restore-rbac, the default): bindings to roles
		// that grant more than the server holds.
		// (admin, not edit: no controller fills in the aggregated edit
		// role's rules on this API server.)
		allowed(t, "create a RoleBinding to the cluster-admin ClusterRole", sc.Create(ctx(t), &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: app, Name: "admins"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}},
		}))
		allowed(t, "create a Role granting what it does not hold", sc.Create(ctx(t), &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Namespace: app, Name: "configmap-admin"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"*"}}},
		}))
		// Its own velero.io objects, status included.
		b := &v1.Backup{}
		allowed(t, "get a Backup", sc.Get(ctx(t), client.ObjectKey{Namespace: ns, Name: "b1"}, b))
		orig := b.DeepCopy()
		b.Status.Phase = v1.BackupPhaseInProgress
		// Through the main resource: like Velero's, the CRD has no status
		// subresource.
		allowed(t, "patch a Backup's status", sc.Patch(ctx(t), b, client.MergeFrom(orig)))
		orig = b.DeepCopy()
		b.Finalizers = []string{v1.BackupFinalizer}
		allowed(t, "patch a Backup", sc.Patch(ctx(t), b, client.MergeFrom(orig)))
		allowed(t, "create a DeleteBackupRequest", sc.Create(ctx(t), v1.NewDeleteBackupRequest(b)))
		// Location credentials and configuration.
		allowed(t, "read a Secret of its namespace", sc.Get(ctx(t), client.ObjectKey{Namespace: ns, Name: "location-credentials"}, &corev1.Secret{}))
		// Leader election.
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: install.LeaseName}}
		allowed(t, "create its Lease", sc.Create(ctx(t), lease))
		holder, now := "pod-1", metav1.NewMicroTime(time.Now())
		lease.Spec.HolderIdentity, lease.Spec.RenewTime = &holder, &now
		allowed(t, "renew its Lease", sc.Update(ctx(t), lease))
		allowed(t, "record an event", sc.Create(ctx(t), &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Namespace: ns, GenerateName: "lease-"},
			InvolvedObject: corev1.ObjectReference{Kind: "Lease", Namespace: ns, Name: install.LeaseName}, Reason: "LeaderElection",
		}))
		// The CSI snapshot cleanup (no snapshot CRDs here: asked, not done).
		for _, res := range []string{"volumesnapshots", "volumesnapshotcontents"} {
			if !may(t, sc, authorizationv1.ResourceAttributes{Verb: "delete", Group: "snapshot.storage.k8s.io", Resource: res, Namespace: app}) {
				t.Errorf("the server may not delete %s", res)
			}
		}
	})

	t.Run("what it was not granted is refused", func(t *testing.T) {
		secret := &corev1.Secret{}
		if err := admin.Get(ctx(t), client.ObjectKey{Namespace: app, Name: "token"}, secret); err != nil {
			t.Fatal(err)
		}
		secret.StringData = map[string]string{"k": "stolen"}
		refused(t, "update a Secret outside its namespace", sc.Update(ctx(t), secret))
		refused(t, "delete a Secret outside its namespace", sc.Delete(ctx(t), secret))
		refused(t, "delete a ConfigMap", sc.Delete(ctx(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: app, Name: "settings"}}))
		refused(t, "delete a Namespace", sc.Delete(ctx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: app}}))
		lease := &coordinationv1.Lease{}
		if err := admin.Get(ctx(t), client.ObjectKey{Namespace: ns, Name: "someone-else"}, lease); err != nil {
			t.Fatal(err)
		}
		refused(t, "update another Lease", sc.Update(ctx(t), lease))
		b := &v1.Backup{}
		if err := admin.Get(ctx(t), client.ObjectKey{Namespace: other, Name: "b1"}, b); err != nil {
			t.Fatal(err)
		}
		// (Patching it is allowed: a restore patches any kind anywhere, and
		// RBAC has no exceptions; docs/install.md says so.)
		refused(t, "delete a Backup of another server's namespace", sc.Delete(ctx(t), b))
		b.Spec.TTL = metav1.Duration{Duration: time.Hour}
		refused(t, "update a Backup of another server's namespace", sc.Update(ctx(t), b))
		if may(t, sc, authorizationv1.ResourceAttributes{Verb: "watch", Resource: "secrets"}) {
			t.Error("the server may watch Secrets cluster-wide")
		}
		if may(t, sc, authorizationv1.ResourceAttributes{Verb: "delete", Resource: "persistentvolumes"}) {
			t.Error("the server may delete PersistentVolumes")
		}

		// Without --restore-rbac the server cannot bind what it does not hold.
		nc := serverClient(t, other)
		refused(t, "bind cluster-admin without --restore-rbac", nc.Create(ctx(t), &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "lifeboat-test-escalation"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: other, Name: install.ServerName}},
		}))
		refused(t, "create a role granting everything without --restore-rbac", nc.Create(ctx(t), &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "lifeboat-test-everything"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}},
		}))
	})
}

package e2e

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/archive/archivetest"
	"github.com/lifeboat-io/lifeboat/internal/storage"
	"github.com/lifeboat-io/lifeboat/internal/storage/s3"
	"github.com/lifeboat-io/lifeboat/internal/testutil/testenv"
)

// Whoever can write to the bucket replaces a backup's tarball with one whose
// entries lie about where their objects belong. A restore of that backup
// limited to one namespace creates nothing outside it (or outside where the
// mapping sends it), patches nothing outside it, and names every refused
// entry in its errors.
func TestACraftedTarballInTheBucketRestoresNothingOutsideTheFilters(t *testing.T) {
	bsl, bucket := env.S3Location(t, env.Name("s3"))
	shop := env.NewNamespace(t, "shop")
	victim := env.NewNamespace(t, "victim")
	copyNS := env.Name("shop-copy")
	env.Create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: "ok"}, Data: map[string]string{"a": "1"}})
	env.Create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: victim, Name: "settings"}, Data: map[string]string{"mode": "safe"}})
	backupName := env.Name("shop")
	mustLifeboat(t, "backup", "create", backupName, "--include-namespaces", shop, "--storage-location", bsl.Name, "--wait")

	obj := func(apiVersion, kind, ns, name string, extra map[string]any) []byte {
		meta := map[string]any{"name": name}
		if ns != "" {
			meta["namespace"] = ns
		}
		o := map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": meta}
		for k, v := range extra {
			o[k] = v
		}
		data, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	binding := env.Name("pwn")
	refused := map[string][]byte{
		// Under the included namespace, into another one.
		"resources/configmaps/namespaces/" + shop + "/planted.json": obj("v1", "ConfigMap", victim, "planted", nil),
		// Under the included namespace, patching an object of another one
		// (the restore's policy is update).
		"resources/configmaps/namespaces/" + shop + "/settings.json": obj("v1", "ConfigMap", victim, "settings", map[string]any{"data": map[string]any{"mode": "owned"}}),
		// A cluster-scoped kind under the included namespace.
		"resources/clusterrolebindings.rbac.authorization.k8s.io/namespaces/" + shop + "/" + binding + ".json": obj("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", shop, binding, map[string]any{
			"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
			"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": "default", "namespace": shop}},
		}),
		// The included namespace's own object, naming the victim.
		"resources/namespaces/cluster/" + shop + ".json": obj("v1", "Namespace", "", victim, map[string]any{
			"metadata": map[string]any{"name": victim, "labels": map[string]any{"pod-security.kubernetes.io/enforce": "privileged"}},
		}),
	}
	entries := []archivetest.Entry{
		{Name: "metadata/version", Data: []byte("1.1.0\n")},
		{Name: "resources/configmaps/namespaces/" + shop + "/ok.json", Data: obj("v1", "ConfigMap", shop, "ok", map[string]any{"data": map[string]any{"a": "1"}})},
	}
	for name, data := range refused {
		entries = append(entries, archivetest.Entry{Name: name, Data: data})
	}
	var tarball bytes.Buffer
	if err := archivetest.Tarball(&tarball, entries); err != nil {
		t.Fatal(err)
	}
	s3store, err := s3.New(testenv.Ctx(t), env.S3.BSLConfig(), env.S3.CredentialsFile())
	if err != nil {
		t.Fatal(err)
	}
	store := storage.NewBackupStore(s3store, bucket, bsl.Spec.ObjectStorage.Prefix)
	if err := store.PutBackupContents(testenv.Ctx(t), backupName, &tarball); err != nil {
		t.Fatalf("replacing the backup's tarball in the bucket: %v", err)
	}

	// The backup's digests give the replaced tarball away: nothing is
	// restored.
	refusedName := env.Name("crafted")
	_, _ = lifeboat(t, "restore", "create", refusedName, "--from-backup", backupName, "--include-namespaces", shop,
		"--namespace-mappings", shop+":"+copyNS, "--existing-resource-policy", "update", "--wait")
	// The reason shows the first five findings in tarball order; which
	// of the planted entries comes among them depends on the generated
	// names, so any entry named added will do (internal/integrity's tests
	// name each kind of finding).
	if rs := waitRestore(t, refusedName); rs.Status.Phase != v1.RestorePhaseFailed ||
		!strings.Contains(rs.Status.FailureReason, "differs from what was written") ||
		!strings.Contains(rs.Status.FailureReason, ".json: added (not in the item digests)") ||
		!strings.Contains(rs.Status.FailureReason, "nothing was restored") {
		t.Errorf("restore of the replaced tarball: %s %q, want Failed naming an entry the crafted tarball added", rs.Status.Phase, rs.Status.FailureReason)
	}
	// Told to go ahead regardless (or were this a Velero-written backup,
	// without digests), the restore's own filters still hold.
	restoreName := env.Name("crafted")
	out, err := lifeboat(t, "restore", "create", restoreName, "--from-backup", backupName, "--include-namespaces", shop,
		"--namespace-mappings", shop+":"+copyNS, "--existing-resource-policy", "update",
		"--annotations", v1.IgnoreIntegrityAnnotation+"=true", "--wait")
	if err == nil || !strings.Contains(err.Error()+out, "partially failed") {
		t.Errorf("restore create --wait should report the partial failure: %v\n%s", err, out)
	}
	rs := waitRestore(t, restoreName)
	if rs.Status.Phase != v1.RestorePhasePartiallyFailed || rs.Status.Errors != len(refused) {
		t.Errorf("restore status %+v, want PartiallyFailed with %d errors", rs.Status, len(refused))
	}

	ctx := testenv.Ctx(t)
	var cm corev1.ConfigMap
	if err := env.Client.Get(ctx, clientKeyIn(copyNS, "ok"), &cm); err != nil {
		t.Errorf("the honest entry was not restored into the mapped namespace: %v", err)
	}
	if err := env.Client.Get(ctx, clientKeyIn(victim, "settings"), &cm); err != nil || cm.Data["mode"] != "safe" {
		t.Errorf("the victim's configmap was changed: %+v (err %v)", cm.Data, err)
	}
	for _, key := range []client.ObjectKey{clientKeyIn(victim, "planted"), clientKeyIn(copyNS, "planted"), clientKeyIn(copyNS, "settings")} {
		if err := env.Client.Get(ctx, key, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			t.Errorf("configmap %s was created (get: %v)", key, err)
		}
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: binding}, &rbacv1.ClusterRoleBinding{}); !apierrors.IsNotFound(err) {
		t.Errorf("the cluster-admin binding was created (get: %v)", err)
	}
	var ns corev1.Namespace
	if err := env.Client.Get(ctx, client.ObjectKey{Name: victim}, &ns); err != nil || ns.Labels["pod-security.kubernetes.io/enforce"] != "" || ns.Labels[v1.RestoreNameLabel] != "" {
		t.Errorf("the victim namespace was changed: labels %v (err %v)", ns.Labels, err)
	}
	// Nothing anywhere carries the restore's label but what belongs in the
	// mapped namespace.
	var labelled corev1.ConfigMapList
	if err := env.Client.List(ctx, &labelled, client.MatchingLabels{v1.RestoreNameLabel: restoreName}); err != nil {
		t.Fatal(err)
	}
	for _, c := range labelled.Items {
		if c.Namespace != copyNS {
			t.Errorf("the restore wrote configmap %s/%s", c.Namespace, c.Name)
		}
	}

	details := mustLifeboat(t, "restore", "describe", restoreName, "--details")
	for entry := range refused {
		if !strings.Contains(details, entry) {
			t.Errorf("restore describe --details does not name the refused entry %s:\n%s", entry, details)
		}
	}
}

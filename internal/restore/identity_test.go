package restore

import (
	"bytes"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/archive/archivetest"
	"github.com/lifeboat-io/lifeboat/internal/results"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

// The bucket is untrusted: whoever can write to it can put any JSON at any
// path. These tests craft such archives and check that a restore creates
// only what its filters admit, where its mapping says, and that the entry
// whose path and JSON (or real scope) disagree is refused with an error
// naming it.

// item renders a stored object.
func item(t *testing.T, apiVersion, kind, ns, name string, extra map[string]any) []byte {
	t.Helper()
	meta := map[string]any{"name": name, "uid": "from-the-bucket"}
	if ns != "" {
		meta["namespace"] = ns
	}
	obj := map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": meta}
	for k, v := range extra {
		obj[k] = v
	}
	return veleroItem(t, obj)
}

// clusterAdminBinding is what an attacker would plant: cluster-admin for a
// service account of the namespace they control.
func clusterAdminBinding(t *testing.T, ns, name, jsonNS string) []byte {
	return item(t, "rbac.authorization.k8s.io/v1", "ClusterRoleBinding", jsonNS, name, map[string]any{
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
		"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": "default", "namespace": ns}},
	})
}

// allErrors is every error message of a restore's results.
func allErrors(res results.Results) string {
	msgs := append(append([]string{}, res.Errors.Velero...), res.Errors.Cluster...)
	for _, m := range res.Errors.Namespaces {
		msgs = append(msgs, m...)
	}
	return strings.Join(msgs, "\n")
}

func (w *world) tarball(entries ...archivetest.Entry) *v1.Backup {
	w.t.Helper()
	var buf bytes.Buffer
	all := append([]archivetest.Entry{{Name: "metadata/version", Data: []byte("1.1.0\n")}}, entries...)
	if err := archivetest.Tarball(&buf, all); err != nil {
		w.t.Fatal(err)
	}
	return w.putBackup(uniq("crafted"), buf.Bytes())
}

// absent fails the test when the object exists.
func (w *world) absent(gvr schema.GroupVersionResource, ns, name string) {
	w.t.Helper()
	var err error
	if ns == "" {
		_, err = w.dyn.Resource(gvr).Get(ctx(w.t), name, metav1.GetOptions{})
	} else {
		_, err = w.dyn.Resource(gvr).Namespace(ns).Get(ctx(w.t), name, metav1.GetOptions{})
	}
	if !apierrors.IsNotFound(err) {
		w.t.Errorf("%s %s was created by the restore (get: %v)", gvr.Resource, qualified(ns, name), err)
	}
}

var (
	gvrConfigMaps   = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	gvrSecrets      = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	gvrCRBs         = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"}
	gvrRoles        = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"}
	gvrClusterRoles = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}
)

// refused checks that the restore ended PartiallyFailed with an error that
// names every one of entries, and that the rest of the archive was
// restored.
func (w *world) refused(rs *v1.Restore, out Outcome, entries ...string) {
	w.t.Helper()
	if out.Phase != v1.RestorePhasePartiallyFailed {
		w.t.Errorf("restore ended %s (%s), want PartiallyFailed", out.Phase, out.FailureReason)
	}
	if out.Errors != len(entries) {
		w.t.Errorf("restore has %d errors, want %d (one per refused entry): %s", out.Errors, len(entries), allErrors(w.results(rs)))
	}
	msgs := allErrors(w.results(rs))
	w.t.Logf("errors:\n%s", msgs)
	for _, e := range entries {
		if !strings.Contains(msgs, `"`+e+`"`) {
			w.t.Errorf("no error names the archive entry %q; errors:\n%s", e, msgs)
		}
	}
}

func TestAnEntryWhoseJSONNamesAnotherNamespaceIsRefused(t *testing.T) {
	w := newWorld(t)
	shop, victim := uniq("shop"), uniq("victim")
	w.namespace(victim)
	planted := "resources/configmaps/namespaces/" + shop + "/planted.json"
	b := w.tarball(
		archivetest.Entry{Name: "resources/configmaps/namespaces/" + shop + "/ok.json", Data: item(t, "v1", "ConfigMap", shop, "ok", nil)},
		archivetest.Entry{Name: planted, Data: item(t, "v1", "ConfigMap", victim, "planted", nil)},
	)
	rs, out := w.restore(b, v1.RestoreSpec{IncludedNamespaces: []string{shop}})
	w.refused(rs, out, planted)
	w.absent(gvrConfigMaps, victim, "planted")
	w.absent(gvrConfigMaps, shop, "planted")
	if _, err := w.cs.CoreV1().ConfigMaps(shop).Get(ctx(t), "ok", metav1.GetOptions{}); err != nil {
		t.Errorf("the item that agrees with its path was not restored: %v", err)
	}
}

func TestAnEntryUnderAMappedNamespaceLandsInTheMappedNamespaceOnly(t *testing.T) {
	w := newWorld(t)
	shop, copyNS, victim := uniq("shop"), uniq("copy"), uniq("victim")
	w.namespace(victim)
	planted := "resources/configmaps/v1-preferredversion/namespaces/" + shop + "/planted.json"
	b := w.tarball(
		archivetest.Entry{Name: "resources/configmaps/namespaces/" + shop + "/ok.json", Data: item(t, "v1", "ConfigMap", shop, "ok", nil)},
		// Only the preferred-version copy: it is the first copy, so it is
		// the one restored, and it must agree with its path as well.
		archivetest.Entry{Name: planted, Data: item(t, "v1", "ConfigMap", victim, "planted", nil)},
	)
	elsewhere := uniq("elsewhere")
	rs, out := w.restore(b, v1.RestoreSpec{IncludedNamespaces: []string{shop}, NamespaceMapping: map[string]string{shop: copyNS, victim: elsewhere}})
	w.refused(rs, out, planted)
	w.absent(gvrConfigMaps, victim, "planted")
	w.absent(gvrConfigMaps, elsewhere, "planted")
	w.absent(gvrConfigMaps, copyNS, "planted")
	if _, err := w.cs.CoreV1().ConfigMaps(copyNS).Get(ctx(t), "ok", metav1.GetOptions{}); err != nil {
		t.Errorf("the item that agrees with its path was not restored into the mapped namespace: %v", err)
	}
}

func TestAClusterScopedKindUnderANamespacePathIsRefused(t *testing.T) {
	w := newWorld(t)
	shop := uniq("shop")
	// The JSON agrees with the path (namespace shop); only the kind's real
	// scope, which discovery knows, gives it away.
	agreeing, bare := uniq("pwn"), uniq("pwn")
	agreeingEntry := "resources/clusterrolebindings.rbac.authorization.k8s.io/namespaces/" + shop + "/" + agreeing + ".json"
	bareEntry := "resources/clusterrolebindings.rbac.authorization.k8s.io/namespaces/" + shop + "/" + bare + ".json"
	b := w.tarball(
		archivetest.Entry{Name: "resources/configmaps/namespaces/" + shop + "/ok.json", Data: item(t, "v1", "ConfigMap", shop, "ok", nil)},
		archivetest.Entry{Name: agreeingEntry, Data: clusterAdminBinding(t, shop, agreeing, shop)},
		archivetest.Entry{Name: bareEntry, Data: clusterAdminBinding(t, shop, bare, "")},
	)
	rs, out := w.restore(b, v1.RestoreSpec{IncludedNamespaces: []string{shop}, IncludeClusterResources: ptr.To(false)})
	w.refused(rs, out, agreeingEntry, bareEntry)
	w.absent(gvrCRBs, "", agreeing)
	w.absent(gvrCRBs, "", bare)
}

func TestANamespacedKindUnderTheClusterPathIsRefused(t *testing.T) {
	w := newWorld(t)
	victim := uniq("victim")
	w.namespace(victim)
	withNS, withoutNS := uniq("planted"), uniq("planted")
	withNSEntry := "resources/configmaps/cluster/" + withNS + ".json"
	withoutNSEntry := "resources/configmaps/cluster/" + withoutNS + ".json"
	pv := uniq("pv")
	b := w.tarball(
		archivetest.Entry{Name: withNSEntry, Data: item(t, "v1", "ConfigMap", victim, withNS, nil)},
		archivetest.Entry{Name: withoutNSEntry, Data: item(t, "v1", "ConfigMap", "", withoutNS, nil)},
		archivetest.Entry{Name: "resources/persistentvolumes/cluster/" + pv + ".json", Data: item(t, "v1", "PersistentVolume", "", pv, map[string]any{
			"spec": map[string]any{"capacity": map[string]any{"storage": "1Gi"}, "accessModes": []any{"ReadWriteOnce"},
				"hostPath": map[string]any{"path": "/data/" + pv}, "persistentVolumeReclaimPolicy": "Retain"},
		})},
	)
	rs, out := w.restore(b, v1.RestoreSpec{ExcludedNamespaces: []string{victim}, IncludeClusterResources: ptr.To(true)})
	w.refused(rs, out, withNSEntry, withoutNSEntry)
	w.absent(gvrConfigMaps, victim, withNS)
	w.absent(gvrConfigMaps, victim, withoutNS)
	if _, err := w.cs.CoreV1().PersistentVolumes().Get(ctx(t), pv, metav1.GetOptions{}); err != nil {
		t.Errorf("the cluster-scoped item that agrees with its path was not restored: %v", err)
	}
}

func TestAnEntryWhoseJSONNamesAnotherObjectIsRefused(t *testing.T) {
	w := newWorld(t)
	shop := uniq("shop")
	renamed := "resources/configmaps/namespaces/" + shop + "/innocent.json"
	b := w.tarball(
		archivetest.Entry{Name: "resources/configmaps/namespaces/" + shop + "/ok.json", Data: item(t, "v1", "ConfigMap", shop, "ok", nil)},
		archivetest.Entry{Name: renamed, Data: item(t, "v1", "ConfigMap", shop, "admin-settings", nil)},
	)
	rs, out := w.restore(b, v1.RestoreSpec{IncludedNamespaces: []string{shop}})
	w.refused(rs, out, renamed)
	w.absent(gvrConfigMaps, shop, "innocent")
	w.absent(gvrConfigMaps, shop, "admin-settings")
}

func TestAnEntryWhoseKindOrGroupIsNotItsDirectorysIsRefused(t *testing.T) {
	w := newWorld(t)
	shop := uniq("shop")
	role, crb, secret, version := uniq("role"), uniq("crb"), uniq("secret"), uniq("version")
	rules := map[string]any{"rules": []any{map[string]any{"apiGroups": []any{"*"}, "resources": []any{"*"}, "verbs": []any{"*"}}}}
	kindEntry := "resources/roles.rbac.authorization.k8s.io/namespaces/" + shop + "/" + role + ".json"
	groupEntry := "resources/configmaps/namespaces/" + shop + "/" + crb + ".json"
	sameGroupEntry := "resources/configmaps/namespaces/" + shop + "/" + secret + ".json"
	versionEntry := "resources/configmaps/v2-preferredversion/namespaces/" + shop + "/" + version + ".json"
	b := w.tarball(
		archivetest.Entry{Name: "resources/configmaps/namespaces/" + shop + "/ok.json", Data: item(t, "v1", "ConfigMap", shop, "ok", nil)},
		// A ClusterRole stored as a Role.
		archivetest.Entry{Name: kindEntry, Data: item(t, "rbac.authorization.k8s.io/v1", "ClusterRole", shop, role, rules)},
		// A ClusterRoleBinding stored as a ConfigMap.
		archivetest.Entry{Name: groupEntry, Data: clusterAdminBinding(t, shop, crb, shop)},
		// A Secret stored as a ConfigMap: same group, other kind.
		archivetest.Entry{Name: sameGroupEntry, Data: item(t, "v1", "Secret", shop, secret, nil)},
		// A version directory that is not the JSON's version.
		archivetest.Entry{Name: versionEntry, Data: item(t, "v1", "ConfigMap", shop, version, nil)},
	)
	rs, out := w.restore(b, v1.RestoreSpec{})
	w.refused(rs, out, kindEntry, groupEntry, sameGroupEntry, versionEntry)
	w.absent(gvrRoles, shop, role)
	w.absent(gvrClusterRoles, "", role)
	w.absent(gvrCRBs, "", crb)
	w.absent(gvrConfigMaps, shop, crb)
	w.absent(gvrSecrets, shop, secret)
	w.absent(gvrConfigMaps, shop, secret)
	w.absent(gvrConfigMaps, shop, version)
}

func TestTheUpdatePolicyNeverPatchesAnObjectOutsideTheFilter(t *testing.T) {
	w := newWorld(t)
	shop, victim := uniq("shop"), uniq("victim")
	w.namespace(victim)
	c := ctx(t)
	if _, err := w.cs.CoreV1().ConfigMaps(victim).Create(c, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"mode": "safe"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cmEntry := "resources/configmaps/namespaces/" + shop + "/settings.json"
	// A Namespace under the included namespace's name whose JSON is the
	// victim namespace, relaxing its pod security.
	nsEntry := "resources/namespaces/cluster/" + shop + ".json"
	b := w.tarball(
		archivetest.Entry{Name: nsEntry, Data: veleroItem(t, map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{
			"name": victim, "labels": map[string]any{"pod-security.kubernetes.io/enforce": "privileged"},
		}})},
		archivetest.Entry{Name: cmEntry, Data: item(t, "v1", "ConfigMap", victim, "settings", map[string]any{"data": map[string]any{"mode": "owned"}})},
	)
	rs, out := w.restore(b, v1.RestoreSpec{IncludedNamespaces: []string{shop}, ExistingResourcePolicy: v1.PolicyTypeUpdate})
	w.refused(rs, out, nsEntry, cmEntry)
	cm, err := w.cs.CoreV1().ConfigMaps(victim).Get(c, "settings", metav1.GetOptions{})
	if err != nil || cm.Data["mode"] != "safe" || cm.Labels[v1.RestoreNameLabel] != "" {
		t.Errorf("the configmap outside the filter was patched: %+v (err %v)", cm, err)
	}
	ns, err := w.cs.CoreV1().Namespaces().Get(c, victim, metav1.GetOptions{})
	if err != nil || ns.Labels[v1.RestoreNameLabel] != "" || ns.Labels["pod-security.kubernetes.io/enforce"] != "" {
		t.Errorf("the namespace outside the filter was patched: labels %v (err %v)", ns.Labels, err)
	}
	w.absent(gvrConfigMaps, shop, "settings")
}

// additionalAsker asks, for every service account, for the secrets its
// annotations name (namespace: name). Service accounts are restored before
// secrets, so the secrets are restored through the additional-items path.
type additionalAsker struct{}

func (additionalAsker) AppliesTo() (api.ResourceSelector, error) {
	return api.ResourceSelector{IncludedResources: []string{"serviceaccounts"}}, nil
}

func (additionalAsker) Execute(in *api.RestoreItemActionExecuteInput) (*api.RestoreItemActionExecuteOutput, error) {
	orig := in.ItemFromBackup.(*unstructured.Unstructured)
	out := &api.RestoreItemActionExecuteOutput{UpdatedItem: in.Item}
	for ns, name := range orig.GetAnnotations() {
		out.AdditionalItems = append(out.AdditionalItems, api.ResourceIdentifier{GroupResource: schema.GroupResource{Resource: "secrets"}, Namespace: ns, Name: name})
	}
	return out, nil
}

func TestAdditionalItemsCannotEscapeTheFilterOrThePath(t *testing.T) {
	w := newWorld(t)
	shop, victim, other := uniq("shop"), uniq("victim"), uniq("other")
	w.namespace(victim)
	planted := "resources/secrets/namespaces/" + shop + "/planted.json"
	b := w.tarball(
		// The action asks for a secret of another namespace (outside the
		// filter) and for one under shop whose JSON says victim.
		archivetest.Entry{Name: "resources/serviceaccounts/namespaces/" + shop + "/app.json", Data: veleroItem(t, map[string]any{
			"apiVersion": "v1", "kind": "ServiceAccount",
			"metadata": map[string]any{"name": "app", "namespace": shop, "annotations": map[string]any{other: "stolen", shop: "planted"}},
		})},
		archivetest.Entry{Name: "resources/secrets/namespaces/" + other + "/stolen.json", Data: item(t, "v1", "Secret", other, "stolen", nil)},
		archivetest.Entry{Name: planted, Data: item(t, "v1", "Secret", victim, "planted", nil)},
	)
	rs := &v1.Restore{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: uniq("rs")},
		Spec: v1.RestoreSpec{BackupName: b.Name, IncludedNamespaces: []string{shop}}}
	e := NewEngine(newAccess(t), nil)
	e.Plugins = fakePlugins{v1: map[string]api.RestoreItemAction{"example.io/asker": additionalAsker{}}}
	out := e.Run(ctx(t), rs, b, w.store, nil)
	w.refused(rs, out, planted)
	w.absent(gvrSecrets, other, "stolen")
	w.absent(gvrSecrets, victim, "planted")
	w.absent(gvrSecrets, shop, "planted")
	if _, err := w.cs.CoreV1().ServiceAccounts(shop).Get(ctx(t), "app", metav1.GetOptions{}); err != nil {
		t.Errorf("the service account that agrees with its path was not restored: %v", err)
	}
}

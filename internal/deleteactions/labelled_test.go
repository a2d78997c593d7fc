package deleteactions

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

func configMap(namespace, name string, labels map[string]string, data map[string]string) map[string]any {
	d := map[string]any{}
	for k, v := range data {
		d[k] = v
	}
	return map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": objMeta(namespace, name, labels), "data": d}
}

func cleanupConfig(namespace, name, resources string) map[string]any {
	return configMap(namespace, name, map[string]string{CleanupConfigLabel: "true"}, map[string]string{CleanupConfigKey: resources})
}

func namespaceItem(name string) map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name}}
}

func TestLabelledResourceCleanupAppliesToNamespaces(t *testing.T) {
	sel, err := NewLabelledResourceCleanup(nil).AppliesTo()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sel.IncludedResources, []string{"namespaces"}) || sel.LabelSelector != "" || len(sel.IncludedNamespaces) != 0 {
		t.Errorf("AppliesTo = %+v, want all namespaces items", sel)
	}
}

func TestLabelledResourceCleanupDeletesOnlyTheBackupsObjects(t *testing.T) {
	server := newNamespace(t, "lifeboat")
	ns1 := newNamespace(t, "app")
	ns2 := newNamespace(t, "app")
	c := newClients(t, server)
	// Discovery is read before the gadget CRD exists, so finding gadgets
	// takes a rediscovery, as for a CRD installed after the server started.
	if _, err := c.resolve(schema.GroupResource{Resource: "configmaps"}); err != nil {
		t.Fatal(err)
	}
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{filepath.Join("testdata", "gadgets.yaml")}}); err != nil {
		t.Fatalf("installing the gadget CRD: %v", err)
	}
	create(t, cmGVR, cleanupConfig(server, "cleanup-exports", "# what the exporter makes\nconfigmaps\n\n  secrets  \n"))
	create(t, cmGVR, cleanupConfig(server, "cleanup-gadgets", "gadgets.cleanup.test.lifeboat.io\nconfigmaps\n"))
	// Not labelled: not configuration, whatever it says.
	create(t, cmGVR, configMap(server, "not-config", nil, map[string]string{CleanupConfigKey: "serviceaccounts"}))

	a := backupNamed("nightly-" + strings.Repeat("y", 70))
	b := backupNamed("backup-b")
	la := map[string]string{v1.BackupNameLabel: v1.LabelValue(a.Name)}
	lb := map[string]string{v1.BackupNameLabel: v1.LabelValue(b.Name)}
	restored := map[string]string{v1.BackupNameLabel: v1.LabelValue(a.Name), v1.RestoreNameLabel: "r1"}
	secret := func(ns, name string, l map[string]string) map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": objMeta(ns, name, l)}
	}
	gadget := func(name string, l map[string]string) map[string]any {
		return map[string]any{"apiVersion": "cleanup.test.lifeboat.io/v1", "kind": "Gadget", "metadata": objMeta("", name, l)}
	}
	serviceAccountGVR := schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}
	gadgetA, gadgetB := uniqueName("gadget-a"), uniqueName("gadget-b")

	create(t, cmGVR, configMap(ns1, "a1", la, nil))
	create(t, cmGVR, configMap(ns1, "b1", lb, nil))
	create(t, cmGVR, configMap(ns1, "plain", nil, nil))
	create(t, cmGVR, configMap(ns1, "restored", restored, nil))
	create(t, secretGVR, secret(ns1, "s-a", la))
	create(t, serviceAccountGVR, map[string]any{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": objMeta(ns1, "sa-a", la)})
	create(t, cmGVR, configMap(ns2, "a2", la, nil))
	create(t, gadgetGVR, gadget(gadgetA, la))
	create(t, gadgetGVR, gadget(gadgetB, lb))

	action := NewLabelledResourceCleanup(c)
	if err := execute(action, itemOf(namespaceItem(ns1)), a); err != nil {
		t.Fatalf("Execute for %s: %v", ns1, err)
	}
	type obj struct {
		gvr       schema.GroupVersionResource
		ns, name  string
		wantThere bool
	}
	check := func(objs []obj) {
		t.Helper()
		for _, o := range objs {
			if got := exists(t, o.gvr, o.ns, o.name); got != o.wantThere {
				t.Errorf("%s %s/%s: there = %v, want %v", o.gvr.Resource, o.ns, o.name, got, o.wantThere)
			}
		}
	}
	check([]obj{
		{cmGVR, ns1, "a1", false},
		{secretGVR, ns1, "s-a", false},
		{gadgetGVR, "", gadgetA, false},
		{cmGVR, ns1, "b1", true},
		{cmGVR, ns1, "plain", true},
		{cmGVR, ns1, "restored", true},
		{serviceAccountGVR, ns1, "sa-a", true}, // kind not configured
		{cmGVR, ns2, "a2", true},               // namespace not handed over yet
		{gadgetGVR, "", gadgetB, true},
	})

	if err := execute(action, itemOf(namespaceItem(ns2)), a); err != nil {
		t.Fatalf("Execute for %s: %v", ns2, err)
	}
	check([]obj{{cmGVR, ns2, "a2", false}, {cmGVR, ns1, "b1", true}})

	// Again, with a fresh instance: nothing left, no error.
	if err := execute(NewLabelledResourceCleanup(c), itemOf(namespaceItem(ns1)), a); err != nil {
		t.Errorf("second Execute for %s: %v", ns1, err)
	}
	// Items of other kinds are not its business.
	create(t, cmGVR, configMap(ns1, "a3", la, nil))
	if err := execute(action, itemOf(configMap(ns1, "a3", nil, nil)), a); err != nil {
		t.Errorf("Execute on a ConfigMap item: %v", err)
	}
	check([]obj{{cmGVR, ns1, "a3", true}})
}

func TestLabelledResourceCleanupRefusesInvalidConfig(t *testing.T) {
	tests := []struct {
		name  string
		data  map[string]string
		wants []string
	}{
		{"unknown resource", map[string]string{CleanupConfigKey: "configmaps\nwidgets.nowhere.example.io\n"},
			[]string{`key "resources"`, "line 2", `entry "widgets.nowhere.example.io"`, "serves no such resource"}},
		{"singular", map[string]string{CleanupConfigKey: "configmap"},
			[]string{`entry "configmap"`, `write it as "configmaps"`}},
		{"subresource", map[string]string{CleanupConfigKey: "deployments.apps/status"},
			[]string{`entry "deployments.apps/status"`, "one resource.group"}},
		{"unknown key", map[string]string{CleanupConfigKey: "configmaps", "resource": "secrets"},
			[]string{`unknown key "resource"`}},
		{"no list", map[string]string{"kinds": "configmaps"},
			[]string{`no key "resources"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			server := newNamespace(t, "lifeboat")
			app := newNamespace(t, "app")
			create(t, cmGVR, configMap(server, "cleanup", map[string]string{CleanupConfigLabel: ""}, tt.data))
			a := backupNamed("backup-a")
			create(t, cmGVR, configMap(app, "a1", map[string]string{v1.BackupNameLabel: a.Name}, nil))

			err := execute(NewLabelledResourceCleanup(newClients(t, server)), itemOf(namespaceItem(app)), a)
			if err == nil {
				t.Fatal("Execute accepted an invalid configuration")
			}
			for _, want := range append([]string{"ConfigMap " + server + "/cleanup"}, tt.wants...) {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			if !exists(t, cmGVR, app, "a1") {
				t.Error("an object was deleted although the configuration is invalid")
			}
		})
	}
}

func TestLabelledResourceCleanupWithoutConfigDoesNothing(t *testing.T) {
	server := newNamespace(t, "lifeboat")
	app := newNamespace(t, "app")
	a := backupNamed("backup-a")
	create(t, cmGVR, configMap(app, "a1", map[string]string{v1.BackupNameLabel: a.Name}, nil))
	if err := execute(NewLabelledResourceCleanup(newClients(t, server)), itemOf(namespaceItem(app)), a); err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if !exists(t, cmGVR, app, "a1") {
		t.Error("an object was deleted with no kinds configured")
	}
}

// The deletion engine calls one instance from several workers at once.
func TestLabelledResourceCleanupConcurrentCalls(t *testing.T) {
	server := newNamespace(t, "lifeboat")
	create(t, cmGVR, cleanupConfig(server, "cleanup", "configmaps\nclusterroles.rbac.authorization.k8s.io\n"))
	a := backupNamed("backup-a")
	la := map[string]string{v1.BackupNameLabel: a.Name}
	clusterRoleGVR := schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}
	role := uniqueName("role-a")
	create(t, clusterRoleGVR, map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": objMeta("", role, la)})
	var namespaces []string
	for range 6 {
		ns := newNamespace(t, "app")
		create(t, cmGVR, configMap(ns, "a", la, nil))
		namespaces = append(namespaces, ns)
	}
	action := NewLabelledResourceCleanup(newClients(t, server))
	errs := make(chan error, len(namespaces))
	for _, ns := range namespaces {
		go func() { errs <- execute(action, itemOf(namespaceItem(ns)), a) }()
	}
	for range namespaces {
		if err := <-errs; err != nil {
			t.Errorf("Execute: %v", err)
		}
	}
	for _, ns := range namespaces {
		if exists(t, cmGVR, ns, "a") {
			t.Errorf("ConfigMap %s/a is still there", ns)
		}
	}
	if exists(t, clusterRoleGVR, "", role) {
		t.Errorf("ClusterRole %s is still there", role)
	}
}

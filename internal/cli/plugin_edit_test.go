package cli

import (
	"bytes"
	"context"
	"io"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lifeboat-io/lifeboat/internal/install"
)

func serverDeployment(t *testing.T, plugins ...string) *appsv1.Deployment {
	t.Helper()
	objs, err := install.Objects(install.Options{Namespace: "velero", Image: "ghcr.io/lifeboat-io/lifeboat:v1", Plugins: plugins})
	if err != nil {
		t.Fatal(err)
	}
	return objs[len(objs)-1].(*appsv1.Deployment)
}

func initContainers(t *testing.T, c client.Client) []string {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "velero", Name: "velero"}, d); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ic := range d.Spec.Template.Spec.InitContainers {
		out = append(out, ic.Name+"="+ic.Image+"@"+ic.VolumeMounts[0].MountPath)
	}
	return out
}

func TestPluginAddAndRemove(t *testing.T) {
	c := newFakeBuilder(t, serverDeployment(t, "velero/velero-plugin-for-aws:v1.12.0")).Build()
	f := newTestFactory(c)
	out, _, err := run(t, f, "plugin", "add", "example.com/team/snap_shotter:v2")
	if err != nil || !strings.Contains(out, "init container team-snap-shotter (example.com/team/snap_shotter:v2) added") {
		t.Fatalf("add: %v\n%s", err, out)
	}
	want := []string{"velero-velero-plugin-for-aws=velero/velero-plugin-for-aws:v1.12.0@/target", "team-snap-shotter=example.com/team/snap_shotter:v2@/target"}
	if got := initContainers(t, c); !slices.Equal(got, want) {
		t.Fatalf("init containers %v, want %v", got, want)
	}
	// Adding it again changes nothing; another image under the same name is refused.
	if out, _, err := run(t, f, "plugin", "add", "example.com/team/snap_shotter:v2"); err != nil || !strings.Contains(out, "already") {
		t.Errorf("second add: %v\n%s", err, out)
	}
	if _, _, err := run(t, f, "plugin", "add", "example.com/team/snap_shotter:v3"); err == nil || !strings.Contains(err.Error(), "plugin remove team-snap-shotter") {
		t.Errorf("add of another version: %v", err)
	}
	// Removed by image, then by name.
	if _, _, err := run(t, f, "plugin", "remove", "velero/velero-plugin-for-aws:v1.12.0"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, f, "plugin", "remove", "team-snap-shotter"); err != nil {
		t.Fatal(err)
	}
	if got := initContainers(t, c); len(got) != 0 {
		t.Errorf("init containers left: %v", got)
	}
	_, _, err = run(t, f, "plugin", "remove", "nothing-here")
	if err == nil || !strings.Contains(err.Error(), `"nothing-here"`) || !strings.Contains(err.Error(), "it has: none") {
		t.Errorf("remove of an unknown plugin: %v", err)
	}
}

func TestPluginAddWithoutServer(t *testing.T) {
	_, _, err := run(t, newTestFactory(newFakeBuilder(t).Build()), "plugin", "add", "a/b:1")
	if err == nil || !strings.Contains(err.Error(), "no Deployment velero/velero") || !strings.Contains(err.Error(), "lifeboat install") {
		t.Errorf("error = %v, want one that says to install the server", err)
	}
}

func TestUninstallRefusesToGuessWithoutATerminal(t *testing.T) {
	c := newFakeBuilder(t, serverDeployment(t)).Build()
	_, _, err := run(t, newTestFactory(c), "uninstall")
	if err == nil || !strings.Contains(err.Error(), "--force") || !strings.Contains(err.Error(), "--keep-crds") {
		t.Fatalf("error = %v, want a refusal naming --force and --keep-crds", err)
	}
	if got := initContainers(t, c); got != nil {
		t.Fatalf("unexpected init containers %v", got)
	}
	// Nothing was removed.
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "velero", Name: "velero"}, &appsv1.Deployment{}); err != nil {
		t.Errorf("the refusal removed the Deployment: %v", err)
	}
}

func TestUninstallAsksAndKeepsTheCRDsOnNo(t *testing.T) {
	objs, err := install.Objects(install.Options{Namespace: "velero", Image: "ghcr.io/lifeboat-io/lifeboat:v1"})
	if err != nil {
		t.Fatal(err)
	}
	c := newFakeBuilder(t, objs...).Build()
	f := newTestFactory(c)
	f.IsTerminalInput = func(io.Reader) bool { return true }
	cmd := newRootCommand(f)
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetIn(strings.NewReader("n\n"))
	cmd.SetArgs([]string{"uninstall"})
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"Remove the velero.io objects", "Deployment/velero/velero: deleted", "ServiceAccount/velero/velero: deleted",
		"ClusterRole/lifeboat-server-velero: deleted", "the velero.io CRDs and objects stay"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := c.List(context.Background(), crds); err != nil || len(crds.Items) == 0 {
		t.Errorf("answering no removed the CRDs (%d left, %v)", len(crds.Items), err)
	}
}

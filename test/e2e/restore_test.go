package e2e

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/testutil/testenv"
)

// sameObject strips what the API server sets and what a restore changes on
// purpose (namespace, restore labels, service cluster IPs, status).
func sameObject(u *unstructured.Unstructured) map[string]any {
	o := u.DeepCopy().Object
	meta := o["metadata"].(map[string]any)
	for _, f := range []string{"uid", "resourceVersion", "creationTimestamp", "managedFields", "generation", "namespace"} {
		delete(meta, f)
	}
	if labels, ok := meta["labels"].(map[string]any); ok {
		delete(labels, v1.BackupNameLabel)
		delete(labels, v1.RestoreNameLabel)
	}
	delete(o, "status")
	if spec, ok := o["spec"].(map[string]any); ok && u.GetKind() == "Service" {
		delete(spec, "clusterIP")
		delete(spec, "clusterIPs")
	}
	return o
}

func TestCLIRestoreRoundTrip(t *testing.T) {
	bsl, _ := env.FilesystemLocation(t, env.Name("fs"))
	src := env.NewNamespace(t, "rsrc")
	dst := env.Name("rdst")
	sampleApp(t, src)

	backupName := env.Name("rt")
	mustLifeboat(t, "backup", "create", backupName, "--include-namespaces", src, "--storage-location", bsl.Name, "--wait")
	restoreName := env.Name("rt")
	out := mustLifeboat(t, "restore", "create", restoreName, "--from-backup", backupName, "--namespace-mappings", src+":"+dst, "--wait")
	if !strings.Contains(out, "Completed") {
		t.Errorf("restore create --wait:\n%s", out)
	}

	dyn := dynamic.NewForConfigOrDie(env.Config)
	for _, gvr := range []schema.GroupVersionResource{
		{Version: "v1", Resource: "configmaps"}, {Version: "v1", Resource: "secrets"}, {Version: "v1", Resource: "serviceaccounts"},
		{Version: "v1", Resource: "services"}, {Group: "apps", Version: "v1", Resource: "deployments"},
		{Group: widgetGroup, Version: widgetVersion, Resource: widgetResource},
	} {
		orig, err := dyn.Resource(gvr).Namespace(src).List(testenv.Ctx(t), metav1.ListOptions{})
		if err != nil || len(orig.Items) != 1 {
			t.Fatalf("%s originals: %v (%d)", gvr.Resource, err, len(orig.Items))
		}
		got, err := dyn.Resource(gvr).Namespace(dst).Get(testenv.Ctx(t), orig.Items[0].GetName(), metav1.GetOptions{})
		if err != nil {
			t.Errorf("%s not restored into %s: %v", gvr.Resource, dst, err)
			continue
		}
		if !reflect.DeepEqual(sameObject(&orig.Items[0]), sameObject(got)) {
			a, _ := json.Marshal(sameObject(&orig.Items[0]))
			b, _ := json.Marshal(sameObject(got))
			t.Errorf("%s differs:\noriginal %s\nrestored %s", gvr.Resource, a, b)
		}
		if got.GetLabels()[v1.RestoreNameLabel] != restoreName {
			t.Errorf("%s lacks the restore label: %v", gvr.Resource, got.GetLabels())
		}
	}

	out = mustLifeboat(t, "restore", "get", restoreName)
	if !strings.Contains(out, backupName) || !strings.Contains(out, "Completed") {
		t.Errorf("restore get:\n%s", out)
	}
	out = mustLifeboat(t, "restore", "describe", restoreName, "--details")
	for _, want := range []string{"Completed", dst + "/settings(created)", dst + "/web(created)"} {
		if !strings.Contains(out, want) {
			t.Errorf("restore describe --details lacks %q:\n%s", want, out)
		}
	}
	out = mustLifeboat(t, "restore", "logs", restoreName)
	if !strings.Contains(out, "restore finished") {
		t.Errorf("restore logs:\n%s", out)
	}

	// Restoring onto what is there changes nothing and warns about nothing:
	// the live objects equal the backed-up ones.
	again := env.Name("rt")
	mustLifeboat(t, "restore", "create", again, "--from-backup", backupName, "--namespace-mappings", src+":"+dst, "--wait")
	var rs v1.Restore
	if err := env.Client.Get(testenv.Ctx(t), clientKey(again), &rs); err != nil {
		t.Fatal(err)
	}
	if rs.Status.Phase != v1.RestorePhaseCompleted || rs.Status.Warnings != 0 || !hasCondition(rs.Status.Conditions, "Completed", metav1.ConditionTrue) {
		t.Errorf("second restore status %+v", rs.Status)
	}
}

func TestRestoreValidation(t *testing.T) {
	rs := &v1.Restore{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: env.Name("rv")},
		Spec: v1.RestoreSpec{BackupName: "no-such-backup"}}
	env.Create(t, rs)
	got := waitRestore(t, rs.Name)
	if got.Status.Phase != v1.RestorePhaseFailedValidation || !strings.Contains(strings.Join(got.Status.ValidationErrors, " "), "no-such-backup") {
		t.Errorf("status %+v, want FailedValidation naming the backup", got.Status)
	}
	out, err := lifeboat(t, "restore", "create", "--from-backup", "no-such-backup")
	if err == nil || !strings.Contains(err.Error()+out, "no-such-backup") {
		t.Errorf("restore create from a missing backup: %v %s", err, out)
	}
	out, err = lifeboat(t, "restore", "create", "--from-backup", "x", "--namespace-mappings", "a:b:c")
	if err == nil || !strings.Contains(err.Error()+out, "--namespace-mappings") {
		t.Errorf("bad mapping: %v %s", err, out)
	}
}

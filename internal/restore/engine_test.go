package restore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/archive/archivetest"
	"github.com/lifeboat-io/lifeboat/internal/backup"
	"github.com/lifeboat-io/lifeboat/internal/results"
	"github.com/lifeboat-io/lifeboat/internal/storage"
	"github.com/lifeboat-io/lifeboat/internal/storage/filesystem"
)

var seq atomic.Int64

func uniq(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1e6, seq.Add(1))
}

var widgets = schema.GroupVersionResource{Group: "restore.lifeboat.io", Version: "v1", Resource: "widgets"}

type world struct {
	t     *testing.T
	cs    kubernetes.Interface
	dyn   dynamic.Interface
	store *storage.BackupStore
	dir   string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "bucket"), 0o755); err != nil {
		t.Fatal(err)
	}
	fs, err := filesystem.New(map[string]string{"path": root})
	if err != nil {
		t.Fatal(err)
	}
	return &world{
		t: t, cs: kubernetes.NewForConfigOrDie(cfg), dyn: dynamic.NewForConfigOrDie(cfg),
		store: storage.NewBackupStore(fs, "bucket", ""), dir: root,
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

func (w *world) namespace(name string) {
	w.t.Helper()
	if _, err := w.cs.CoreV1().Namespaces().Create(ctx(w.t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

// ensureWidgetCRD defines a namespaced custom resource with a status
// subresource, once per package.
func (w *world) ensureWidgetCRD() {
	w.t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.restore.lifeboat.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "restore.lifeboat.io", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true),
				}},
			}},
		},
	}
	u, err := toUnstructured(crd)
	if err != nil {
		w.t.Fatal(err)
	}
	crds := w.dyn.Resource(grCRDs.WithVersion("v1"))
	if _, err := crds.Create(ctx(w.t), u, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		w.t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx(w.t), 100*time.Millisecond, time.Minute, true, func(c context.Context) (bool, error) {
		got, err := crds.Get(c, crd.Name, metav1.GetOptions{})
		return err == nil && established(got), nil
	})
	if err != nil {
		w.t.Fatalf("CRD not established: %v", err)
	}
}

func toUnstructured(obj any) (*unstructured.Unstructured, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	return u, json.Unmarshal(data, &u.Object)
}

// app creates the objects of the round-trip test in ns.
func (w *world) app(ns string) {
	w.t.Helper()
	c := ctx(w.t)
	labels := map[string]string{"app": "shop"}
	must := func(err error) {
		w.t.Helper()
		if err != nil {
			w.t.Fatal(err)
		}
	}
	_, err := w.cs.CoreV1().ConfigMaps(ns).Create(c, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Labels: labels}, Data: map[string]string{"a": "1"}}, metav1.CreateOptions{})
	must(err)
	_, err = w.cs.CoreV1().Secrets(ns).Create(c, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "token", Labels: labels}, Data: map[string][]byte{"t": []byte("s3cr3t")}}, metav1.CreateOptions{})
	must(err)
	_, err = w.cs.CoreV1().ServiceAccounts(ns).Create(c, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "runner", Labels: labels}}, metav1.CreateOptions{})
	must(err)
	_, err = w.cs.CoreV1().Services(ns).Create(c, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: labels},
		Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
	must(err)
	_, err = w.cs.AppsV1().Deployments(ns).Create(c, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: labels},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}}}}}, metav1.CreateOptions{})
	must(err)
	w.ensureWidgetCRD()
	widget := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "restore.lifeboat.io/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "gizmo", "labels": map[string]any{"app": "shop"}},
		// An integer past float64's 53 bits: it must come back as it
		// was, not rounded through a float.
		"spec": map[string]any{"color": "blue", "sizes": []any{int64(1), int64(2)}, "serial": int64(9007199254740993), "ratio": 0.5},
	}}
	created, err := w.dyn.Resource(widgets).Namespace(ns).Create(c, widget, metav1.CreateOptions{})
	must(err)
	created.Object["status"] = map[string]any{"ready": true}
	_, err = w.dyn.Resource(widgets).Namespace(ns).UpdateStatus(c, created, metav1.UpdateOptions{})
	must(err)
}

// backupOf backs ns up with the real backup engine and returns the Backup.
func (w *world) backupOf(ns string) *v1.Backup {
	w.t.Helper()
	e := backup.NewEngine(newAccess(w.t), 4, nil)
	now := metav1.Now()
	b := &v1.Backup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: uniq("bk")},
		Spec:       v1.BackupSpec{IncludedNamespaces: []string{ns}},
		Status:     v1.BackupStatus{Phase: v1.BackupPhaseInProgress, StartTimestamp: &now},
	}
	out := e.Run(ctx(w.t), b, w.store, nil)
	if out.Phase != v1.BackupPhaseCompleted {
		w.t.Fatalf("backup: %+v", out)
	}
	backup.ApplyOutcome(b, out)
	// As the backup controller records it.
	b.Annotations = map[string]string{v1.DigestsAnnotation: out.DigestsSHA256}
	return b
}

func (w *world) restore(b *v1.Backup, spec v1.RestoreSpec) (*v1.Restore, Outcome) {
	w.t.Helper()
	spec.BackupName = b.Name
	rs := &v1.Restore{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: uniq("rs")}, Spec: spec}
	if msgs := Validate(&rs.Spec); len(msgs) > 0 {
		w.t.Fatalf("invalid restore spec: %v", msgs)
	}
	e := NewEngine(newAccess(w.t), nil)
	return rs, e.Run(ctx(w.t), rs, b, w.store, nil)
}

// comparable strips what the API server sets and what a restore changes on
// purpose, so an original and its restored copy compare equal.
func comparable(u *unstructured.Unstructured) map[string]any {
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

func TestRoundTripIntoAMappedNamespace(t *testing.T) {
	w := newWorld(t)
	src, dst := uniq("src"), uniq("dst")
	w.namespace(src)
	w.app(src)
	b := w.backupOf(src)

	rs, out := w.restore(b, v1.RestoreSpec{NamespaceMapping: map[string]string{src: dst}})
	if out.Phase != v1.RestorePhaseCompleted {
		t.Fatalf("restore outcome %+v", out)
	}
	// 6 objects of the app, the namespace, and the widget's CRD (which
	// exists already and is identical, so it is skipped quietly).
	if out.Progress.ItemsRestored != 8 || out.Progress.TotalItems != 8 || out.Warnings != 0 {
		t.Errorf("progress %+v warnings %d", out.Progress, out.Warnings)
	}
	kinds := []schema.GroupVersionResource{
		{Version: "v1", Resource: "configmaps"}, {Version: "v1", Resource: "secrets"}, {Version: "v1", Resource: "serviceaccounts"},
		{Version: "v1", Resource: "services"}, {Group: "apps", Version: "v1", Resource: "deployments"}, widgets,
	}
	for _, gvr := range kinds {
		orig, err := w.dyn.Resource(gvr).Namespace(src).List(ctx(t), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(orig.Items) != 1 {
			t.Fatalf("%s: %d originals", gvr.Resource, len(orig.Items))
		}
		got, err := w.dyn.Resource(gvr).Namespace(dst).Get(ctx(t), orig.Items[0].GetName(), metav1.GetOptions{})
		if err != nil {
			t.Errorf("%s %s not restored: %v", gvr.Resource, orig.Items[0].GetName(), err)
			continue
		}
		if !reflect.DeepEqual(comparable(&orig.Items[0]), comparable(got)) {
			a, _ := json.MarshalIndent(comparable(&orig.Items[0]), "", " ")
			b, _ := json.MarshalIndent(comparable(got), "", " ")
			t.Errorf("%s differs after restore:\noriginal %s\nrestored %s", gvr.Resource, a, b)
		}
		if got.GetLabels()[v1.RestoreNameLabel] != rs.Name || got.GetLabels()[v1.BackupNameLabel] != b.Name {
			t.Errorf("%s labels %v", gvr.Resource, got.GetLabels())
		}
	}
	widget, err := w.dyn.Resource(widgets).Namespace(dst).Get(ctx(t), "gizmo", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, has := widget.Object["status"]; has {
		t.Errorf("status of a type with a status subresource was restored: %v", widget.Object["status"])
	}
	if _, err := w.cs.CoreV1().Namespaces().Get(ctx(t), dst, metav1.GetOptions{}); err != nil {
		t.Errorf("mapped namespace: %v", err)
	}

	list := map[string][]string{}
	if err := w.store.GetGzipJSON(ctx(t), w.store.RestoreKey(rs.Name, storage.RestoreResourceListFile(rs.Name)), &list); err != nil {
		t.Fatal(err)
	}
	if got := list["v1/ConfigMap"]; len(got) != 1 || got[0] != dst+"/settings(created)" {
		t.Errorf("restore resource list v1/ConfigMap = %v", got)
	}
	if got := list["apiextensions.k8s.io/v1/CustomResourceDefinition"]; len(got) != 1 || !strings.HasSuffix(got[0], "(skipped)") {
		t.Errorf("restore resource list CRD = %v", got)
	}
}

func TestExistingResourcePolicy(t *testing.T) {
	w := newWorld(t)
	src, dst := uniq("src"), uniq("dst")
	w.namespace(src)
	w.app(src)
	b := w.backupOf(src)
	if _, out := w.restore(b, v1.RestoreSpec{NamespaceMapping: map[string]string{src: dst}}); out.Phase != v1.RestorePhaseCompleted {
		t.Fatalf("first restore: %+v", out)
	}
	cms := w.cs.CoreV1().ConfigMaps(dst)
	cm, err := cms.Get(ctx(t), "settings", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["a"] = "changed"
	if _, err := cms.Update(ctx(t), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	rs, out := w.restore(b, v1.RestoreSpec{NamespaceMapping: map[string]string{src: dst}, ExistingResourcePolicy: v1.PolicyTypeNone})
	if out.Phase != v1.RestorePhaseCompleted || out.Warnings != 1 {
		t.Fatalf("restore with none: %+v, want Completed with exactly one warning (the changed ConfigMap): %+v", out, w.results(rs))
	}
	if got := w.results(rs).Warnings.Namespaces[dst]; len(got) != 1 || !strings.Contains(got[0], "configmaps "+dst+"/settings") {
		t.Errorf("warnings %v should name the ConfigMap", got)
	}
	if cm, _ := cms.Get(ctx(t), "settings", metav1.GetOptions{}); cm.Data["a"] != "changed" {
		t.Errorf("policy none changed the live object: %v", cm.Data)
	}

	_, out = w.restore(b, v1.RestoreSpec{NamespaceMapping: map[string]string{src: dst}, ExistingResourcePolicy: v1.PolicyTypeUpdate})
	if out.Phase != v1.RestorePhaseCompleted || out.Warnings != 0 {
		t.Fatalf("restore with update: %+v", out)
	}
	if cm, _ := cms.Get(ctx(t), "settings", metav1.GetOptions{}); cm.Data["a"] != "1" {
		t.Errorf("policy update did not patch the live object: %v", cm.Data)
	}
}

func (w *world) results(rs *v1.Restore) results.Results {
	w.t.Helper()
	var res results.Results
	if err := w.store.GetGzipJSON(ctx(w.t), w.store.RestoreKey(rs.Name, storage.RestoreResultsFile(rs.Name)), &res); err != nil {
		w.t.Fatal(err)
	}
	return res
}

// putBackup stores a hand-made archive as backup name and returns a Backup for it.
func (w *world) putBackup(name string, tarball []byte) *v1.Backup {
	w.t.Helper()
	if err := w.store.PutBackupContents(ctx(w.t), name, bytes.NewReader(tarball)); err != nil {
		w.t.Fatal(err)
	}
	return &v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: name}, Status: v1.BackupStatus{Phase: v1.BackupPhaseCompleted}}
}

func TestHostileArchivesFailBeforeAnythingIsCreated(t *testing.T) {
	w := newWorld(t)
	ns := uniq("hostile")
	cm := func(name string) []byte {
		return []byte(fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":%q}}`, name, ns))
	}
	outside := filepath.Join(t.TempDir(), "escaped")
	cases := []struct {
		name    string
		entries []archivetest.Entry
		want    string
	}{
		{"path traversal", []archivetest.Entry{
			{Name: "resources/configmaps/namespaces/" + ns + "/ok.json", Data: cm("ok")},
			{Name: "resources/configmaps/namespaces/../../../../.." + outside, Data: []byte("x")},
		}, "unsafe path"},
		{"symlink", []archivetest.Entry{
			{Name: "resources/configmaps/namespaces/" + ns + "/ok.json", Data: cm("ok")},
			{Name: "resources/configmaps/namespaces/" + ns + "/link.json", Typeflag: '2', Linkname: outside},
		}, "symlink"},
		{"absolute path", []archivetest.Entry{{Name: outside, Data: []byte("x")}}, "absolute"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := archivetest.Tarball(&buf, tc.entries); err != nil {
				t.Fatal(err)
			}
			b := w.putBackup(uniq("hostile"), buf.Bytes())
			_, out := w.restore(b, v1.RestoreSpec{})
			if out.Phase != v1.RestorePhaseFailed || !strings.Contains(out.FailureReason, tc.want) {
				t.Fatalf("outcome %+v, want Failed mentioning %q", out, tc.want)
			}
			if _, err := w.cs.CoreV1().ConfigMaps(ns).Get(ctx(t), "ok", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("an item of a hostile archive was restored (get: %v)", err)
			}
			if _, err := os.Lstat(outside); !os.IsNotExist(err) {
				t.Errorf("something was written outside the restore's temp space: %v", err)
			}
		})
	}

	t.Run("10 GB decompression bomb", func(t *testing.T) {
		var buf bytes.Buffer
		if err := archivetest.Bomb(&buf, 10<<30, 32<<20); err != nil {
			t.Fatal(err)
		}
		b := w.putBackup(uniq("bomb"), buf.Bytes())
		start := time.Now()
		_, out := w.restore(b, v1.RestoreSpec{})
		if out.Phase != v1.RestorePhaseFailed || !strings.Contains(out.FailureReason, "decompression bomb") {
			t.Fatalf("outcome %+v, want Failed as a decompression bomb", out)
		}
		t.Logf("refused after %s", time.Since(start))
		tmp, err := filepath.Glob(filepath.Join(os.TempDir(), "lifeboat-restore-*"))
		if err != nil || len(tmp) != 0 {
			t.Errorf("the restore left its temp space behind: %v %v", tmp, err)
		}
	})
}

package restore

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

type fakePlugins struct {
	v1 map[string]api.RestoreItemAction
}

func (f fakePlugins) Names(kind api.Kind) []string {
	var out []string
	if kind == api.KindRestoreItemAction {
		for n := range f.v1 {
			out = append(out, n)
		}
	}
	return out
}
func (f fakePlugins) RestoreItemAction(name string) (api.RestoreItemAction, error) {
	return f.v1[name], nil
}
func (f fakePlugins) RestoreItemActionV2(string) (api.RestoreItemActionV2, error) {
	return nil, errors.New("none")
}
func (f fakePlugins) VolumeSnapshotter(name string) (api.VolumeSnapshotter, error) {
	return nil, errors.New("no VolumeSnapshotter " + name)
}

// tweak skips configmaps labelled skip=true, rewrites the data of the
// others, asks for the secret they name, and fails on "poison".
type tweak struct{ sawOriginal *bool }

func (tweak) AppliesTo() (api.ResourceSelector, error) {
	return api.ResourceSelector{IncludedResources: []string{"configmaps"}}, nil
}

func (t tweak) Execute(in *api.RestoreItemActionExecuteInput) (*api.RestoreItemActionExecuteOutput, error) {
	u := in.Item.(*unstructured.Unstructured)
	orig := in.ItemFromBackup.(*unstructured.Unstructured)
	if orig.GetResourceVersion() != "" && u.GetResourceVersion() == "" {
		*t.sawOriginal = true
	}
	switch {
	case u.GetName() == "poison":
		return nil, errors.New("cannot restore poison")
	case u.GetLabels()["skip"] == "true":
		return &api.RestoreItemActionExecuteOutput{SkipRestore: true}, nil
	}
	_ = unstructured.SetNestedField(u.Object, "rewritten", "data", "value")
	out := &api.RestoreItemActionExecuteOutput{UpdatedItem: u}
	if s, ok, _ := unstructured.NestedString(orig.Object, "data", "secret"); ok {
		out.AdditionalItems = []api.ResourceIdentifier{{GroupResource: schema.GroupResource{Resource: "secrets"}, Namespace: orig.GetNamespace(), Name: s}}
	}
	return out, nil
}

func TestRestoreItemActions(t *testing.T) {
	w := newWorld(t)
	src, dst := uniq("src"), uniq("dst")
	w.namespace(src)
	c := ctx(t)
	for _, cm := range []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Name: "app"}, Data: map[string]string{"value": "original", "secret": "creds"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "skipped", Labels: map[string]string{"skip": "true"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "poison"}},
	} {
		if _, err := w.cs.CoreV1().ConfigMaps(src).Create(c, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.cs.CoreV1().Secrets(src).Create(c, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b := w.backupOf(src)

	sawOriginal := false
	rs := &v1.Restore{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: uniq("rs")},
		Spec: v1.RestoreSpec{BackupName: b.Name, NamespaceMapping: map[string]string{src: dst}}}
	e := NewEngine(newAccess(t), nil)
	e.Plugins = fakePlugins{v1: map[string]api.RestoreItemAction{"example.io/tweak": tweak{&sawOriginal}}}
	out := e.Run(c, rs, b, w.store, nil)
	if out.Phase != v1.RestorePhasePartiallyFailed || out.Errors != 1 {
		t.Fatalf("outcome %+v, want PartiallyFailed with one error (poison): %+v", out, w.results(rs))
	}
	if msg := strings.Join(w.results(rs).Errors.Namespaces[dst], " "); !strings.Contains(msg, "example.io/tweak") || !strings.Contains(msg, "poison") {
		t.Errorf("error %q should name the action and the item", msg)
	}
	cms := w.cs.CoreV1().ConfigMaps(dst)
	if cm, err := cms.Get(c, "app", metav1.GetOptions{}); err != nil || cm.Data["value"] != "rewritten" {
		t.Errorf("app configmap %+v, %v: want the action's update", cm, err)
	}
	for _, name := range []string{"skipped", "poison"} {
		if _, err := cms.Get(c, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s was restored (err %v)", name, err)
		}
	}
	if _, err := w.cs.CoreV1().Secrets(dst).Get(c, "creds", metav1.GetOptions{}); err != nil {
		t.Errorf("additional secret: %v", err)
	}
	if !sawOriginal {
		t.Error("the action did not get the item as stored in the backup next to the prepared one")
	}
	if out.Progress.ItemsRestored != out.Progress.TotalItems {
		t.Errorf("progress %+v", out.Progress)
	}
}

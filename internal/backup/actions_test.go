package backup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/archive"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

// fakePlugins serves in-process actions; the out-of-process path is
// covered by the plugin host's and the end-to-end tests.
type fakePlugins struct {
	v1     map[string]api.BackupItemAction
	v2     map[string]api.BackupItemActionV2
	blocks map[string]api.ItemBlockAction
	// snapshotters are by provider name.
	snapshotters map[string]api.VolumeSnapshotter
}

func (f fakePlugins) Names(kind api.Kind) []string {
	var out []string
	switch kind {
	case api.KindBackupItemAction:
		for n := range f.v1 {
			out = append(out, n)
		}
	case api.KindBackupItemActionV2:
		for n := range f.v2 {
			out = append(out, n)
		}
	case api.KindItemBlockAction:
		for n := range f.blocks {
			out = append(out, n)
		}
	}
	return out
}

func (f fakePlugins) BackupItemAction(name string) (api.BackupItemAction, error) {
	return f.v1[name], nil
}
func (f fakePlugins) ItemBlockAction(name string) (api.ItemBlockAction, error) {
	return f.blocks[name], nil
}
func (f fakePlugins) BackupItemActionV2(name string) (api.BackupItemActionV2, error) {
	return f.v2[name], nil
}
func (f fakePlugins) VolumeSnapshotter(name string) (api.VolumeSnapshotter, error) {
	if vs, ok := f.snapshotters[name]; ok {
		return vs, nil
	}
	return nil, fmt.Errorf("no VolumeSnapshotter %q", name)
}

// annotate marks configmaps and asks for the secret named in their data.
type annotate struct{}

func (annotate) AppliesTo() (api.ResourceSelector, error) {
	return api.ResourceSelector{IncludedResources: []string{"configmaps"}}, nil
}

func (annotate) Execute(item runtime.Unstructured, b *v1.Backup) (runtime.Unstructured, []api.ResourceIdentifier, error) {
	u := item.(*unstructured.Unstructured)
	if u.GetName() == "poison" {
		return nil, nil, errors.New("cannot handle poison")
	}
	ann := u.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann["example.io/backed-up-by"] = b.Name
	u.SetAnnotations(ann)
	var extra []api.ResourceIdentifier
	if s, ok, _ := unstructured.NestedString(u.Object, "data", "secret"); ok {
		extra = append(extra, api.ResourceIdentifier{GroupResource: schema.GroupResource{Resource: "secrets"}, Namespace: u.GetNamespace(), Name: s})
	}
	return u, extra, nil
}

// labelV2 is a v2 action that labels secrets.
type labelV2 struct{}

func (labelV2) Name() string { return "example.io/label" }
func (labelV2) AppliesTo() (api.ResourceSelector, error) {
	return api.ResourceSelector{IncludedResources: []string{"secrets"}}, nil
}
func (labelV2) Execute(item runtime.Unstructured, _ *v1.Backup) (runtime.Unstructured, []api.ResourceIdentifier, string, []api.ResourceIdentifier, error) {
	u := item.(*unstructured.Unstructured)
	l := u.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	l["example.io/seen"] = "true"
	u.SetLabels(l)
	return u, nil, "", nil, nil
}
func (labelV2) Progress(string, *v1.Backup) (api.OperationProgress, error) {
	return api.OperationProgress{}, nil
}
func (labelV2) Cancel(string, *v1.Backup) error { return nil }

// relatedConfig says a secret named "creds-<cm>" belongs with each configmap
// labelled block=yes.
type relatedConfig struct{}

func (relatedConfig) Name() string { return "example.io/related" }
func (relatedConfig) AppliesTo() (api.ResourceSelector, error) {
	return api.ResourceSelector{IncludedResources: []string{"configmaps"}, LabelSelector: "block=yes"}, nil
}
func (relatedConfig) GetRelatedItems(item runtime.Unstructured, _ *v1.Backup) ([]api.ResourceIdentifier, error) {
	u := item.(*unstructured.Unstructured)
	return []api.ResourceIdentifier{{GroupResource: schema.GroupResource{Resource: "secrets"}, Namespace: u.GetNamespace(), Name: "block-" + u.GetName()}}, nil
}

func TestItemActionsChangeItemsAndAddItems(t *testing.T) {
	f := newFixture(t, 0)
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	for _, cm := range []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Name: "app", Labels: map[string]string{"backup": "yes"}}, Data: map[string]string{"secret": "creds"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "poison", Labels: map[string]string{"backup": "yes"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "blocky", Labels: map[string]string{"backup": "yes", "block": "yes"}}},
	} {
		if _, err := cs.CoreV1().ConfigMaps(f.ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The secret does not match the label selector: only the action brings it in.
	for _, s := range []string{"creds", "block-blocky"} {
		if _, err := cs.CoreV1().Secrets(f.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: s}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	f.engine.Plugins = fakePlugins{
		v1:     map[string]api.BackupItemAction{"example.io/annotate": annotate{}},
		v2:     map[string]api.BackupItemActionV2{"example.io/label": labelV2{}},
		blocks: map[string]api.ItemBlockAction{"example.io/related": relatedConfig{}},
	}
	b := f.backup("actions")
	b.Spec.LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"backup": "yes"}}
	out := f.engine.Run(ctx, b, f.store, nil)
	if out.Phase != v1.BackupPhasePartiallyFailed || out.Errors != 1 {
		t.Fatalf("outcome %+v, want PartiallyFailed with the poison item's error", out)
	}

	items := readItems(t, f, "actions")
	cm := items["resources/configmaps/namespaces/"+f.ns+"/app.json"]
	if cm == nil || cm.GetAnnotations()["example.io/backed-up-by"] != "actions" {
		t.Errorf("configmap not changed by the action: %v", cm)
	}
	if _, ok := items["resources/configmaps/namespaces/"+f.ns+"/poison.json"]; ok {
		t.Error("an item whose action failed was stored")
	}
	secret := items["resources/secrets/namespaces/"+f.ns+"/creds.json"]
	if secret == nil || secret.GetLabels()["example.io/seen"] != "true" {
		t.Errorf("additional secret missing or not passed through the v2 action: %v", secret)
	}
	if items["resources/secrets/namespaces/"+f.ns+"/block-blocky.json"] == nil {
		t.Error("the item block action's related secret was not stored")
	}
	if secret != nil && secret.GetKind() != "Secret" {
		t.Errorf("additional item kind %q", secret.GetKind())
	}
}

func readItems(t *testing.T, f *fixture, name string) map[string]*unstructured.Unstructured {
	t.Helper()
	rc, err := f.store.GetBackupContents(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	r, err := archive.NewReader(rc, archive.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*unstructured.Unstructured{}
	for {
		e, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if e.Item == nil || e.PreferredVersionCopy {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := json.Unmarshal(e.Data, &u.Object); err != nil {
			t.Fatal(err)
		}
		out[e.Path] = u
		if strings.Contains(e.Path, "..") {
			t.Fatal("unexpected path")
		}
	}
}

package deleteactions

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/cluster"
	"github.com/lifeboat-io/lifeboat/internal/localcluster"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

var (
	cfg *rest.Config
	dyn dynamic.Interface
	seq atomic.Int64
)

func TestMain(m *testing.M) {
	c, err := localcluster.Start(localcluster.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cfg = c.Config
	code := func() int {
		if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{
			Paths: []string{filepath.Join("testdata", "volumesnapshots.yaml"), filepath.Join("testdata", "volumesnapshotcontents.yaml")},
		}); err != nil {
			fmt.Fprintln(os.Stderr, "installing the snapshot CRDs:", err)
			return 1
		}
		if dyn, err = dynamic.NewForConfig(cfg); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}()
	if err := c.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}

var (
	vsGVR                   = schema.GroupVersionResource{Group: snapshotGroup, Version: "v1", Resource: "volumesnapshots"}
	vscGVR                  = schema.GroupVersionResource{Group: snapshotGroup, Version: "v1", Resource: "volumesnapshotcontents"}
	cmGVR                   = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	secretGVR               = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	namespaceGVR            = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	gadgetGVR               = schema.GroupVersionResource{Group: "cleanup.test.lifeboat.io", Version: "v1", Resource: "gadgets"}
	testLogOutput io.Writer = io.Discard
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1_000_000, seq.Add(1))
}

func newNamespace(t *testing.T, prefix string) string {
	t.Helper()
	name := uniqueName(prefix)
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name}}}
	if _, err := dyn.Resource(namespaceGVR).Create(ctx(t), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	return name
}

func newClients(t *testing.T, namespace string) *Clients {
	t.Helper()
	return NewClients(newAccess(t), namespace, slog.New(slog.NewTextHandler(testLogOutput, nil)))
}

// create makes an object of gvr from its apiVersion, kind, metadata and the
// rest of obj.
func create(t *testing.T, gvr schema.GroupVersionResource, obj map[string]any) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{Object: obj}
	res := dyn.Resource(gvr)
	var ri dynamic.ResourceInterface = res
	if u.GetNamespace() != "" {
		ri = res.Namespace(u.GetNamespace())
	}
	out, err := ri.Create(ctx(t), u, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating %s %s/%s: %v", gvr.Resource, u.GetNamespace(), u.GetName(), err)
	}
	return out
}

func objMeta(namespace, name string, labels map[string]string) map[string]any {
	m := map[string]any{"name": name}
	if namespace != "" {
		m["namespace"] = namespace
	}
	if len(labels) > 0 {
		l := map[string]any{}
		for k, v := range labels {
			l[k] = v
		}
		m["labels"] = l
	}
	return m
}

// exists reports whether the object is there (and not being deleted).
func exists(t *testing.T, gvr schema.GroupVersionResource, namespace, name string) bool {
	t.Helper()
	obj, err := getObj(t, gvr, namespace, name)
	return err == nil && obj != nil && obj.GetDeletionTimestamp() == nil
}

func getObj(t *testing.T, gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	t.Helper()
	var ri dynamic.ResourceInterface = dyn.Resource(gvr)
	if namespace != "" {
		ri = dyn.Resource(gvr).Namespace(namespace)
	}
	obj, err := ri.Get(ctx(t), name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		t.Fatalf("reading %s %s/%s: %v", gvr.Resource, namespace, name, err)
	}
	return obj, nil
}

func backupNamed(name string) *v1.Backup {
	return &v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: name, UID: types.UID(uniqueName("uid"))}}
}

// itemOf is obj as a backup item: what the deletion engine hands over.
func itemOf(obj map[string]any) runtime.Unstructured {
	return &unstructured.Unstructured{Object: obj}
}

func execute(a api.DeleteItemAction, item runtime.Unstructured, b *v1.Backup) error {
	return a.Execute(&api.DeleteItemActionExecuteInput{Item: item, Backup: b})
}

// newAccess builds the clients an engine takes, as the server does.
func newAccess(t testing.TB) *cluster.Access {
	t.Helper()
	acc, err := cluster.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return acc
}

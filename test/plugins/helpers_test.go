package plugins

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/archive"
	"github.com/lifeboat-io/lifeboat/internal/testutil/testenv"
)

// sampleApp fills ns with what the example plugins act on: two ConfigMaps
// (annotate, cleanup, the compat plugin), a Deployment (annotate), a
// Service (nothing applies to it) and a PersistentVolumeClaim
// (custom-volume). Without a provisioner the claim stays Pending, which is
// all a backup needs.
func sampleApp(t *testing.T, ns string) {
	t.Helper()
	labels := map[string]string{"app": "demo"}
	env.Create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings", Labels: labels}, Data: map[string]string{"greeting": "hello"}})
	env.Create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "features", Labels: labels}, Data: map[string]string{"beta": "on"}})
	env.Create(t, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
			},
		},
	})
	env.Create(t, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", Labels: labels},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80}}},
	})
	class := "example-no-provisioner"
	env.Create(t, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data", Labels: labels},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &class,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	})
}

// newBackup creates a Backup of namespace ns in location and waits for it
// to end Completed.
func newBackup(t *testing.T, location, ns string) *v1.Backup {
	t.Helper()
	b := &v1.Backup{
		ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: env.Name("bk")},
		Spec:       v1.BackupSpec{StorageLocation: location, IncludedNamespaces: []string{ns}},
	}
	env.Create(t, b)
	b = env.WaitBackup(t, b.Name, 2*time.Minute)
	if b.Status.Phase != v1.BackupPhaseCompleted {
		out, _ := lifeboat(t, "backup", "logs", b.Name)
		t.Fatalf("backup %s: phase %s, want Completed (failure %q, validation %v, errors %d, warnings %d)\nlogs:\n%s",
			b.Name, b.Status.Phase, b.Status.FailureReason, b.Status.ValidationErrors, b.Status.Errors, b.Status.Warnings, out)
	}
	return b
}

// readArchive reads a backup tarball and returns its entries by path.
func readArchive(t *testing.T, rc io.ReadCloser) map[string][]byte {
	t.Helper()
	defer rc.Close()
	r, err := archive.NewReader(rc, archive.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	entries := map[string][]byte{}
	for {
		e, err := r.Next()
		if err == io.EOF {
			return entries
		}
		if err != nil {
			t.Fatalf("reading tarball: %v", err)
		}
		entries[e.Path] = e.Data
	}
}

// readArchiveFile reads a tarball from disk.
func readArchiveFile(t *testing.T, file string) map[string][]byte {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	return readArchive(t, f)
}

// storedItem decodes the item stored at resources/<gr>/namespaces/<ns>/<name>.json.
func storedItem(t *testing.T, entries map[string][]byte, gr, ns, name string) *unstructured.Unstructured {
	t.Helper()
	p := "resources/" + gr + "/namespaces/" + ns + "/" + name + ".json"
	data, ok := entries[p]
	if !ok {
		t.Fatalf("the tarball has no %s", p)
	}
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(data, &u.Object); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return u
}

// storedItems decodes every item of gr in ns (the preferred-version
// copies left out).
func storedItems(t *testing.T, entries map[string][]byte, gr, ns string) []*unstructured.Unstructured {
	t.Helper()
	dir := "resources/" + gr + "/namespaces/" + ns + "/"
	var out []*unstructured.Unstructured
	for p := range entries {
		if strings.HasPrefix(p, dir) && path.Dir(p)+"/" == dir {
			out = append(out, storedItem(t, entries, gr, ns, strings.TrimSuffix(path.Base(p), ".json")))
		}
	}
	return out
}

func waitRestore(t *testing.T, name string) *v1.Restore {
	t.Helper()
	var rs v1.Restore
	err := wait.PollUntilContextTimeout(testenv.Ctx(t), 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: name}, &rs); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return rs.Status.Phase != "" && rs.Status.Phase != v1.RestorePhaseNew && rs.Status.Phase != v1.RestorePhaseInProgress, nil
	})
	if err != nil {
		t.Fatalf("restore %s did not finish (phase %q): %v", name, rs.Status.Phase, err)
	}
	return &rs
}

// restoreInto restores backup's namespace ns into a new namespace and
// returns that namespace's name, after checking the restore Completed.
func restoreInto(t *testing.T, backup, ns string) string {
	t.Helper()
	target := env.Name("restored")
	rs := &v1.Restore{
		ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: env.Name("rs")},
		Spec:       v1.RestoreSpec{BackupName: backup, NamespaceMapping: map[string]string{ns: target}},
	}
	env.Create(t, rs)
	rs = waitRestore(t, rs.Name)
	if rs.Status.Phase != v1.RestorePhaseCompleted {
		out, _ := lifeboat(t, "restore", "logs", rs.Name)
		t.Fatalf("restore %s: phase %s, want Completed (failure %q, errors %d, warnings %d)\nlogs:\n%s",
			rs.Name, rs.Status.Phase, rs.Status.FailureReason, rs.Status.Errors, rs.Status.Warnings, out)
	}
	return target
}

// location creates a BackupStorageLocation served by an ObjectStore plugin
// over a fresh root directory (with the bucket directory in it) and waits
// until it is Available. It returns the location and the bucket's path.
func location(t *testing.T, provider string) (*v1.BackupStorageLocation, string) {
	t.Helper()
	root := t.TempDir()
	const bucket = "backups"
	if err := os.Mkdir(root+"/"+bucket, 0o755); err != nil {
		t.Fatal(err)
	}
	bsl := &v1.BackupStorageLocation{
		ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: env.Name("dir")},
		Spec: v1.BackupStorageLocationSpec{
			Provider:    provider,
			Config:      map[string]string{"root": root},
			StorageType: v1.StorageType{ObjectStorage: &v1.ObjectStorageLocation{Bucket: bucket, Prefix: "lifeboat"}},
		},
	}
	env.Create(t, bsl)
	env.WaitLocationPhase(t, bsl.Name, v1.BackupStorageLocationPhaseAvailable, time.Minute)
	return bsl, root + "/" + bucket
}

// The cleanup example's receipts, as its README and receipt-crd.yaml
// describe them.
const (
	receiptLabel         = "example.lifeboat.io/receipt"
	receiptGroupResource = "receipts.example.lifeboat.io"
)

var receiptListGVK = schema.GroupVersionKind{Group: "example.lifeboat.io", Version: "v1", Kind: "ReceiptList"}

// installReceiptCRD creates the cleanup example's CRD from the file its
// README tells users to apply, and waits until the API server serves it.
// Every backup of a ConfigMap runs example.io/receipt, which fails the
// item without it, so TestMain installs it before the server starts.
func installReceiptCRD(ctx context.Context, c client.Client) error {
	file := filepath.Join(moduleRoot, "examples", "plugins", "cleanup", "receipt-crd.yaml")
	data, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("reading the Receipt CRD: %w", err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if err := c.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating CRD %s: %w", crd.Name, err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil {
			return false, err
		}
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("CRD %s is not established: %w", crd.Name, err)
	}
	return nil
}

// listReceipts lists the receipts made for backup, in namespace ns (every
// namespace when ns is "").
func listReceipts(t *testing.T, ns, backup string) []unstructured.Unstructured {
	t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(receiptListGVK)
	opts := []client.ListOption{client.MatchingLabels{v1.BackupNameLabel: v1.LabelValue(backup), receiptLabel: "true"}}
	if ns != "" {
		opts = append(opts, client.InNamespace(ns))
	}
	if err := env.Client.List(testenv.Ctx(t), list, opts...); err != nil {
		t.Fatalf("listing receipts: %v", err)
	}
	return list.Items
}

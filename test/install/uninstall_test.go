package install

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/config/crd"
)

// touchedKinds are every kind install creates, plus the velero.io kinds
// whose objects uninstall removes.
func touchedKinds(t *testing.T) []schema.GroupVersionKind {
	kinds := []schema.GroupVersionKind{
		{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"},
		{Version: "v1", Kind: "Namespace"},
		{Version: "v1", Kind: "ServiceAccount"},
		{Version: "v1", Kind: "Secret"},
		{Version: "v1", Kind: "ConfigMap"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"},
		{Group: "apps", Version: "v1", Kind: "Deployment"},
	}
	crds, err := crd.All()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range crds {
		kinds = append(kinds, schema.GroupVersionKind{Group: c.Spec.Group, Version: c.Spec.Versions[0].Name, Kind: c.Spec.Names.Kind})
	}
	return kinds
}

// snapshot names every object of the touched kinds, with its UID (an
// object deleted and made again is not the same object). An object being
// deleted counts as gone: this API server runs no namespace controller to
// finish a namespace's deletion, and a CRD goes a moment after its objects.
func snapshot(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, gvk := range touchedKinds(t) {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := admin.List(ctx(t), list); err != nil {
			if apimeta.IsNoMatchError(err) || apierrors.IsNotFound(err) { // no such CRD (any more)
				continue
			}
			t.Fatalf("listing %s: %v", gvk.Kind, err)
		}
		for _, item := range list.Items {
			if item.DeletionTimestamp != nil {
				continue
			}
			out = append(out, fmt.Sprintf("%s %s/%s %s", gvk.Kind, item.Namespace, item.Name, item.UID))
		}
	}
	sort.Strings(out)
	return out
}

// treeDigest is every file and directory under root: path, mode, size and
// content digest.
func treeDigest(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		line := fmt.Sprintf("%s %s", rel, fi.Mode())
		if fi.Mode().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(data)
			line += fmt.Sprintf(" %d %s", len(data), hex.EncodeToString(sum[:]))
		}
		out = append(out, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// backupsInStore writes what a server would have stored for two backups.
func backupsInStore(t *testing.T, root string) {
	t.Helper()
	for _, name := range []string{"nightly-1", "nightly-2"} {
		dir := filepath.Join(root, "backups", "backups", name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		for file, content := range map[string]string{
			"velero-backup.json":         `{"kind":"Backup","metadata":{"name":"` + name + `"}}`,
			name + ".tar.gz":             strings.Repeat("archive bytes ", 1000),
			name + "-logs.gz":            "log",
			name + "-results.gz":         "{}",
			name + "-volumeinfo.json.gz": "[]",
		} {
			if err := os.WriteFile(filepath.Join(dir, file), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// serverState creates what a server leaves in its namespace: Backups held
// by the finalizer, a Restore, a Schedule.
func serverState(t *testing.T, ns string) {
	t.Helper()
	for _, name := range []string{"nightly-1", "nightly-2"} {
		b := &v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Finalizers: []string{v1.BackupFinalizer}}}
		if err := admin.Create(ctx(t), b); err != nil {
			t.Fatal(err)
		}
		b.Status.Phase = v1.BackupPhaseCompleted
		if err := admin.Update(ctx(t), b); err != nil {
			t.Fatal(err)
		}
	}
	for _, obj := range []client.Object{
		&v1.Restore{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly-1-restore"}, Spec: v1.RestoreSpec{BackupName: "nightly-1"}},
		&v1.Schedule{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly"}, Spec: v1.ScheduleSpec{Schedule: "@daily"}},
	} {
		if err := admin.Create(ctx(t), obj); err != nil {
			t.Fatal(err)
		}
	}
}

// watchRequests records every DeleteBackupRequest created from now on.
func watchRequests(t *testing.T) func() []string {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: "velero.io", Version: "v1", Resource: "deletebackuprequests"}
	list, err := dyn.Resource(gvr).List(ctx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := dyn.Resource(gvr).Watch(ctx(t), metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var created []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if ev.Type == watch.Added {
				if m, err := apimeta.Accessor(ev.Object); err == nil {
					mu.Lock()
					created = append(created, m.GetNamespace()+"/"+m.GetName())
					mu.Unlock()
				}
			}
		}
	}()
	return func() []string {
		w.Stop()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return created
	}
}

func TestUninstallLeavesTheClusterAndTheStoreAsTheyWere(t *testing.T) {
	// lb-b exists before install, with something of its own; lb-a is made
	// by install.
	if err := admin.Create(ctx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "lb-b"}}); err != nil {
		t.Fatal(err)
	}
	if err := admin.Create(ctx(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "lb-b", Name: "mine"}}); err != nil {
		t.Fatal(err)
	}
	storeA, storeB := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	before := snapshot(t)

	secret := filepath.Join(t.TempDir(), "credentials")
	if err := os.WriteFile(secret, []byte("[default]\naws_access_key_id=x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustLifeboat(t, "install", "-n", "lb-a", "--use-filesystem", storeA)
	mustLifeboat(t, "install", "-n", "lb-b", "--provider", "aws", "--bucket", "b", "--secret-file", secret,
		"--plugins", "velero/velero-plugin-for-aws:v1.12.0")
	// Re-running install is an upgrade in place, not a second set of objects.
	installed := snapshot(t)
	mustLifeboat(t, "install", "-n", "lb-a", "--use-filesystem", storeA, "--image", "example.com/lifeboat:v2")
	if again := snapshot(t); !slices.Equal(again, installed) {
		t.Fatalf("a second install changed the set of objects:\n%s", diff(installed, again))
	}
	for _, dir := range []string{storeA, storeB} {
		backupsInStore(t, dir)
	}
	storeBefore := [][]string{treeDigest(t, storeA), treeDigest(t, storeB)}
	serverState(t, "lb-a")
	serverState(t, "lb-b")
	requests := watchRequests(t)

	// No terminal and no --force: nothing is touched.
	if out, err := lifeboat(t, "uninstall", "-n", "lb-b"); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("uninstall without a terminal: %v\n%s", err, out)
	}
	if err := admin.Get(ctx(t), client.ObjectKey{Namespace: "lb-b", Name: "velero"}, &appsv1.Deployment{}); err != nil {
		t.Fatalf("the refused uninstall removed the Deployment: %v", err)
	}

	// lb-b first: the CRDs stay, since lb-a still has velero.io objects.
	out := mustLifeboat(t, "uninstall", "-n", "lb-b", "--force")
	for _, want := range []string{"Deployment/lb-b/velero: deleted", "finalizer lifeboat.io/backup-data removed from 2 Backups",
		"velero.io CRDs: kept", "Namespace/lb-b: kept"} {
		if !strings.Contains(out, want) {
			t.Errorf("uninstall -n lb-b output lacks %q:\n%s", want, out)
		}
	}
	if err := admin.Get(ctx(t), client.ObjectKey{Namespace: "lb-a", Name: "velero"}, &appsv1.Deployment{}); err != nil {
		t.Errorf("uninstalling lb-b touched lb-a's server: %v", err)
	}
	out = mustLifeboat(t, "uninstall", "-n", "lb-a", "--force")
	for _, want := range []string{"CustomResourceDefinition/backups.velero.io: deleted", "Namespace/lb-a: deleted (install created it)"} {
		if !strings.Contains(out, want) {
			t.Errorf("uninstall -n lb-a output lacks %q:\n%s", want, out)
		}
	}
	if got := requests(); len(got) > 0 {
		t.Errorf("uninstall created DeleteBackupRequests %v", got)
	}

	// CRDs go asynchronously, once their objects are gone.
	var after []string
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if after = snapshot(t); slices.Equal(after, before) || time.Now().After(deadline) {
			break
		}
	}
	if !slices.Equal(after, before) {
		t.Errorf("install then uninstall did not leave the objects as they were:\n%s", diff(before, after))
	}
	for i, dir := range []string{storeA, storeB} {
		if got := treeDigest(t, dir); !slices.Equal(got, storeBefore[i]) {
			t.Errorf("the store %s changed:\n%s", dir, diff(storeBefore[i], got))
		}
	}
}

func diff(want, got []string) string {
	var b strings.Builder
	for _, s := range want {
		if !slices.Contains(got, s) {
			fmt.Fprintf(&b, "- %s\n", s)
		}
	}
	for _, s := range got {
		if !slices.Contains(want, s) {
			fmt.Fprintf(&b, "+ %s\n", s)
		}
	}
	return b.String()
}

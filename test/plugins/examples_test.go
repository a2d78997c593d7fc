package plugins

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/pluginhost"
	"github.com/lifeboat-io/lifeboat/internal/selection"
	"github.com/lifeboat-io/lifeboat/internal/storage"
	"github.com/lifeboat-io/lifeboat/internal/storage/pluginstore"
	"github.com/lifeboat-io/lifeboat/internal/storage/storagetest"
	"github.com/lifeboat-io/lifeboat/internal/testutil/testenv"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/config"
	"github.com/lifeboat-io/lifeboat/pkg/volumehelper"
)

// What the examples set, as their READMEs describe it.
const (
	annotateKey     = "example.lifeboat.io/backed-up-by"
	customVolumeKey = "example.lifeboat.io/custom-volume"
	compatKey       = "compat.example.io/backed-up-by"
)

func TestPluginGetListsEveryPlugin(t *testing.T) {
	want := []v1.PluginInfo{
		{Kind: "BackupItemAction", Name: "example.io/annotate", Binary: filepath.Join(pluginDir, "annotate")},
		{Kind: "BackupItemAction", Name: "example.io/custom-volume", Binary: filepath.Join(pluginDir, "custom-volume")},
		{Kind: "BackupItemAction", Name: "example.io/receipt", Binary: filepath.Join(pluginDir, "cleanup")},
		{Kind: "DeleteItemAction", Name: "example.io/cleanup", Binary: filepath.Join(pluginDir, "cleanup")},
		{Kind: "ObjectStore", Name: "example.io/dirstore", Binary: filepath.Join(pluginDir, "dirstore")},
		{Kind: "VolumeSnapshotter", Name: "example.io/filesnapshotter", Binary: filepath.Join(pluginDir, "filesnapshotter")},
		{Kind: "BackupItemAction", Name: "example.io/restore-point", Binary: filepath.Join(pluginDir, "restore-point")},
		{Kind: "DeleteItemAction", Name: "example.io/restore-point-cleanup", Binary: filepath.Join(pluginDir, "restore-point")},
		// Built with Velero's SDK.
		{Kind: "BackupItemAction", Name: "compat.example.io/annotate", Binary: filepath.Join(pluginDir, compatBinary)},
		{Kind: "BackupItemAction", Name: "compat.example.io/custom-volume", Binary: filepath.Join(pluginDir, compatBinary)},
		{Kind: "DeleteItemAction", Name: "compat.example.io/record-deletes", Binary: filepath.Join(pluginDir, compatBinary)},
		{Kind: "ObjectStore", Name: "compat.example.io/dirstore", Binary: filepath.Join(pluginDir, compatBinary)},
	}
	var got []v1.PluginInfo
	if err := json.Unmarshal([]byte(mustLifeboat(t, "plugin", "get", "-o", "json")), &got); err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("plugin get -o json lacks %+v; got %+v", w, got)
		}
	}
	// The table a user reads has the same rows.
	table := mustLifeboat(t, "plugin", "get")
	for _, w := range want {
		row := strings.Join([]string{w.Kind, w.Name, w.Binary}, " ")
		if !slices.ContainsFunc(strings.Split(table, "\n"), func(l string) bool { return strings.Join(strings.Fields(l), " ") == row }) {
			t.Errorf("plugin get has no row %q:\n%s", row, table)
		}
	}
	t.Logf("lifeboat plugin get:\n%s", table)
}

func TestExampleActionsInABackup(t *testing.T) {
	ns := env.NewNamespace(t, "examples")
	sampleApp(t, ns)
	bsl, dir := env.FilesystemLocation(t, env.Name("fs"))
	b := newBackup(t, bsl.Name, ns)
	entries := readArchiveFile(t, filepath.Join(dir, "lifeboat", "backups", b.Name, b.Name+".tar.gz"))

	t.Run("annotate: ConfigMaps and Deployments, nothing else", func(t *testing.T) {
		for _, it := range []struct{ gr, name string }{{"configmaps", "settings"}, {"configmaps", "features"}, {"deployments.apps", "web"}} {
			u := storedItem(t, entries, it.gr, ns, it.name)
			if got := u.GetAnnotations()[annotateKey]; got != b.Name {
				t.Errorf("stored %s %s: annotation %s = %q, want %q", it.gr, it.name, annotateKey, got, b.Name)
			}
		}
		for _, it := range []struct{ gr, name string }{{"services", "web"}, {"persistentvolumeclaims", "data"}} {
			if got, ok := storedItem(t, entries, it.gr, ns, it.name).GetAnnotations()[annotateKey]; ok {
				t.Errorf("stored %s %s has %s=%q; the plugin does not apply to it", it.gr, it.name, annotateKey, got)
			}
		}
		// The backup changed the stored copy only.
		var live corev1.ConfigMap
		if err := env.Client.Get(testenv.Ctx(t), client.ObjectKey{Namespace: ns, Name: "settings"}, &live); err != nil {
			t.Fatal(err)
		}
		if _, ok := live.Annotations[annotateKey]; ok {
			t.Errorf("the live ConfigMap was annotated too")
		}
	})

	t.Run("custom-volume: a claim no volume policy gives the custom action is left alone", func(t *testing.T) {
		pvc := storedItem(t, entries, "persistentvolumeclaims", ns, "data")
		for _, key := range []string{customVolumeKey, volumehelper.ClaimedByAnnotation} {
			if v, ok := pvc.GetAnnotations()[key]; ok {
				t.Errorf("stored claim has %s=%q without a custom volume policy", key, v)
			}
		}
	})

	stored := storedItems(t, entries, "configmaps", ns)
	receipts := func(t *testing.T) []string {
		t.Helper()
		var out []string
		for _, r := range listReceipts(t, ns, b.Name) {
			cm, _, _ := unstructured.NestedString(r.Object, "spec", "configMap")
			out = append(out, cm)
		}
		slices.Sort(out)
		return out
	}

	t.Run("cleanup's companion left a receipt per ConfigMap", func(t *testing.T) {
		if got, want := receipts(t), []string{"features", "settings"}; !slices.Equal(got, want) {
			t.Errorf("receipts for %q, want %q", got, want)
		}
		if len(stored) != 2 {
			t.Errorf("stored ConfigMaps: %d, want 2", len(stored))
		}
		// Receipts opt out of backups, so whether the LIST of receipts
		// ran before or after they were made does not change the backup.
		if got := storedItems(t, entries, receiptGroupResource, ns); len(got) != 0 {
			t.Errorf("the backup holds %d receipts; they are labelled to be left out", len(got))
		}
	})

	t.Run("cleanup deletes the receipts, through the plugin host", func(t *testing.T) {
		h := testHost(t)
		dia, err := h.DeleteItemAction("example.io/cleanup")
		if err != nil {
			t.Fatal(err)
		}
		called := deleteItems(t, dia, b, stored)
		if len(called) != 2 {
			t.Errorf("cleanup applied to %v, want the 2 ConfigMaps", called)
		}
		if got := receipts(t); len(got) != 0 {
			t.Errorf("receipts left after cleanup: %q", got)
		}
		// Deletions are retried: a second run finds nothing and is fine.
		deleteItems(t, dia, b, stored)
		// The example is built with Lifeboat's SDK: its calls took the stream.
		if s, ok := dia.(interface{ Streaming() bool }); !ok || !s.Streaming() {
			t.Error("the Lifeboat-SDK DeleteItemAction's calls did not go over Lifeboat's stream")
		}
	})
}

// deleteItems calls dia for each item its AppliesTo selects (Velero's
// rules), as backup deletion will, and returns the names it was called for.
func deleteItems(t *testing.T, dia api.DeleteItemAction, b *v1.Backup, items []*unstructured.Unstructured) []string {
	t.Helper()
	sel, err := dia.AppliesTo()
	if err != nil {
		t.Fatalf("AppliesTo: %v", err)
	}
	at, err := selection.NewAppliesTo(sel, nil)
	if err != nil {
		t.Fatal(err)
	}
	var called []string
	for _, u := range items {
		if !at.Matches(schema.GroupResource{Resource: "configmaps"}, u.GetNamespace(), u.GetLabels()) {
			continue
		}
		if err := dia.Execute(&api.DeleteItemActionExecuteInput{Item: u, Backup: b}); err != nil {
			t.Errorf("Execute(%s): %v", u.GetName(), err)
		}
		called = append(called, u.GetName())
	}
	return called
}

// TestAnnotateReadsItsPluginConfigMap runs the annotate example in a host
// of its own, whose process sees a different server namespace, so that the
// server's annotate plugin keeps its defaults.
func TestAnnotateReadsItsPluginConfigMap(t *testing.T) {
	ns := env.NewNamespace(t, "annotate-config")
	env.Create(t, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "annotate-config", Labels: map[string]string{
			config.Label: "", "example.io/annotate": "BackupItemAction",
		}},
		Data: map[string]string{"resources": "services, secrets", "annotation": "example.com/copied-by"},
	})
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(pluginDir, "annotate"), filepath.Join(dir, "annotate")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("VELERO_NAMESPACE", ns) // inherited by the plugin process
	h := pluginhost.New(pluginhost.Options{Dir: dir})
	defer h.Close()
	if err := h.Discover(testenv.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	bia, err := h.BackupItemAction("example.io/annotate")
	if err != nil {
		t.Fatal(err)
	}
	sel, err := bia.AppliesTo()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"services", "secrets"}; !slices.Equal(sel.IncludedResources, want) {
		t.Errorf("AppliesTo().IncludedResources = %q, want %q", sel.IncludedResources, want)
	}
	item := &unstructured.Unstructured{}
	item.SetAPIVersion("v1")
	item.SetKind("Service")
	item.SetNamespace(ns)
	item.SetName("web")
	out, _, err := bia.Execute(item, &v1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "nightly"}})
	if err != nil {
		t.Fatal(err)
	}
	// Items come back from a plugin still as JSON (api.RawItem).
	if got := (&unstructured.Unstructured{Object: out.UnstructuredContent()}).GetAnnotations(); got["example.com/copied-by"] != "nightly" {
		t.Errorf("annotations = %v, want example.com/copied-by=nightly", got)
	}
}

func TestDirStoreLocation(t *testing.T) {
	ns := env.NewNamespace(t, "dirstore")
	sampleApp(t, ns)
	bsl, bucketDir := location(t, "example.io/dirstore")
	b := newBackup(t, bsl.Name, ns)

	t.Run("the backup's files are in the directory", func(t *testing.T) {
		backupDir := filepath.Join(bucketDir, "lifeboat", "backups", b.Name)
		for _, f := range []string{
			"velero-backup.json", b.Name + ".tar.gz", b.Name + "-logs.gz", b.Name + "-resource-list.json.gz",
			b.Name + "-results.gz", b.Name + "-itemoperations.json.gz",
		} {
			if _, err := os.Stat(filepath.Join(backupDir, f)); err != nil {
				t.Errorf("%v", err)
			}
		}
		var meta v1.Backup
		data, err := os.ReadFile(filepath.Join(backupDir, "velero-backup.json"))
		if err == nil {
			err = json.Unmarshal(data, &meta)
		}
		if err != nil || meta.Status.Phase != v1.BackupPhaseCompleted {
			t.Errorf("velero-backup.json: phase %q, err %v", meta.Status.Phase, err)
		}
		entries := readArchiveFile(t, filepath.Join(backupDir, b.Name+".tar.gz"))
		if got := storedItem(t, entries, "configmaps", ns, "settings").GetAnnotations()[annotateKey]; got != b.Name {
			t.Errorf("stored ConfigMap: %s = %q", annotateKey, got)
		}
		// No upload left a temporary file behind.
		if err := filepath.WalkDir(filepath.Dir(bucketDir), func(p string, d os.DirEntry, err error) error {
			if err == nil && strings.HasPrefix(d.Name(), ".dirstore-tmp-") {
				t.Errorf("temporary file left: %s", p)
			}
			return nil
		}); err != nil {
			t.Error(err)
		}
	})

	t.Run("logs are read back through a file:// URL", func(t *testing.T) {
		out := mustLifeboat(t, "backup", "logs", b.Name)
		if !strings.Contains(out, "phase=Completed") {
			t.Errorf("backup logs:\n%s", out)
		}
	})

	t.Run("a restore reads the backup back", func(t *testing.T) {
		target := restoreInto(t, b.Name, ns)
		var cm corev1.ConfigMap
		if err := env.Client.Get(testenv.Ctx(t), client.ObjectKey{Namespace: target, Name: "settings"}, &cm); err != nil {
			t.Fatal(err)
		}
		// The annotation the example added in the backup comes back.
		if cm.Data["greeting"] != "hello" || cm.Annotations[annotateKey] != b.Name {
			t.Errorf("restored ConfigMap: data %v, annotations %v", cm.Data, cm.Annotations)
		}
	})
}

// TestDirStoreConformance runs the storage conformance suite (the answers
// S3 gives) against the example ObjectStore, through the plugin protocol.
func TestDirStoreConformance(t *testing.T) {
	objectStoreConformance(t, "example.io/dirstore")
}

func objectStoreConformance(t *testing.T, name string) {
	h := testHost(t)
	storagetest.Run(t, func(t *testing.T) (storage.ObjectStore, string) {
		root := t.TempDir()
		if err := os.Mkdir(filepath.Join(root, "bucket"), 0o755); err != nil {
			t.Fatal(err)
		}
		// A cancelled put returns to the caller as soon as its stream is
		// cut; the plugin removes its half-written file afterwards. Wait
		// for that before TempDir's cleanup (which would otherwise race
		// it), and fail if the file stays: it would leak on a real disk.
		t.Cleanup(func() { waitNoInFlightFiles(t, root) })
		plugin, err := h.ObjectStore(name)
		if err != nil {
			t.Fatal(err)
		}
		s, err := pluginstore.New(plugin, name, map[string]string{"root": root}, "bucket", "", "")
		if err != nil {
			t.Fatal(err)
		}
		return s, "bucket"
	})
}

// waitNoInFlightFiles waits until no upload-in-flight file of the example
// store is left under root, failing after a bound.
func waitNoInFlightFiles(t *testing.T, root string) {
	t.Helper()
	var left []string
	for deadline := time.Now().Add(10 * time.Second); ; {
		left = left[:0]
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if strings.HasPrefix(d.Name(), ".dirstore-tmp-") {
				left = append(left, p)
			}
			return nil
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("walking %s: %v", root, err)
			return
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("the store left files of unfinished uploads: %q", left)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

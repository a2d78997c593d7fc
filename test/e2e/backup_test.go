package e2e

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/archive"
	"github.com/lifeboat-io/lifeboat/internal/storage"
	"github.com/lifeboat-io/lifeboat/internal/storage/provider"
	"github.com/lifeboat-io/lifeboat/internal/testutil/testenv"
)

// newBackup creates a Backup of spec in location and waits for it to end.
func newBackup(t *testing.T, location string, spec v1.BackupSpec) *v1.Backup {
	t.Helper()
	spec.StorageLocation = location
	b := &v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: env.Name("bk")}, Spec: spec}
	env.Create(t, b)
	return env.WaitBackup(t, b.Name, 2*time.Minute)
}

// openStore opens the object store behind a location the way the server does.
func openStore(t *testing.T, bsl *v1.BackupStorageLocation) *storage.BackupStore {
	t.Helper()
	var creds []byte
	if bsl.Spec.Provider == "aws" {
		creds = env.S3.CredentialsFile()
	}
	os, err := provider.Open(testenv.Ctx(t), bsl.Spec.Provider, bsl.Spec.Config, creds)
	if err != nil {
		t.Fatalf("opening store of %s: %v", bsl.Name, err)
	}
	return storage.NewBackupStore(os, bsl.Spec.ObjectStorage.Bucket, bsl.Spec.ObjectStorage.Prefix)
}

// archivePaths reads a backup's tarball and returns its entry paths and the
// content of metadata/version.
func archivePaths(t *testing.T, store *storage.BackupStore, name string) ([]string, map[string][]byte) {
	t.Helper()
	rc, err := store.GetBackupContents(testenv.Ctx(t), name)
	if err != nil {
		t.Fatalf("reading tarball of %s: %v", name, err)
	}
	defer rc.Close()
	r, err := archive.NewReader(rc, archive.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	data := map[string][]byte{}
	for {
		e, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("reading tarball of %s: %v", name, err)
		}
		paths = append(paths, e.Path)
		data[e.Path] = e.Data
	}
	sort.Strings(paths)
	return paths, data
}

func itemPaths(gr, version, ns, name string) []string {
	scope := "namespaces/" + ns
	if ns == "" {
		scope = "cluster"
	}
	return []string{
		"resources/" + gr + "/" + scope + "/" + name + ".json",
		"resources/" + gr + "/" + version + "-preferredversion/" + scope + "/" + name + ".json",
	}
}

func TestBackupHasVeleroLayout(t *testing.T) {
	for _, kind := range []string{"filesystem", "s3"} {
		t.Run(kind, func(t *testing.T) {
			var bsl *v1.BackupStorageLocation
			if kind == "s3" {
				bsl, _ = env.S3Location(t, env.Name("s3"))
			} else {
				bsl, _ = env.FilesystemLocation(t, env.Name("fs"))
			}
			ns := env.NewNamespace(t, "layout")
			sampleApp(t, ns)

			b := newBackup(t, bsl.Name, v1.BackupSpec{IncludedNamespaces: []string{ns}})
			if b.Status.Phase != v1.BackupPhaseCompleted {
				t.Fatalf("phase %s, want Completed (failure %q, validation %v)", b.Status.Phase, b.Status.FailureReason, b.Status.ValidationErrors)
			}
			store := openStore(t, bsl)
			paths, data := archivePaths(t, store, b.Name)
			// The API server itself may record Events about the sample
			// objects at any moment (its Service IP repair loop does); they
			// are backed up like everything else, but are not the test's to
			// predict.
			isEvent := func(p string) bool {
				return strings.HasPrefix(p, "resources/events/") || strings.HasPrefix(p, "resources/events.events.k8s.io/")
			}
			// Each item is stored twice (its group's path and the
			// preferred-version path), so the events count half.
			events := 0
			for _, p := range paths {
				if isEvent(p) && !strings.Contains(p, "-preferredversion/") {
					events++
				}
			}
			paths = slices.DeleteFunc(paths, isEvent)

			want := []string{"metadata/version"}
			want = append(want, itemPaths("namespaces", "v1", "", ns)...)
			want = append(want, itemPaths("configmaps", "v1", ns, "settings")...)
			want = append(want, itemPaths("secrets", "v1", ns, "token")...)
			want = append(want, itemPaths("serviceaccounts", "v1", ns, "runner")...)
			want = append(want, itemPaths("services", "v1", ns, "web")...)
			want = append(want, itemPaths("deployments.apps", "v1", ns, "web")...)
			want = append(want, itemPaths("widgets."+widgetGroup, widgetVersion, ns, "gizmo")...)
			// The CRD of a backed-up custom resource goes with it, as in Velero.
			want = append(want, itemPaths("customresourcedefinitions.apiextensions.k8s.io", "v1", "", widgetResource+"."+widgetGroup)...)
			sort.Strings(want)
			if strings.Join(paths, "\n") != strings.Join(want, "\n") {
				t.Fatalf("tarball paths:\n%s\nwant:\n%s", strings.Join(paths, "\n"), strings.Join(want, "\n"))
			}
			// Velero writes the version with a trailing newline.
			if got := string(data["metadata/version"]); strings.TrimSpace(got) != "1.1.0" {
				t.Errorf("metadata/version = %q, want 1.1.0", got)
			}
			var cm map[string]any
			if err := json.Unmarshal(data["resources/configmaps/namespaces/"+ns+"/settings.json"], &cm); err != nil {
				t.Fatal(err)
			}
			if cm["apiVersion"] != "v1" || cm["kind"] != "ConfigMap" || cm["data"].(map[string]any)["greeting"] != "hello" {
				t.Errorf("configmap item = %v", cm)
			}

			// Every file Velero writes is there, and velero-backup.json says Completed.
			ctx := testenv.Ctx(t)
			meta, err := store.GetBackupMetadata(ctx, b.Name)
			if err != nil {
				t.Fatal(err)
			}
			var stored v1.Backup
			if err := json.Unmarshal(meta, &stored); err != nil {
				t.Fatal(err)
			}
			if stored.Status.Phase != v1.BackupPhaseCompleted || stored.Kind != "Backup" || stored.Status.Progress.ItemsBackedUp != 8+events {
				t.Errorf("velero-backup.json: kind %q phase %q progress %+v, want 8 items and %d events", stored.Kind, stored.Status.Phase, stored.Status.Progress, events)
			}
			keys, err := store.ObjectStore().ListObjects(ctx, store.Bucket(), store.BackupDir(b.Name))
			if err != nil {
				t.Fatal(err)
			}
			var files []string
			for _, k := range keys {
				files = append(files, strings.TrimPrefix(k, store.BackupDir(b.Name)))
			}
			n := b.Name
			// Velero's files, and Lifeboat's two digests files beside them
			// (docs/integrity.md).
			wantFiles := []string{n + "-itemoperations.json.gz", n + "-logs.gz", n + "-podvolumebackups.json.gz", n + "-resource-list.json.gz",
				n + "-results.gz", n + "-volumeinfo.json.gz", n + "-volumesnapshots.json.gz", n + ".tar.gz", "velero-backup.json",
				n + "-lifeboat-digests.json", n + "-lifeboat-item-digests.json.gz"}
			sort.Strings(files)
			sort.Strings(wantFiles)
			if strings.Join(files, ",") != strings.Join(wantFiles, ",") {
				t.Errorf("backup files %v, want %v", files, wantFiles)
			}
			list, err := store.GetResourceList(ctx, b.Name)
			if err != nil {
				t.Fatal(err)
			}
			if got := list["v1/ConfigMap"]; len(got) != 1 || got[0] != ns+"/settings" {
				t.Errorf("resource list v1/ConfigMap = %v", got)
			}
			if got := list["apps/v1/Deployment"]; len(got) != 1 || got[0] != ns+"/web" {
				t.Errorf("resource list apps/v1/Deployment = %v", got)
			}
			if b.Status.Expiration == nil || b.Status.Expiration.Sub(b.Status.StartTimestamp.Time) != 720*time.Hour {
				t.Errorf("expiration %v, want start + 720h", b.Status.Expiration)
			}
			if b.Labels[v1.StorageLocationLabel] != bsl.Name {
				t.Errorf("label %s = %q", v1.StorageLocationLabel, b.Labels[v1.StorageLocationLabel])
			}
		})
	}
}

// backedUp returns the "resource/ns/name" items (unversioned copies) of a backup.
func backedUp(t *testing.T, store *storage.BackupStore, name string) []string {
	t.Helper()
	paths, _ := archivePaths(t, store, name)
	var items []string
	for _, p := range paths {
		if !strings.HasPrefix(p, "resources/") || strings.Contains(p, "-preferredversion/") {
			continue
		}
		p = strings.TrimSuffix(strings.TrimPrefix(p, "resources/"), ".json")
		p = strings.Replace(p, "/namespaces/", "/", 1)
		p = strings.Replace(p, "/cluster/", "//", 1)
		items = append(items, p)
	}
	return items
}

func TestBackupFilters(t *testing.T) {
	bsl, _ := env.FilesystemLocation(t, env.Name("fs"))
	store := openStore(t, bsl)
	a := env.NewNamespace(t, "fa")
	b := env.NewNamespace(t, "fb")
	sampleApp(t, a)
	sampleApp(t, b)

	has := func(items []string, item string) bool {
		for _, it := range items {
			if it == item {
				return true
			}
		}
		return false
	}
	cases := []struct {
		name    string
		spec    v1.BackupSpec
		want    []string
		notWant []string
	}{
		{
			name:    "excluded namespace beats an included glob",
			spec:    v1.BackupSpec{IncludedNamespaces: []string{"f[ab]-*"}, ExcludedNamespaces: []string{b}},
			want:    []string{"configmaps/" + a + "/settings"},
			notWant: []string{"configmaps/" + b + "/settings", "namespaces//" + b},
		},
		{
			name:    "excluded resource beats included star",
			spec:    v1.BackupSpec{IncludedNamespaces: []string{a}, IncludedResources: []string{"*"}, ExcludedResources: []string{"secrets"}},
			want:    []string{"configmaps/" + a + "/settings", "deployments.apps/" + a + "/web"},
			notWant: []string{"secrets/" + a + "/token"},
		},
		{
			name:    "resource short names and kinds resolve",
			spec:    v1.BackupSpec{IncludedNamespaces: []string{a}, IncludedResources: []string{"cm", "Deployment"}},
			want:    []string{"configmaps/" + a + "/settings", "deployments.apps/" + a + "/web"},
			notWant: []string{"secrets/" + a + "/token", "services/" + a + "/web"},
		},
		{
			name:    "namespace filter leaves cluster-scoped resources out",
			spec:    v1.BackupSpec{IncludedNamespaces: []string{a}},
			want:    []string{"namespaces//" + a},
			notWant: []string{"namespaces//" + b, "customresourcedefinitions.apiextensions.k8s.io//" + "lifeboat-unrelated"},
		},
		{
			name: "includeClusterResources brings cluster-scoped resources with a namespace filter",
			spec: v1.BackupSpec{IncludedNamespaces: []string{a}, IncludeClusterResources: ptr.To(true)},
			want: []string{"namespaces//" + a, "customresourcedefinitions.apiextensions.k8s.io//" + widgetResource + "." + widgetGroup, "configmaps/" + a + "/settings"},
		},
		{
			// Velero's resource filter leaves even the Namespace objects out then.
			name:    "includeClusterResources false keeps cluster-scoped resources out",
			spec:    v1.BackupSpec{IncludedNamespaces: []string{a}, IncludeClusterResources: ptr.To(false)},
			want:    []string{"configmaps/" + a + "/settings"},
			notWant: []string{"customresourcedefinitions.apiextensions.k8s.io//" + widgetResource + "." + widgetGroup, "namespaces//" + a},
		},
		{
			name:    "label selector",
			spec:    v1.BackupSpec{IncludedNamespaces: []string{a, b}, IncludedResources: []string{"configmaps", "secrets"}, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "demo"}}},
			want:    []string{"configmaps/" + a + "/settings", "secrets/" + b + "/token"},
			notWant: []string{"deployments.apps/" + a + "/web"},
		},
		{
			name:    "or label selectors",
			spec:    v1.BackupSpec{IncludedNamespaces: []string{a}, IncludedResources: []string{"configmaps"}, OrLabelSelectors: []*metav1.LabelSelector{{MatchLabels: map[string]string{"app": "nope"}}, {MatchLabels: map[string]string{"app": "demo"}}}},
			want:    []string{"configmaps/" + a + "/settings"},
			notWant: []string{"secrets/" + a + "/token"},
		},
		{
			name:    "or label selectors matching nothing",
			spec:    v1.BackupSpec{IncludedNamespaces: []string{a}, IncludedResources: []string{"configmaps"}, OrLabelSelectors: []*metav1.LabelSelector{{MatchLabels: map[string]string{"app": "nope"}}}},
			notWant: []string{"configmaps/" + a + "/settings"},
		},
		{
			name: "no namespace filter takes every namespace and cluster-scoped resources",
			spec: v1.BackupSpec{IncludedResources: []string{"configmaps", "namespaces", "customresourcedefinitions"}},
			want: []string{"configmaps/" + a + "/settings", "configmaps/" + b + "/settings", "namespaces//" + a, "customresourcedefinitions.apiextensions.k8s.io//" + widgetResource + "." + widgetGroup},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bk := newBackup(t, bsl.Name, tc.spec)
			if bk.Status.Phase != v1.BackupPhaseCompleted {
				t.Fatalf("phase %s (failure %q, validation %v)", bk.Status.Phase, bk.Status.FailureReason, bk.Status.ValidationErrors)
			}
			items := backedUp(t, store, bk.Name)
			for _, w := range tc.want {
				if !has(items, w) {
					t.Errorf("missing %s; got %v", w, items)
				}
			}
			for _, nw := range tc.notWant {
				if has(items, nw) {
					t.Errorf("unexpected %s", nw)
				}
			}
		})
	}
}

func TestBackupValidation(t *testing.T) {
	bsl, dir := env.FilesystemLocation(t, env.Name("fs"))
	cases := []struct {
		name string
		spec v1.BackupSpec
		want string
	}{
		{"hook with a broken label selector", v1.BackupSpec{Hooks: v1.BackupHooks{Resources: []v1.BackupResourceHookSpec{{Name: "h",
			LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Sometimes"}}}}}}}, "spec.hooks.resources[0].labelSelector"},
		{"unknown volume snapshot location", v1.BackupSpec{VolumeSnapshotLocations: []string{"no-such-vsl"}}, "spec.volumeSnapshotLocations"},
		{"missing resource policy", v1.BackupSpec{ResourcePolicy: &corev1.TypedLocalObjectReference{Kind: "configmap", Name: "no-such-policy"}}, "spec.resourcePolicy"},
		{"star in excludes", v1.BackupSpec{ExcludedNamespaces: []string{"*"}}, "spec.excludedNamespaces"},
		{"namespace both included and excluded", v1.BackupSpec{IncludedNamespaces: []string{"x"}, ExcludedNamespaces: []string{"x"}}, "spec.excludedNamespaces"},
		{"both label selector kinds", v1.BackupSpec{
			LabelSelector:    &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}},
			OrLabelSelectors: []*metav1.LabelSelector{{MatchLabels: map[string]string{"c": "d"}}},
		}, "orLabelSelectors"},
		{"mixed resource filter styles", v1.BackupSpec{IncludedResources: []string{"configmaps"}, IncludedClusterScopedResources: []string{"namespaces"}}, "spec.includedResources"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newBackup(t, bsl.Name, tc.spec)
			if b.Status.Phase != v1.BackupPhaseFailedValidation {
				t.Fatalf("phase %s, want FailedValidation", b.Status.Phase)
			}
			if msg := strings.Join(b.Status.ValidationErrors, "\n"); !strings.Contains(msg, tc.want) {
				t.Errorf("validation errors %q do not name %s", msg, tc.want)
			}
			if _, err := os.Stat(filepath.Join(dir, "lifeboat", "backups", b.Name)); !os.IsNotExist(err) {
				t.Errorf("a backup that failed validation wrote to storage (stat: %v)", err)
			}
			if !hasCondition(b.Status.Conditions, "Failed", metav1.ConditionTrue) {
				t.Errorf("conditions %+v lack Failed=True", b.Status.Conditions)
			}
			// It expires, so garbage collection does not keep it forever.
			if b.Status.Expiration == nil || b.Status.CompletionTimestamp == nil || b.Status.Expiration.Sub(b.Status.CompletionTimestamp.Time) != 720*time.Hour {
				t.Errorf("expiration %v, want completion + the default TTL (720h)", b.Status.Expiration)
			}
		})
	}

	t.Run("unknown storage location", func(t *testing.T) {
		b := newBackup(t, "no-such-location", v1.BackupSpec{})
		if b.Status.Phase != v1.BackupPhaseFailedValidation {
			t.Fatalf("phase %s, want FailedValidation", b.Status.Phase)
		}
		if msg := strings.Join(b.Status.ValidationErrors, "\n"); !strings.Contains(msg, `"no-such-location"`) || !strings.Contains(msg, bsl.Name) {
			t.Errorf("validation errors %q should name the missing location and list existing ones", msg)
		}
	})
}

func hasCondition(conds []metav1.Condition, typ string, status metav1.ConditionStatus) bool {
	for _, c := range conds {
		if c.Type == typ && c.Status == status {
			return true
		}
	}
	return false
}

func TestBackupToUnreachableStoreFails(t *testing.T) {
	bsl, dir := env.FilesystemLocation(t, env.Name("fs"))
	// Removing the bucket directory makes the location unusable.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	env.WaitLocationPhase(t, bsl.Name, v1.BackupStorageLocationPhaseUnavailable, 30*time.Second)
	b := newBackup(t, bsl.Name, v1.BackupSpec{IncludedNamespaces: []string{"default"}})
	if b.Status.Phase != v1.BackupPhaseFailed || !strings.Contains(b.Status.FailureReason, bsl.Name) {
		t.Fatalf("phase %s reason %q, want Failed naming the location", b.Status.Phase, b.Status.FailureReason)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the failed backup created the bucket directory (stat: %v)", err)
	}
}

func TestStorageLocationAvailability(t *testing.T) {
	bsl, _ := env.FilesystemLocation(t, env.Name("fs"))
	got := env.WaitLocationPhase(t, bsl.Name, v1.BackupStorageLocationPhaseAvailable, 30*time.Second)
	if !hasCondition(got.Status.Conditions, "Available", metav1.ConditionTrue) {
		t.Errorf("conditions %+v lack Available=True", got.Status.Conditions)
	}
	s3bsl, _ := env.S3Location(t, env.Name("s3"))
	env.WaitLocationPhase(t, s3bsl.Name, v1.BackupStorageLocationPhaseAvailable, 30*time.Second)

	// A bucket that does not exist is Unavailable, and the message says why.
	missing, _ := env.S3Location(t, env.Name("s3"))
	cur := *missing
	orig := cur.DeepCopy()
	cur.Spec.ObjectStorage.Bucket = "no-such-bucket"
	if err := env.Client.Patch(testenv.Ctx(t), &cur, clientMergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	un := env.WaitLocationPhase(t, missing.Name, v1.BackupStorageLocationPhaseUnavailable, 30*time.Second)
	if !strings.Contains(un.Status.Message, "no-such-bucket") {
		t.Errorf("message %q should name the bucket", un.Status.Message)
	}
}

// A backup left InProgress by a server that died cannot be resumed; the
// server says so instead of leaving it InProgress forever.
func TestBackupLeftInProgressByADeadServerFails(t *testing.T) {
	bsl, _ := env.FilesystemLocation(t, env.Name("fs"))
	b := &v1.Backup{
		ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: env.Name("orphan")},
		Spec:       v1.BackupSpec{StorageLocation: bsl.Name},
	}
	// Stop the server so that it does not pick the backup up as New, mark
	// the backup InProgress as a crashed server would have left it, and
	// start the server again.
	if err := env.StopServer(); err != nil && !testenv.IsCleanExit(err) {
		t.Fatalf("stopping server: %v", err)
	}
	env.Create(t, b)
	orig := b.DeepCopy()
	b.Status.Phase = v1.BackupPhaseInProgress
	if err := env.Client.Patch(testenv.Ctx(t), b, clientMergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	if err := env.StartServer(); err != nil {
		t.Fatal(err)
	}
	got := env.WaitBackup(t, b.Name, time.Minute)
	if got.Status.Phase != v1.BackupPhaseFailed || !strings.Contains(got.Status.FailureReason, "server stopped") {
		t.Fatalf("phase %s reason %q, want Failed saying the server stopped", got.Status.Phase, got.Status.FailureReason)
	}
}

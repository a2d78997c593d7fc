package plugins

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lifeboat-io/lifeboat/internal/pluginhost"
	"github.com/lifeboat-io/lifeboat/internal/testutil/testenv"
)

// TestVeleroSDKPlugin runs a plugin binary built with Velero's own SDK
// (test/compat, Velero v1.18.3's pkg/plugin/framework) under Lifeboat: its
// ObjectStore serves a location, its BackupItemAction changes stored items,
// and its DeleteItemAction is called with a backup's items. That it is
// listed is checked by TestPluginGetListsEveryPlugin.
func TestVeleroSDKPlugin(t *testing.T) {
	ns := env.NewNamespace(t, "compat")
	sampleApp(t, ns)
	bsl, bucketDir := location(t, "compat.example.io/dirstore")
	b := newBackup(t, bsl.Name, ns)

	backupDir := filepath.Join(bucketDir, "lifeboat", "backups", b.Name)
	entries := readArchiveFile(t, filepath.Join(backupDir, b.Name+".tar.gz"))

	t.Run("its BackupItemAction annotated the stored ConfigMaps", func(t *testing.T) {
		for _, name := range []string{"settings", "features"} {
			ann := storedItem(t, entries, "configmaps", ns, name).GetAnnotations()
			// The value is the backup's name, which the plugin read from
			// the Backup decoded with Velero's own types.
			if ann[compatKey] != b.Name {
				t.Errorf("stored ConfigMap %s: %s = %q, want %q", name, compatKey, ann[compatKey], b.Name)
			}
			// The Lifeboat-SDK example ran on the same item too.
			if ann[annotateKey] != b.Name {
				t.Errorf("stored ConfigMap %s: %s = %q, want %q", name, annotateKey, ann[annotateKey], b.Name)
			}
		}
		if _, ok := storedItem(t, entries, "deployments.apps", ns, "web").GetAnnotations()[compatKey]; ok {
			t.Errorf("the compat action, which applies to ConfigMaps only, annotated the Deployment")
		}
	})

	t.Run("its ObjectStore reads the backup back for a restore", func(t *testing.T) {
		if _, err := os.Stat(filepath.Join(backupDir, "velero-backup.json")); err != nil {
			t.Error(err)
		}
		target := restoreInto(t, b.Name, ns)
		var cm corev1.ConfigMap
		if err := env.Client.Get(testenv.Ctx(t), client.ObjectKey{Namespace: target, Name: "settings"}, &cm); err != nil {
			t.Fatal(err)
		}
		if cm.Data["greeting"] != "hello" || cm.Annotations[compatKey] != b.Name {
			t.Errorf("restored ConfigMap: data %v, annotations %v", cm.Data, cm.Annotations)
		}
		out := mustLifeboat(t, "backup", "logs", b.Name)
		if !strings.Contains(out, "phase=Completed") {
			t.Errorf("backup logs through the compat store's file:// URL:\n%s", out)
		}
	})

	t.Run("its DeleteItemAction is called through the plugin host", func(t *testing.T) {
		dia, err := testHost(t).DeleteItemAction("compat.example.io/record-deletes")
		if err != nil {
			t.Fatal(err)
		}
		called := deleteItems(t, dia, b, storedItems(t, entries, "configmaps", ns))
		if len(called) != 2 {
			t.Errorf("called for %v, want the 2 ConfigMaps", called)
		}
		data, err := os.ReadFile(filepath.Join(compatStateDir, "deletes.log"))
		if err != nil {
			t.Fatal(err)
		}
		var mine []string
		for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			if strings.HasPrefix(l, b.Name+" ") {
				mine = append(mine, l)
			}
		}
		slices.Sort(mine)
		want := []string{b.Name + " ConfigMap " + ns + "/features", b.Name + " ConfigMap " + ns + "/settings"}
		if !slices.Equal(mine, want) {
			t.Errorf("the plugin recorded %q, want %q", mine, want)
		}
		// Velero's SDK serves no Lifeboat stream: the host asked, got
		// Unimplemented, and made Velero's unary calls, which did the work
		// recorded above.
		if s, ok := dia.(interface{ Streaming() bool }); !ok || s.Streaming() {
			t.Errorf("the Velero-SDK DeleteItemAction reports streaming (%v, %v); its calls must be unary", ok, ok && s.Streaming())
		}
	})
}

// TestVeleroReadsAndDeletesALifeboatBackup: Velero's own persistence code
// (what its server restores, syncs and deletes with, run from the compat
// binary over the same directory store) reads a backup Lifeboat wrote, with
// Lifeboat's digests files beside Velero's, and its deletion removes every
// file of it, Lifeboat's included.
func TestVeleroReadsAndDeletesALifeboatBackup(t *testing.T) {
	ns := env.NewNamespace(t, "veldel")
	sampleApp(t, ns)
	bsl, bucketDir := location(t, "compat.example.io/dirstore")
	b := newBackup(t, bsl.Name, ns)
	backupDir := filepath.Join(bucketDir, "lifeboat", "backups", b.Name)
	files, err := os.ReadDir(backupDir)
	if err != nil {
		t.Fatal(err)
	}
	var lifeboatFiles []string
	for _, f := range files {
		if strings.Contains(f.Name(), "-lifeboat-") {
			lifeboatFiles = append(lifeboatFiles, f.Name())
		}
	}
	if len(lifeboatFiles) != 2 {
		t.Fatalf("the backup wrote %v of Lifeboat's own files, want the digests and the item digests", lifeboatFiles)
	}

	cmd := exec.CommandContext(testenv.Ctx(t), filepath.Join(pluginDir, compatBinary), "velero-store",
		filepath.Dir(bucketDir), filepath.Base(bucketDir), "lifeboat", b.Name)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("Velero's persistence code on a Lifeboat backup: %v\n%s", err, out)
	}
	for _, want := range []string{"metadata: " + b.Name + " phase Completed", "contents: ", "deleted"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("Velero's persistence code printed no %q:\n%s", want, out)
		}
	}
	left := 0
	err = filepath.WalkDir(backupDir, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return fs.SkipAll
		}
		if err == nil && !d.IsDir() {
			left++
			t.Errorf("Velero's deletion left %s", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if left > 0 {
		t.Errorf("%d files left", left)
	}
}

// TestVeleroSDKObjectStoreConformance runs the storage conformance suite
// against the Velero-SDK ObjectStore: streaming uploads and downloads,
// errors and listings cross Velero's server-side implementation intact.
func TestVeleroSDKObjectStoreConformance(t *testing.T) {
	objectStoreConformance(t, "compat.example.io/dirstore")
}

// TestVeleroSDKPluginStartsAtEveryServerLogLevel starts the Velero-SDK
// plugin the way the server does at each of the server's log levels.
// Plugins that bind Velero's flags (BindFlags(pflag.CommandLine), as
// Velero's AWS, GCP and Azure plugins do) accept only logrus level names
// and exit at once on anything else, so the host must pass "warning", not
// slog's "warn".
func TestVeleroSDKPluginStartsAtEveryServerLogLevel(t *testing.T) {
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(pluginDir, compatBinary), filepath.Join(dir, compatBinary)); err != nil {
		t.Fatal(err)
	}
	for _, level := range []string{"debug", "info", "warn", "error"} {
		t.Run(level, func(t *testing.T) {
			h := pluginhost.New(pluginhost.Options{Dir: dir, LogLevel: level})
			defer h.Close()
			if err := h.Discover(testenv.Ctx(t)); err != nil {
				t.Errorf("server log level %q: %v", level, firstLine(err))
			}
		})
	}
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

package velerocli

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/testutil/testenv"
)

// defaultLocation makes the default BackupStorageLocation, over a fresh
// bucket of the TLS S3 server with its CA in caCertRef, once per package,
// and waits until the server finds it Available.
func defaultLocation(t *testing.T) (name, bucket string) {
	t.Helper()
	const loc = "default"
	var bsl v1.BackupStorageLocation
	err := env.Client.Get(testenv.Ctx(t), client.ObjectKey{Namespace: env.Namespace, Name: loc}, &bsl)
	if err == nil {
		return loc, bsl.Spec.ObjectStorage.Bucket
	}
	if !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	bucket = env.S3.NewBucket(t)
	created := env.S3LocationOver(t, env.Namespace, loc, bucket)
	if created.Spec.ObjectStorage.CACertRef == nil {
		t.Fatal("the test location has no caCertRef; the environment's S3 server must run with TLS")
	}
	created.Spec.Default = true
	if err := env.Client.Update(testenv.Ctx(t), created); err != nil {
		t.Fatal(err)
	}
	env.WaitLocationPhase(t, loc, v1.BackupStorageLocationPhaseAvailable, time.Minute)
	return loc, bucket
}

// workload creates a namespace with a ConfigMap and a Secret in it.
func workload(t *testing.T) (ns string) {
	t.Helper()
	ns = env.NewNamespace(t, "app")
	env.Create(t, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings", Labels: map[string]string{"app": "demo"}},
		Data:       map[string]string{"color": "blue"},
	})
	env.Create(t, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "token"},
		Data:       map[string][]byte{"token": []byte("s3cr3t")},
	})
	return ns
}

// TestBackupRestoreAndDeleteWithVeleroCLI is a Velero user's day: back a
// namespace up, look at the backup every way the CLI offers, lose a
// ConfigMap, restore it, look at the restore, and delete the backup.
func TestBackupRestoreAndDeleteWithVeleroCLI(t *testing.T) {
	loc, bucket := defaultLocation(t)
	ns := workload(t)
	backup := env.Name("nightly")

	// A type the API server does not serve is a warning in the backup's
	// results, so describe reads the results file too.
	out := velero(t, "backup", "create", backup, "--include-namespaces", ns, "--exclude-resources", "widgets.example.com", "--wait")
	mustContain(t, "backup create", out,
		`Backup request "`+backup+`" submitted successfully.`,
		"Backup completed with status: Completed.")

	out = velero(t, "backup", "get")
	if row := lineWith(out, backup, "Completed", loc); row == "" {
		t.Errorf("backup get: no row with %s, Completed and %s:\n%s", backup, loc, out)
	}
	out = velero(t, "backup", "get", backup, "-o", "json")
	mustContain(t, "backup get -o json", out, `"phase": "Completed"`, `"storageLocation": "`+loc+`"`)

	out = velero(t, "backup", "describe", backup, "--details")
	mustContain(t, "backup describe --details", out,
		"Name:         "+backup,
		"Phase:  Completed",
		"Included:  "+ns,
		"Storage Location:  "+loc,
		// From the resource list, read through a DownloadRequest.
		"Resource List:",
		"v1/ConfigMap:",
		"- "+ns+"/settings",
		"v1/Secret:",
		"- "+ns+"/token",
		"TTL:  720h0m0s",
		// From the results file (BackupResults).
		"Warnings:\n  Velero:     <none>\n",
		`Cluster:  spec.excludedResources: "widgets.example.com" is not a resource type the API server serves`,
	)
	if strings.Contains(out, "\nErrors:") {
		t.Errorf("backup describe shows errors for a backup without any:\n%s", out)
	}

	out = velero(t, "backup", "logs", backup)
	if !strings.Contains(out, backup) {
		t.Errorf("backup logs do not name the backup %s:\n%s", backup, out)
	}

	dir := t.TempDir()
	out = veleroIn(t, dir, "backup", "download", backup)
	tarball := filepath.Join(dir, backup+"-data.tar.gz")
	mustContain(t, "backup download", out, "Backup "+backup+" has been successfully downloaded to "+tarball)
	files := tarballFiles(t, tarball)
	for _, want := range []string{
		"resources/configmaps/namespaces/" + ns + "/settings.json",
		"resources/secrets/namespaces/" + ns + "/token.json",
		"metadata/version",
	} {
		if _, ok := files[want]; !ok {
			t.Errorf("downloaded tarball has no %s; it has %d files", want, len(files))
		}
	}
	if !strings.Contains(files["resources/configmaps/namespaces/"+ns+"/settings.json"], `"color":"blue"`) {
		t.Errorf("the tarball's ConfigMap is not the one backed up: %s", files["resources/configmaps/namespaces/"+ns+"/settings.json"])
	}

	// Lose the ConfigMap and change the Secret, then restore with the CLI:
	// the ConfigMap comes back, the changed Secret is left alone with a
	// warning (existingResourcePolicy none), read from the results file.
	if err := env.Client.Delete(testenv.Ctx(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"}}); err != nil {
		t.Fatal(err)
	}
	changed := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "token"}, Data: map[string][]byte{"token": []byte("rotated")}}
	if err := env.Client.Update(testenv.Ctx(t), changed); err != nil {
		t.Fatal(err)
	}
	restore := env.Name("undo")
	out = velero(t, "restore", "create", restore, "--from-backup", backup, "--wait")
	mustContain(t, "restore create", out,
		`Restore request "`+restore+`" submitted successfully.`,
		"Restore completed with status: Completed.")
	var cm corev1.ConfigMap
	if err := env.Client.Get(testenv.Ctx(t), client.ObjectKey{Namespace: ns, Name: "settings"}, &cm); err != nil {
		t.Fatalf("the restored ConfigMap: %v", err)
	}
	if cm.Data["color"] != "blue" {
		t.Errorf("restored ConfigMap data = %v", cm.Data)
	}

	out = velero(t, "restore", "get")
	if row := lineWith(out, restore, backup, "Completed"); row == "" {
		t.Errorf("restore get: no row with %s, %s and Completed:\n%s", restore, backup, out)
	}
	out = velero(t, "restore", "describe", restore, "--details")
	mustContain(t, "restore describe --details", out,
		"Name:         "+restore,
		"Phase:                       Completed",
		"Backup:  "+backup,
		"Resource List:",
		"v1/ConfigMap:",
		ns+"/settings(created)",
		// From the results file (RestoreResults).
		"Warnings:",
		"could not restore secrets " + ns + "/token: it already exists and differs from the backup",
	)
	if strings.Contains(out, "\nErrors:") {
		t.Errorf("restore describe shows errors for a restore without any:\n%s", out)
	}
	out = velero(t, "restore", "logs", restore)
	if !strings.Contains(out, restore) {
		t.Errorf("restore logs do not name the restore %s:\n%s", restore, out)
	}

	out = velero(t, "backup", "delete", backup, "--confirm")
	mustContain(t, "backup delete", out, `Request to delete backup "`+backup+`" submitted successfully.`)
	waitGone(t, &v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: backup}}, 2*time.Minute)
	if keys := env.S3.Keys(t, bucket, "lifeboat/backups/"+backup+"/"); len(keys) > 0 {
		t.Errorf("backup %s deleted, but its files are still in the bucket: %v", backup, keys)
	}
	out = velero(t, "backup", "get")
	if strings.Contains(out, backup) {
		t.Errorf("backup get still lists the deleted backup %s:\n%s", backup, out)
	}
}

// tarballFiles reads a gzipped tarball into a map from name to content.
func tarballFiles(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s is not gzip: %v", path, err)
	}
	tr := tar.NewReader(zr)
	files := map[string]string{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatalf("reading %s: %v", path, err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = string(b)
	}
}

// waitGone waits until obj no longer exists.
func waitGone(t *testing.T, obj client.Object, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		t.Fatalf("%T %s still exists after %s: %v", obj, obj.GetName(), timeout, err)
	}
}

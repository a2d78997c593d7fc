package plugins

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/testutil/testenv"
	"github.com/lifeboat-io/lifeboat/internal/volumefiles"
)

// What the filesnapshotter records of the credentials a call was made with
// (examples/plugins/filesnapshotter, README.md).
type recordedCredentials struct {
	File   string `json:"file"`
	SHA256 string `json:"sha256"`
}

// A VolumeSnapshotLocation with spec.credential is used with its
// credentials on every path: the snapshot is taken (CreateSnapshot),
// restored from (CreateVolumeFromSnapshot) and deleted (DeleteSnapshot)
// with the secret's bytes, through the real server and a real plugin
// process; the file that carried them is private to the server and goes
// when the location goes. A snapshot taken with the plugin's default
// credentials and deleted with the location's would be "not found" at
// deletion, counted as deleted, and leak.
func TestSnapshotLocationCredentialsOnEveryPath(t *testing.T) {
	ns := env.NewNamespace(t, "creds")
	bsl, dir := env.FilesystemLocation(t, env.Name("fs"))
	snapDir := t.TempDir()
	secretBytes := []byte("[default]\naws_access_key_id=" + rand.Text() + "\n")
	sum := sha256.Sum256(secretBytes)
	wantDigest := hex.EncodeToString(sum[:])
	secretName := env.Name("snap-creds")
	env.Create(t, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: secretName},
		Data:       map[string][]byte{"cloud": secretBytes},
	})
	vsl := &v1.VolumeSnapshotLocation{
		ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: env.Name("files-creds")},
		Spec: v1.VolumeSnapshotLocationSpec{
			Provider:   "example.io/filesnapshotter",
			Config:     map[string]string{"dir": snapDir},
			Credential: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: secretName}, Key: "cloud"},
		},
	}
	env.Create(t, vsl)
	pvName := boundVolume(t, ns, "data", "gold", "1Gi", nil, corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data/" + ns}})

	// Backup: the snapshot is taken with the location's credentials.
	name := env.Name("creds")
	mustLifeboat(t, "backup", "create", name, "--include-namespaces", ns, "--storage-location", bsl.Name,
		"--volume-snapshot-locations", vsl.Name, "--wait")
	b := env.WaitBackup(t, name, 2*time.Minute)
	if b.Status.Phase != v1.BackupPhaseCompleted || b.Status.VolumeSnapshotsCompleted != 1 {
		out, _ := lifeboat(t, "backup", "logs", name)
		t.Fatalf("backup: phase %s, %d of %d snapshots (failure %q); want Completed with 1\n%s",
			b.Status.Phase, b.Status.VolumeSnapshotsCompleted, b.Status.VolumeSnapshotsAttempted, b.Status.FailureReason, out)
	}
	var snaps []volumefiles.Snapshot
	readGzipJSONFile(t, filepath.Join(dir, "lifeboat", "backups", name, name+"-volumesnapshots.json.gz"), &snaps)
	if len(snaps) != 1 {
		t.Fatalf("backup recorded %d snapshots, want 1", len(snaps))
	}
	snapID := snaps[0].Status.ProviderSnapshotID
	var snap struct {
		Credentials *recordedCredentials `json:"credentials"`
	}
	readJSONFile(t, filepath.Join(snapDir, "snapshots", snapID+".json"), &snap)
	// Each path is checked and the test goes on, so that one run says
	// which of them use the credentials.
	var credsFile string
	used := func(call string, got *recordedCredentials) {
		t.Helper()
		switch {
		case got == nil || got.SHA256 != wantDigest:
			t.Errorf("%s was made with credentials %+v, want the location's (sha256 %s)", call, got, wantDigest)
		case credsFile == "":
			credsFile = got.File
		case got.File != credsFile:
			t.Errorf("%s read the credentials from %s, an earlier call from %s", call, got.File, credsFile)
		}
	}
	used("CreateSnapshot", snap.Credentials)

	// The file that carried them is the server's alone.
	if credsFile != "" {
		if fi, err := os.Lstat(credsFile); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
			t.Errorf("credentials file %s: %v (%v), want a regular file of mode 0600", credsFile, fi.Mode(), err)
		}
		if fi, err := os.Lstat(filepath.Dir(credsFile)); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
			t.Errorf("credentials directory %s: %v (%v), want a directory of mode 0700", filepath.Dir(credsFile), fi.Mode(), err)
		}
	}

	// Restore: the volume is made from the snapshot with them.
	pv := &corev1.PersistentVolume{}
	if err := env.Client.Get(testenv.Ctx(t), client.ObjectKey{Name: pvName}, pv); err != nil {
		t.Fatal(err)
	}
	pv.Finalizers = nil // pv-protection; no controller here takes it off
	if err := env.Client.Update(testenv.Ctx(t), pv); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(testenv.Ctx(t), pv); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pv)
	restoreName := env.Name("creds-restore")
	mustLifeboat(t, "restore", "create", restoreName, "--from-backup", name, "--include-resources", "persistentvolumes", "--wait")
	if rs := waitRestore(t, restoreName); rs.Status.Phase != v1.RestorePhaseCompleted {
		out, _ := lifeboat(t, "restore", "logs", restoreName)
		t.Fatalf("restore phase %s (%d errors)\n%s", rs.Status.Phase, rs.Status.Errors, out)
	}
	var vol struct {
		Credentials *recordedCredentials `json:"credentials"`
	}
	readJSONFile(t, filepath.Join(snapDir, "volumes", "restored-"+snapID+"-1.json"), &vol)
	used("CreateVolumeFromSnapshot", vol.Credentials)

	// Delete: the snapshot is deleted with them, and was there to delete.
	if out, err := lifeboat(t, "backup", "delete", name, "--confirm", "--wait"); err != nil {
		t.Fatalf("backup delete: %v\n%s", err, out)
	}
	type deletion struct {
		SnapshotID  string               `json:"snapshotID"`
		Existed     bool                 `json:"existed"`
		Credentials *recordedCredentials `json:"credentials"`
	}
	var deleted []deletion
	f, err := os.Open(filepath.Join(snapDir, "deletions.jsonl"))
	if err != nil {
		t.Fatalf("the snapshotter recorded no deletion: %v", err)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var d deletion
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatal(err)
		}
		deleted = append(deleted, d)
	}
	f.Close()
	if len(deleted) != 1 || deleted[0].SnapshotID != snapID || !deleted[0].Existed {
		t.Fatalf("DeleteSnapshot calls %+v; want one, of %s, that found it", deleted, snapID)
	}
	used("DeleteSnapshot", deleted[0].Credentials)
	if _, err := os.Stat(filepath.Join(snapDir, "snapshots", snapID+".json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the snapshot is left: %v", err)
	}

	// The location goes, and its credentials file with it.
	if credsFile == "" {
		t.FailNow()
	}
	if err := env.Client.Delete(testenv.Ctx(t), vsl); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := os.Lstat(credsFile)
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("credentials file %s of the deleted location is still there (%v)", credsFile, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func readJSONFile(t *testing.T, file string, into any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, into); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

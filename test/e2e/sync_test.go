package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/archive/archivetest"
	"github.com/lifeboat-io/lifeboat/internal/testutil/testenv"
)

// A bucket written by Velero, attached to a fresh Lifeboat: its backups
// appear in the cluster with their status, and restore.
func TestBackupsInABucketWrittenByVeleroAreSyncedAndRestore(t *testing.T) {
	ns := env.Name("from-velero")
	backupName := env.Name("velero-nightly")
	location := env.Name("veleros")
	bucketDir := filepath.Join(env.StoreRoot, location)
	dir := filepath.Join(bucketDir, "velero", "backups", backupName)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}

	cm, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "motd", "namespace": ns, "uid": "ab12", "resourceVersion": "77"},
		"data":     map[string]any{"text": "restored from a Velero backup"}})
	nsObj, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": ns, "uid": "cd34"}, "status": map[string]any{"phase": "Active"}})
	var tarball bytes.Buffer
	if err := archivetest.Tarball(&tarball, []archivetest.Entry{
		{Name: "metadata/version", Data: []byte("1.1.0\n")},
		{Name: "resources/configmaps/namespaces/" + ns + "/motd.json", Data: cm},
		{Name: "resources/configmaps/v1-preferredversion/namespaces/" + ns + "/motd.json", Data: cm},
		{Name: "resources/namespaces/cluster/" + ns + ".json", Data: nsObj},
		{Name: "resources/namespaces/v1-preferredversion/cluster/" + ns + ".json", Data: nsObj},
	}); err != nil {
		t.Fatal(err)
	}
	started := metav1.NewTime(time.Now().Add(-time.Hour).UTC().Truncate(time.Second))
	expires := metav1.NewTime(started.Add(720 * time.Hour))
	meta, _ := json.Marshal(&v1.Backup{
		TypeMeta: metav1.TypeMeta{APIVersion: "velero.io/v1", Kind: "Backup"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: backupName, UID: "ef56", Labels: map[string]string{v1.StorageLocationLabel: "default"},
			// Records only a cluster keeps, planted in the bucket: a
			// digest to check the backup against, a verification.
			Annotations: map[string]string{v1.DigestsAnnotation: strings.Repeat("0", 64), v1.VerificationAnnotation: "Verified"}},
		Spec: v1.BackupSpec{IncludedNamespaces: []string{ns}, StorageLocation: "default", TTL: metav1.Duration{Duration: 720 * time.Hour}},
		Status: v1.BackupStatus{Phase: v1.BackupPhaseCompleted, Version: 1, FormatVersion: "1.1.0", StartTimestamp: &started,
			CompletionTimestamp: &started, Expiration: &expires, Progress: &v1.BackupProgress{TotalItems: 2, ItemsBackedUp: 2}},
	})
	for file, data := range map[string][]byte{"velero-backup.json": meta, backupName + ".tar.gz": tarball.Bytes()} {
		if err := os.WriteFile(filepath.Join(dir, file), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	env.Create(t, &v1.BackupStorageLocation{
		ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: location},
		Spec: v1.BackupStorageLocationSpec{
			Provider:    "lifeboat.io/filesystem",
			Config:      map[string]string{"path": env.StoreRoot},
			StorageType: v1.StorageType{ObjectStorage: &v1.ObjectStorageLocation{Bucket: location, Prefix: "velero"}},
		},
	})
	b := env.WaitBackup(t, backupName, 30*time.Second)
	if b.Status.Phase != v1.BackupPhaseCompleted || b.Spec.StorageLocation != location || !b.Status.StartTimestamp.Equal(&started) {
		t.Fatalf("synced backup: spec %+v status %+v", b.Spec, b.Status)
	}

	for _, a := range v1.ClusterOnlyAnnotations {
		if v, ok := b.Annotations[a]; ok {
			t.Errorf("the synced backup took %s=%q from the bucket", a, v)
		}
	}

	mustLifeboat(t, "restore", "create", env.Name("fromvelero"), "--from-backup", backupName, "--wait")
	var got corev1.ConfigMap
	if err := env.Client.Get(testenv.Ctx(t), clientKeyIn(ns, "motd"), &got); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got.Data["text"], "Velero") {
		t.Errorf("restored configmap %+v", got.Data)
	}
}

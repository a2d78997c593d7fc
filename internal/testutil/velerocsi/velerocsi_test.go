package velerocsi

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/archive"
	"github.com/lifeboat-io/lifeboat/internal/storage"
	"github.com/lifeboat-io/lifeboat/internal/storage/filesystem"
)

func obj(s string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal([]byte(s), &u.Object); err != nil {
		panic(err)
	}
	return u
}

func fixture() Fixture {
	return Fixture{
		Backup: &v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: "nightly", UID: "b-uid"},
			Spec: v1.BackupSpec{IncludedNamespaces: []string{"app"}, StorageLocation: "default"}},
		Class: obj(`{"apiVersion":"snapshot.storage.k8s.io/v1","kind":"VolumeSnapshotClass","metadata":{"name":"csi","labels":{"velero.io/csi-volumesnapshot-class":"true"}},"driver":"d.example","deletionPolicy":"Delete"}`),
		Volumes: []Volume{{
			Claim:    obj(`{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"data","namespace":"app","managedFields":[{"manager":"x"}]},"spec":{"volumeName":"pvc-1"}}`),
			Volume:   obj(`{"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"pvc-1"},"spec":{"persistentVolumeReclaimPolicy":"Delete","csi":{"driver":"d.example","volumeHandle":"vol-1"}}}`),
			Snapshot: obj(`{"apiVersion":"snapshot.storage.k8s.io/v1","kind":"VolumeSnapshot","metadata":{"name":"velero-data-abcde","namespace":"app"},"spec":{"source":{"persistentVolumeClaimName":"data"},"volumeSnapshotClassName":"csi"},"status":{"boundVolumeSnapshotContentName":"snapcontent-1","readyToUse":true,"restoreSize":"1Mi"}}`),
			Content:  obj(`{"apiVersion":"snapshot.storage.k8s.io/v1","kind":"VolumeSnapshotContent","metadata":{"name":"snapcontent-1"},"spec":{"driver":"d.example","deletionPolicy":"Delete","source":{"volumeHandle":"vol-1"},"volumeSnapshotRef":{"kind":"VolumeSnapshot","namespace":"app","name":"velero-data-abcde","uid":"vs-uid"}},"status":{"snapshotHandle":"snap-1","readyToUse":true,"restoreSize":1048576}}`),
		}},
		Started: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC),
	}
}

func newStore(t *testing.T) *storage.BackupStore {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "bucket"), 0o700); err != nil {
		t.Fatal(err)
	}
	fs, err := filesystem.New(map[string]string{filesystem.PathKey: root})
	if err != nil {
		t.Fatal(err)
	}
	return storage.NewBackupStore(fs, "bucket", "velero")
}

// The files and items are where and what Velero v1.18.3 writes.
func TestWriteLaysTheBackupOutAsVeleroDoes(t *testing.T) {
	store := newStore(t)
	b, err := Write(t.Context(), store, fixture())
	if err != nil {
		t.Fatal(err)
	}
	if b.Status.Phase != v1.BackupPhaseCompleted || b.Status.CSIVolumeSnapshotsCompleted != 1 || b.Status.Expiration.Sub(b.Status.StartTimestamp.Time) != 720*time.Hour {
		t.Errorf("status %+v", b.Status)
	}
	keys, err := store.ObjectStore().ListObjects(t.Context(), "bucket", "velero/backups/nightly/")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"velero-backup.json", "nightly.tar.gz", "nightly-logs.gz", "nightly-resource-list.json.gz", "nightly-results.gz",
		"nightly-itemoperations.json.gz", "nightly-volumesnapshots.json.gz", "nightly-podvolumebackups.json.gz",
		"nightly-csi-volumesnapshots.json.gz", "nightly-csi-volumesnapshotcontents.json.gz", "nightly-csi-volumesnapshotclasses.json.gz",
		"nightly-volumeinfo.json.gz"} {
		if !slices.Contains(keys, "velero/backups/nightly/"+f) {
			t.Errorf("no %s in %v", f, keys)
		}
	}

	rc, err := store.GetBackupContents(t.Context(), "nightly")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	r, err := archive.NewReader(rc, archive.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	items := map[string]*unstructured.Unstructured{}
	var paths []string
	for {
		e, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, e.Path)
		if e.Item != nil && !e.PreferredVersionCopy {
			u := &unstructured.Unstructured{}
			if err := json.Unmarshal(e.Data, &u.Object); err != nil {
				t.Fatal(err)
			}
			items[e.Path] = u
		}
	}
	for _, p := range []string{"metadata/version",
		"resources/volumesnapshots.snapshot.storage.k8s.io/namespaces/app/velero-data-abcde.json",
		"resources/volumesnapshots.snapshot.storage.k8s.io/v1-preferredversion/namespaces/app/velero-data-abcde.json",
		"resources/volumesnapshotcontents.snapshot.storage.k8s.io/cluster/snapcontent-1.json",
		"resources/volumesnapshotclasses.snapshot.storage.k8s.io/cluster/csi.json",
		"resources/persistentvolumeclaims/namespaces/app/data.json",
		"resources/persistentvolumes/cluster/pvc-1.json",
		"resources/namespaces/cluster/app.json"} {
		if !slices.Contains(paths, p) {
			t.Errorf("no %s in the tarball", p)
		}
	}
	vs := items["resources/volumesnapshots.snapshot.storage.k8s.io/namespaces/app/velero-data-abcde.json"]
	want := map[string]string{VolumeSnapshotHandle: "snap-1", DriverName: "d.example", VSCDeletionPolicy: "Delete", VolumeSnapshotRestoreSize: "1Mi", MustIncludeAdditionalItems: "true"}
	for k, v := range want {
		if vs.GetAnnotations()[k] != v {
			t.Errorf("VolumeSnapshot annotation %s = %q, want %q", k, vs.GetAnnotations()[k], v)
		}
	}
	if vs.GetLabels()[v1.BackupNameLabel] != "nightly" {
		t.Errorf("VolumeSnapshot labels %v", vs.GetLabels())
	}
	vsc := items["resources/volumesnapshotcontents.snapshot.storage.k8s.io/cluster/snapcontent-1.json"]
	if vsc.GetLabels()[v1.BackupNameLabel] != "nightly" {
		t.Errorf("content labels %v", vsc.GetLabels())
	}
	claim := items["resources/persistentvolumeclaims/namespaces/app/data.json"]
	if claim.GetLabels()[VolumeSnapshotLabel] != "velero-data-abcde" || claim.GetAnnotations()[VolumeSnapshotLabel] != "velero-data-abcde" || claim.GetManagedFields() != nil {
		t.Errorf("claim %v", claim.Object)
	}

	var infos []map[string]any
	if err := store.GetGzipJSON(t.Context(), store.BackupKey("nightly", storage.BackupVolumeInfoFile("nightly")), &infos); err != nil {
		t.Fatal(err)
	}
	ci, _ := infos[0]["csiSnapshotInfo"].(map[string]any)
	if len(infos) != 1 || infos[0]["backupMethod"] != "CSISnapshot" || ci["snapshotHandle"] != "snap-1" || ci["driver"] != "d.example" || ci["vscName"] != "snapcontent-1" {
		t.Errorf("volume info %v", infos)
	}
}

func TestWriteWithoutTarball(t *testing.T) {
	store := newStore(t)
	f := fixture()
	f.WithoutTarball = true
	if _, err := Write(t.Context(), store, f); err != nil {
		t.Fatal(err)
	}
	if _, err := store.GetBackupContents(t.Context(), "nightly"); err == nil {
		t.Error("a tarball was written")
	}
}

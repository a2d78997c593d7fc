package incluster

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/install"
	"github.com/lifeboat-io/lifeboat/internal/locations"
	"github.com/lifeboat-io/lifeboat/internal/podvolume"
	"github.com/lifeboat-io/lifeboat/internal/podvolume/kopiapath"
	"github.com/lifeboat-io/lifeboat/internal/podvolume/repository"
)

// TestBackupCopiesPodVolumesThroughTheNodeAgent: a backup with
// defaultVolumesToFsBackup of a Deployment whose pod has an emptyDir and a
// claim on a local PV, both full of files, ends Completed with one
// Completed PodVolumeBackup per volume, stored in the location; each
// snapshot, restored on this host, holds exactly the pod's files.
func TestBackupCopiesPodVolumesThroughTheNodeAgent(t *testing.T) {
	store := installWithNodeAgent(t)

	const ns = "fsb-shop"
	testNamespace(t, ns)
	localDir, err := os.MkdirTemp("", "lifeboat-fsb-local-pv-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(localDir) })
	if err := os.Chmod(localDir, 0o777); err != nil {
		t.Fatal(err)
	}
	create(t, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "fsb-local"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              "fsb-local",
			PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: localDir}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{nodeName(t)}}},
			}}}},
		},
	})
	t.Cleanup(func() {
		_ = admin.Delete(context.Background(), &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "fsb-local"}})
	})
	create(t, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "local"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To("fsb-local"),
			VolumeName:       "fsb-local",
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")}},
		},
	})
	// Many small files in nested directories and one of 3 MiB in each
	// volume, then a marker that the writes are done.
	const fill = `for v in /cache /local; do
  for d in 0 1 2 3; do /bin/busybox mkdir -p $v/dir$d; for i in $(/bin/busybox seq 1 50); do echo "$v $d $i $RANDOM" > $v/dir$d/f$i; done; done
  /bin/busybox dd if=/dev/urandom of=$v/big bs=1024 count=3072 2>/dev/null
done
/bin/busybox sync; /bin/busybox touch /cache/.filled; exec /bin/busybox sleep 3600`
	labels := map[string]string{"app": "fsb-web"}
	pod := shellPod(ns)
	pod.Labels = labels
	pod.Spec.Containers[0].Command = []string{"/bin/busybox", "sh", "-c", fill}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "cache", MountPath: "/cache"}, {Name: "local", MountPath: "/local"}}
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "local", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "local"}}},
	}
	create(t, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod.Spec},
		},
	})
	var podName string
	poll(t, "the Deployment's pod to fill its volumes", func(c context.Context) (bool, error) {
		var pods corev1.PodList
		if err := admin.List(c, &pods, client.InNamespace(ns), client.MatchingLabels(labels)); err != nil || len(pods.Items) != 1 {
			return false, err
		}
		if pods.Items[0].Status.Phase != corev1.PodRunning {
			return false, nil
		}
		podName = pods.Items[0].Name
		return strings.Contains(execIn(t, ns, podName, "/bin/busybox", "ls", "-a", "/cache"), ".filled"), nil
	})
	want := map[string]string{}
	for _, vol := range []string{"cache", "local"} {
		want[vol] = execIn(t, ns, podName, "/bin/busybox", "sh", "-c",
			"cd /"+vol+" && /bin/busybox find . -type f | /bin/busybox sort | /bin/busybox xargs /bin/busybox md5sum")
		if strings.Count(want[vol], "\n") < 201 {
			t.Fatalf("the pod's %s holds too few files:\n%s", vol, want[vol])
		}
	}

	yes := true
	b := &v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: serverNamespace, Name: "fsb-1"},
		Spec: v1.BackupSpec{IncludedNamespaces: []string{ns}, DefaultVolumesToFsBackup: &yes}}
	start := time.Now()
	create(t, b)
	waitFor(t, b, "the backup to end", func(b *v1.Backup) bool {
		switch b.Status.Phase {
		case v1.BackupPhaseCompleted, v1.BackupPhasePartiallyFailed, v1.BackupPhaseFailed, v1.BackupPhaseFailedValidation:
			return true
		}
		return false
	})
	t.Logf("backup %s in %s", b.Status.Phase, time.Since(start).Round(time.Millisecond))
	if b.Status.Phase != v1.BackupPhaseCompleted {
		t.Fatalf("backup %s (%d errors, %q); server log:\n%s", b.Status.Phase, b.Status.Errors, b.Status.FailureReason, serverLog(t))
	}

	var list v1.PodVolumeBackupList
	if err := admin.List(ctx(t), &list, client.InNamespace(serverNamespace), client.MatchingLabels{v1.BackupNameLabel: "fsb-1"}); err != nil {
		t.Fatal(err)
	}
	byVolume := map[string]v1.PodVolumeBackup{}
	for _, p := range list.Items {
		if p.Status.Phase != v1.PodVolumePhaseCompleted || p.Status.SnapshotID == "" {
			t.Errorf("PodVolumeBackup %s of %s: %s %q, snapshot %q", p.Name, p.Spec.Volume, p.Status.Phase, p.Status.Message, p.Status.SnapshotID)
		}
		byVolume[p.Spec.Volume] = p
	}
	if len(list.Items) != 2 || byVolume["cache"].Name == "" || byVolume["local"].Name == "" {
		t.Fatalf("%d PodVolumeBackups (volumes %v), want one for cache and one for local", len(list.Items), list.Items)
	}
	if byVolume["local"].Annotations[v1.PVCNameAnnotation] != "local" {
		t.Errorf("the claim's PodVolumeBackup has annotations %v", byVolume["local"].Annotations)
	}

	var stored []v1.PodVolumeBackup
	if err := json.Unmarshal([]byte(gunzip(t, filepath.Join(store, "backups", "backups", "fsb-1", "fsb-1-podvolumebackups.json.gz"))), &stored); err != nil {
		t.Fatal(err)
	}
	if len(stored) != 2 {
		t.Errorf("%d PodVolumeBackups in the store, want 2", len(stored))
	}

	repos := &repository.Manager{
		Storage: &locations.Resolver{Client: admin, SecretReader: admin, Namespace: serverNamespace},
		Secrets: admin, Namespace: serverNamespace, WorkDir: t.TempDir(),
	}
	t.Cleanup(func() { _ = repos.Close(context.Background()) })
	var bsl v1.BackupStorageLocation
	get(t, client.ObjectKey{Namespace: serverNamespace, Name: install.LocationName}, &bsl)
	dp := &kopiapath.DataPath{Repositories: repos}
	for vol, p := range byVolume {
		dir := t.TempDir()
		if _, err := dp.Restore(ctx(t), podvolume.RestoreRequest{
			Repository: podvolume.Repository{Location: &bsl, VolumeNamespace: ns},
			SnapshotID: p.Status.SnapshotID, Path: dir,
		}); err != nil {
			t.Fatalf("restoring %s's snapshot %s: %v", vol, p.Status.SnapshotID, err)
		}
		if got := md5Sums(t, dir); got != want[vol] {
			t.Errorf("%s: the restored snapshot's files differ from the pod's:\n got %.600s\nwant %.600s", vol, got, want[vol])
		}
	}
}

// md5Sums is busybox's `find . -type f | sort | xargs md5sum` of dir.
func md5Sums(t *testing.T, dir string) string {
	t.Helper()
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			paths = append(paths, "./"+rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(paths)
	var b strings.Builder
	for _, p := range paths {
		data, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		sum := md5.Sum(data)
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(sum[:]), p)
	}
	return b.String()
}

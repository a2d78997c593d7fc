package incluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/hostpods"
	"github.com/lifeboat-io/lifeboat/internal/install"
	"github.com/lifeboat-io/lifeboat/internal/locations"
	"github.com/lifeboat-io/lifeboat/internal/podvolume"
	"github.com/lifeboat-io/lifeboat/internal/podvolume/kopiapath"
	"github.com/lifeboat-io/lifeboat/internal/podvolume/repository"
	"github.com/lifeboat-io/lifeboat/internal/testutil/csistack"
)

func nodeName(t *testing.T) string {
	t.Helper()
	var nodes corev1.NodeList
	if err := admin.List(ctx(t), &nodes); err != nil || len(nodes.Items) != 1 {
		t.Fatalf("the node: %v (%d nodes)", err, len(nodes.Items))
	}
	return nodes.Items[0].Name
}

// TestHostPodsFindsVolumesOfRunningPods: a pod on the real node writes a
// file into an emptyDir, a claim on a local PersistentVolume and a claim
// on a CSI volume; the node agent's rules find each volume's directory in
// the kubelet's real pod directory, holding the file the pod wrote. Its
// hostPath volume is refused.
func TestHostPodsFindsVolumesOfRunningPods(t *testing.T) {
	if node.CSI == nil {
		t.Fatal("the node runs no CSI stack")
	}
	const ns = "hostpods"
	testNamespace(t, ns)
	localDir, err := os.MkdirTemp("", "lifeboat-local-pv-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(localDir) })
	// The test shell does not run as root.
	if err := os.Chmod(localDir, 0o777); err != nil {
		t.Fatal(err)
	}
	hostDir := t.TempDir()
	create(t, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "hostpods-local"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              "hostpods-local",
			PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: localDir}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{nodeName(t)}}},
			}}}},
		},
	})
	t.Cleanup(func() {
		_ = admin.Delete(context.Background(), &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "hostpods-local"}})
	})
	claim := func(name, class, volume string) {
		create(t, &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: ptr.To(class),
				VolumeName:       volume,
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}},
			},
		})
	}
	claim("local", "hostpods-local", "hostpods-local")
	claim("csi", csistack.StorageClass, "")
	pod := shellPod(ns)
	pod.Spec.Containers[0].Command = []string{"/bin/busybox", "sh", "-c",
		"echo from-emptydir > /cache/f; echo from-local > /local/f; echo from-csi > /csi/f; sync; exec /bin/busybox sleep 3600"}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{
		{Name: "cache", MountPath: "/cache"}, {Name: "local", MountPath: "/local"}, {Name: "csi", MountPath: "/csi"}, {Name: "host", MountPath: "/host"},
	}
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "local", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "local"}}},
		{Name: "csi", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "csi"}}},
		{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: hostDir}}},
	}
	create(t, pod)
	t.Cleanup(func() { _ = admin.Delete(context.Background(), pod) })
	waitPodRunning(t, ns, "web")
	get(t, client.ObjectKeyFromObject(pod), pod)

	root := filepath.Join(node.KubeletDir(), "pods")
	start := time.Now()
	for volume, want := range map[string]struct{ plugin, content string }{
		"cache": {"kubernetes.io~empty-dir", "from-emptydir\n"},
		"local": {"kubernetes.io~local-volume", "from-local\n"},
		"csi":   {"kubernetes.io~csi", "from-csi\n"},
	} {
		var path, seen string
		poll(t, "the pod's write into "+volume, func(c context.Context) (bool, error) {
			p, _, err := hostpods.Resolve(c, admin, root, pod, volume)
			if err != nil {
				return false, err
			}
			path = p
			data, err := os.ReadFile(filepath.Join(p, "f"))
			if seen = fmt.Sprintf("%s: %q, %v", p, data, err); err == nil && string(data) == want.content {
				return true, nil
			}
			if time.Since(start) > time.Minute {
				entries, _ := os.ReadDir(p)
				return false, fmt.Errorf("after a minute, %s (directory holds %v; the pod's view: %q)", seen, entries,
					execIn(t, ns, "web", "/bin/busybox", "ls", "-la", "/"+volume))
			}
			return false, nil
		})
		if rel, _ := filepath.Rel(filepath.Join(root, string(pod.UID), "volumes"), path); !strings.HasPrefix(rel, want.plugin+"/") {
			t.Errorf("volume %s found at %s, want it under the %s plugin's directory", volume, path, want.plugin)
		}
		t.Logf("volume %s: %s", volume, path)
	}
	if _, _, err := hostpods.Resolve(ctx(t), admin, root, pod, "host"); !errors.Is(err, hostpods.ErrHostPath) {
		t.Errorf("the hostPath volume: %v, want ErrHostPath", err)
	}
}

// TestInstalledNodeAgentTakesAPodVolumeBackup: install --use-node-agent
// puts a node agent on the node, Running and Ready; a PodVolumeBackup for a
// pod's emptyDir reaches it, and it finds the volume's directory through
// its /host_pods mount.
func TestInstalledNodeAgentTakesAPodVolumeBackup(t *testing.T) {
	installWithNodeAgent(t)

	const ns = "fs-shop"
	testNamespace(t, ns)
	pod := shellPod(ns)
	create(t, pod)
	waitPodRunning(t, ns, "web")
	get(t, client.ObjectKeyFromObject(pod), pod)

	// The repository first, as a backup does: the in-cluster server makes
	// it (and the password Secret) under the filesystem location.
	ensurer := &repository.Ensurer{Client: admin, Namespace: serverNamespace, Timeout: 2 * time.Minute}
	if _, err := ensurer.Ensure(ctx(t), ns, install.LocationName); err != nil {
		t.Fatalf("the server setting up the repository of %s: %v", ns, err)
	}

	pvb := &v1.PodVolumeBackup{
		ObjectMeta: metav1.ObjectMeta{Namespace: serverNamespace, Name: "fs-shop-web-data"},
		Spec: v1.PodVolumeBackupSpec{
			Node:                  pod.Spec.NodeName,
			Pod:                   corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod.Name, UID: pod.UID},
			Volume:                "data",
			BackupStorageLocation: install.LocationName,
			RepoIdentifier:        "",
			UploaderType:          "kopia",
			Tags:                  map[string]string{"backup": "fs-shop-1", "ns": ns, "pod": pod.Name, "volume": "data"},
		},
	}
	create(t, pvb)
	waitFor(t, pvb, "the node agent to finish the PodVolumeBackup", func(p *v1.PodVolumeBackup) bool {
		return p.Status.Phase == v1.PodVolumePhaseCompleted || p.Status.Phase == v1.PodVolumePhaseFailed || p.Status.Phase == v1.PodVolumePhaseCanceled
	})
	if want := filepath.Join(hostpods.MountPath, string(pod.UID), "volumes", "kubernetes.io~empty-dir", "data"); pvb.Status.Path != want {
		t.Errorf("status.path %q, want %q (message %q)", pvb.Status.Path, want, pvb.Status.Message)
	}
	if pvb.Status.AcceptedTimestamp == nil || pvb.Status.StartTimestamp == nil || pvb.Status.CompletionTimestamp == nil {
		t.Errorf("timestamps of %+v: want accepted, start and completion", pvb.Status)
	}
	wantDataPathOutcome(t, pvb)

	if logs := nodeAgentLog(t); strings.Contains(logs, "forbidden") {
		t.Errorf("the node agent was refused something it needs:\n%s", logs)
	}
}

// wantDataPathOutcome: the node agent stored the volume with the kopia
// data path, and the snapshot, read back from the location's directory on
// this host, holds what the pod wrote.
func wantDataPathOutcome(t *testing.T, pvb *v1.PodVolumeBackup) {
	t.Helper()
	if pvb.Status.Phase != v1.PodVolumePhaseCompleted || pvb.Status.SnapshotID == "" {
		t.Fatalf("PodVolumeBackup %s %q, snapshot %q: want Completed with a snapshot ID", pvb.Status.Phase, pvb.Status.Message, pvb.Status.SnapshotID)
	}
	if pvb.Status.Progress.TotalBytes == 0 || pvb.Status.Progress.BytesDone != pvb.Status.Progress.TotalBytes {
		t.Errorf("progress %+v: want every byte of the volume done", pvb.Status.Progress)
	}
	repos := &repository.Manager{
		Storage: &locations.Resolver{Client: admin, SecretReader: admin, Namespace: serverNamespace},
		Secrets: admin, Namespace: serverNamespace, WorkDir: t.TempDir(),
	}
	t.Cleanup(func() { _ = repos.Close(context.Background()) })
	var bsl v1.BackupStorageLocation
	get(t, client.ObjectKey{Namespace: serverNamespace, Name: pvb.Spec.BackupStorageLocation}, &bsl)
	dir := t.TempDir()
	dp := &kopiapath.DataPath{Repositories: repos}
	if _, err := dp.Restore(ctx(t), podvolume.RestoreRequest{
		Repository: podvolume.Repository{Location: &bsl, VolumeNamespace: pvb.Spec.Pod.Namespace},
		SnapshotID: pvb.Status.SnapshotID, Path: dir,
	}); err != nil {
		t.Fatalf("restoring snapshot %s from the location: %v", pvb.Status.SnapshotID, err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "greeting")); err != nil || string(got) != "hello\n" {
		t.Errorf("the snapshot's greeting: %q, %v; want what the pod wrote, \"hello\\n\"", got, err)
	}
}

func nodeAgentLog(t *testing.T) string {
	t.Helper()
	var pods corev1.PodList
	if err := admin.List(ctx(t), &pods, client.InNamespace(serverNamespace), client.MatchingLabels(install.NodeAgentSelector())); err != nil || len(pods.Items) == 0 {
		t.Fatalf("the node agent's pod: %v (%d pods)", err, len(pods.Items))
	}
	cs := kubernetes.NewForConfigOrDie(node.Config)
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := cs.CoreV1().Pods(serverNamespace).GetLogs(pods.Items[0].Name, &corev1.PodLogOptions{Container: install.NodeAgentName}).DoRaw(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// installWithNodeAgent installs the server and the node agent on the node,
// backups in a directory of the node, waits until the node agent is ready
// and uninstalls at the end; it returns that directory.
func installWithNodeAgent(t *testing.T) string {
	t.Helper()
	store := storeDir(t)
	lifeboat(t, "install", "--image", images["lifeboat"], "--image-pull-policy", "Never",
		"--use-filesystem", store, "--use-node-agent", "--kubelet-root-dir", node.KubeletDir(), "--wait", "--timeout", "4m")
	t.Cleanup(func() { uninstallAndWait(t) })
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: serverNamespace, Name: install.NodeAgentName}}
	waitFor(t, ds, "the node agent to be ready", func(d *appsv1.DaemonSet) bool {
		return d.Status.DesiredNumberScheduled == 1 && d.Status.NumberReady == 1
	})
	return store
}

// testNamespace creates namespace ns, deleted at the end.
func testNamespace(t *testing.T, ns string) {
	t.Helper()
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	t.Cleanup(func() {
		_ = admin.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
}

package localnode

import (
	"bytes"
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/lifeboat-io/lifeboat/internal/testutil/csistack"
)

// TestCSIVolumesCarryDataThroughASnapshot runs the CSI stack on the real
// node: a pod writes into a provisioned CSI volume (a bind mount of the
// driver's state), a snapshot copies the bytes, a claim restored from the
// snapshot is mounted into a second pod that reads them back, and after
// everything is deleted and the node stopped, nothing is left: no volume
// or snapshot in the driver's state, no process of the stack, no mount.
func TestCSIVolumesCarryDataThroughASnapshot(t *testing.T) {
	tarballs, pause, shell := testImages(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	before := snapshotState("")
	var log bytes.Buffer
	begin := time.Now()
	n, err := Start(ctx, Options{SandboxImage: pause, Images: tarballs, Log: &log, CSI: true})
	if err != nil {
		t.Fatalf("starting the node with CSI: %v\n%s", err, log.String())
	}
	t.Logf("node and CSI stack up in %s", time.Since(begin).Round(time.Millisecond))
	for _, line := range strings.Split(log.String(), "\n") {
		if strings.Contains(line, "CSI stack ready") {
			t.Log(line)
		}
	}
	root := n.dirs.root
	stack := n.CSI
	pids := stack.PIDs()
	stopped := false
	defer func() {
		if t.Failed() {
			for _, c := range []string{"csidriver", "csi-provisioner", "csi-snapshotter", "snapshot-controller"} {
				t.Logf("--- %s:\n%s", c, stack.Log(c, 40))
			}
			t.Logf("--- kubelet:\n%s", tail(n.LogDir()+"/kubelet.log", 40))
		}
		if !stopped {
			_ = n.Stop()
		}
	}()
	c := stack.Client
	cs := kubernetes.NewForConfigOrDie(n.Config)
	const ns = "default"
	payload := "written by a pod at " + time.Now().Format(time.RFC3339Nano)

	claim := csiClaim(ns, "data", nil)
	if err := c.Create(ctx, claim); err != nil {
		t.Fatal(err)
	}
	step := time.Now()
	runPod(ctx, t, n, cs, ns, "writer", shell, claim.Name, "echo -n '"+payload+"' > /data/payload && mkdir -p /data/sub && echo nested > /data/sub/f && sync")
	t.Logf("writer pod done in %s", time.Since(step).Round(time.Millisecond))
	if err := c.Get(ctx, client.ObjectKeyFromObject(claim), claim); err != nil {
		t.Fatal(err)
	}
	var pv corev1.PersistentVolume
	if err := c.Get(ctx, client.ObjectKey{Name: claim.Spec.VolumeName}, &pv); err != nil {
		t.Fatal(err)
	}
	files, err := stack.VolumeFiles(pv.Spec.CSI.VolumeHandle)
	if err != nil || string(files["payload"]) != payload || string(files["sub/f"]) != "nested\n" {
		t.Fatalf("the volume's files in the driver's state = %q, %v; want the pod's writes", files, err)
	}

	step = time.Now()
	snap := &snapshotv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data-snap"},
		Spec: snapshotv1.VolumeSnapshotSpec{
			Source:                  snapshotv1.VolumeSnapshotSource{PersistentVolumeClaimName: ptr.To(claim.Name)},
			VolumeSnapshotClassName: ptr.To(csistack.SnapshotClass),
		},
	}
	if err := c.Create(ctx, snap); err != nil {
		t.Fatal(err)
	}
	if err := n.waitFor("the snapshot ready", 2*time.Minute, func() (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(snap), snap)
		return err == nil && snap.Status != nil && ptr.Deref(snap.Status.ReadyToUse, false), err
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("snapshot ready in %s", time.Since(step).Round(time.Millisecond))
	var content snapshotv1.VolumeSnapshotContent
	if err := c.Get(ctx, client.ObjectKey{Name: *snap.Status.BoundVolumeSnapshotContentName}, &content); err != nil {
		t.Fatal(err)
	}
	snapFiles, err := stack.SnapshotFiles(*content.Status.SnapshotHandle)
	if err != nil || string(snapFiles["payload"]) != payload {
		t.Fatalf("snapshot files = %q, %v; want the payload", snapFiles, err)
	}

	restored := csiClaim(ns, "restored", &corev1.TypedObjectReference{APIGroup: ptr.To(snapshotv1.GroupName), Kind: "VolumeSnapshot", Name: snap.Name})
	if err := c.Create(ctx, restored); err != nil {
		t.Fatal(err)
	}
	step = time.Now()
	out := runPod(ctx, t, n, cs, ns, "reader", shell, restored.Name, "cat /data/payload; echo; cat /data/sub/f")
	t.Logf("reader pod done in %s", time.Since(step).Round(time.Millisecond))
	if want := payload + "\nnested\n"; out != want {
		t.Fatalf("the restored volume read by a pod = %q, want %q", out, want)
	}

	// Delete everything: the storage goes with the objects.
	for _, name := range []string{"writer", "reader"} {
		if err := cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Delete(ctx, snap); err != nil {
		t.Fatal(err)
	}
	for _, cl := range []*corev1.PersistentVolumeClaim{claim, restored} {
		if err := c.Delete(ctx, cl); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.waitFor("volumes and snapshots gone from the driver", 2*time.Minute, func() (bool, error) {
		vols, err := stack.Volumes()
		if err != nil {
			return false, err
		}
		snaps, err := stack.Snapshots()
		if err != nil {
			return false, err
		}
		err = c.Get(ctx, client.ObjectKeyFromObject(&content), &content)
		return len(vols) == 0 && len(snaps) == 0 && apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}); err != nil {
		t.Fatal(err)
	}

	stopped = true
	if err := n.Stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("CSI stack process %d still runs after Stop", pid)
		}
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mounts), "kubernetes.io~csi") || strings.Contains(string(mounts), "kubernetes.io/csi") {
		t.Errorf("CSI mounts remain after Stop")
	}
	assertNothingLeft(t, root, before)
}

// The stack's client is controller-runtime's, which complains on stderr
// when a test binary that runs for more than 30 s never set its logger.
func init() { ctrllog.SetLogger(logr.Discard()) }

func csiClaim(ns, name string, source *corev1.TypedObjectReference) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: ptr.To(csistack.StorageClass),
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}},
			DataSourceRef:    source,
		},
	}
}

// runPod runs a shell script in a pod with the claim at /data, waits for
// it to succeed and returns its output.
func runPod(ctx context.Context, t *testing.T, n *Node, cs kubernetes.Interface, ns, name, image, claim, script string) string {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: name, Image: image, ImagePullPolicy: corev1.PullNever,
				Command:      []string{"/bin/busybox", "sh", "-c", script},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim},
			}}},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
		},
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := n.waitFor("pod "+name+" to succeed", 3*time.Minute, func() (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Status.Phase == corev1.PodFailed {
			logs, _ := cs.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
			t.Fatalf("pod %s failed: %s", name, logs)
		}
		return p.Status.Phase == corev1.PodSucceeded, nil
	}); err != nil {
		evs, _ := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		for _, e := range evs.Items {
			t.Logf("event %s/%s: %s %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
		t.Fatal(err)
	}
	logs, err := cs.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return string(logs)
}

// TestCSIStopWithAPodMountingAVolume stops a node whose pod still has a CSI
// volume mounted: the stack's Stop unmounts it, and the node leaves nothing.
func TestCSIStopWithAPodMountingAVolume(t *testing.T) {
	tarballs, pause, shell := testImages(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	before := snapshotState("")
	var log bytes.Buffer
	n, err := Start(ctx, Options{SandboxImage: pause, Images: tarballs, Log: &log, CSI: true})
	if err != nil {
		t.Fatalf("starting the node with CSI: %v\n%s", err, log.String())
	}
	root := n.dirs.root
	stopped := false
	defer func() {
		if !stopped {
			_ = n.Stop()
		}
	}()
	c, cs := n.CSI.Client, kubernetes.NewForConfigOrDie(n.Config)
	if err := c.Create(ctx, csiClaim("default", "held", nil)); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "holder", Namespace: "default"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "holder", Image: shell, ImagePullPolicy: corev1.PullNever,
				Command:      []string{"/bin/busybox", "sh", "-c", "echo held > /data/f && exec /bin/busybox sleep 3600"},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "held"},
			}}},
		},
	}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := n.waitFor("the holder pod to run", 3*time.Minute, func() (bool, error) {
		p, err := cs.CoreV1().Pods("default").Get(ctx, "holder", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, err
	}); err != nil {
		t.Fatal(err)
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if !strings.Contains(string(mounts), "kubernetes.io~csi") {
		t.Fatal("the running pod's CSI volume is not mounted on the host")
	}
	stopped = true
	if err := n.Stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
	mounts, _ = os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mounts), "kubernetes.io~csi") || strings.Contains(string(mounts), "kubernetes.io/csi") {
		t.Errorf("CSI mounts remain after Stop")
	}
	assertNothingLeft(t, root, before)
}

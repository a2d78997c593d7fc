package localnode

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
)

// testImages names the image archives the tests import (`make image`
// writes them) and the references of the sandbox image and of one with a
// shell.
func testImages(t *testing.T) (tarballs []string, pause, shell string) {
	t.Helper()
	dir := os.Getenv(TestImagesEnv)
	if dir == "" {
		t.Fatalf("%s is not set: the directory of the image archives `make image` writes (bin/images)", TestImagesEnv)
	}
	tarballs = []string{filepath.Join(dir, "pause.tar"), filepath.Join(dir, "lifeboat-test-shell.tar")}
	var err error
	if pause, err = ImageName(tarballs[0]); err != nil {
		t.Fatal(err)
	}
	if shell, err = ImageName(tarballs[1]); err != nil {
		t.Fatal(err)
	}
	return tarballs, pause, shell
}

func TestAPodRunsWritesItsVolumeAndAnswersExecAndTeardownLeavesNothing(t *testing.T) {
	tarballs, pause, shell := testImages(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	before := snapshotState("")
	var log bytes.Buffer
	n, err := Start(ctx, Options{SandboxImage: pause, Images: tarballs, Log: &log})
	if err != nil {
		t.Fatalf("starting the node: %v\n%s", err, log.String())
	}
	root := n.dirs.root
	stopped := false
	defer func() {
		if !stopped {
			_ = n.Stop()
		}
	}()

	cs := kubernetes.NewForConfigOrDie(n.Config)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "writer", Namespace: "default"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "writer", Image: shell, ImagePullPolicy: corev1.PullNever,
				Command:      []string{"/bin/busybox", "sh", "-c", "echo hello > /data/greeting; cat /data/greeting; exec /bin/busybox sleep 3600"},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			}},
			Volumes:                       []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			TerminationGracePeriodSeconds: new(int64),
		},
	}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := n.waitFor("the pod to run", 2*time.Minute, func() (bool, error) {
		p, err := cs.CoreV1().Pods("default").Get(ctx, "writer", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, err
	}); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	logs, err := cs.CoreV1().Pods("default").GetLogs("writer", &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil || strings.TrimSpace(string(logs)) != "hello" {
		t.Errorf("pod logs %q, %v; want hello", logs, err)
	}
	req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace("default").Name("writer").SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: "writer", Command: []string{"/bin/busybox", "cat", "/data/greeting"}, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	exec, err := remotecommand.NewSPDYExecutor(n.Config, "POST", req.URL())
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if err := exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr}); err != nil || stdout.String() != "hello\n" {
		t.Errorf("exec: %q %q %v; want hello", stdout.String(), stderr.String(), err)
	}

	stopped = true
	if err := n.Stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
	assertNothingLeft(t, root, before)
}

// A test binary killed outright never calls Stop. Its node's processes die
// with it (parent-death signal), but pods, mounts, the bridge and iptables
// chains would stay: the next Start removes them.
func TestANodeWhoseProcessWasKilledIsRemovedByTheNextStart(t *testing.T) {
	if os.Getenv("LOCALNODE_HELPER") == "1" {
		return
	}
	tarballs, pause, _ := testImages(t)
	before := snapshotState("")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	child := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperRunsANodeUntilKilled$", "-test.v")
	child.Env = append(os.Environ(), "LOCALNODE_HELPER=1")
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = child.Stdout
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	var seen bytes.Buffer
	buf := make([]byte, 4096)
	for !strings.Contains(seen.String(), "NODE-RUNNING ") {
		k, err := out.Read(buf)
		seen.Write(buf[:k])
		if err != nil {
			t.Fatalf("the child ended before its node ran: %v\n%s", err, seen.String())
		}
	}
	_ = child.Process.Kill()
	_ = child.Wait()
	deadRoot := strings.Fields(strings.SplitN(seen.String(), "NODE-RUNNING ", 2)[1])[0]
	if _, err := os.Stat(filepath.Join(stateDir, "state.json")); err != nil {
		t.Fatalf("the killed node left no state to recover from: %v", err)
	}

	var log bytes.Buffer
	n, err := Start(ctx, Options{SandboxImage: pause, Images: tarballs[:1], Log: &log})
	if err != nil {
		t.Fatalf("starting after a killed node: %v\n%s", err, log.String())
	}
	if !strings.Contains(log.String(), deadRoot) {
		t.Errorf("the start did not say it removed the dead node %s:\n%s", deadRoot, log.String())
	}
	if _, err := os.Stat(deadRoot); !os.IsNotExist(err) {
		t.Errorf("the dead node's directory %s is still there", deadRoot)
	}
	root := n.dirs.root
	if err := n.Stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
	assertNothingLeft(t, root, before)
}

// TestHelperRunsANodeUntilKilled is the child of the test above: it starts
// a node with a pod and waits to be killed.
func TestHelperRunsANodeUntilKilled(t *testing.T) {
	if os.Getenv("LOCALNODE_HELPER") != "1" {
		return
	}
	tarballs, pause, shell := testImages(t)
	ctx := context.Background()
	n, err := Start(ctx, Options{SandboxImage: pause, Images: tarballs})
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(n.Config)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "orphan", Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "sleeper", Image: shell, ImagePullPolicy: corev1.PullNever, Command: []string{"/bin/busybox", "sleep", "3600"},
		}}},
	}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := n.waitFor("the pod to run", 2*time.Minute, func() (bool, error) {
		p, err := cs.CoreV1().Pods("default").Get(ctx, "orphan", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, err
	}); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("NODE-RUNNING %s\n", n.dirs.root)
	select {}
}

// assertNothingLeft checks the machine for what a node leaves behind.
func assertNothingLeft(t *testing.T, root string, before state) {
	t.Helper()
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Errorf("the node's directory %s is still there (%v)", root, err)
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mounts), root) {
		t.Errorf("mounts under %s remain", root)
	}
	if err := exec.Command("ip", "link", "show", bridgeName).Run(); err == nil {
		t.Errorf("bridge %s remains", bridgeName)
	}
	for _, table := range []string{"filter", "nat"} {
		out, _ := exec.Command("iptables-save", "-t", table).Output()
		if strings.Contains(string(out), "KUBE-") || strings.Contains(string(out), "CNI-") {
			t.Errorf("iptables table %s keeps the node's chains:\n%s", table, out)
		}
	}
	after := snapshotState("")
	for k, v := range before.Sysctls {
		if after.Sysctls[k] != v {
			t.Errorf("sysctl %s is %s, was %s", k, after.Sysctls[k], v)
		}
	}
	for _, d := range sharedDirs {
		if !slices.Equal(after.Before[d], before.Before[d]) {
			t.Errorf("%s holds %q, held %q before the node", d, after.Before[d], before.Before[d])
		}
	}
	if dirs := kubepodsDirs(); len(dirs) > 0 {
		t.Errorf("kubelet cgroups remain: %v", dirs)
	}
	out, _ := exec.Command("pgrep", "-f", root).Output()
	if len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("processes of the node still run: %s", out)
	}
	if _, err := os.Stat(filepath.Join(stateDir, "state.json")); !os.IsNotExist(err) {
		t.Errorf("state file remains (%v)", err)
	}
}

package incluster

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/hooks"
	"github.com/lifeboat-io/lifeboat/internal/results"
)

// TestHooksRunInRealPods: the installed server, as its service account,
// runs a backup's hooks in running containers through pods/exec — a pre
// hook from annotations that writes a marker and prints to the backup's
// log, a post hook after it, and a spec hook with onError Fail that fails
// and leaves its pod out of a PartiallyFailed backup, named in the
// results, and a hook in a pod whose container never starts, which fails
// (Continue: the pod is kept) rather than pass silently — then a restore's init-container hook and post-restore exec
// hook in the restored pod, whose files show both ran, in order.
func TestHooksRunInRealPods(t *testing.T) {
	store := storeDir(t)
	lifeboat(t, "install", "--image", images["lifeboat"], "--image-pull-policy", "Never",
		"--use-filesystem", store, "--wait", "--timeout", "4m")
	t.Cleanup(func() { uninstallAndWait(t) })

	const ns = "hooked"
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	db := hookPod(ns, "db", nil, map[string]string{
		"pre.hook.backup.velero.io/command":   `["/bin/busybox","sh","-c","echo frozen >> /data/marker; echo pre-hook-ran"]`,
		"pre.hook.backup.velero.io/on-error":  "Fail",
		"post.hook.backup.velero.io/command":  `["/bin/busybox","sh","-c","echo thawed >> /data/marker"]`,
		"post.hook.restore.velero.io/command": `["/bin/busybox","sh","-c","cat /data/init > /data/post"]`,
	})
	create(t, db)
	create(t, hookPod(ns, "broken", map[string]string{"app": "broken"}, nil))
	// A pod whose container never starts: its hook cannot run.
	pending := hookPod(ns, "pending", nil, map[string]string{
		"pre.hook.backup.velero.io/command": `["/bin/busybox","true"]`, "pre.hook.backup.velero.io/on-error": "Continue"})
	pending.Spec.Containers[0].Image = "example.com/not-on-the-node:1"
	create(t, pending)
	waitPodRunning(t, ns, "db")
	waitPodRunning(t, ns, "broken")

	b := &v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: serverNamespace, Name: "hooked-1"},
		Spec: v1.BackupSpec{IncludedNamespaces: []string{ns}, Hooks: v1.BackupHooks{Resources: []v1.BackupResourceHookSpec{{
			Name: "must-pass", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "broken"}},
			PreHooks: []v1.BackupResourceHook{{Exec: &v1.ExecHook{Command: []string{"/bin/busybox", "false"}, OnError: v1.HookErrorModeFail}}},
		}}}}}
	create(t, b)
	waitFor(t, b, "the backup to end", func(b *v1.Backup) bool {
		return b.Status.Phase == v1.BackupPhasePartiallyFailed || b.Status.Phase == v1.BackupPhaseCompleted || b.Status.Phase == v1.BackupPhaseFailed
	})
	if b.Status.Phase != v1.BackupPhasePartiallyFailed || b.Status.HookStatus == nil ||
		b.Status.HookStatus.HooksAttempted != 4 || b.Status.HookStatus.HooksFailed != 2 {
		t.Fatalf("backup ended %s with hook status %+v; want PartiallyFailed, 4 attempted, 2 failed", b.Status.Phase, b.Status.HookStatus)
	}
	if got := execIn(t, ns, "db", "/bin/busybox", "cat", "/data/marker"); got != "frozen\nthawed\n" {
		t.Errorf("the db pod's marker after the backup: %q, want the pre hook's line then the post hook's", got)
	}
	dir := filepath.Join(store, "backups", "backups", b.Name)
	if log := gunzip(t, filepath.Join(dir, b.Name+"-logs.gz")); !strings.Contains(log, "pre-hook-ran") {
		t.Errorf("the backup's log lacks the pre hook's output:\n%s", log)
	}
	var res results.Results
	if err := json.Unmarshal([]byte(gunzip(t, filepath.Join(dir, b.Name+"-results.gz"))), &res); err != nil {
		t.Fatal(err)
	}
	errs := strings.Join(res.Errors.Namespaces[ns], "\n")
	for _, want := range []string{`pre hook "must-pass" (spec, #0) in container "web" of pod hooked/broken failed: command terminated with exit code 1`,
		"pod hooked/broken not backed up",
		`pre hook "<from-annotation>" (annotation) in container "web" of pod hooked/pending failed: pod is not running: its phase is "Pending"`} {
		if !strings.Contains(errs, want) {
			t.Errorf("the backup's errors lack %q:\n%s", want, errs)
		}
	}
	var list map[string][]string
	if err := json.Unmarshal([]byte(gunzip(t, filepath.Join(dir, b.Name+"-resource-list.json.gz"))), &list); err != nil {
		t.Fatal(err)
	}
	if pods := list["v1/Pod"]; !slices.Equal(pods, []string{ns + "/db", ns + "/pending"}) {
		t.Errorf("pods in the backup: %q; want db and pending (a failed Fail pre hook leaves its pod out, a Continue one does not)", pods)
	}
	if out := squeezeSpaces(lifeboat(t, "backup", "describe", b.Name)); !strings.Contains(out, "HooksAttempted: 4\nHooksFailed: 2\n") ||
		!strings.Contains(out, "must-pass:") {
		t.Errorf("backup describe does not show the hooks:\n%s", out)
	}

	seed := fmt.Sprintf(`{"name":"seed","image":%q,"imagePullPolicy":"Never","command":["/bin/busybox","sh","-c","echo init-ran > /data/init"],
		"volumeMounts":[{"name":"data","mountPath":"/data"}]}`, images["lifeboat-test-shell"])
	rs := &v1.Restore{ObjectMeta: metav1.ObjectMeta{Namespace: serverNamespace, Name: "hooked-1-copy"},
		Spec: v1.RestoreSpec{BackupName: b.Name, NamespaceMapping: map[string]string{ns: "hooked-copy"},
			Hooks: v1.RestoreHooks{Resources: []v1.RestoreResourceHookSpec{{Name: "seed", IncludedNamespaces: []string{"hooked-copy"},
				PostHooks: []v1.RestoreResourceHook{{Init: &v1.InitRestoreHook{InitContainers: []runtime.RawExtension{{Raw: []byte(seed)}}}}}}}}}}
	create(t, rs)
	waitFor(t, rs, "the restore to end", func(r *v1.Restore) bool {
		return r.Status.Phase == v1.RestorePhaseCompleted || r.Status.Phase == v1.RestorePhasePartiallyFailed || r.Status.Phase == v1.RestorePhaseFailed
	})
	if rs.Status.Phase != v1.RestorePhaseCompleted || rs.Status.HookStatus == nil || rs.Status.HookStatus.HooksAttempted != 1 || rs.Status.HookStatus.HooksFailed != 0 {
		t.Fatalf("restore ended %s (errors %d) with hook status %+v; want Completed, 1 attempted, 0 failed", rs.Status.Phase, rs.Status.Errors, rs.Status.HookStatus)
	}
	var restored corev1.Pod
	get(t, client.ObjectKey{Namespace: "hooked-copy", Name: "db"}, &restored)
	if len(restored.Spec.InitContainers) == 0 || restored.Spec.InitContainers[0].Name != "seed" {
		t.Errorf("the restored pod's init containers: %+v, want the hook's seed first", restored.Spec.InitContainers)
	}
	if got := execIn(t, "hooked-copy", "db", "/bin/busybox", "cat", "/data/post"); got != "init-ran\n" {
		t.Errorf("the restored pod's /data/post: %q; want what the init hook wrote, copied by the post-restore exec hook", got)
	}
	if out := squeezeSpaces(lifeboat(t, "restore", "describe", rs.Name)); !strings.Contains(out, "HooksAttempted: 1\nHooksFailed: 0\n") {
		t.Errorf("restore describe does not show the hooks:\n%s", out)
	}
	if logs := serverLog(t); strings.Contains(logs, "forbidden") {
		t.Errorf("the server was refused something it needs:\n%s", logs)
	}
}

// uninstallAndWait removes the server and waits for its namespace to be
// gone, so the next test's install does not meet it terminating.
func uninstallAndWait(t *testing.T) {
	lifeboat(t, "uninstall", "--force")
	err := wait.PollUntilContextTimeout(ctx(t), 250*time.Millisecond, 3*time.Minute, true, func(c context.Context) (bool, error) {
		err := admin.Get(c, client.ObjectKey{Name: serverNamespace}, &corev1.Namespace{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if err != nil {
		t.Errorf("namespace %s after uninstall: %v", serverNamespace, err)
	}
}

// hookPod runs the test shell with an emptyDir at /data, left alone.
func hookPod(namespace, name string, labels, annotations map[string]string) *corev1.Pod {
	p := shellPod(namespace)
	p.Name, p.Labels, p.Annotations = name, labels, annotations
	p.Spec.Containers[0].Command = []string{"/bin/busybox", "sleep", "3600"}
	return p
}

// execIn runs a command in a pod's first container as the admin, through
// the same exec path the server uses.
func execIn(t *testing.T, namespace, pod string, command ...string) string {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(node.Config)
	ex := hooks.NewRemoteExecutor(node.Config, cs.CoreV1().RESTClient())
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stdout, stderr, err := ex.Exec(c, namespace, pod, "web", command)
	if err != nil {
		t.Fatalf("exec %q in %s/%s: %v (%s)", command, namespace, pod, err, stderr)
	}
	return stdout
}

func gunzip(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func squeezeSpaces(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.Join(strings.Fields(l), " ")
	}
	return strings.Join(lines, "\n")
}

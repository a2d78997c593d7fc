package restore

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/hooks"
)

type recordingExec struct {
	mu    sync.Mutex
	calls []string
}

func (e *recordingExec) Exec(_ context.Context, ns, pod, container string, cmd []string) (string, string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls = append(e.calls, pod+"/"+container+": "+strings.Join(cmd, " "))
	if cmd[0] == "false" {
		return "", "", errors.New("command terminated with exit code 1")
	}
	return "", "", nil
}

// runPods plays the kubelet for the pods of ns: each pod found is marked
// Running with its containers running, until ctx ends.
func (w *world) runPods(c context.Context, ns string) {
	for c.Err() == nil {
		pods, err := w.cs.CoreV1().Pods(ns).List(c, metav1.ListOptions{})
		if err == nil {
			for _, p := range pods.Items {
				if p.Status.Phase == corev1.PodRunning {
					continue
				}
				p.Status.Phase = corev1.PodRunning
				for _, ctr := range p.Spec.Containers {
					p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: ctr.Name, Ready: true,
						State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}})
				}
				_, _ = w.cs.CoreV1().Pods(ns).UpdateStatus(c, &p, metav1.UpdateOptions{})
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestRestoreHooksRunInRestoredPods(t *testing.T) {
	old := hooks.PollInterval
	hooks.PollInterval = 20 * time.Millisecond
	t.Cleanup(func() { hooks.PollInterval = old })

	w := newWorld(t)
	src, dst := uniq("hooks"), uniq("hooks-copy")
	w.namespace(src)
	pod := func(name string, labels, annotations map[string]string) {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations},
			Spec: corev1.PodSpec{
				InitContainers: []corev1.Container{{Name: "app-init", Image: "busybox", Command: []string{"true"}}},
				Containers:     []corev1.Container{{Name: "app", Image: "busybox"}, {Name: "side", Image: "busybox"}}}}
		if _, err := w.cs.CoreV1().Pods(src).Create(ctx(t), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pod("annotated", nil, map[string]string{
		"init.hook.restore.velero.io/container-image": "busybox", "init.hook.restore.velero.io/container-name": "seed",
		"init.hook.restore.velero.io/command": `["sh","-c","echo seeded"]`,
		"post.hook.restore.velero.io/command": `["cat","/seeded"]`, "post.hook.restore.velero.io/container": "side",
	})
	pod("selected", map[string]string{"app": "db"}, nil)
	b := w.backupOf(src)

	runCtx, stop := context.WithCancel(context.Background())
	defer stop()
	go w.runPods(runCtx, dst)

	initContainer := runtime.RawExtension{Raw: []byte(`{"name":"warm","image":"busybox","command":["true"]}`)}
	spec := v1.RestoreSpec{BackupName: b.Name, NamespaceMapping: map[string]string{src: dst}, Hooks: v1.RestoreHooks{Resources: []v1.RestoreResourceHookSpec{{
		Name: "db", IncludedNamespaces: []string{dst}, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
		PostHooks: []v1.RestoreResourceHook{
			{Init: &v1.InitRestoreHook{InitContainers: []runtime.RawExtension{initContainer}}},
			{Exec: &v1.ExecRestoreHook{Command: []string{"migrate"}, WaitTimeout: metav1.Duration{Duration: time.Minute}}},
			{Exec: &v1.ExecRestoreHook{Container: "nope", Command: []string{"true"}}},
		},
	}}}}
	rs := &v1.Restore{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: uniq("rs")}, Spec: spec}
	if msgs := Validate(&rs.Spec); len(msgs) > 0 {
		t.Fatal(msgs)
	}
	e := NewEngine(newAccess(t), nil)
	ex := &recordingExec{}
	e.Hooks, e.HookWait = ex, 30*time.Second
	out := e.Run(ctx(t), rs, b, w.store, nil)

	if out.Phase != v1.RestorePhasePartiallyFailed || out.HooksAttempted != 3 || out.HooksFailed != 1 {
		t.Errorf("outcome %s, hooks attempted %d failed %d; want PartiallyFailed, 3, 1", out.Phase, out.HooksAttempted, out.HooksFailed)
	}
	slices.Sort(ex.calls)
	if want := []string{"annotated/side: cat /seeded", "selected/app: migrate"}; !reflect.DeepEqual(ex.calls, want) {
		t.Errorf("execs %q, want %q", ex.calls, want)
	}
	for name, want := range map[string][]string{"annotated": {"seed", "app-init"}, "selected": {"warm", "app-init"}} {
		p, err := w.cs.CoreV1().Pods(dst).Get(ctx(t), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range p.Spec.InitContainers {
			got = append(got, c.Name)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("pod %s init containers %q, want %q (hooks' first)", name, got, want)
		}
	}
	errs := w.results(rs).Errors.Namespaces[dst]
	if len(errs) != 1 || !strings.Contains(errs[0], `hook "db" (spec, #2) in container "nope" of pod `+dst+`/selected failed`) {
		t.Errorf("results errors %q", errs)
	}
}

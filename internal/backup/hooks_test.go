package backup

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/results"
)

// recordingExec stands in for pods/exec (the local API server has no
// kubelet): it records each call and fails "false".
type recordingExec struct {
	mu    sync.Mutex
	calls []string
}

func (e *recordingExec) Exec(_ context.Context, ns, pod, container string, cmd []string) (string, string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls = append(e.calls, pod+"/"+container+": "+strings.Join(cmd, " "))
	if cmd[0] == "false" {
		return "", "it broke", errors.New("command terminated with exit code 1")
	}
	return "said " + cmd[len(cmd)-1], "", nil
}

func runningPodIn(t *testing.T, cs kubernetes.Interface, ns, name string, labels, annotations map[string]string) {
	t.Helper()
	ctx := context.Background()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, Annotations: annotations},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox"}}}}
	created, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status.Phase = corev1.PodRunning
	if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestRunExecutesHooksAroundPods(t *testing.T) {
	f := newFixture(t, 0)
	cs := kubernetes.NewForConfigOrDie(cfg)
	runningPodIn(t, cs, f.ns, "annotated", nil, map[string]string{
		"pre.hook.backup.velero.io/command": `["echo","pre"]`, "post.hook.backup.velero.io/command": `["echo","post"]`,
	})
	runningPodIn(t, cs, f.ns, "frozen", map[string]string{"app": "db"}, nil)
	runningPodIn(t, cs, f.ns, "missing", map[string]string{"app": "other"}, nil)
	ex := &recordingExec{}
	f.engine.Hooks = ex

	b := f.backup("hooks")
	exec := func(container string, onError v1.HookErrorMode, cmd ...string) v1.BackupResourceHook {
		return v1.BackupResourceHook{Exec: &v1.ExecHook{Container: container, Command: cmd, OnError: onError}}
	}
	b.Spec.Hooks.Resources = []v1.BackupResourceHookSpec{
		{Name: "db", IncludedResources: []string{"pod"}, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			PreHooks:  []v1.BackupResourceHook{exec("", v1.HookErrorModeFail, "false"), exec("", "", "true")},
			PostHooks: []v1.BackupResourceHook{exec("", "", "thaw")}},
		{Name: "other", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}},
			PreHooks: []v1.BackupResourceHook{exec("nope", v1.HookErrorModeContinue, "true")}},
	}
	out := f.engine.Run(context.Background(), b, f.store, nil)

	want := []string{"annotated/app: echo pre", "annotated/app: echo post", "frozen/app: false"}
	if !reflect.DeepEqual(ex.calls, want) {
		t.Errorf("execs %q, want %q", ex.calls, want)
	}
	if out.Phase != v1.BackupPhasePartiallyFailed || out.HooksAttempted != 5 || out.HooksFailed != 2 {
		t.Errorf("outcome phase %s, hooks attempted %d failed %d; want PartiallyFailed, 5, 2", out.Phase, out.HooksAttempted, out.HooksFailed)
	}
	list, err := f.store.GetResourceList(context.Background(), "hooks")
	if err != nil {
		t.Fatal(err)
	}
	if pods := list["v1/Pod"]; !reflect.DeepEqual(pods, []string{f.ns + "/annotated", f.ns + "/missing"}) {
		t.Errorf("stored pods %q: the pod whose Fail pre hook failed must be left out, the others kept", pods)
	}
	var res results.Results
	if err := f.store.GetGzipJSON(context.Background(), f.store.BackupDir("hooks")+"hooks-results.gz", &res); err != nil {
		t.Fatal(err)
	}
	errs := res.Errors.Namespaces[f.ns]
	for _, w := range []string{`pre hook "db" (spec, #0) in container "app" of pod ` + f.ns + `/frozen failed: command terminated with exit code 1`,
		`pod ` + f.ns + `/frozen not backed up`,
		`pre hook "other" (spec, #0) in container "nope" of pod ` + f.ns + `/missing failed: the pod has no container "nope"`} {
		if !slices.ContainsFunc(errs, func(e string) bool { return strings.Contains(e, w) }) {
			t.Errorf("results errors %q lack %q", errs, w)
		}
	}
	stored := &v1.Backup{}
	ApplyOutcome(stored, out)
	if stored.Status.HookStatus == nil || stored.Status.HookStatus.HooksAttempted != 5 {
		t.Errorf("hook status %+v", stored.Status.HookStatus)
	}
}

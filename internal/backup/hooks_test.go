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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/results"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
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

// eventLog is shared by the hooks and the item actions of the order test.
type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (l *eventLog) add(e string) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

func (l *eventLog) Exec(_ context.Context, _, pod, _ string, cmd []string) (string, string, error) {
	l.add("hook " + pod + ": " + strings.Join(cmd, " "))
	return "", "", nil
}

// recordItems records the pods and secrets it sees; a pod names its
// "<pod>-extra" secret as an additional item, stored with it (secrets are
// listed after pods, so only as additional items).
type recordItems struct{ log *eventLog }

func (recordItems) AppliesTo() (api.ResourceSelector, error) {
	return api.ResourceSelector{IncludedResources: []string{"pods", "secrets"}}, nil
}

func (a recordItems) Execute(item runtime.Unstructured, _ *v1.Backup) (runtime.Unstructured, []api.ResourceIdentifier, error) {
	u := item.(*unstructured.Unstructured)
	a.log.add("store " + strings.ToLower(u.GetKind()) + " " + u.GetName())
	if u.GetKind() != "Pod" {
		return u, nil, nil
	}
	return u, []api.ResourceIdentifier{{GroupResource: schema.GroupResource{Resource: "secrets"}, Namespace: u.GetNamespace(), Name: u.GetName() + "-extra"}}, nil
}

// TestHooksRunInVeleroOrder: a pod's pre hook runs before any item action
// sees it, its post hook after it and the items stored with it (its
// claims too: a claim it mounts that needs no native snapshot after the
// archive does not hold its post hook back).
func TestHooksRunInVeleroOrder(t *testing.T) {
	f := newFixture(t, 0)
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	hooked := map[string]string{"pre.hook.backup.velero.io/command": `["freeze"]`, "post.hook.backup.velero.io/command": `["thaw"]`}
	for _, name := range []string{"a-claims", "b-plain"} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name, Annotations: hooked},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox"}}}}
		if name == "a-claims" {
			p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
		}
		created, err := cs.CoreV1().Pods(f.ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Status.Phase = corev1.PodRunning
		if _, err := cs.CoreV1().Pods(f.ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CoreV1().Secrets(f.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-extra"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	log := &eventLog{}
	f.engine.Hooks = log
	f.engine.Plugins = fakePlugins{v1: map[string]api.BackupItemAction{"example.io/record": recordItems{log: log}}}
	b := f.backup("order")
	out := f.engine.Run(ctx, b, f.store, nil)
	if out.Phase != v1.BackupPhaseCompleted || out.HooksAttempted != 4 {
		t.Fatalf("outcome %+v", out)
	}
	want := []string{
		"hook a-claims: freeze", "store pod a-claims", "store secret a-claims-extra", "hook a-claims: thaw",
		"hook b-plain: freeze", "store pod b-plain", "store secret b-plain-extra", "hook b-plain: thaw",
	}
	if !reflect.DeepEqual(log.events, want) {
		t.Errorf("order of events:\n got %q\nwant %q", log.events, want)
	}
}

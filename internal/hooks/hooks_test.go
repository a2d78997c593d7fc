package hooks

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// resolver knows "pod" and "po" as pods, as discovery does.
type resolver struct{}

func (resolver) ResolveResource(name string) (schema.GroupResource, bool, error) {
	switch name {
	case "pods", "pod", "po", "Pod":
		return schema.GroupResource{Resource: "pods"}, true, nil
	case "deployments", "deploy":
		return schema.GroupResource{Group: "apps", Resource: "deployments"}, true, nil
	}
	return schema.GroupResource{}, false, errors.New("unknown")
}

func execHook(container string, onError v1.HookErrorMode, cmd ...string) v1.BackupResourceHook {
	return v1.BackupResourceHook{Exec: &v1.ExecHook{Container: container, Command: cmd, OnError: onError, Timeout: metav1.Duration{Duration: 10 * time.Second}}}
}

func TestBackupHooksForPod(t *testing.T) {
	specs := []v1.BackupResourceHookSpec{
		{Name: "db", IncludedNamespaces: []string{"shop"}, IncludedResources: []string{"po"},
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			PreHooks:      []v1.BackupResourceHook{execHook("db", v1.HookErrorModeFail, "fsfreeze", "--freeze", "/data"), execHook("", "", "sync")},
			PostHooks:     []v1.BackupResourceHook{execHook("db", "", "fsfreeze", "--unfreeze", "/data")}},
		{Name: "not-pods", IncludedResources: []string{"deploy"}, PreHooks: []v1.BackupResourceHook{execHook("", "", "never")}},
		{Name: "excluded", ExcludedResources: []string{"pod"}, PreHooks: []v1.BackupResourceHook{execHook("", "", "never")}},
		{Name: "everywhere-but-kube", ExcludedNamespaces: []string{"kube-*"}, PostHooks: []v1.BackupResourceHook{execHook("", v1.HookErrorModeContinue, "echo", "done")}},
	}
	rules, err := NewBackupRules(specs, resolver{})
	if err != nil {
		t.Fatal(err)
	}
	db := PodMeta{Namespace: "shop", Name: "db-0", Labels: map[string]string{"app": "db"}}
	annotated := PodMeta{Namespace: "shop", Name: "web", Labels: map[string]string{"app": "db"}, Annotations: map[string]string{
		"pre.hook.backup.velero.io/container": "web", "pre.hook.backup.velero.io/command": `["/bin/sh","-c","echo hi"]`,
		"pre.hook.backup.velero.io/on-error": "Fail", "pre.hook.backup.velero.io/timeout": "2m",
	}}
	legacy := PodMeta{Namespace: "kube-system", Name: "old", Annotations: map[string]string{
		"hook.backup.velero.io/command": "/bin/true", "hook.backup.velero.io/on-error": "Sometimes", "hook.backup.velero.io/timeout": "soon",
		"post.hook.backup.velero.io/command": "/bin/false",
	}}
	tests := []struct {
		name     string
		pod      PodMeta
		phase    Phase
		want     []Exec
		warnings int
	}{
		{"spec pre hooks in order", db, PhasePre, []Exec{
			{Name: "db", Source: SourceSpec, Phase: PhasePre, Index: 0, Container: "db", Command: []string{"fsfreeze", "--freeze", "/data"}, OnError: v1.HookErrorModeFail, Timeout: 10 * time.Second},
			{Name: "db", Source: SourceSpec, Phase: PhasePre, Index: 1, Command: []string{"sync"}, Timeout: 10 * time.Second},
		}, 0},
		{"spec post hooks of every matching rule", db, PhasePost, []Exec{
			{Name: "db", Source: SourceSpec, Phase: PhasePost, Container: "db", Command: []string{"fsfreeze", "--unfreeze", "/data"}, Timeout: 10 * time.Second},
			{Name: "everywhere-but-kube", Source: SourceSpec, Phase: PhasePost, Command: []string{"echo", "done"}, OnError: v1.HookErrorModeContinue, Timeout: 10 * time.Second},
		}, 0},
		{"annotation replaces the spec for its phase", annotated, PhasePre, []Exec{
			{Name: FromAnnotation, Source: SourceAnnotation, Phase: PhasePre, Container: "web", Command: []string{"/bin/sh", "-c", "echo hi"}, OnError: v1.HookErrorModeFail, Timeout: 2 * time.Minute},
		}, 0},
		{"spec still applies to the other phase", annotated, PhasePost, []Exec{
			{Name: "db", Source: SourceSpec, Phase: PhasePost, Container: "db", Command: []string{"fsfreeze", "--unfreeze", "/data"}, Timeout: 10 * time.Second},
			{Name: "everywhere-but-kube", Source: SourceSpec, Phase: PhasePost, Command: []string{"echo", "done"}, OnError: v1.HookErrorModeContinue, Timeout: 10 * time.Second},
		}, 0},
		{"legacy annotations are a pre hook; bad values ignored with a warning", legacy, PhasePre, []Exec{
			{Name: FromAnnotation, Source: SourceAnnotation, Phase: PhasePre, Command: []string{"/bin/true"}},
		}, 1},
		{"a command that is not JSON is one word", legacy, PhasePost, []Exec{
			{Name: FromAnnotation, Source: SourceAnnotation, Phase: PhasePost, Command: []string{"/bin/false"}},
		}, 0},
		{"no label match, no hooks", PodMeta{Namespace: "shop", Name: "x"}, PhasePre, nil, 0},
		{"excluded namespace pattern", PodMeta{Namespace: "kube-system", Name: "x"}, PhasePost, nil, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, warnings := rules.ForPod(tc.pod, tc.phase)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("hooks:\n got %+v\nwant %+v", got, tc.want)
			}
			if len(warnings) != tc.warnings {
				t.Errorf("warnings %q, want %d", warnings, tc.warnings)
			}
		})
	}
}

func TestValidateBackupHooks(t *testing.T) {
	msgs := ValidateBackupHooks([]v1.BackupResourceHookSpec{{Name: "x",
		LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Sometimes"}}},
		PreHooks:      []v1.BackupResourceHook{{Exec: &v1.ExecHook{}}}}})
	if len(msgs) != 2 || !strings.Contains(msgs[0], "spec.hooks.resources[0].labelSelector") || !strings.Contains(msgs[1], "spec.hooks.resources[0].pre[0].exec.command") {
		t.Errorf("messages %q", msgs)
	}
}

// fakeExec records calls and fails commands whose first word is "false".
type fakeExec struct {
	mu    sync.Mutex
	calls []string
}

func (f *fakeExec) Exec(ctx context.Context, ns, pod, container string, cmd []string) (string, string, error) {
	f.mu.Lock()
	f.calls = append(f.calls, fmt.Sprintf("%s/%s/%s: %s", ns, pod, container, strings.Join(cmd, " ")))
	f.mu.Unlock()
	switch cmd[0] {
	case "false":
		return "", "boom", errors.New("command terminated with exit code 1")
	case "sleep":
		<-ctx.Done()
		return "", "", context.Cause(ctx)
	}
	return "ok", "", nil
}

func runningPod(containers ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c})
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: c, Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}})
	}
	return p
}

func TestRunBackupHooks(t *testing.T) {
	h := func(container string, onError v1.HookErrorMode, cmd ...string) Exec {
		return Exec{Name: "h", Source: SourceSpec, Phase: PhasePre, Container: container, Command: cmd, OnError: onError}
	}
	tests := []struct {
		name        string
		pod         *corev1.Pod
		hooks       []Exec
		wantCalls   []string
		wantFailed  int
		wantStopped bool
		wantErr     string
	}{
		{"all run, first container by default", runningPod("a", "b"), []Exec{h("", "", "true"), h("b", "", "true")},
			[]string{"ns/p/a: true", "ns/p/b: true"}, 0, false, ""},
		{"Continue failure goes on", runningPod("a"), []Exec{h("", v1.HookErrorModeContinue, "false"), h("", "", "true")},
			[]string{"ns/p/a: false", "ns/p/a: true"}, 1, false, "exit code 1"},
		{"unset onError goes on, as Velero's handler does", runningPod("a"), []Exec{h("", "", "false"), h("", "", "true")},
			[]string{"ns/p/a: false", "ns/p/a: true"}, 1, false, "exit code 1"},
		{"Fail failure stops the rest", runningPod("a"), []Exec{h("", v1.HookErrorModeFail, "false"), h("", "", "true")},
			[]string{"ns/p/a: false"}, 1, true, "exit code 1"},
		{"missing container fails without an exec", runningPod("a"), []Exec{h("nope", v1.HookErrorModeFail, "true")},
			nil, 1, true, `the pod has no container "nope"`},
		{"a pod that is not running fails the hook", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}}}, Status: corev1.PodStatus{Phase: corev1.PodSucceeded}},
			[]Exec{h("", "", "true")}, nil, 1, false, `pod is not running: its phase is "Succeeded"`},
		{"timeout", runningPod("a"), []Exec{{Name: "h", Command: []string{"sleep"}, Timeout: 50 * time.Millisecond}},
			[]string{"ns/p/a: sleep"}, 1, false, "timed out after 50ms"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ex := &fakeExec{}
			res, stopped := RunBackupHooks(context.Background(), ex, tc.pod, tc.hooks)
			if !reflect.DeepEqual(ex.calls, tc.wantCalls) {
				t.Errorf("calls %q, want %q", ex.calls, tc.wantCalls)
			}
			if len(res) != len(tc.hooks) {
				t.Fatalf("%d results for %d hooks", len(res), len(tc.hooks))
			}
			failed := 0
			for _, r := range res {
				if r.Failed() {
					failed++
					if !strings.Contains(r.Error(), tc.wantErr) || !strings.Contains(r.Error(), "pod ns/p") || !strings.Contains(r.Error(), `hook "h"`) {
						t.Errorf("error %q names no pod, hook or cause (%q)", r.Error(), tc.wantErr)
					}
				}
			}
			if failed != tc.wantFailed || stopped != tc.wantStopped {
				t.Errorf("failed %d stopped %v, want %d %v", failed, stopped, tc.wantFailed, tc.wantStopped)
			}
		})
	}
}

func TestRestoreHooks(t *testing.T) {
	initContainer := runtime.RawExtension{Raw: []byte(`{"name":"seed","image":"busybox","command":["sh","-c","echo seeded > /data/x"]}`)}
	rules, err := NewRestoreRules([]v1.RestoreResourceHookSpec{
		{Name: "seed", IncludedNamespaces: []string{"copy"}, IncludedResources: []string{"deployments"}, // ignored: pods only, as Velero
			PostHooks: []v1.RestoreResourceHook{
				{Init: &v1.InitRestoreHook{InitContainers: []runtime.RawExtension{initContainer}}},
				{Exec: &v1.ExecRestoreHook{Command: []string{"check"}, WaitTimeout: metav1.Duration{Duration: time.Minute}}},
				{Exec: &v1.ExecRestoreHook{Container: "side", Command: []string{"warm"}, OnError: v1.HookErrorModeFail, WaitForReady: new(true)}},
			}},
		{Name: "elsewhere", IncludedNamespaces: []string{"other"}, PostHooks: []v1.RestoreResourceHook{{Exec: &v1.ExecRestoreHook{Command: []string{"never"}}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	pod := PodMeta{Namespace: "copy", Name: "web"}
	inits, err := rules.InitContainers(pod)
	if err != nil || len(inits) != 1 || inits[0].Name != "seed" || inits[0].Image != "busybox" {
		t.Errorf("init containers from the spec: %+v, %v", inits, err)
	}
	got, _ := rules.ExecHooks(pod, []string{"web", "side"})
	want := []Exec{
		{Name: "seed", Source: SourceSpec, Index: 1, Container: "web", Command: []string{"check"}, WaitTimeout: time.Minute},
		{Name: "seed", Source: SourceSpec, Index: 2, Container: "side", Command: []string{"warm"}, OnError: v1.HookErrorModeFail, WaitForReady: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("exec hooks:\n got %+v\nwant %+v", got, want)
	}

	annotated := PodMeta{Namespace: "copy", Name: "web", Annotations: map[string]string{
		"init.hook.restore.velero.io/container-image": "busybox", "init.hook.restore.velero.io/command": `["touch","/x"]`,
		"post.hook.restore.velero.io/command": `["cat","/x"]`, "post.hook.restore.velero.io/on-error": "Fail",
		"post.hook.restore.velero.io/exec-timeout": "5s", "post.hook.restore.velero.io/wait-timeout": "1m",
		"post.hook.restore.velero.io/wait-for-ready": "yes please",
	}}
	inits, err = rules.InitContainers(annotated)
	if err != nil || len(inits) != 1 || !strings.HasPrefix(inits[0].Name, "velero-restore-init-") || !reflect.DeepEqual(inits[0].Command, []string{"touch", "/x"}) {
		t.Errorf("init containers from annotations: %+v, %v", inits, err)
	}
	got, warnings := rules.ExecHooks(annotated, []string{"web"})
	want = []Exec{{Name: FromAnnotation, Source: SourceAnnotation, Container: "web", Command: []string{"cat", "/x"}, OnError: v1.HookErrorModeFail,
		Timeout: 5 * time.Second, WaitTimeout: time.Minute}}
	if !reflect.DeepEqual(got, want) || len(warnings) != 1 {
		t.Errorf("exec hooks from annotations:\n got %+v (warnings %q)\nwant %+v", got, warnings, want)
	}

	bad, _ := NewRestoreRules([]v1.RestoreResourceHookSpec{{Name: "bad", PostHooks: []v1.RestoreResourceHook{
		{Init: &v1.InitRestoreHook{InitContainers: []runtime.RawExtension{{Raw: []byte(`{"name":"x"}`)}}}}}}})
	if _, err := bad.InitContainers(pod); err == nil || !strings.Contains(err.Error(), "needs a name, an image and a command") {
		t.Errorf("an init container without image and command: %v", err)
	}

	existing := []any{map[string]any{"name": "restore-wait"}, map[string]any{"name": "app-init"}}
	merged := InsertInitContainers(existing, []any{map[string]any{"name": "hook"}})
	var names []string
	for _, c := range merged {
		names = append(names, c.(map[string]any)["name"].(string))
	}
	if !reflect.DeepEqual(names, []string{"restore-wait", "hook", "app-init"}) {
		t.Errorf("init container order %q", names)
	}
}

func TestRunRestoreHooksWaitsForContainers(t *testing.T) {
	old := PollInterval
	PollInterval = 10 * time.Millisecond
	t.Cleanup(func() { PollInterval = old })

	var polls int
	get := func(context.Context, string, string) (*corev1.Pod, error) {
		polls++
		p := runningPod("web", "side")
		if polls < 3 {
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{}}
		}
		if polls < 5 {
			p.Status.ContainerStatuses[1].Ready = false
		}
		return p, nil
	}
	hooks := []Exec{
		{Name: "a", Container: "web", Command: []string{"true"}},
		{Name: "b", Container: "side", Command: []string{"true"}, WaitForReady: true},
		{Name: "c", Container: "gone", Command: []string{"true"}},
	}
	ex := &fakeExec{}
	res := RunRestoreHooks(context.Background(), ex, get, "ns", "p", hooks, time.Minute)
	if !reflect.DeepEqual(ex.calls, []string{"ns/p/web: true", "ns/p/side: true"}) {
		t.Errorf("calls %q", ex.calls)
	}
	if res[0].Err != nil || res[1].Err != nil || res[2].Err == nil || !strings.Contains(res[2].Error(), `no container "gone"`) {
		t.Errorf("results %+v", res)
	}
	if polls < 5 {
		t.Errorf("ran after %d polls, before the side container was ready", polls)
	}

	// A Fail failure ends the pod's hooks; the wait timeout of a container
	// that never comes up fails its hooks, naming why.
	ex = &fakeExec{}
	res = RunRestoreHooks(context.Background(), ex, func(context.Context, string, string) (*corev1.Pod, error) { return runningPod("web"), nil },
		"ns", "p", []Exec{{Name: "x", Container: "web", Command: []string{"false"}, OnError: v1.HookErrorModeFail}, {Name: "y", Container: "web", Command: []string{"true"}}}, time.Minute)
	if len(ex.calls) != 1 || res[1].Err == nil || !strings.Contains(res[1].Err.Error(), "onError Fail") {
		t.Errorf("after a Fail failure: calls %q results %+v", ex.calls, res)
	}
	pending := runningPod("web")
	pending.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{}}
	res = RunRestoreHooks(context.Background(), ex, func(context.Context, string, string) (*corev1.Pod, error) { return pending, nil },
		"ns", "p", []Exec{{Name: "z", Container: "web", Command: []string{"true"}, WaitTimeout: 50 * time.Millisecond}}, time.Minute)
	if res[0].Err == nil || !strings.Contains(res[0].Err.Error(), "was not running within 50ms") {
		t.Errorf("a container that never runs: %+v", res)
	}
}

package hooks

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// RestoreRules are a restore's spec.hooks.resources. Velero applies them
// to pods only, whatever their includedResources say, and matches the
// namespace a pod is restored into.
type RestoreRules struct {
	rules []restoreRule
}

type restoreRule struct {
	name  string
	sel   podSelector
	hooks []v1.RestoreResourceHook
}

// NewRestoreRules resolves the spec's resource hooks.
func NewRestoreRules(specs []v1.RestoreResourceHookSpec) (*RestoreRules, error) {
	out := &RestoreRules{}
	for i, s := range specs {
		sel, err := newPodSelector(fmt.Sprintf("spec.hooks.resources[%d]", i), s.IncludedNamespaces, s.ExcludedNamespaces, s.LabelSelector)
		if err != nil {
			return nil, err
		}
		out.rules = append(out.rules, restoreRule{name: s.Name, sel: sel, hooks: s.PostHooks})
	}
	return out, nil
}

// ValidateRestoreHooks returns a message for each resource hook the server
// could not apply, naming the field and the fix.
func ValidateRestoreHooks(specs []v1.RestoreResourceHookSpec) []string {
	var msgs []string
	for i, s := range specs {
		field := fmt.Sprintf("spec.hooks.resources[%d]", i)
		if _, err := newPodSelector(field, s.IncludedNamespaces, s.ExcludedNamespaces, s.LabelSelector); err != nil {
			msgs = append(msgs, err.Error()+"; fix the selector")
		}
	}
	return msgs
}

// waitInitContainer is the init container Velero's file-system restore
// puts first; hooks' init containers go after it so restored data is
// there when they run.
const waitInitContainer = "restore-wait"

// InitContainers returns the init containers to put first in a restored
// pod, from its init hook annotations or else from the spec's init hooks
// that select it. pod is the
// stored pod in its target namespace. A spec init container without a
// name, image or command is an error, as in Velero, and the pod is then
// not restored.
func (r *RestoreRules) InitContainers(pod PodMeta) (containers []corev1.Container, err error) {
	a := pod.Annotations
	if image := a[initImageKey]; image != "" {
		name := a[initNameKey]
		if name == "" {
			name = "velero-restore-init-" + randomSuffix()
		}
		return []corev1.Container{{Name: name, Image: image, Command: parseCommand(a[initCommandKey])}}, nil
	}
	if r == nil {
		return nil, nil
	}
	for _, rule := range r.rules {
		if !rule.sel.applies(pod.Namespace, pod.Labels) {
			continue
		}
		for i, h := range rule.hooks {
			if h.Init == nil {
				continue
			}
			for j, raw := range h.Init.InitContainers {
				var c corev1.Container
				if err := json.Unmarshal(raw.Raw, &c); err != nil {
					return nil, fmt.Errorf("restore hook %q: postHooks[%d].init.initContainers[%d] is not a container: %w", rule.name, i, j, err)
				}
				if c.Name == "" || c.Image == "" || len(c.Command) == 0 {
					return nil, fmt.Errorf("restore hook %q: postHooks[%d].init.initContainers[%d] needs a name, an image and a command", rule.name, i, j)
				}
				containers = append(containers, c)
			}
		}
	}
	return containers, nil
}

// InsertInitContainers puts hook containers first among existing init
// containers, after Velero's restore-wait container when it leads.
func InsertInitContainers(existing []any, hookContainers []any) []any {
	out := make([]any, 0, len(existing)+len(hookContainers))
	if len(existing) > 0 {
		if m, ok := existing[0].(map[string]any); ok && m["name"] == waitInitContainer {
			out = append(out, existing[0])
			existing = existing[1:]
		}
	}
	out = append(out, hookContainers...)
	return append(out, existing...)
}

func randomSuffix() string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		return "deadfeed"
	}
	return hex.EncodeToString(b)
}

// ExecHooks returns the exec hooks for a restored pod, in the order they
// run per container, and warnings for annotations it could not read: the
// pod's post-restore annotations when it has a command there, else every
// exec hook of the spec that selects it. A hook without a container runs
// in the pod's first.
func (r *RestoreRules) ExecHooks(pod PodMeta, containers []string) (hooks []Exec, warnings []string) {
	first := ""
	if len(containers) > 0 {
		first = containers[0]
	}
	a := pod.Annotations
	if cmd := a[restoreCommandKey]; cmd != "" {
		name := pod.Namespace + "/" + pod.Name
		h := Exec{
			Name: FromAnnotation, Source: SourceAnnotation,
			Container:   a[restoreContainerKey],
			Command:     parseCommand(cmd),
			OnError:     onErrorMode(a[restoreOnErrorKey]),
			Timeout:     parseDuration(a, restoreExecTimeoutKey, name, &warnings),
			WaitTimeout: parseDuration(a, restoreWaitTimeoutKey, name, &warnings),
		}
		if s := a[restoreWaitForReadyKey]; s != "" {
			ready, err := strconv.ParseBool(s)
			if err != nil {
				warnings = append(warnings, fmt.Sprintf("pod %s: annotation %s=%q is not true or false; false is used", name, restoreWaitForReadyKey, s))
			}
			h.WaitForReady = ready
		}
		if h.Container == "" {
			h.Container = first
		}
		return []Exec{h}, warnings
	}
	if r == nil {
		return nil, warnings
	}
	for _, rule := range r.rules {
		if !rule.sel.applies(pod.Namespace, pod.Labels) {
			continue
		}
		for i, rh := range rule.hooks {
			if rh.Exec == nil {
				continue
			}
			e := rh.Exec
			h := Exec{
				Name: rule.name, Source: SourceSpec, Index: i,
				Container: e.Container, Command: e.Command, OnError: e.OnError,
				Timeout: e.ExecTimeout.Duration, WaitTimeout: e.WaitTimeout.Duration,
				WaitForReady: e.WaitForReady != nil && *e.WaitForReady,
			}
			if h.Container == "" {
				h.Container = first
			}
			hooks = append(hooks, h)
		}
	}
	return hooks, warnings
}

// PodGetter reads a restored pod's current state.
type PodGetter func(ctx context.Context, namespace, name string) (*corev1.Pod, error)

// PollInterval is how often a restore looks at a pod whose hooks wait
// for their containers.
var PollInterval = time.Second

// RunRestoreHooks runs a restored pod's exec hooks as Velero does: each
// container's hooks, in order, once that container is running (ready, if
// any of its hooks waits for ready), each hook only if its wait timeout
// has not passed. A failure with onError Fail ends the pod's hooks; every
// hook not run by the end (wait timeout, the pod finished or deleted, a
// missing container, ctx done) is a failure naming why. maxWait bounds the
// wait of hooks without a wait timeout.
func RunRestoreHooks(ctx context.Context, ex Executor, get PodGetter, namespace, name string, hooks []Exec, maxWait time.Duration) []Result {
	podName := namespace + "/" + name
	results := make([]Result, len(hooks))
	done := make([]bool, len(hooks))
	for i, h := range hooks {
		results[i] = Result{Hook: h, Pod: podName, Container: h.Container}
	}
	fail := func(i int, err error) {
		results[i].Ran, results[i].Err, done[i] = true, err, true
	}
	start := time.Now()
	wait := longestWait(hooks, maxWait)
	var stop error
	for stop == nil {
		pod, err := get(ctx, namespace, name)
		switch {
		case err != nil && ctx.Err() != nil:
			stop = fmt.Errorf("the restore stopped waiting: %w", context.Cause(ctx))
		case err != nil:
			// Transient read errors are retried until the wait ends.
		case pod.DeletionTimestamp != nil:
			stop = errors.New("the pod was deleted before the hook ran")
		case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
			stop = fmt.Errorf("the pod entered phase %s before the hook ran", pod.Status.Phase)
		default:
			if runReady(ctx, ex, pod, hooks, results, done, start, fail) {
				stop = errors.New("an earlier hook of the pod failed with onError Fail")
			}
		}
		if allDone(done) {
			break
		}
		if stop == nil && time.Since(start) >= wait {
			stop = fmt.Errorf("its container was not %s within %s", upWord(hooks), wait)
		}
		if stop != nil {
			break
		}
		select {
		case <-ctx.Done():
			stop = fmt.Errorf("the restore stopped waiting: %w", context.Cause(ctx))
		case <-time.After(PollInterval):
		}
	}
	for i := range hooks {
		if !done[i] {
			results[i].Err = fmt.Errorf("not run: %w", stop)
		}
	}
	return results
}

// runReady runs, for each container that is up, its hooks not run yet.
// It reports whether a failure with onError Fail ended the pod's hooks.
func runReady(ctx context.Context, ex Executor, pod *corev1.Pod, hooks []Exec, results []Result, done []bool, start time.Time, fail func(int, error)) bool {
	containers := map[string]bool{}
	for _, c := range pod.Spec.Containers {
		containers[c.Name] = true
	}
	for i, h := range hooks {
		if done[i] {
			continue
		}
		if !containers[h.Container] {
			fail(i, fmt.Errorf("the pod has no container %q", h.Container))
			continue
		}
		if !containerUp(pod, h.Container, waitsForReady(hooks, h.Container)) {
			continue
		}
		if h.WaitTimeout > 0 && time.Since(start) > h.WaitTimeout {
			fail(i, fmt.Errorf("its wait timeout (%s) passed before the container was up", h.WaitTimeout))
		} else {
			results[i].Ran, done[i] = true, true
			results[i].Stdout, results[i].Stderr, results[i].Err = run(ctx, ex, pod.Namespace, pod.Name, h.Container, h)
		}
		if results[i].Err != nil && h.stopsOthers() {
			return true
		}
	}
	return false
}

// waitsForReady: a container's hooks all wait for ready if one does.
func waitsForReady(hooks []Exec, container string) bool {
	for _, h := range hooks {
		if h.Container == container && h.WaitForReady {
			return true
		}
	}
	return false
}

func containerUp(pod *corev1.Pod, container string, ready bool) bool {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == container {
			if ready {
				return cs.Ready
			}
			return cs.State.Running != nil
		}
	}
	return false
}

// longestWait is how long a pod's hooks are waited for: the longest wait
// timeout, or maxWait when any hook has none (Velero waits as long as the
// restore does).
func longestWait(hooks []Exec, maxWait time.Duration) time.Duration {
	var longest time.Duration
	for _, h := range hooks {
		if h.WaitTimeout <= 0 {
			return maxWait
		}
		longest = max(longest, h.WaitTimeout)
	}
	return min(longest, maxWait)
}

func upWord(hooks []Exec) string {
	for _, h := range hooks {
		if h.WaitForReady {
			return "ready"
		}
	}
	return "running"
}

func allDone(done []bool) bool {
	for _, d := range done {
		if !d {
			return false
		}
	}
	return true
}

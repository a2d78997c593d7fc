package restore

// Restore hooks, as Velero runs them: init containers from a pod's init
// hook annotations or the spec's init hooks are put first in the pod
// before it is created; exec hooks from its post-restore annotations or
// the spec run in each created pod once its container is up, while the
// restore goes on, and the restore ends only when they have.

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/lifeboat-io/lifeboat/internal/cluster"
	"github.com/lifeboat-io/lifeboat/internal/hooks"
)

func podMeta(obj *unstructured.Unstructured) hooks.PodMeta {
	return hooks.PodMeta{Namespace: obj.GetNamespace(), Name: obj.GetName(), Labels: obj.GetLabels(), Annotations: obj.GetAnnotations()}
}

// addInitHooks puts the restore hooks' init containers first in a pod
// about to be created (in its target namespace).
func (r *run) addInitHooks(obj *unstructured.Unstructured) error {
	containers, err := r.hookRules.InitContainers(podMeta(obj))
	if err != nil || len(containers) == 0 {
		return err
	}
	added := make([]any, 0, len(containers))
	names := make([]string, 0, len(containers))
	for i := range containers {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&containers[i])
		if err != nil {
			return fmt.Errorf("init hook container %q: %w", containers[i].Name, err)
		}
		added = append(added, m)
		names = append(names, containers[i].Name)
	}
	existing, _, err := unstructured.NestedSlice(obj.Object, "spec", "initContainers")
	if err != nil {
		return fmt.Errorf("reading the pod's init containers: %w", err)
	}
	if err := unstructured.SetNestedSlice(obj.Object, hooks.InsertInitContainers(existing, added), "spec", "initContainers"); err != nil {
		return err
	}
	r.log.Info("init containers added by restore hooks", "namespace", obj.GetNamespace(), "pod", obj.GetName(), "containers", names)
	return nil
}

// startExecHooks starts waiting to run a created pod's exec hooks.
func (r *run) startExecHooks(pod *unstructured.Unstructured) {
	var containers []string
	list, _, _ := unstructured.NestedSlice(pod.Object, "spec", "containers")
	for _, c := range list {
		if m, ok := c.(map[string]any); ok {
			name, _ := m["name"].(string)
			containers = append(containers, name)
		}
	}
	meta := podMeta(pod)
	execs, warnings := r.hookRules.ExecHooks(meta, containers)
	for _, w := range warnings {
		r.results.Warning(meta.Namespace, w)
		r.log.Warn("hook annotation ignored", "namespace", meta.Namespace, "pod", meta.Name, "warning", w)
	}
	if len(execs) == 0 {
		return
	}
	r.hookWG.Go(func() {
		var results []hooks.Result
		if r.e.Hooks == nil {
			for _, h := range execs {
				results = append(results, hooks.Result{Hook: h, Pod: meta.Namespace + "/" + meta.Name, Container: h.Container, Ran: true,
					Err: errors.New("this server cannot exec into pods")})
			}
		} else {
			results = hooks.RunRestoreHooks(r.hookCtx, r.e.Hooks, r.getPod, meta.Namespace, meta.Name, execs, r.e.hookWait())
		}
		r.recordHooks(results)
	})
}

func (r *run) getPod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	var pod *corev1.Pod
	err := cluster.Call(ctx, func(ctx context.Context) (err error) {
		pod, err = r.cs.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		return err
	})
	return pod, err
}

// recordHooks counts a pod's hooks in the hook status and records each
// failure as an error naming the pod and the hook (the restore ends
// PartiallyFailed), and the output in the restore's log.
func (r *run) recordHooks(results []hooks.Result) {
	r.hookMu.Lock()
	defer r.hookMu.Unlock()
	for _, res := range results {
		r.hooksAttempted++
		ns, pod, _ := cutPod(res.Pod)
		args := []any{"namespace", ns, "pod", pod, "hook", res.Hook.Name, "hookSource", res.Hook.Source,
			"container", res.Container, "command", res.Hook.Command}
		if res.Failed() {
			r.hooksFailed++
			r.results.Error(ns, res.Error())
			r.log.Error("hook failed", append(args, "error", res.Err.Error(), "stdout", res.Stdout, "stderr", res.Stderr)...)
			continue
		}
		r.log.Info("hook ran", append(args, "stdout", res.Stdout, "stderr", res.Stderr)...)
	}
}

func cutPod(nsName string) (string, string, bool) {
	for i := range nsName {
		if nsName[i] == '/' {
			return nsName[:i], nsName[i+1:], true
		}
	}
	return "", nsName, false
}

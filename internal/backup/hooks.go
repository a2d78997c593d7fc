package backup

// Backup hooks, as Velero runs them: a pod's pre hooks before its item
// (and the item actions on it), its post hooks after the item and the
// items stored with it. The claims such a pod mounts are held back when
// claims are listed and stored right after the pod, where their CSI
// snapshots are taken and cut before the post hooks (Velero's item block).
// A pod with a claim snapshotted natively, which happens after the
// archive, has its post hooks after that volume step instead: a hook that
// froze a file system must not thaw it before the snapshot.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/lifeboat-io/lifeboat/internal/archive"
	"github.com/lifeboat-io/lifeboat/internal/hooks"
	"github.com/lifeboat-io/lifeboat/pkg/volumehelper"
)

// podHooks are a listed pod's hooks.
type podHooks struct {
	pod       *corev1.Pod
	pre, post []hooks.Exec
}

// hookAnnotation is in every backup hook annotation: pods without it are
// not decoded when the spec declares no hooks.
var hookAnnotation = []byte("hook.backup.velero.io/")

// hooksForPage returns the hooks of a page of pods, by index; nil when
// none has any.
func (r *run) hooksForPage(items []rawItem) map[int]*podHooks {
	var out map[int]*podHooks
	for i, it := range items {
		if r.hookRules.Empty() && !bytes.Contains(it.JSON, hookAnnotation) {
			continue
		}
		pod := &corev1.Pod{}
		if err := json.Unmarshal(it.JSON, pod); err != nil {
			r.results.Error(it.Namespace, fmt.Sprintf("pod %s: reading it for its hooks: %v", qualified(it.Namespace, it.Name), err))
			continue
		}
		meta := hooks.PodMeta{Namespace: pod.Namespace, Name: pod.Name, Labels: pod.Labels, Annotations: pod.Annotations}
		pre, w1 := r.hookRules.ForPod(meta, hooks.PhasePre)
		post, w2 := r.hookRules.ForPod(meta, hooks.PhasePost)
		for _, w := range append(w1, w2...) {
			r.results.Warning(pod.Namespace, w)
			r.log.Warn("hook annotation ignored", "namespace", pod.Namespace, "pod", pod.Name, "warning", w)
		}
		if len(pre)+len(post) == 0 {
			continue
		}
		if out == nil {
			out = map[int]*podHooks{}
		}
		out[i] = &podHooks{pod: pod, pre: pre, post: post}
	}
	return out
}

// writeHookedPod stores a pod between its pre and post hooks. A pre hook
// with onError Fail that fails leaves the pod out, as Velero does.
func (r *run) writeHookedPod(ctx context.Context, aw *archive.Writer, rt resourceType, it rawItem, ph *podHooks) error {
	key := rt.GroupResource().String() + "/" + it.Namespace + "/" + it.Name
	if r.stored[key] {
		return nil // stored already as another item's additional item: Velero runs no hooks then
	}
	if stopped := r.runPodHooks(ctx, ph, hooks.PhasePre); stopped {
		msg := fmt.Sprintf("pod %s not backed up: its pre hook failed with onError Fail", qualified(it.Namespace, it.Name))
		r.results.Error(it.Namespace, msg)
		r.log.Error("pod not backed up: a pre hook failed with onError Fail", "namespace", it.Namespace, "pod", it.Name)
		if r.stored != nil {
			r.stored[key] = true
		}
		return nil
	}
	err := r.writeItem(ctx, aw, rt, it, nil, 0)
	if err == nil {
		// The pod's claims were held for it: stored now, their CSI
		// snapshots taken and cut before the post hooks.
		err = r.writeHeldClaims(ctx, aw, ph.pod)
	}
	switch {
	case len(ph.post) == 0:
	case usesClaims(ph.pod) && !r.podVolumesDone(ctx, ph.pod), r.mayFSBackup(ph.pod):
		// As Velero's, a pod's post hooks wait for its PodVolumeBackups.
		r.deferredPost = append(r.deferredPost, ph)
	default:
		r.runPodHooks(ctx, ph, hooks.PhasePost)
	}
	return err
}

// runDeferredPostHooks runs the post hooks held back for the volume step.
func (r *run) runDeferredPostHooks(ctx context.Context) {
	for _, ph := range r.deferredPost {
		r.runPodHooks(ctx, ph, hooks.PhasePost)
	}
	r.deferredPost = nil
}

// mayFSBackup reports whether fs-backup may copy a volume of the pod: one
// selected by its annotations or defaultVolumesToFsBackup, or any that
// fs-backup can copy when volume policies (which may choose fs-backup)
// apply. Its post hooks then wait for the PodVolumeBackups, created in the
// volume step after the archive.
func (r *run) mayFSBackup(pod *corev1.Pod) bool {
	spec := &r.b.Spec
	def := (spec.DefaultVolumesToFsBackup != nil && *spec.DefaultVolumesToFsBackup) || (spec.DefaultVolumesToRestic != nil && *spec.DefaultVolumesToRestic)
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		if volumehelper.NeverFSBackedUpReason(vol, false) != "" {
			continue
		}
		if spec.ResourcePolicy != nil || volumehelper.FSBackupSelection(pod.Annotations, vol.Name, def) != "" {
			return true
		}
	}
	return false
}

// usesClaims reports whether a pod mounts persistent volume claims, its
// own ephemeral ones included.
func usesClaims(pod *corev1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
			return true
		}
	}
	return false
}

// runPodHooks runs one phase's hooks of a pod and records each: counted
// in the hook status, a failure as an error naming the pod and the hook
// (the backup ends PartiallyFailed, whatever onError says, as in Velero),
// the output in the backup's log. Post hooks run even when the backup was
// cancelled: they undo what the pre hooks did.
func (r *run) runPodHooks(ctx context.Context, ph *podHooks, phase hooks.Phase) (stopped bool) {
	list := ph.pre
	if phase == hooks.PhasePost {
		list = ph.post
		ctx = context.WithoutCancel(ctx)
	}
	if len(list) == 0 {
		return false
	}
	var results []hooks.Result
	if r.e.Hooks == nil {
		for _, h := range list {
			results = append(results, hooks.Result{Hook: h, Pod: ph.pod.Namespace + "/" + ph.pod.Name, Container: h.Container, Ran: true,
				Err: fmt.Errorf("this server cannot exec into pods")})
		}
	} else {
		results, stopped = hooks.RunBackupHooks(ctx, r.e.Hooks, ph.pod, list)
	}
	for _, res := range results {
		r.hooksAttempted++
		args := []any{"namespace", ph.pod.Namespace, "pod", ph.pod.Name, "hook", res.Hook.Name, "hookSource", res.Hook.Source,
			"hookPhase", string(phase), "container", res.Container, "command", res.Hook.Command}
		switch {
		case !res.Ran:
			r.log.Info("hook not run: an earlier hook of the pod failed with onError Fail", args...)
		case res.Failed():
			r.hooksFailed++
			r.results.Error(ph.pod.Namespace, res.Error())
			r.log.Error("hook failed", append(args, "error", res.Err.Error(), "stdout", res.Stdout, "stderr", res.Stderr)...)
		default:
			r.log.Info("hook ran", append(args, "stdout", res.Stdout, "stderr", res.Stderr)...)
		}
	}
	return stopped
}

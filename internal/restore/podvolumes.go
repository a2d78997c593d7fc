package restore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/cluster"
	"github.com/lifeboat-io/lifeboat/internal/podvolume"
	"github.com/lifeboat-io/lifeboat/internal/storage"
)

// Velero's names for the objects of a file-system restore.
const (
	// RestoreWaitContainer is the init container put first in a pod whose
	// volumes are restored from pod volume backups; the node agent starts
	// a volume's restore once it runs, and it exits once every volume has
	// its done marker.
	RestoreWaitContainer = "restore-wait"
	// legacyRestoreWaitContainer is the name older Velero versions used;
	// a stored pod may still carry it.
	legacyRestoreWaitContainer = "restic-wait"
	// RestoresDir is where the wait container mounts the restored volumes,
	// one directory per volume.
	RestoresDir = "/restores"

	RestoreUIDLabel = "velero.io/restore-uid"
	PodUIDLabel     = "velero.io/pod-uid"
	PVCUIDLabel     = "velero.io/pvc-uid"

	// RestoreActionConfigLabel selects the ConfigMap (in the server's
	// namespace) that Velero reads its pod volume restore action's
	// settings from; Lifeboat honours its `image` and `command` keys.
	RestoreActionConfigLabel = "velero.io/pod-volume-restore"
	pluginConfigLabel        = "velero.io/plugin-config"

	// DefaultPodVolumeTimeout bounds the wait for a restore's pod volume
	// restores: Velero's --fs-backup-timeout default.
	DefaultPodVolumeTimeout = 4 * time.Hour
	// DefaultNodeAgentWait is how long a volume's restore waits for a node
	// agent on its pod's node before it fails: long enough for a node
	// agent that restarts, far shorter than DefaultPodVolumeTimeout.
	DefaultNodeAgentWait = time.Minute

	waitCPU    = "100m"
	waitMemory = "128Mi"
	waitUID    = 1000
)

// DefaultRestoreHelperCommand runs `lifeboat restore-helper` in Lifeboat's
// image; the wait container's only argument is the restore's UID.
var DefaultRestoreHelperCommand = []string{"/lifeboat", "restore-helper"}

// RepositoryEnsurer makes the repository of (volume namespace, location)
// ready (repository.Ensurer).
type RepositoryEnsurer interface {
	Ensure(ctx context.Context, volumeNamespace, location string) (*v1.BackupRepository, error)
}

// PodVolumeOptions let a restore bring pod volume data back through the
// node agent.
type PodVolumeOptions struct {
	// Repositories are made ready before PodVolumeRestores are created.
	Repositories RepositoryEnsurer
	// Image runs the restore-wait init container (the server's own image).
	Image string
	// Command overrides DefaultRestoreHelperCommand (tests, other images).
	Command []string
	// Timeout bounds the wait for all PodVolumeRestores of a restore; zero
	// is DefaultPodVolumeTimeout.
	Timeout time.Duration
	// Poll is how often the wait looks at the PodVolumeRestores; zero is
	// a second.
	Poll time.Duration
	// NodeAgentWait bounds how long a PodVolumeRestore whose pod is
	// scheduled on a node without a running node agent is waited for;
	// zero is DefaultNodeAgentWait.
	NodeAgentWait time.Duration
}

// podVolumeSource is one stored volume of a pod to restore.
type podVolumeSource struct {
	volume, snapshotID, uploaderType, location string
	size                                       int64
}

// pendingPVR is a PodVolumeRestore the restore waits for.
type pendingPVR struct {
	name, podNamespace, pod, volume string
	claim                           string // the volume's claim, if any
}

// loadPodVolumeBackups reads the backup's PodVolumeBackups (none when the
// file is absent, as for every backup without file-system backups).
func (r *run) loadPodVolumeBackups(ctx context.Context) error {
	file := storage.PodVolumeBackupsFile(r.b.Name)
	var pvbs []v1.PodVolumeBackup
	err := r.store.GetGzipJSON(ctx, r.store.BackupKey(r.b.Name, file), &pvbs)
	if errors.Is(err, storage.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the pod volume backups of backup %q (%s): %w", r.b.Name, file, err)
	}
	for i, p := range pvbs {
		if p.Spec.Pod.Namespace == "" || p.Spec.Pod.Name == "" || p.Spec.Volume == "" {
			return fmt.Errorf("reading the pod volume backups of backup %q (%s): entry %d (%q) lacks spec.pod.namespace, spec.pod.name or spec.volume", r.b.Name, file, i, p.Name)
		}
	}
	r.pvbs = pvbs
	return nil
}

// podVolumesOf is the stored volumes of the backup's pod ns/name (ns is
// the backup's namespace, before any mapping), matched as Velero matches
// them: pod namespace, name and volume; only backups with a snapshot (an
// empty volume or a failed backup has none); never a projected or
// downward API volume of the pod.
func (r *run) podVolumesOf(ns, name string, pod *unstructured.Unstructured) []podVolumeSource {
	if len(r.pvbs) == 0 {
		return nil
	}
	skip := nonRestorableVolumes(pod)
	byVolume := map[string]podVolumeSource{}
	for _, p := range r.pvbs {
		if p.Spec.Pod.Namespace != ns || p.Spec.Pod.Name != name || p.Status.SnapshotID == "" || skip[p.Spec.Volume] {
			continue
		}
		uploader := p.Spec.UploaderType
		if uploader == "" {
			uploader = "kopia"
		}
		// The backup's location, as Velero uses, never one the (untrusted)
		// file names: the data is read from where the backup is.
		byVolume[p.Spec.Volume] = podVolumeSource{volume: p.Spec.Volume, snapshotID: p.Status.SnapshotID, uploaderType: uploader,
			location: r.b.Spec.StorageLocation, size: p.Status.Progress.TotalBytes}
	}
	out := make([]podVolumeSource, 0, len(byVolume))
	for _, v := range byVolume {
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].volume < out[j].volume })
	return out
}

func nonRestorableVolumes(pod *unstructured.Unstructured) map[string]bool {
	vols, _, _ := unstructured.NestedSlice(pod.Object, "spec", "volumes")
	skip := map[string]bool{}
	for _, v := range vols {
		m, _ := v.(map[string]any)
		name, _ := m["name"].(string)
		if m["projected"] != nil || m["downwardAPI"] != nil {
			skip[name] = true
		}
	}
	return skip
}

// waitContainer is Velero's restore-wait init container for the volumes:
// the restore's UID as its argument, the pod's name and namespace in its
// environment, each volume mounted at /restores/<volume>, 100m CPU and
// 128Mi memory, and the first container's security context (else a
// restricted one, as user 1000).
func waitContainer(image string, command []string, restoreUID types.UID, volumes []string, firstSecurityContext *corev1.SecurityContext) corev1.Container {
	q := func(s string) resource.Quantity { return resource.MustParse(s) }
	res := corev1.ResourceList{corev1.ResourceCPU: q(waitCPU), corev1.ResourceMemory: q(waitMemory)}
	c := corev1.Container{
		Name:    RestoreWaitContainer,
		Image:   image,
		Command: append([]string(nil), command...),
		Args:    []string{string(restoreUID)},
		Env: []corev1.EnvVar{
			{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
			{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		},
		Resources: corev1.ResourceRequirements{Requests: res, Limits: res.DeepCopy()},
	}
	for _, v := range volumes {
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: v, MountPath: RestoresDir + "/" + v})
	}
	if firstSecurityContext != nil {
		c.SecurityContext = firstSecurityContext.DeepCopy()
	} else {
		uid, no, yes := int64(waitUID), false, true
		c.SecurityContext = &corev1.SecurityContext{
			AllowPrivilegeEscalation: &no,
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			RunAsUser:                &uid,
			RunAsNonRoot:             &yes,
		}
	}
	return c
}

// addRestoreWait puts the restore-wait container first among the pod's
// init containers, replacing any the stored pod had (a pod restored
// before carries one), and reports the volumes it waits for. A pod
// without stored volumes only loses a stale wait container, as in Velero.
func (r *run) addRestoreWait(ctx context.Context, obj *unstructured.Unstructured, volumes []podVolumeSource) error {
	existing, _, err := unstructured.NestedSlice(obj.Object, "spec", "initContainers")
	if err != nil {
		return fmt.Errorf("reading the pod's init containers: %w", err)
	}
	kept := make([]any, 0, len(existing)+1)
	for _, c := range existing {
		m, _ := c.(map[string]any)
		if n, _ := m["name"].(string); n == RestoreWaitContainer || n == legacyRestoreWaitContainer {
			continue
		}
		kept = append(kept, c)
	}
	if len(volumes) == 0 {
		if len(kept) == len(existing) {
			return nil
		}
		return unstructured.SetNestedSlice(obj.Object, kept, "spec", "initContainers")
	}
	image, command := r.restoreHelper(ctx)
	if image == "" {
		return errors.New("its volumes are restored from file-system backups, and the server has no image for the restore-wait init container (set the server's --restore-helper-image; lifeboat install sets it)")
	}
	names := make([]string, len(volumes))
	for i, v := range volumes {
		names[i] = v.volume
	}
	var first *corev1.SecurityContext
	containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "containers")
	if len(containers) > 0 {
		var c corev1.Container
		if m, ok := containers[0].(map[string]any); ok && runtime.DefaultUnstructuredConverter.FromUnstructured(m, &c) == nil {
			first = c.SecurityContext
		}
	}
	wc := waitContainer(image, command, r.rs.UID, names, first)
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&wc)
	if err != nil {
		return fmt.Errorf("the restore-wait container: %w", err)
	}
	return unstructured.SetNestedSlice(obj.Object, append([]any{m}, kept...), "spec", "initContainers")
}

// restoreHelper is the wait container's image and command: the server's,
// unless Velero's pod volume restore action ConfigMap (labelled
// velero.io/plugin-config and velero.io/pod-volume-restore=RestoreItemAction
// in the server's namespace) names others. Read once per restore.
func (r *run) restoreHelper(ctx context.Context) (string, []string) {
	r.helperOnce.Do(func() {
		o := r.e.PodVolumes
		r.helperImage, r.helperCommand = o.Image, o.Command
		if len(r.helperCommand) == 0 {
			r.helperCommand = DefaultRestoreHelperCommand
		}
		var cms corev1.ConfigMapList
		err := cluster.Call(ctx, func(ctx context.Context) error {
			return r.e.acc.Client.List(ctx, &cms, client.InNamespace(r.rs.Namespace),
				client.MatchingLabels{RestoreActionConfigLabel: "RestoreItemAction"}, client.HasLabels{pluginConfigLabel})
		})
		if err != nil {
			r.results.Warning("", fmt.Sprintf("reading the pod volume restore ConfigMap (label %s=RestoreItemAction): %v; using the server's restore helper image", RestoreActionConfigLabel, err))
			return
		}
		if len(cms.Items) == 0 {
			return
		}
		cm := cms.Items[0]
		if img := cm.Data["image"]; img != "" {
			// Velero ignores an image without a registry part.
			if strings.Contains(img, "/") {
				r.helperImage = img
			} else {
				r.log.Info("pod volume restore ConfigMap's image has no registry; using the server's", "configmap", cm.Name, "image", img)
			}
		}
		if c := cm.Data["command"]; c != "" {
			r.helperCommand = []string{c}
		}
		r.log.Info("restore helper from ConfigMap", "configmap", cm.Name, "image", r.helperImage, "command", r.helperCommand)
	})
	return r.helperImage, r.helperCommand
}

// startPodVolumeRestores creates a PodVolumeRestore per stored volume of a
// pod this restore created, as Velero does, once the volume's repository is
// ready; the node agent of the pod's node carries them out. Problems are
// the restore's errors, naming pod and volume.
func (r *run) startPodVolumeRestores(ctx context.Context, pod *unstructured.Unstructured, sourceNamespace string, volumes []podVolumeSource) {
	ns, name := pod.GetNamespace(), pod.GetName()
	claims := podClaims(pod)
	for _, v := range volumes {
		if _, err := r.e.PodVolumes.Repositories.Ensure(ctx, sourceNamespace, v.location); err != nil {
			r.podVolumeError(ns, name, v.volume, fmt.Errorf("the repository of namespace %q in location %q: %w", sourceNamespace, v.location, err))
			continue
		}
		var pvcUID types.UID
		if claim := claims[v.volume]; claim != "" {
			var pvc corev1.PersistentVolumeClaim
			if err := r.e.acc.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: claim}, &pvc); err != nil {
				r.podVolumeError(ns, name, v.volume, fmt.Errorf("reading its claim %s: %w", claim, err))
				continue
			}
			pvcUID = pvc.UID
		}
		pvr := newPodVolumeRestore(r.rs, ns, name, pod.GetUID(), sourceNamespace, v, pvcUID)
		if err := cluster.Call(ctx, func(ctx context.Context) error { return r.e.acc.Client.Create(ctx, pvr) }); err != nil {
			r.podVolumeError(ns, name, v.volume, fmt.Errorf("creating its PodVolumeRestore: %w", err))
			continue
		}
		r.log.Info("pod volume restore created", "podvolumerestore", pvr.Name, "namespace", ns, "pod", name, "volume", v.volume, "snapshot", v.snapshotID)
		r.mu.Lock()
		r.pendingPVRs = append(r.pendingPVRs, pendingPVR{name: pvr.Name, podNamespace: ns, pod: name, volume: v.volume, claim: claims[v.volume]})
		r.mu.Unlock()
	}
}

func podClaims(pod *unstructured.Unstructured) map[string]string {
	vols, _, _ := unstructured.NestedSlice(pod.Object, "spec", "volumes")
	out := map[string]string{}
	for _, v := range vols {
		m, _ := v.(map[string]any)
		name, _ := m["name"].(string)
		if claim, _, _ := unstructured.NestedString(m, "persistentVolumeClaim", "claimName"); claim != "" {
			out[name] = claim
		}
	}
	return out
}

// newPodVolumeRestore is the PodVolumeRestore Velero creates for one
// volume of a restored pod.
func newPodVolumeRestore(rs *v1.Restore, podNamespace, podName string, podUID types.UID, sourceNamespace string, v podVolumeSource, pvcUID types.UID) *v1.PodVolumeRestore {
	yes := true
	pvr := &v1.PodVolumeRestore{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:    rs.Namespace,
			GenerateName: rs.Name + "-",
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: v1.SchemeGroupVersion.String(), Kind: "Restore", Name: rs.Name, UID: rs.UID, Controller: &yes,
			}},
			Labels: map[string]string{
				v1.RestoreNameLabel: v1.LabelValue(rs.Name),
				RestoreUIDLabel:     string(rs.UID),
				PodUIDLabel:         string(podUID),
			},
		},
		Spec: v1.PodVolumeRestoreSpec{
			Pod:                   corev1.ObjectReference{Kind: "Pod", Namespace: podNamespace, Name: podName, UID: podUID},
			Volume:                v.volume,
			SnapshotID:            v.snapshotID,
			SnapshotSize:          v.size,
			BackupStorageLocation: v.location,
			UploaderType:          v.uploaderType,
			SourceNamespace:       sourceNamespace,
		},
	}
	if pvcUID != "" {
		pvr.Labels[PVCUIDLabel] = string(pvcUID)
	}
	if c := rs.Spec.UploaderConfig; c != nil {
		pvr.Spec.UploaderSettings = map[string]string{"WriteSparseFiles": strconv.FormatBool(c.WriteSparseFiles != nil && *c.WriteSparseFiles)}
		if c.ParallelFilesDownload > 0 {
			pvr.Spec.UploaderSettings["ParallelFilesDownload"] = strconv.Itoa(c.ParallelFilesDownload)
		}
	}
	return pvr
}

// dropWithoutNodeAgent ends as errors the pending volumes whose pod has
// been scheduled on a node without a running node agent (the rule the
// backup applies too, podvolume.NodeAgentOn) for longer than wait, and
// returns the others: without this a restore would wait its whole
// timeout for a transfer nobody takes. A pod not yet scheduled, or a
// failure to look, keeps its volume waiting.
func (r *run) dropWithoutNodeAgent(ctx context.Context, pending []pendingPVR, since map[string]time.Time, wait time.Duration) []pendingPVR {
	// Once per round: a pod's node, a node's NodeAgentOn answer.
	nodes, agents := map[string]string{}, map[string]error{}
	left := pending[:0]
	for _, p := range pending {
		key := p.podNamespace + "/" + p.pod
		node, known := nodes[key]
		if !known {
			var pod corev1.Pod
			if err := r.e.acc.Reader.Get(ctx, client.ObjectKey{Namespace: p.podNamespace, Name: p.pod}, &pod); err == nil {
				node = pod.Spec.NodeName
			}
			nodes[key] = node
		}
		if node == "" {
			delete(since, p.name)
			left = append(left, p)
			continue
		}
		err, asked := agents[node]
		if !asked {
			err = podvolume.NodeAgentOn(ctx, r.e.acc.Reader, r.rs.Namespace, node)
			agents[node] = err
		}
		if !podvolume.IsNoNodeAgent(err) {
			if err != nil {
				r.log.Warn("looking for the node agent of a pod volume restore", "podvolumerestore", p.name, "node", node, "error", err)
			}
			delete(since, p.name)
			left = append(left, p)
			continue
		}
		first, seen := since[p.name]
		if !seen {
			since[p.name] = time.Now()
			r.log.Warn("no node agent on the node of a restored pod; waiting for one", "podvolumerestore", p.name, "namespace", p.podNamespace, "pod", p.pod, "node", node, "wait", wait.String())
		}
		if !seen || time.Since(first) < wait {
			left = append(left, p)
			continue
		}
		r.podVolumeError(p.podNamespace, p.pod, p.volume, fmt.Errorf("PodVolumeRestore %s/%s waited %s for a node agent: %w", r.rs.Namespace, p.name, wait, err))
	}
	return left
}

func (r *run) podVolumeError(ns, pod, volume string, err error) {
	r.results.Error(ns, fmt.Sprintf("pod volume restore of volume %s of pod %s: %v", volume, qualified(ns, pod), err))
	r.log.Error("pod volume restore failed", "namespace", ns, "pod", pod, "volume", volume, "error", err)
}

// waitPodVolumeRestores waits, bounded by the options' timeout, until each
// PodVolumeRestore this restore created has ended. A failed, canceled,
// vanished or unfinished one is an error of the restore naming its pod and
// volume.
func (r *run) waitPodVolumeRestores(ctx context.Context) {
	r.mu.Lock()
	pending := append([]pendingPVR(nil), r.pendingPVRs...)
	r.mu.Unlock()
	if len(pending) == 0 {
		return
	}
	o := r.e.PodVolumes
	timeout, poll, agentWait := o.Timeout, o.Poll, o.NodeAgentWait
	if timeout <= 0 {
		timeout = DefaultPodVolumeTimeout
	}
	if poll <= 0 {
		poll = time.Second
	}
	if agentWait <= 0 {
		agentWait = DefaultNodeAgentWait
	}
	r.log.Info("waiting for pod volume restores", "count", len(pending), "timeout", timeout.String())
	deadline := time.Now().Add(timeout)
	phases := map[string]v1.PodVolumeRestore{}
	noAgentSince := map[string]time.Time{}
	for len(pending) > 0 {
		var list v1.PodVolumeRestoreList
		err := cluster.Call(ctx, func(ctx context.Context) error {
			return r.e.acc.Client.List(ctx, &list, client.InNamespace(r.rs.Namespace), client.MatchingLabels{RestoreUIDLabel: string(r.rs.UID)})
		})
		if err != nil {
			r.log.Warn("listing pod volume restores", "error", err)
		} else {
			clear(phases)
			for _, p := range list.Items {
				phases[p.Name] = p
			}
			left := pending[:0]
			for _, p := range pending {
				pvr, ok := phases[p.name]
				switch {
				case !ok:
					r.podVolumeError(p.podNamespace, p.pod, p.volume, fmt.Errorf("its PodVolumeRestore %s/%s was deleted before it ended", r.rs.Namespace, p.name))
				case pvr.Status.Phase == v1.PodVolumePhaseCompleted:
					r.log.Info("pod volume restored", "podvolumerestore", p.name, "namespace", p.podNamespace, "pod", p.pod, "volume", p.volume)
					r.trackPodVolume(ctx, p, &pvr)
				case pvr.Status.Phase == v1.PodVolumePhaseFailed, pvr.Status.Phase == v1.PodVolumePhaseCanceled:
					r.trackPodVolume(ctx, p, &pvr)
					r.podVolumeError(p.podNamespace, p.pod, p.volume, fmt.Errorf("PodVolumeRestore %s/%s %s: %s", r.rs.Namespace, p.name, strings.ToLower(string(pvr.Status.Phase)), pvr.Status.Message))
				default:
					left = append(left, p)
				}
			}
			pending = r.dropWithoutNodeAgent(ctx, left, noAgentSince, agentWait)
		}
		if len(pending) == 0 {
			return
		}
		if !time.Now().Before(deadline) || ctx.Err() != nil {
			why := fmt.Sprintf("did not end within %s", timeout)
			if ctx.Err() != nil {
				why = "was still running when the restore stopped"
			}
			for _, p := range pending {
				phase := phases[p.name].Status.Phase
				if phase == "" {
					phase = v1.PodVolumePhaseNew
				}
				r.podVolumeError(p.podNamespace, p.pod, p.volume, fmt.Errorf("PodVolumeRestore %s/%s %s (phase %s; is the node agent running on the pod's node?)", r.rs.Namespace, p.name, why, phase))
			}
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(poll):
		}
	}
}

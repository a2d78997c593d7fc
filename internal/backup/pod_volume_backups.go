package backup

// File-system backup of pod volumes, as Velero's backup hands them to its
// node agent: for each pod with volumes decided fs-backup, the repository
// of (pod namespace, backup's location) is made ready, one PodVolumeBackup
// per volume is created for the node agent of the pod's node, and before
// the backup ends every one of them is waited for (bounded by the
// server's --fs-backup-timeout). The node agent moves the files; this
// side only asks and records.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/podvolume"
	"github.com/lifeboat-io/lifeboat/internal/volumefiles"
	"github.com/lifeboat-io/lifeboat/pkg/volumehelper"
)

// RepositoryEnsurer gets the kopia repository of (volume namespace,
// location) ready (repository.Ensurer).
type RepositoryEnsurer interface {
	Ensure(ctx context.Context, volumeNamespace, location string) (*v1.BackupRepository, error)
}

// DefaultFSBackupTimeout is Velero's --fs-backup-timeout default.
const DefaultFSBackupTimeout = 4 * time.Hour

// Velero's names on a PodVolumeBackup.
const (
	// pvcUIDLabel marks a PodVolumeBackup of a claim's volume.
	pvcUIDLabel   = "velero.io/pvc-uid"
	uploaderKopia = "kopia"
)

// podVolumeRef is one pod volume to copy by fs-backup, and the volume
// infos (by index) that record it.
type podVolumeRef struct {
	namespace, pod, volume string
}

func (p podVolumeRef) String() string { return p.namespace + "/" + p.pod + ":" + p.volume }

// fsTarget returns the pod volume that copies a volume decided fs-backup:
// the pod volume itself, or, for a claim, the pod the decision names, else
// a running pod in the backup mounting the claim.
func (r *run) fsTarget(ctx context.Context, v *volumeItem, d volumehelper.Decision) (podVolumeRef, error) {
	switch {
	case v.pod != nil:
		return podVolumeRef{v.pod.Namespace, v.pod.Name, v.vol.Name}, nil
	case d.Pod != nil:
		return podVolumeRef{d.Pod.Namespace, d.Pod.Pod, d.Pod.Volume}, nil
	case v.pvc == nil:
		return podVolumeRef{}, errors.New("fs-backup was chosen for a PersistentVolume without a claim in the backup: no pod mounts it, so there is nothing to copy")
	}
	var pods corev1.PodList
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := r.e.Client.List(cctx, &pods, crclient.InNamespace(v.pvc.Namespace)); err != nil {
		return podVolumeRef{}, fmt.Errorf("listing the pods of namespace %s to find one mounting the claim: %w", v.pvc.Namespace, err)
	}
	sort.Slice(pods.Items, func(i, j int) bool { return pods.Items[i].Name < pods.Items[j].Name })
	for _, p := range pods.Items {
		if podRunning(&p) != nil {
			continue
		}
		for _, vol := range p.Spec.Volumes {
			if vol.PersistentVolumeClaim != nil && vol.PersistentVolumeClaim.ClaimName == v.pvc.Name {
				return podVolumeRef{p.Namespace, p.Name, vol.Name}, nil
			}
		}
	}
	return podVolumeRef{}, fmt.Errorf("fs-backup was chosen, but no running pod in namespace %s mounts the claim, so there is nothing to copy", v.pvc.Namespace)
}

// podRunning is Velero's test of a pod whose volumes can be read: on a
// node, Running, not being deleted.
func podRunning(p *corev1.Pod) error {
	switch {
	case p.Spec.NodeName == "":
		return fmt.Errorf("pod %s/%s is not scheduled", p.Namespace, p.Name)
	case p.Status.Phase != corev1.PodRunning:
		return fmt.Errorf("pod %s/%s is not running (phase %s)", p.Namespace, p.Name, p.Status.Phase)
	case p.DeletionTimestamp != nil:
		return fmt.Errorf("pod %s/%s is being deleted", p.Namespace, p.Name)
	}
	return nil
}

// NewPodVolumeBackup is the PodVolumeBackup Velero's backup creates for a
// pod's volume; pvc is the volume's claim, nil for other volumes.
func NewPodVolumeBackup(b *v1.Backup, pod *corev1.Pod, volume string, pvc *corev1.PersistentVolumeClaim) *v1.PodVolumeBackup {
	controller := true
	pvb := &v1.PodVolumeBackup{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:    b.Namespace,
			GenerateName: b.Name + "-",
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: v1.SchemeGroupVersion.String(), Kind: "Backup", Name: b.Name, UID: b.UID, Controller: &controller,
			}},
			Labels: map[string]string{v1.BackupNameLabel: v1.LabelValue(b.Name), v1.BackupUIDLabel: string(b.UID)},
		},
		Spec: v1.PodVolumeBackupSpec{
			Node:   pod.Spec.NodeName,
			Pod:    corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
			Volume: volume,
			Tags: map[string]string{
				"backup": b.Name, "backup-uid": string(b.UID), "pod": pod.Name, "pod-uid": string(pod.UID),
				"ns": pod.Namespace, "volume": volume,
			},
			BackupStorageLocation: b.Spec.StorageLocation,
			UploaderType:          uploaderKopia,
		},
	}
	if pvc != nil {
		pvb.Annotations = map[string]string{v1.PVCNameAnnotation: pvc.Name}
		pvb.Labels[pvcUIDLabel] = string(pvc.UID)
		pvb.Spec.Tags["pvc-uid"] = string(pvc.UID)
	}
	if b.Spec.UploaderConfig != nil {
		pvb.Spec.UploaderSettings = map[string]string{"ParallelFilesUpload": fmt.Sprint(b.Spec.UploaderConfig.ParallelFilesUpload)}
	}
	return pvb
}

// backupPodVolumes carries out the fs-backup decisions: targets[i] is the
// pod volume of infos[i] (nil for other decisions). It creates the
// PodVolumeBackups, waits for them, and fills the infos and
// r.podVolumeBackups.
func (r *run) backupPodVolumes(ctx context.Context, targets []*podVolumeRef, infos []volumefiles.BackupVolumeInfo) {
	byPod := map[string][]string{} // ns/pod -> volumes
	infoOf := map[podVolumeRef][]int{}
	for i, t := range targets {
		if t == nil {
			continue
		}
		k := t.namespace + "/" + t.pod
		if len(infoOf[*t]) == 0 {
			byPod[k] = append(byPod[k], t.volume)
		}
		infoOf[*t] = append(infoOf[*t], i)
	}
	if len(byPod) == 0 {
		return
	}
	skip := func(t podVolumeRef, why string, isErr bool) {
		if isErr {
			r.results.Error(t.namespace, fmt.Sprintf("pod volume %s: %s", t, why))
		} else {
			r.results.Warning(t.namespace, fmt.Sprintf("pod volume %s: %s", t, why))
		}
		r.log.Warn("pod volume not backed up", "podVolume", t.String(), "reason", why)
		for _, i := range infoOf[t] {
			infos[i].Skipped, infos[i].SkippedReason = true, why
			if isErr {
				infos[i].Result = volumefiles.ResultFailed
			}
		}
	}
	timeout := r.e.FSBackupTimeout
	if timeout <= 0 {
		timeout = DefaultFSBackupTimeout
	}
	deadline := time.Now().Add(timeout)
	pods := make([]string, 0, len(byPod))
	for k := range byPod {
		pods = append(pods, k)
	}
	sort.Strings(pods)
	created := map[string]podVolumeRef{} // PVB name -> volume
	for _, k := range pods {
		ns, name, _ := strings.Cut(k, "/")
		for name, t := range r.createPodVolumeBackups(ctx, ns, name, byPod[k], skip) {
			created[name] = t
		}
	}
	if len(created) == 0 {
		return
	}
	pvbs := r.waitPodVolumeBackups(ctx, created, deadline)
	for _, pvb := range pvbs {
		t := created[pvb.Name]
		ok := pvb.Status.Phase == v1.PodVolumePhaseCompleted
		if !ok {
			msg := pvb.Status.Message
			if msg == "" {
				msg = "no message from the node agent"
			}
			r.results.Error(t.namespace, fmt.Sprintf("pod volume %s: PodVolumeBackup %s ended %s: %s", t, pvb.Name, pvb.Status.Phase, msg))
			r.log.Error("pod volume backup did not complete", "podVolume", t.String(), "podVolumeBackup", pvb.Name, "phase", pvb.Status.Phase, "message", msg)
		}
		for _, i := range infoOf[t] {
			in := &infos[i]
			in.BackupMethod = volumefiles.PodVolumeBackup
			in.StartTimestamp, in.CompletionTimestamp = pvb.Status.StartTimestamp, pvb.Status.CompletionTimestamp
			in.Result = volumefiles.ResultFailed
			if ok {
				in.Result = volumefiles.ResultSucceeded
			}
			in.PVBInfo = &volumefiles.PodVolumeInfo{
				SnapshotHandle: pvb.Status.SnapshotID, Size: pvb.Status.Progress.TotalBytes, IncrementalSize: pvb.Status.IncrementalBytes,
				UploaderType: pvb.Spec.UploaderType, VolumeName: pvb.Spec.Volume, PodName: pvb.Spec.Pod.Name, PodNamespace: pvb.Spec.Pod.Namespace,
				NodeName: pvb.Spec.Node, Phase: string(pvb.Status.Phase),
			}
		}
	}
	r.podVolumeBackups = pvbs
}

// createPodVolumeBackups creates the PodVolumeBackups of one pod's
// volumes, skipping those Velero skips; it returns them by name.
func (r *run) createPodVolumeBackups(ctx context.Context, ns, name string, volumes []string, skip func(podVolumeRef, string, bool)) map[string]podVolumeRef {
	skipAll := func(why string, isErr bool) {
		for _, vol := range volumes {
			skip(podVolumeRef{ns, name, vol}, why, isErr)
		}
	}
	pod := &corev1.Pod{}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := r.e.Client.Get(cctx, crclient.ObjectKey{Namespace: ns, Name: name}, pod); err != nil {
		skipAll(fmt.Sprintf("reading the pod: %v", err), !apierrors.IsNotFound(err))
		return nil
	}
	if err := podRunning(pod); err != nil {
		// Velero skips a pod that is not running without failing the backup.
		skipAll(err.Error()+": fs-backup reads a running pod's volumes, so the volume's data is not in this backup", false)
		return nil
	}
	if r.e.Repositories == nil {
		skipAll("fs-backup was chosen, but this server has no file-system backup repositories: the volume's data is not in this backup", false)
		return nil
	}
	if err := r.nodeAgentOn(cctx, pod.Spec.NodeName); err != nil {
		skipAll(err.Error(), true)
		return nil
	}
	if _, err := r.e.Repositories.Ensure(ctx, pod.Namespace, r.b.Spec.StorageLocation); err != nil {
		skipAll(fmt.Sprintf("the repository of namespace %s in location %s is not ready: %v", pod.Namespace, r.b.Spec.StorageLocation, err), true)
		return nil
	}
	podVols := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		podVols[v.Name] = v
	}
	mounted, devices := map[string]bool{}, map[string]bool{}
	for _, c := range pod.Spec.Containers {
		for _, m := range c.VolumeMounts {
			mounted[m.Name] = true
		}
		for _, d := range c.VolumeDevices {
			devices[d.Name] = true
		}
	}
	out := map[string]podVolumeRef{}
	for _, vol := range volumes {
		t := podVolumeRef{ns, name, vol}
		v, ok := podVols[vol]
		if !ok {
			skip(t, "the pod has no such volume", false)
			continue
		}
		var pvc *corev1.PersistentVolumeClaim
		if v.PersistentVolumeClaim != nil {
			pvc = &corev1.PersistentVolumeClaim{}
			if err := r.e.Client.Get(cctx, crclient.ObjectKey{Namespace: ns, Name: v.PersistentVolumeClaim.ClaimName}, pvc); err != nil {
				skip(t, fmt.Sprintf("reading its claim %s: %v", v.PersistentVolumeClaim.ClaimName, err), true)
				continue
			}
		}
		hostPath, err := r.isHostPath(cctx, &v, pvc)
		switch {
		case err != nil:
			skip(t, fmt.Sprintf("checking whether it is a hostPath volume: %v", err), true)
			continue
		case hostPath:
			skip(t, "a hostPath volume is not under the kubelet's pod directory, so the node agent cannot read it; not backed up", false)
			continue
		case devices[vol]:
			skip(t, "a block volume: fs-backup copies files, so it is not backed up", false)
			continue
		case !mounted[vol]:
			skip(t, "declared in the pod but not mounted by any container, so there are no files to copy", false)
			continue
		}
		pvb := NewPodVolumeBackup(r.b, pod, vol, pvc)
		if err := r.createWithGeneratedName(ctx, pvb); err != nil {
			skip(t, fmt.Sprintf("creating its PodVolumeBackup: %v", err), true)
			continue
		}
		r.log.Info("pod volume backup created", "podVolume", t.String(), "podVolumeBackup", pvb.Name, "node", pvb.Spec.Node)
		out[pvb.Name] = t
	}
	return out
}

// createWithGeneratedName creates obj, trying again when the generated
// name was taken (as Velero's CreateRetryGenerateName).
func (r *run) createWithGeneratedName(ctx context.Context, obj *v1.PodVolumeBackup) error {
	var err error
	for range 5 {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		err = r.e.Client.Create(cctx, obj)
		cancel()
		if !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return err
}

func (r *run) isHostPath(ctx context.Context, v *corev1.Volume, pvc *corev1.PersistentVolumeClaim) (bool, error) {
	if v.HostPath != nil {
		return true, nil
	}
	if pvc == nil || pvc.Spec.VolumeName == "" {
		return false, nil
	}
	pv := &corev1.PersistentVolume{}
	if err := r.e.Client.Get(ctx, crclient.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil {
		return false, fmt.Errorf("reading PersistentVolume %s: %w", pvc.Spec.VolumeName, err)
	}
	return pv.Spec.HostPath != nil, nil
}

// nodeAgentOn fails unless a node agent pod runs on the node, as Velero
// checks before it creates a PodVolumeBackup nobody would take.
func (r *run) nodeAgentOn(ctx context.Context, node string) error {
	return podvolume.NodeAgentOn(ctx, r.e.Client, r.b.Namespace, node)
}

func podVolumeFinal(p v1.PodVolumePhase) bool {
	return p == v1.PodVolumePhaseCompleted || p == v1.PodVolumePhaseFailed || p == v1.PodVolumePhaseCanceled
}

// waitPodVolumeBackups waits until every created PodVolumeBackup ended or
// the deadline passed; those still running then are cancelled
// (spec.cancel) and returned as they are, marked Canceled with a message
// saying why. The result is sorted by name.
func (r *run) waitPodVolumeBackups(ctx context.Context, created map[string]podVolumeRef, deadline time.Time) []v1.PodVolumeBackup {
	maxPoll := r.e.podVolumePoll
	if maxPoll <= 0 {
		maxPoll = 2 * time.Second
	}
	// A tenth of the time waited so far, from 50 ms up to maxPoll: a
	// small or unchanged volume is done in a fraction of a second, and a
	// flat 2 s poll would double such a backup's time; the end of any
	// transfer is seen within a tenth of its time (doubling the wait
	// overshot by up to its last step); a long one is still looked at
	// every 2 s.
	started := time.Now()
	nextPoll := func() time.Duration { return min(max(time.Since(started)/10, 50*time.Millisecond), maxPoll) }
	r.log.Info("waiting for the pod volume backups", "count", len(created), "deadline", deadline.UTC().Format(time.RFC3339))
	last := map[string]v1.PodVolumeBackup{}
	for {
		var list v1.PodVolumeBackupList
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		err := r.e.Client.List(cctx, &list, crclient.InNamespace(r.b.Namespace), crclient.MatchingLabels{v1.BackupUIDLabel: string(r.b.UID)})
		cancel()
		if err == nil {
			for _, p := range list.Items {
				if _, ok := created[p.Name]; ok {
					last[p.Name] = p
				}
			}
		} else {
			r.log.Warn("listing the pod volume backups", "error", err)
		}
		pending := 0
		for name := range created {
			if p, ok := last[name]; !ok || !podVolumeFinal(p.Status.Phase) {
				pending++
			}
		}
		if pending == 0 {
			break
		}
		if ctx.Err() != nil || !time.Now().Before(deadline) {
			why := "not ended within the fs-backup timeout (--fs-backup-timeout); cancelled"
			if ctx.Err() != nil {
				why = "the backup was stopped before it ended; cancelled"
			}
			r.cancelPodVolumeBackups(context.WithoutCancel(ctx), created, last, why)
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(min(nextPoll(), time.Until(deadline)+time.Millisecond)):
		}
	}
	out := make([]v1.PodVolumeBackup, 0, len(created))
	for name := range created {
		p, ok := last[name]
		if !ok {
			p = v1.PodVolumeBackup{ObjectMeta: metav1.ObjectMeta{Namespace: r.b.Namespace, Name: name}, Status: v1.PodVolumeBackupStatus{
				Phase: v1.PodVolumePhaseFailed, Message: "the PodVolumeBackup is gone"}}
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// cancelPodVolumeBackups sets spec.cancel on the PodVolumeBackups not
// ended, so that their node agents stop, and records them as Canceled.
func (r *run) cancelPodVolumeBackups(ctx context.Context, created map[string]podVolumeRef, last map[string]v1.PodVolumeBackup, why string) {
	for name := range created {
		p, ok := last[name]
		if ok && podVolumeFinal(p.Status.Phase) {
			continue
		}
		obj := &v1.PodVolumeBackup{ObjectMeta: metav1.ObjectMeta{Namespace: r.b.Namespace, Name: name}}
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		err := r.e.Client.Patch(cctx, obj, crclient.RawPatch("application/merge-patch+json", []byte(`{"spec":{"cancel":true}}`)))
		cancel()
		if err != nil && !apierrors.IsNotFound(err) {
			r.log.Warn("cancelling a pod volume backup", "podVolumeBackup", name, "error", err)
		}
		if ok {
			obj = &p
		}
		obj.Spec.Cancel = true
		obj.Status.Phase = v1.PodVolumePhaseCanceled
		msg := why
		if obj.Status.Message != "" {
			msg += " (node agent: " + obj.Status.Message + ")"
		}
		obj.Status.Message = msg
		last[name] = *obj
	}
}

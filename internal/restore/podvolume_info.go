package restore

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/cluster"
	"github.com/lifeboat-io/lifeboat/internal/volumefiles"
)

// trackPodVolume records an ended PodVolumeRestore in the restore's volume
// information as Velero's restore does: restoreMethod PodVolumeRestore
// and pvrInfo, for a volume that is a claim only (Velero leaves out a
// pod's other volumes, emptyDir and the like), with the PersistentVolume
// when this restore created the claim and it is bound. Completed, failed
// and canceled ones are recorded, as in Velero; one that never ended or
// vanished is not.
func (r *run) trackPodVolume(ctx context.Context, p pendingPVR, pvr *v1.PodVolumeRestore) {
	if p.claim == "" {
		r.log.Info("pod volume restore left out of the volume information: the volume is not a claim, as in Velero",
			"podvolumerestore", p.name, "namespace", p.podNamespace, "pod", p.pod, "volume", p.volume)
		return
	}
	in := volumefiles.RestoreVolumeInfo{
		PVCName: p.claim, PVCNamespace: p.podNamespace, RestoreMethod: volumefiles.PodVolumeRestore,
		PVRInfo: &volumefiles.PodVolumeInfo{
			SnapshotHandle: pvr.Spec.SnapshotID, Size: pvr.Status.Progress.TotalBytes, UploaderType: pvr.Spec.UploaderType,
			VolumeName: pvr.Spec.Volume, PodName: pvr.Spec.Pod.Name, PodNamespace: pvr.Spec.Pod.Namespace,
		},
	}
	if r.createdClaim(p.podNamespace, p.claim) {
		var pvc corev1.PersistentVolumeClaim
		err := cluster.Call(ctx, func(ctx context.Context) error {
			return r.e.acc.Reader.Get(ctx, client.ObjectKey{Namespace: p.podNamespace, Name: p.claim}, &pvc)
		})
		switch {
		case err != nil:
			r.log.Warn("reading a restored claim for the volume information", "namespace", p.podNamespace, "claim", p.claim, "error", err)
		case pvc.Status.Phase == corev1.ClaimBound:
			in.PVName = pvc.Spec.VolumeName
		}
	}
	r.mu.Lock()
	r.volumeInfos = append(r.volumeInfos, in)
	r.mu.Unlock()
}

// createdClaim says whether this restore created the claim ns/name.
func (r *run) createdClaim(ns, name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.createdClaims[ns+"/"+name]
}

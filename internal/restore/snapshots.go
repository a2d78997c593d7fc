package restore

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lifeboat-io/lifeboat/internal/volumefiles"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

// loadSnapshots reads the backup's native snapshots, by PV name. Only
// completed ones can be restored from.
func (r *run) loadSnapshots(ctx context.Context) error {
	snaps, err := volumefiles.GetSnapshots(ctx, r.store, r.b.Name)
	if err != nil {
		return err
	}
	for _, s := range snaps {
		if s.Status.Phase != volumefiles.SnapshotPhaseCompleted || s.Status.ProviderSnapshotID == "" {
			continue
		}
		if r.snapshots == nil {
			r.snapshots = map[string]volumefiles.Snapshot{}
		}
		r.snapshots[s.Spec.PersistentVolumeName] = s
	}
	return nil
}

// restoreVolumeData gives a PV whose volume was snapshotted a new volume
// made from the snapshot, through the VolumeSnapshotter of the snapshot's
// location (CreateVolumeFromSnapshot, then SetVolumeID), as Velero does. A
// PV without a snapshot is returned as it is. An error leaves the PV out:
// creating it would point at a volume that is not the backed-up data.
func (r *run) restoreVolumeData(ctx context.Context, pv *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	snap, ok := r.snapshots[pv.GetName()]
	if !ok {
		return pv, nil
	}
	vs, err := r.snapshotter(ctx, snap.Spec.Location)
	if err != nil {
		return nil, fmt.Errorf("restoring from snapshot %s: %w", snap.Status.ProviderSnapshotID, err)
	}
	volumeID, err := vs.CreateVolumeFromSnapshot(snap.Status.ProviderSnapshotID, snap.Spec.VolumeType, snap.Spec.VolumeAZ, snap.Spec.VolumeIOPS)
	if err != nil {
		return nil, fmt.Errorf("creating a volume from snapshot %s: %w", snap.Status.ProviderSnapshotID, err)
	}
	updated, err := vs.SetVolumeID(pv, volumeID)
	if err != nil {
		return nil, fmt.Errorf("setting volume ID %s on the PersistentVolume: %w", volumeID, err)
	}
	out := &unstructured.Unstructured{Object: updated.UnstructuredContent()}
	r.log.Info("volume restored from snapshot", "persistentVolume", pv.GetName(), "snapshotID", snap.Status.ProviderSnapshotID, "volumeID", volumeID)
	r.mu.Lock()
	r.volumeInfos = append(r.volumeInfos, volumefiles.RestoreVolumeInfo{
		PVName: pv.GetName(), RestoreMethod: volumefiles.NativeSnapshot,
		NativeSnapshotInfo: &volumefiles.NativeSnapshotInfo{SnapshotHandle: snap.Status.ProviderSnapshotID, VolumeType: snap.Spec.VolumeType, VolumeAZ: snap.Spec.VolumeAZ, IOPS: iopsText(snap.Spec.VolumeIOPS), Phase: snap.Status.Phase},
	})
	r.mu.Unlock()
	return out, nil
}

// snapshotter returns the initialised VolumeSnapshotter of the named
// location, set up once per restore: PVs are restored by several workers,
// and each would otherwise read the location and Init its plugin again.
func (r *run) snapshotter(ctx context.Context, location string) (api.VolumeSnapshotter, error) {
	r.snapshottersMu.Lock()
	defer r.snapshottersMu.Unlock()
	if got, ok := r.snapshotters[location]; ok {
		return got.vs, got.err
	}
	vs, err := r.newSnapshotter(ctx, location)
	if r.snapshotters == nil {
		r.snapshotters = map[string]snapshotterResult{}
	}
	r.snapshotters[location] = snapshotterResult{vs, err}
	return vs, err
}

type snapshotterResult struct {
	vs  api.VolumeSnapshotter
	err error
}

// newSnapshotter opens the location through the engine's
// SnapshotLocations, the one way every path opens them, so the volume is
// made with the credentials the snapshot was taken with.
func (r *run) newSnapshotter(ctx context.Context, location string) (api.VolumeSnapshotter, error) {
	if r.e.Plugins == nil || r.e.SnapshotLocations == nil {
		return nil, errors.New("a VolumeSnapshotter is needed, and the restore has no plugins or snapshot locations")
	}
	provider, config, err := r.e.SnapshotLocations.SnapshotLocation(ctx, location)
	if err != nil {
		return nil, err
	}
	vs, err := r.e.Plugins.VolumeSnapshotter(provider)
	if err == nil {
		err = vs.Init(config)
	}
	if err != nil {
		return nil, fmt.Errorf("VolumeSnapshotLocation %s (provider %s): %w", location, provider, err)
	}
	return vs, nil
}

func iopsText(iops *int64) string {
	if iops == nil {
		return "0"
	}
	return fmt.Sprint(*iops)
}

// provisionAnew reports whether the stored PV pv is left out of the
// restore so that its claim gets a new volume, and records it if so.
// Velero's rule: a PV with no snapshot to restore and reclaim policy
// Delete (what a provisioner's volumes have) is not recreated; its claim
// is restored without spec.volumeName, and the target cluster binds it to
// a volume of its own (a provisioner's, or an available PV that matches).
// A PV whose data is in a CSI snapshot is never restored either (Velero's
// rule): its claim gets a new volume made from the snapshot.
// Recreating the PV would point a second claim at the source's volume,
// or, in the cluster the backup came from, wait forever for a volume
// still bound to the original claim. A PV with reclaim policy Retain is
// restored as it was, as Velero does: someone keeps that volume on
// purpose.
func (r *run) provisionAnew(pv *unstructured.Unstructured) bool {
	if _, ok := r.snapshots[pv.GetName()]; ok {
		return false
	}
	policy, _, _ := unstructured.NestedString(pv.Object, "spec", "persistentVolumeReclaimPolicy")
	csi := r.csiVolume(pv.GetName())
	if policy != string(corev1.PersistentVolumeReclaimDelete) && !csi {
		return false
	}
	r.mu.Lock()
	if r.reprovisioned == nil {
		r.reprovisioned = map[string]bool{}
	}
	r.reprovisioned[pv.GetName()] = true
	r.mu.Unlock()
	if csi {
		r.log.Info("persistent volume not restored: its data is in a CSI snapshot, from which its claim gets a new volume", "persistentVolume", pv.GetName())
	} else {
		r.log.Info("persistent volume not restored: the backup holds no snapshot of it and its reclaim policy is Delete, so its claim is restored without spec.volumeName to get a new volume",
			"persistentVolume", pv.GetName())
	}
	if csi {
		r.skip(grPVs, pv, "its data is in a CSI snapshot, from which its claim would get a new volume")
	} else {
		r.skip(grPVs, pv, "no snapshot of it in the backup and reclaim policy Delete: its claim would get a new volume")
	}
	return true
}

// unbindFromUnrestoredVolume removes a claim's spec.volumeName when
// provisionAnew left that volume out.
func (r *run) unbindFromUnrestoredVolume(pvc *unstructured.Unstructured) {
	volume, _, _ := unstructured.NestedString(pvc.Object, "spec", "volumeName")
	r.mu.Lock()
	anew := volume != "" && r.reprovisioned[volume]
	r.mu.Unlock()
	if !anew {
		return
	}
	unstructured.RemoveNestedField(pvc.Object, "spec", "volumeName")
	r.log.Info("claim restored without spec.volumeName, to get a new volume", "namespace", pvc.GetNamespace(), "name", pvc.GetName(), "persistentVolume", volume)
}

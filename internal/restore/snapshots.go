package restore

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/volumes"
)

var vslResource = schema.GroupVersionResource{Group: v1.SchemeGroupVersion.Group, Version: v1.SchemeGroupVersion.Version, Resource: "volumesnapshotlocations"}

// loadSnapshots reads the backup's native snapshots, by PV name. Only
// completed ones can be restored from.
func (r *run) loadSnapshots(ctx context.Context) error {
	snaps, err := volumes.GetSnapshots(ctx, r.store, r.b.Name)
	if err != nil {
		return err
	}
	for _, s := range snaps {
		if s.Status.Phase != volumes.SnapshotPhaseCompleted || s.Status.ProviderSnapshotID == "" {
			continue
		}
		if r.snapshots == nil {
			r.snapshots = map[string]volumes.Snapshot{}
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
	if r.e.Plugins == nil {
		return nil, fmt.Errorf("volume snapshot %s needs a VolumeSnapshotter, and the restore has no plugins", snap.Status.ProviderSnapshotID)
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	loc, err := r.dyn.Resource(vslResource).Namespace(r.rs.Namespace).Get(cctx, snap.Spec.Location, metav1.GetOptions{})
	cancel()
	if err != nil {
		return nil, fmt.Errorf("getting VolumeSnapshotLocation %s of snapshot %s: %w", snap.Spec.Location, snap.Status.ProviderSnapshotID, err)
	}
	vsl := &v1.VolumeSnapshotLocation{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(loc.Object, vsl); err != nil {
		return nil, fmt.Errorf("decoding VolumeSnapshotLocation %s: %w", snap.Spec.Location, err)
	}
	vs, err := r.e.Plugins.VolumeSnapshotter(vsl.Spec.Provider)
	if err == nil {
		err = vs.Init(vsl.Spec.Config)
	}
	if err != nil {
		return nil, fmt.Errorf("VolumeSnapshotLocation %s (provider %s): %w", vsl.Name, vsl.Spec.Provider, err)
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
	r.volumeInfos = append(r.volumeInfos, volumes.RestoreVolumeInfo{
		PVName: pv.GetName(), RestoreMethod: volumes.NativeSnapshot,
		NativeSnapshotInfo: &volumes.NativeSnapshotInfo{SnapshotHandle: snap.Status.ProviderSnapshotID, VolumeType: snap.Spec.VolumeType, VolumeAZ: snap.Spec.VolumeAZ, IOPS: iopsText(snap.Spec.VolumeIOPS), Phase: snap.Status.Phase},
	})
	r.mu.Unlock()
	return out, nil
}

func iopsText(iops *int64) string {
	if iops == nil {
		return "0"
	}
	return fmt.Sprint(*iops)
}

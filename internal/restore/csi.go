package restore

// Claims restored from their CSI snapshots, as Velero v1.18's CSI restore
// item actions do: the stored VolumeSnapshotContent is re-created
// pre-bound to the storage snapshot's handle (deletionPolicy Retain), the
// VolumeSnapshot pointing to it, both under a name derived from the
// restore's UID; the claim gets that VolumeSnapshot as its data source and
// no volumeName, so the provisioner makes a new volume from the snapshot.
// The claim's PersistentVolume is not restored.

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lifeboat-io/lifeboat/internal/archive"
	"github.com/lifeboat-io/lifeboat/internal/csisnapshot"
	"github.com/lifeboat-io/lifeboat/internal/volumefiles"
)

// csiRestore is what a restore knows of the backup's CSI snapshots.
type csiRestore struct {
	// snapshots: namespace/name of each stored VolumeSnapshot the restore
	// admitted -> what its annotations say.
	snapshots map[string]storedSnapshot
	// pvs are the PersistentVolumes whose data is in a CSI snapshot: they
	// are provisioned anew from it, not restored.
	pvs map[string]bool

	classesOnce sync.Once
	// classes: driver -> the first VolumeSnapshotClass of the target
	// cluster for it, by name order.
	classes map[string]string
}

type storedSnapshot struct {
	handle, driver string
	size           int64
}

// loadCSI reads the backup's CSI snapshots: the VolumeSnapshots in the
// spool and the volume information.
func (r *run) loadCSI(ctx context.Context) error {
	c := &csiRestore{snapshots: map[string]storedSnapshot{}, pvs: map[string]bool{}}
	r.csi = c
	claims := map[string]bool{} // namespace/claim with a snapshot
	err := r.spool.each(csisnapshot.VolumeSnapshots.String(), func(it spooledItem) error {
		var vs struct {
			Metadata struct {
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
			Spec struct {
				Source struct {
					PVC string `json:"persistentVolumeClaimName"`
				} `json:"source"`
			} `json:"spec"`
		}
		if json.Unmarshal(it.JSON, &vs) != nil {
			return nil // the item's own restore reports it
		}
		s := storedSnapshot{handle: vs.Metadata.Annotations[csisnapshot.HandleAnnotation], driver: vs.Metadata.Annotations[csisnapshot.DriverAnnotation]}
		if q, err := resource.ParseQuantity(vs.Metadata.Annotations[csisnapshot.RestoreSizeAnnotation]); err == nil {
			s.size = q.Value()
		}
		c.snapshots[it.Namespace+"/"+it.Name] = s
		if vs.Spec.Source.PVC != "" {
			claims[it.Namespace+"/"+vs.Spec.Source.PVC] = true
		}
		return nil
	})
	if err != nil {
		return err
	}
	infos, err := volumefiles.GetVolumeInfo(ctx, r.store, r.b.Name)
	if err != nil {
		return err
	}
	for _, in := range infos {
		if in.BackupMethod == volumefiles.CSISnapshot && in.PVName != "" && in.Result != volumefiles.ResultFailed {
			c.pvs[in.PVName] = true
		}
	}
	// A backup without volume information (older Velero): the PV of a
	// claim a stored VolumeSnapshot was taken of, as Velero finds it.
	if len(infos) == 0 && len(claims) > 0 {
		return r.spool.each(grPVs.String(), func(it spooledItem) error {
			var pv corev1.PersistentVolume
			if json.Unmarshal(it.JSON, &pv) == nil && pv.Spec.ClaimRef != nil && claims[pv.Spec.ClaimRef.Namespace+"/"+pv.Spec.ClaimRef.Name] {
				c.pvs[it.Name] = true
			}
			return nil
		})
	}
	return nil
}

// admitSnapshotItem decides the backup's VolumeSnapshots and contents,
// which resource filters never name (no backup lists them: Velero
// excludes them from every backup and stores only those its claims'
// snapshots made). Like Velero's must-include additional items, they are
// restored with the claims they belong to, whatever the resource and
// label filters say: a VolumeSnapshot when its namespace is restored, a
// content when its VolumeSnapshot's is. With spec.restorePVs false,
// neither is (Velero's actions skip them).
func (r *run) admitSnapshotItem(gr schema.GroupResource, ref archive.ItemRef, data []byte, nsIncluded func(string) bool) bool {
	if r.rs.Spec.RestorePVs != nil && !*r.rs.Spec.RestorePVs {
		return false
	}
	if gr == csisnapshot.VolumeSnapshots {
		return ref.Namespace != "" && nsIncluded(ref.Namespace)
	}
	var vsc struct {
		Spec struct {
			Ref struct {
				Namespace string `json:"namespace"`
			} `json:"volumeSnapshotRef"`
		} `json:"spec"`
	}
	if json.Unmarshal(data, &vsc) != nil {
		return true // its restore reports what is wrong with it
	}
	return vsc.Spec.Ref.Namespace != "" && nsIncluded(vsc.Spec.Ref.Namespace)
}

// csiVolume reports whether a stored PV's data is in a CSI snapshot.
func (r *run) csiVolume(pvName string) bool { return r.csi != nil && r.csi.pvs[pvName] }

// prepareCSI rewrites the CSI snapshot objects and the claims restored
// from them; stored is the item as the backup holds it (status included).
func (r *run) prepareCSI(ctx context.Context, gr schema.GroupResource, obj, stored *unstructured.Unstructured, storedNS string) error {
	switch gr {
	case csisnapshot.VolumeSnapshotContents:
		return r.prepareContent(ctx, obj, stored)
	case csisnapshot.VolumeSnapshots:
		return r.prepareSnapshot(obj, stored)
	case grPVCs:
		r.prepareClaim(obj, stored, storedNS)
	}
	return nil
}

func (r *run) restoredName(vsName string) string {
	return csisnapshot.RestoredName(string(r.rs.UID), vsName)
}

// prepareContent: the content re-created pre-bound to the stored handle,
// with Retain (deleting the restored snapshot must not delete the
// backup's storage snapshot), bound to the VolumeSnapshot of the same
// new name in the mapped namespace, with a class of the target cluster
// for its driver (if any), as Velero does.
func (r *run) prepareContent(ctx context.Context, obj, stored *unstructured.Unstructured) error {
	handle, _, _ := unstructured.NestedString(stored.Object, "status", "snapshotHandle")
	if handle == "" {
		return fmt.Errorf("VolumeSnapshotContent %s: the backup holds no snapshot handle in its status, so it cannot be re-created", stored.GetName())
	}
	refNS, _, _ := unstructured.NestedString(stored.Object, "spec", "volumeSnapshotRef", "namespace")
	refName, _, _ := unstructured.NestedString(stored.Object, "spec", "volumeSnapshotRef", "name")
	name := r.restoredName(refName)
	obj.SetName(name)
	ref := map[string]any{"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot", "namespace": r.tf.targetNamespace(refNS), "name": name}
	_ = unstructured.SetNestedMap(obj.Object, ref, "spec", "volumeSnapshotRef")
	_ = unstructured.SetNestedField(obj.Object, "Retain", "spec", "deletionPolicy")
	_ = unstructured.SetNestedMap(obj.Object, map[string]any{"snapshotHandle": handle}, "spec", "source")
	unstructured.RemoveNestedField(obj.Object, "spec", "volumeSnapshotClassName")
	driver, _, _ := unstructured.NestedString(stored.Object, "spec", "driver")
	if class := r.snapshotClassFor(ctx, driver); class != "" {
		_ = unstructured.SetNestedField(obj.Object, class, "spec", "volumeSnapshotClassName")
	}
	return nil
}

// prepareSnapshot: the VolumeSnapshot restored from the content above,
// with no class (the restore must not depend on one), as Velero does.
func (r *run) prepareSnapshot(obj, stored *unstructured.Unstructured) error {
	bound, _, _ := unstructured.NestedString(stored.Object, "status", "boundVolumeSnapshotContentName")
	if bound == "" {
		return fmt.Errorf("VolumeSnapshot %s/%s: the backup holds no bound VolumeSnapshotContent for it, so it cannot be restored", stored.GetNamespace(), stored.GetName())
	}
	name := r.restoredName(stored.GetName())
	obj.SetName(name)
	_ = unstructured.SetNestedMap(obj.Object, map[string]any{"volumeSnapshotContentName": name}, "spec", "source")
	unstructured.RemoveNestedField(obj.Object, "spec", "volumeSnapshotClassName")
	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[csisnapshot.ContentDeletionPolicyAnnot] = "Retain"
	ann[csisnapshot.MustIncludeOnRestore] = "true"
	obj.SetAnnotations(ann)
	return nil
}

// prepareClaim points a claim whose backup holds its CSI snapshot at the
// restored VolumeSnapshot.
func (r *run) prepareClaim(obj, stored *unstructured.Unstructured, storedNS string) {
	vsName := stored.GetAnnotations()[csisnapshot.VolumeSnapshotNameLabel]
	if vsName == "" {
		return
	}
	clearSource := func() {
		unstructured.RemoveNestedField(obj.Object, "spec", "volumeName")
		unstructured.RemoveNestedField(obj.Object, "spec", "dataSource")
		unstructured.RemoveNestedField(obj.Object, "spec", "dataSourceRef")
	}
	if r.rs.Spec.RestorePVs != nil && !*r.rs.Spec.RestorePVs {
		clearSource()
		return
	}
	snap, ok := r.csi.snapshots[storedNS+"/"+vsName]
	if !ok {
		clearSource()
		r.results.Warning(obj.GetNamespace(), fmt.Sprintf("PersistentVolumeClaim %s/%s: its CSI VolumeSnapshot %s/%s is not among the items restored "+
			"(not in the backup, or left out by the restore's filters), so the claim gets a new, empty volume", obj.GetNamespace(), obj.GetName(), storedNS, vsName))
		return
	}
	clearSource()
	name := r.restoredName(vsName)
	_ = unstructured.SetNestedMap(obj.Object, map[string]any{"apiGroup": csisnapshot.Group, "kind": "VolumeSnapshot", "name": name}, "spec", "dataSource")
	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[csisnapshot.MustIncludeOnRestore] = "true"
	obj.SetAnnotations(ann)
	r.mu.Lock()
	r.volumeInfos = append(r.volumeInfos, volumefiles.RestoreVolumeInfo{
		PVCName: obj.GetName(), PVCNamespace: obj.GetNamespace(), RestoreMethod: volumefiles.CSISnapshot,
		CSISnapshotInfo: &volumefiles.CSISnapshotInfo{SnapshotHandle: snap.handle, Size: snap.size, Driver: snap.driver, VSCName: name,
			VolumeSnapshot: obj.GetNamespace() + "/" + name},
	})
	r.mu.Unlock()
	r.log.Info("claim restored from its CSI snapshot", "namespace", obj.GetNamespace(), "name", obj.GetName(), "volumeSnapshot", name, "snapshotHandle", snap.handle)
}

// snapshotClassFor returns the target cluster's first VolumeSnapshotClass
// (by name) of driver, or "" when it has none or they cannot be listed.
func (r *run) snapshotClassFor(ctx context.Context, driver string) string {
	c := r.csi
	c.classesOnce.Do(func() {
		c.classes = map[string]string{}
		info, err := r.types.lookup(csisnapshot.VolumeSnapshotClasses, "v1")
		if err != nil {
			return
		}
		lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		list, err := r.dyn.Resource(info.GVR).List(lctx, metav1.ListOptions{})
		if err != nil {
			r.log.Warn("listing VolumeSnapshotClasses", "error", err)
			return
		}
		for _, it := range list.Items {
			d, _, _ := unstructured.NestedString(it.Object, "driver")
			if cur, ok := c.classes[d]; !ok || it.GetName() < cur {
				c.classes[d] = it.GetName()
			}
		}
	})
	return c.classes[driver]
}

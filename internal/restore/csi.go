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
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/archive"
	"github.com/lifeboat-io/lifeboat/internal/csisnapshot"
	"github.com/lifeboat-io/lifeboat/internal/selection"
	"github.com/lifeboat-io/lifeboat/internal/volumefiles"
)

// csiRestore is what a restore knows of the backup's CSI snapshots.
type csiRestore struct {
	// snapshots: namespace/name of each stored VolumeSnapshot the restore
	// restores -> what the backup records of it.
	snapshots map[string]storedSnapshot
	// skip holds the spooled VolumeSnapshots and contents (itemKey) that
	// are not restored: no restored claim needs them and the filters left
	// them out.
	skip map[string]bool
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
	// content is the VolumeSnapshotContent the snapshot was bound to.
	content string
	// size is the snapshot's restore size in bytes, 0 when unknown.
	size int64
}

// skipped reports whether a spooled item is a snapshot object the restore
// leaves out.
func (c *csiRestore) skipped(gr schema.GroupResource, it spooledItem) bool {
	return c != nil && len(c.skip) > 0 && c.skip[itemKey(gr.String(), it.Namespace, it.Name)]
}

// spoolSnapshotItem decides whether a stored VolumeSnapshot or content is
// spooled. It is restored, as in Velero, when the restore's filters admit
// it (admit, noted in csiByFilters) or when a restored claim is made from
// it: Velero's claim action names the VolumeSnapshot as an additional item
// that must be restored whatever the filters say
// (restore.velero.io/must-include-additional-items), and the snapshot's
// action does the same for its content. Which claims are restored is
// known only once the archive is read, so every snapshot object a claim
// of an admitted namespace could need is spooled, and loadCSI drops the
// others. With spec.restorePVs false neither is (Velero's actions skip
// them).
func (r *run) spoolSnapshotItem(gr schema.GroupResource, ref archive.ItemRef, data []byte, nsIncluded func(string) bool,
	admit func(archive.ItemRef, schema.GroupResource, []byte) (bool, error)) (bool, error) {
	if r.rs.Spec.RestorePVs != nil && !*r.rs.Spec.RestorePVs {
		return false, nil
	}
	ok, err := admit(ref, gr, data)
	if err != nil {
		return false, err
	}
	if ok {
		if r.csiByFilters == nil {
			r.csiByFilters = map[string]bool{}
		}
		r.csiByFilters[itemKey(ref.GroupResource, ref.Namespace, ref.Name)] = true
		return true, nil
	}
	if gr == csisnapshot.VolumeSnapshots {
		return ref.Namespace != "" && nsIncluded(ref.Namespace), nil
	}
	var vsc struct {
		Spec struct {
			Ref struct {
				Namespace string `json:"namespace"`
			} `json:"volumeSnapshotRef"`
		} `json:"spec"`
	}
	if json.Unmarshal(data, &vsc) != nil {
		return false, nil // no snapshot can name it usefully
	}
	return vsc.Spec.Ref.Namespace != "" && nsIncluded(vsc.Spec.Ref.Namespace), nil
}

// noteCSIExclusions notes which snapshot types spec.excludedResources
// names, so that restoring them for a claim anyway is said out loud.
func (r *run) noteCSIExclusions(excluded []string, resolver selection.ResourceResolver) error {
	if len(excluded) == 0 {
		return nil
	}
	f, errs := selection.NewResourceFilter(&v1.BackupSpec{ExcludedResources: excluded}, resolver)
	if len(errs) > 0 {
		return fmt.Errorf("invalid filters: %w", errors.Join(errs...))
	}
	r.csiExcluded = map[schema.GroupResource]bool{
		csisnapshot.VolumeSnapshots:        !f.ShouldRestoreResource(csisnapshot.VolumeSnapshots, true),
		csisnapshot.VolumeSnapshotContents: !f.ShouldRestoreResource(csisnapshot.VolumeSnapshotContents, false),
	}
	return nil
}

// loadCSI reads what the restore needs of the backup's CSI snapshots: the
// snapshots the restored claims are made from and those the filters
// admit, with their contents; their restore sizes; the volumes they
// replace.
func (r *run) loadCSI(ctx context.Context) error {
	c := &csiRestore{snapshots: map[string]storedSnapshot{}, skip: map[string]bool{}, pvs: map[string]bool{}}
	r.csi = c
	vsGR, vscGR := csisnapshot.VolumeSnapshots.String(), csisnapshot.VolumeSnapshotContents.String()
	// needed: namespace/VolumeSnapshot -> the restored claim made from it.
	needed := map[string]string{}
	err := r.spool.each(grPVCs.String(), func(it spooledItem) error {
		var pvc struct {
			Metadata struct {
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
		}
		if json.Unmarshal(it.JSON, &pvc) == nil {
			if vs := pvc.Metadata.Annotations[csisnapshot.VolumeSnapshotNameLabel]; vs != "" {
				needed[it.Namespace+"/"+vs] = it.Name
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	claims := map[string]bool{} // namespace/claim a restored snapshot was taken of
	contents := map[string]bool{}
	var forced []string // namespace/VolumeSnapshot restored for a claim only
	err = r.spool.each(vsGR, func(it spooledItem) error {
		var vs struct {
			Metadata struct {
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
			Spec struct {
				Source struct {
					PVC string `json:"persistentVolumeClaimName"`
				} `json:"source"`
			} `json:"spec"`
			Status struct {
				Bound       string `json:"boundVolumeSnapshotContentName"`
				RestoreSize string `json:"restoreSize"`
			} `json:"status"`
		}
		if json.Unmarshal(it.JSON, &vs) != nil {
			return nil // the item's own restore reports it
		}
		if vs.Spec.Source.PVC != "" {
			claims[it.Namespace+"/"+vs.Spec.Source.PVC] = true
		}
		key := it.Namespace + "/" + it.Name
		_, forClaim := needed[key]
		byFilters := r.csiByFilters[itemKey(vsGR, it.Namespace, it.Name)]
		if !forClaim && !byFilters {
			c.skip[itemKey(vsGR, it.Namespace, it.Name)] = true
			return nil
		}
		ann := vs.Metadata.Annotations
		s := storedSnapshot{handle: ann[csisnapshot.HandleAnnotation], driver: ann[csisnapshot.DriverAnnotation], content: vs.Status.Bound}
		s.size = max(quantityBytes(ann[csisnapshot.RestoreSizeAnnotation]), quantityBytes(vs.Status.RestoreSize))
		c.snapshots[key] = s
		if s.content != "" {
			contents[s.content] = true
		}
		if forClaim && !byFilters {
			forced = append(forced, key)
		}
		return nil
	})
	if err != nil {
		return err
	}
	contentSizes := map[string]int64{}
	err = r.spool.each(vscGR, func(it spooledItem) error {
		if !contents[it.Name] && !r.csiByFilters[itemKey(vscGR, "", it.Name)] {
			c.skip[itemKey(vscGR, it.Namespace, it.Name)] = true
			return nil
		}
		var vsc struct {
			Status struct {
				RestoreSize *int64 `json:"restoreSize"`
			} `json:"status"`
		}
		if json.Unmarshal(it.JSON, &vsc) == nil && vsc.Status.RestoreSize != nil {
			contentSizes[it.Name] = *vsc.Status.RestoreSize
		} else {
			contentSizes[it.Name] = 0
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
	infoSizes := map[string]int64{} // namespace/claim -> the snapshot's size
	for _, in := range infos {
		if in.BackupMethod == volumefiles.CSISnapshot && in.PVName != "" && in.Result != volumefiles.ResultFailed {
			c.pvs[in.PVName] = true
		}
		if in.CSISnapshotInfo != nil {
			infoSizes[in.PVCNamespace+"/"+in.PVCName] = in.CSISnapshotInfo.Size
		}
	}
	for key, s := range c.snapshots {
		size, ok := contentSizes[s.content]
		if !ok {
			// Bound to a content the backup does not hold: it cannot be
			// re-created, so the snapshot is not restored either and its
			// claim gets a new volume, with a warning.
			delete(c.snapshots, key)
			ns, name, _ := strings.Cut(key, "/")
			c.skip[itemKey(vsGR, ns, name)] = true
			r.log.Warn("VolumeSnapshot not restored: the backup does not hold its VolumeSnapshotContent", "volumeSnapshot", key, "content", s.content)
			continue
		}
		// The restore size as the backup records it: the content's
		// status.restoreSize (where Velero reads it), else the
		// VolumeSnapshot's or the volume information's; they agree when
		// all are there.
		ns, _, _ := strings.Cut(key, "/")
		s.size = max(size, s.size, infoSizes[ns+"/"+needed[key]])
		c.snapshots[key] = s
	}
	for _, key := range forced {
		r.warnForcedSnapshot(key, needed[key])
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

// warnForcedSnapshot says that a claim's snapshot objects are restored
// although spec.excludedResources names their type: the claim cannot get
// its data otherwise (Velero restores them too, as must-include
// additional items).
func (r *run) warnForcedSnapshot(vsKey, claim string) {
	var named []string
	for _, gr := range []schema.GroupResource{csisnapshot.VolumeSnapshots, csisnapshot.VolumeSnapshotContents} {
		if r.csiExcluded[gr] {
			named = append(named, gr.String())
		}
	}
	if len(named) == 0 {
		return
	}
	ns, vs, _ := strings.Cut(vsKey, "/")
	target := r.tf.targetNamespace(ns)
	r.results.Warning(target, fmt.Sprintf("PersistentVolumeClaim %s/%s: its CSI snapshot (VolumeSnapshot %s/%s and its content) is restored with it "+
		"although spec.excludedResources names %s: the claim's data is in it, and Velero restores it too. "+
		"To restore the claim without its data, set restorePVs to false; to leave the claim out, exclude persistentvolumeclaims",
		target, claim, ns, vs, strings.Join(named, " and ")))
}

// quantityBytes is a quantity's value in bytes, 0 when it is empty or
// not one.
func quantityBytes(s string) int64 {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0
	}
	return q.Value()
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
		r.results.Warning(obj.GetNamespace(), fmt.Sprintf("PersistentVolumeClaim %s/%s: the backup does not hold its CSI snapshot "+
			"(VolumeSnapshot %s/%s with its VolumeSnapshotContent), so the claim gets a new, empty volume", obj.GetNamespace(), obj.GetName(), storedNS, vsName))
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
	r.fitRequestToSnapshot(obj, snap.size)
	r.mu.Lock()
	if r.csiClaims == nil {
		r.csiClaims = map[string]volumefiles.RestoreVolumeInfo{}
	}
	r.csiClaims[obj.GetNamespace()+"/"+obj.GetName()] = volumefiles.RestoreVolumeInfo{
		PVCName: obj.GetName(), PVCNamespace: obj.GetNamespace(), RestoreMethod: volumefiles.CSISnapshot,
		CSISnapshotInfo: &volumefiles.CSISnapshotInfo{SnapshotHandle: snap.handle, Size: snap.size, Driver: snap.driver, VSCName: name,
			VolumeSnapshot: obj.GetNamespace() + "/" + name},
	}
	r.mu.Unlock()
	r.log.Info("claim restored from its CSI snapshot", "namespace", obj.GetNamespace(), "name", obj.GetName(), "volumeSnapshot", name, "snapshotHandle", snap.handle)
}

// fitRequestToSnapshot raises the claim's storage request to the
// snapshot's restore size when that is larger (or the claim asks for
// none): a provisioner refuses to make a volume from a snapshot larger
// than the volume asked for, which leaves the claim Pending. The volume a
// claim was given can be larger than it asked, and so its snapshot. Velero
// raises it in the claim it stores, once the snapshot's content has its
// restore size; Lifeboat stores a claim before its snapshot is cut, so it
// raises it here, for its own backups and Velero's alike.
func (r *run) fitRequestToSnapshot(obj *unstructured.Unstructured, size int64) {
	if size <= 0 {
		return
	}
	want := resource.NewQuantity(size, resource.BinarySI)
	cur, found, _ := unstructured.NestedString(obj.Object, "spec", "resources", "requests", "storage")
	if found {
		if q, err := resource.ParseQuantity(cur); err == nil && q.Cmp(*want) >= 0 {
			return
		}
	}
	_ = unstructured.SetNestedField(obj.Object, want.String(), "spec", "resources", "requests", "storage")
	r.log.Info("claim's storage request raised to its snapshot's restore size", "namespace", obj.GetNamespace(), "name", obj.GetName(),
		"requested", cur, "restoreSize", want.String())
}

// claimCreated records the restore volume information of a claim made
// from its CSI snapshot once it is created, as Velero records only the
// claims its restore created. name is the claim's name when it was
// prepared, final its name as created.
func (r *run) claimCreated(ns, name, final string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	in, ok := r.csiClaims[ns+"/"+name]
	if !ok {
		return
	}
	in.PVCName = final
	r.volumeInfos = append(r.volumeInfos, in)
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

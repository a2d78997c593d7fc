// Package csisnapshot is the one place for the shapes of CSI snapshot
// objects as Velero v1.18 makes, stores and restores them: the
// VolumeSnapshot a backup creates for a claim, the annotations it stores
// on it, the class it picks, and the VolumeSnapshot and
// VolumeSnapshotContent a restore re-creates from the stored items. It is
// pure (no client): the backup and restore engines do the calls.
package csisnapshot

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// Group is the snapshot API group.
const Group = "snapshot.storage.k8s.io"

// The snapshot resources, as archive paths and discovery name them.
var (
	VolumeSnapshots        = schema.GroupResource{Group: Group, Resource: "volumesnapshots"}
	VolumeSnapshotContents = schema.GroupResource{Group: Group, Resource: "volumesnapshotcontents"}
	VolumeSnapshotClasses  = schema.GroupResource{Group: Group, Resource: "volumesnapshotclasses"}
)

// Velero's labels and annotations for CSI snapshots (pkg/apis/velero/v1),
// which its tools and restores read.
const (
	// VolumeSnapshotNameLabel is set, as label and annotation, on a stored
	// claim: the VolumeSnapshot the backup took of it. A restore makes the
	// claim's data source from it.
	VolumeSnapshotNameLabel = "velero.io/volume-snapshot-name"
	// Annotations on the stored VolumeSnapshot, from its content.
	HandleAnnotation            = "velero.io/csi-volumesnapshot-handle"
	RestoreSizeAnnotation       = "velero.io/csi-volumesnapshot-restore-size"
	DriverAnnotation            = "velero.io/csi-driver-name"
	ContentDeletionPolicyAnnot  = "velero.io/csi-vsc-deletion-policy"
	MustIncludeAdditionalItems  = "backup.velero.io/must-include-additional-items"
	MustIncludeOnRestore        = "restore.velero.io/must-include-additional-items"
	ClassSelectorLabel          = "velero.io/csi-volumesnapshot-class"
	ClassBackupAnnotationPrefix = "velero.io/csi-volumesnapshot-class"
	ClassClaimAnnotation        = "velero.io/csi-volumesnapshot-class"
	KubernetesDefaultClassAnnot = "snapshot.storage.kubernetes.io/is-default-class"
)

// DefaultTimeout is how long a backup waits for a snapshot when
// spec.csiSnapshotTimeout is unset (Velero's server default).
const DefaultTimeout = 10 * time.Minute

// ChooseClass picks the VolumeSnapshotClass for a claim whose volume's
// driver is driver, in Velero's order: the claim's annotation
// velero.io/csi-volumesnapshot-class, the backup's annotation
// velero.io/csi-volumesnapshot-class_<driver>, the driver's class
// labelled velero.io/csi-volumesnapshot-class, the driver's class marked
// default for Kubernetes, the driver's only class. An annotation naming a
// missing class or one of another driver is an error, as in Velero; so is
// no class at all. Each error names the fix.
func ChooseClass(classes []snapshotv1.VolumeSnapshotClass, driver string, b *v1.Backup, pvc *corev1.PersistentVolumeClaim) (*snapshotv1.VolumeSnapshotClass, error) {
	sorted := append([]snapshotv1.VolumeSnapshotClass(nil), classes...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	byName := func(name, where string) (*snapshotv1.VolumeSnapshotClass, error) {
		for i := range sorted {
			c := &sorted[i]
			if !strings.EqualFold(c.Name, name) {
				continue
			}
			if !strings.EqualFold(c.Driver, driver) {
				return nil, fmt.Errorf("%s names VolumeSnapshotClass %s, whose driver is %s, not the volume's %s; name a class of driver %s", where, c.Name, c.Driver, driver, driver)
			}
			return c, nil
		}
		return nil, fmt.Errorf("%s names VolumeSnapshotClass %s, which does not exist; create it or fix the annotation", where, name)
	}
	if name, ok := pvc.Annotations[ClassClaimAnnotation]; ok {
		c, err := byName(name, fmt.Sprintf("the claim's annotation %s", ClassClaimAnnotation))
		// Velero falls through to the backup's choice when the claim's
		// annotation is wrong, and only logs it; an error here would
		// refuse what Velero backs up.
		if err == nil {
			return c, nil
		}
	}
	key := ClassBackupAnnotationPrefix + "_" + strings.ToLower(driver)
	if name, ok := b.Annotations[key]; ok {
		if c, err := byName(name, fmt.Sprintf("the backup's annotation %s", key)); err == nil {
			return c, nil
		}
	}
	var ofDriver []*snapshotv1.VolumeSnapshotClass
	for i := range sorted {
		if sorted[i].Driver == driver {
			ofDriver = append(ofDriver, &sorted[i])
		}
	}
	for _, c := range ofDriver {
		if _, ok := c.Labels[ClassSelectorLabel]; ok {
			return c, nil
		}
	}
	for _, c := range ofDriver {
		if _, ok := c.Annotations[KubernetesDefaultClassAnnot]; ok {
			return c, nil
		}
	}
	if len(ofDriver) == 1 {
		return ofDriver[0], nil
	}
	return nil, fmt.Errorf("no VolumeSnapshotClass for driver %s: label the class to use %s=true (or annotate the backup %s, or the claim %s)",
		driver, ClassSelectorLabel, key, ClassClaimAnnotation)
}

// GenerateNameFor is the generateName a backup's VolumeSnapshot of claim
// pvcName is created with, Velero's.
func GenerateNameFor(pvcName string) string { return "velero-" + pvcName + "-" }

// NewVolumeSnapshot is the VolumeSnapshot a backup creates for a claim,
// as Velero's claim action makes it: the claim's labels plus the backup's
// name, the claim as source, the chosen class.
func NewVolumeSnapshot(b *v1.Backup, pvc *corev1.PersistentVolumeClaim, class string) *snapshotv1.VolumeSnapshot {
	labels := map[string]string{}
	for k, val := range pvc.Labels {
		labels[k] = val
	}
	labels[v1.BackupNameLabel] = v1.LabelValue(b.Name)
	claim := pvc.Name
	return &snapshotv1.VolumeSnapshot{
		TypeMeta:   metav1.TypeMeta{APIVersion: snapshotv1.SchemeGroupVersion.String(), Kind: "VolumeSnapshot"},
		ObjectMeta: metav1.ObjectMeta{GenerateName: GenerateNameFor(pvc.Name), Namespace: pvc.Namespace, Labels: labels},
		Spec: snapshotv1.VolumeSnapshotSpec{
			Source:                  snapshotv1.VolumeSnapshotSource{PersistentVolumeClaimName: &claim},
			VolumeSnapshotClassName: &class,
		},
	}
}

// ClaimLabels and ClaimAnnotations are what Velero adds to a stored claim
// whose volume got a VolumeSnapshot.
func ClaimLabels(b *v1.Backup, vsName string) map[string]string {
	return map[string]string{VolumeSnapshotNameLabel: vsName, v1.BackupNameLabel: b.Name}
}

// ClaimAnnotations: see ClaimLabels.
func ClaimAnnotations(vsName string) map[string]string {
	return map[string]string{VolumeSnapshotNameLabel: vsName, MustIncludeAdditionalItems: "true"}
}

// StoredAnnotations are what Velero records on the stored VolumeSnapshot
// from its content: the storage snapshot's handle and driver (a restore
// re-creates the content from them), the content's deletion policy and
// the restore size.
func StoredAnnotations(vsc *snapshotv1.VolumeSnapshotContent) map[string]string {
	out := map[string]string{ContentDeletionPolicyAnnot: string(vsc.Spec.DeletionPolicy)}
	if st := vsc.Status; st != nil {
		if st.SnapshotHandle != nil {
			out[HandleAnnotation] = *st.SnapshotHandle
			out[DriverAnnotation] = vsc.Spec.Driver
		}
		if st.RestoreSize != nil {
			out[RestoreSizeAnnotation] = resource.NewQuantity(*st.RestoreSize, resource.BinarySI).String()
		}
	}
	return out
}

// RestoredName is the name a restore gives the VolumeSnapshot made from
// stored VolumeSnapshot vsName, and its content: Velero's, a digest of the
// restore's UID and the name, so two restores of one backup do not clash.
func RestoredName(restoreUID, vsName string) string {
	sum := sha256.Sum256([]byte(restoreUID + "/" + vsName))
	return hex.EncodeToString(sum[:])
}

// PreProvisionedContent is a VolumeSnapshotContent pointing at the storage
// snapshot handle by itself: stored (a content as a backup stored it)
// under name, without status or server-set metadata, with policy as its
// deletionPolicy, without a class (what it does must not depend on one),
// and bound to a VolumeSnapshot that cannot exist (the CRD requires the
// reference; suffix makes it unique), with no UID, as Velero makes them.
// The csi-snapshotter looks the handle up in the driver (ListSnapshots)
// and records it in the status, or records that it is not found.
func PreProvisionedContent(stored *unstructured.Unstructured, name, handle, policy, suffix string) *unstructured.Unstructured {
	obj := stored.DeepCopy()
	unstructured.RemoveNestedField(obj.Object, "status")
	for _, f := range []string{"resourceVersion", "uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
		"generation", "managedFields", "ownerReferences", "generateName", "selfLink", "finalizers"} {
		unstructured.RemoveNestedField(obj.Object, "metadata", f)
	}
	obj.SetName(name)
	spec, _, _ := unstructured.NestedMap(obj.Object, "spec")
	if spec == nil {
		spec = map[string]any{}
	}
	spec["deletionPolicy"] = policy
	spec["source"] = map[string]any{"snapshotHandle": handle}
	delete(spec, "volumeSnapshotClassName")
	spec["volumeSnapshotRef"] = map[string]any{
		"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
		"namespace": "ns-" + suffix, "name": "name-" + suffix,
	}
	obj.Object["spec"] = spec
	return obj
}

// ContentHandle is the storage snapshot a stored content names: its
// status (a dynamically made content, what Velero stores), else its
// source (a pre-provisioned one).
func ContentHandle(vsc *unstructured.Unstructured) string {
	if h, _, _ := unstructured.NestedString(vsc.Object, "status", "snapshotHandle"); h != "" {
		return h
	}
	h, _, _ := unstructured.NestedString(vsc.Object, "spec", "source", "snapshotHandle")
	return h
}

// SnapshotNotFound reports whether the csi-snapshotter recorded on a
// content that the driver does not have its snapshot.
func SnapshotNotFound(vsc *unstructured.Unstructured) bool {
	msg, _, _ := unstructured.NestedString(vsc.Object, "status", "error", "message")
	// The first is the sidecar's words for an empty ListSnapshots answer,
	// the second a driver that answers NotFound.
	return strings.Contains(msg, "can not find snapshot") || strings.Contains(msg, "code = NotFound")
}

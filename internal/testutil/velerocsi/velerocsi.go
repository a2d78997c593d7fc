// Package velerocsi writes a backup with CSI snapshots into a bucket as
// Velero v1.18.3 lays it out, for tests of what Lifeboat does with
// Velero-made backups. Nothing of Velero runs: the caller takes the
// snapshots on a real CSI stack and hands the objects it read from the
// cluster (claim, volume, VolumeSnapshot, VolumeSnapshotContent, class);
// this package makes the changes Velero's CSI backup item actions make to
// them (pkg/backup/actions/csi in Velero's sources: labels and annotations
// on the claim and the VolumeSnapshot, the backup label on the content),
// and writes the tarball, velero-backup.json, the volume information
// (internal/volume/volumes_information.go) and the other files Velero's
// persistence writes (pkg/persistence/object_store.go PutBackup).
//
// Finalize then does to the cluster what Velero does when such a backup
// ends (pkg/util/csi DeleteReadyVolumeSnapshot): the content set to Retain
// and deleted, then the VolumeSnapshot, so the storage snapshot outlives
// both and only the bucket says it exists.
package velerocsi

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/archive/archivetest"
	"github.com/lifeboat-io/lifeboat/internal/resourcelist"
	"github.com/lifeboat-io/lifeboat/internal/storage"
)

// Velero's names (pkg/apis/velero/v1/labels_annotations.go).
const (
	VolumeSnapshotLabel        = "velero.io/volume-snapshot-name"
	VolumeSnapshotHandle       = "velero.io/csi-volumesnapshot-handle"
	VolumeSnapshotRestoreSize  = "velero.io/csi-volumesnapshot-restore-size"
	DriverName                 = "velero.io/csi-driver-name"
	VSCDeletionPolicy          = "velero.io/csi-vsc-deletion-policy"
	MustIncludeAdditionalItems = "backup.velero.io/must-include-additional-items"
	VolumeSnapshotBackupAction = "velero.io/csi-volumesnapshot-backupper"
	tarballFormatVersion       = "1.1.0"
	volumeSnapshotsResource    = "volumesnapshots.snapshot.storage.k8s.io"
	volumeSnapshotContentsRes  = "volumesnapshotcontents.snapshot.storage.k8s.io"
	volumeSnapshotClassesRes   = "volumesnapshotclasses.snapshot.storage.k8s.io"
	persistentVolumeClaimsRes  = "persistentvolumeclaims"
	persistentVolumesRes       = "persistentvolumes"
	namespacesRes              = "namespaces"
)

// Volume is one claim and its snapshot, as read from the cluster once the
// snapshot was ready.
type Volume struct {
	Claim, Volume, Snapshot, Content *unstructured.Unstructured
}

// Fixture is the backup to write.
type Fixture struct {
	// Backup gives the name, namespace, UID, labels and spec; Write fills
	// in the status as Velero leaves it (Completed).
	Backup *v1.Backup
	// Class is the VolumeSnapshotClass the snapshots were taken with.
	Class   *unstructured.Unstructured
	Volumes []Volume
	// Started is when the backup ran (its expiration is Started + TTL).
	Started time.Time
	// WithoutTarball leaves <name>.tar.gz out: a backup whose tarball was
	// lost, of which only the volume information tells the snapshots.
	WithoutTarball bool
}

// Write puts the backup in store and returns velero-backup.json's Backup.
func Write(ctx context.Context, store *storage.BackupStore, f Fixture) (*v1.Backup, error) {
	b := f.Backup.DeepCopy()
	name := b.Name
	if f.Started.IsZero() {
		f.Started = time.Now().Add(-time.Minute)
	}
	var (
		items    = map[string]*unstructured.Unstructured{} // by tarball path
		list     = map[string][]string{}
		infos    []map[string]any
		ops      []map[string]any
		vss, vsc []map[string]any
	)
	add := func(gr string, obj *unstructured.Unstructured) {
		p := "resources/" + gr + "/"
		if ns := obj.GetNamespace(); ns != "" {
			p += "namespaces/" + ns + "/"
		} else {
			p += "cluster/"
		}
		items[p+obj.GetName()+".json"] = obj
		key := obj.GetAPIVersion() + "/" + obj.GetKind()
		id := obj.GetName()
		if ns := obj.GetNamespace(); ns != "" {
			id = ns + "/" + id
		}
		list[key] = append(list[key], id)
	}
	label := v1.LabelValue(name)
	for _, vol := range f.Volumes {
		ns := vol.Claim.GetNamespace()
		nsObj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace",
			"metadata": map[string]any{"name": ns, "labels": map[string]any{"kubernetes.io/metadata.name": ns}},
			"spec":     map[string]any{"finalizers": []any{"kubernetes"}}, "status": map[string]any{"phase": "Active"}}}
		add(namespacesRes, nsObj)

		vs := clean(vol.Snapshot)
		content := clean(vol.Content)
		handle, _, _ := unstructured.NestedString(content.Object, "status", "snapshotHandle")
		driver, _, _ := unstructured.NestedString(content.Object, "spec", "driver")
		policy, _, _ := unstructured.NestedString(content.Object, "spec", "deletionPolicy")
		size := restoreSize(content)

		// Velero's VolumeSnapshot action: the content labelled with the
		// backup (in the cluster, then read back as an additional item)...
		setLabel(content, v1.BackupNameLabel, label)
		// ... and the VolumeSnapshot annotated with what a restore needs.
		setLabel(vs, v1.BackupNameLabel, label)
		ann := map[string]string{VSCDeletionPolicy: policy, VolumeSnapshotHandle: handle, DriverName: driver, MustIncludeAdditionalItems: "true"}
		if size > 0 {
			ann[VolumeSnapshotRestoreSize] = resource.NewQuantity(size, resource.BinarySI).String()
		}
		for k, v := range ann {
			setAnnotation(vs, k, v)
		}
		// Velero's claim action: the claim names its snapshot.
		claim := clean(vol.Claim)
		setLabel(claim, VolumeSnapshotLabel, vs.GetName())
		setLabel(claim, v1.BackupNameLabel, name)
		setAnnotation(claim, VolumeSnapshotLabel, vs.GetName())
		setAnnotation(claim, MustIncludeAdditionalItems, "true")
		pv := clean(vol.Volume)

		add(persistentVolumeClaimsRes, claim)
		add(persistentVolumesRes, pv)
		add(volumeSnapshotsResource, vs)
		add(volumeSnapshotContentsRes, content)
		vss = append(vss, vs.Object)
		vsc = append(vsc, content.Object)

		opID := fmt.Sprintf("%s/%s/%s", vs.GetNamespace(), vs.GetName(), f.Started.UTC().Format(time.RFC3339))
		started := metav1.NewTime(f.Started.UTC().Truncate(time.Second))
		ops = append(ops, map[string]any{
			"spec": map[string]any{
				"backupName": name, "backupUID": string(b.UID), "backupItemAction": VolumeSnapshotBackupAction,
				"resourceIdentifier": map[string]any{"Group": "snapshot.storage.k8s.io", "Resource": "volumesnapshots", "Namespace": vs.GetNamespace(), "Name": vs.GetName()},
				"operationID":        opID,
				"postOperationItems": []any{
					map[string]any{"Group": "snapshot.storage.k8s.io", "Resource": "volumesnapshots", "Namespace": vs.GetNamespace(), "Name": vs.GetName()},
					map[string]any{"Group": "snapshot.storage.k8s.io", "Resource": "volumesnapshotcontents", "Namespace": "", "Name": content.GetName()},
				},
			},
			"status": map[string]any{"phase": "Completed", "created": started, "started": started, "updated": started},
		})
		ready := true
		reclaim, _, _ := unstructured.NestedString(pv.Object, "spec", "persistentVolumeReclaimPolicy")
		infos = append(infos, map[string]any{
			"pvcName": claim.GetName(), "pvcNamespace": ns, "pvName": pv.GetName(),
			"backupMethod": "CSISnapshot", "snapshotDataMoved": false, "preserveLocalSnapshot": true, "skipped": false,
			"startTimestamp": started, "completionTimestamp": started, "result": "succeeded",
			"csiSnapshotInfo": map[string]any{
				"snapshotHandle": handle, "size": size, "driver": driver, "vscName": content.GetName(),
				"operationID": opID, "ReadyToUse": ready,
			},
			"pvInfo": map[string]any{"reclaimPolicy": reclaim, "labels": pv.GetLabels()},
		})
	}
	var classes []map[string]any
	if f.Class != nil {
		class := clean(f.Class)
		add(volumeSnapshotClassesRes, class)
		classes = append(classes, class.Object)
	}
	for k := range list {
		list[k] = dedupe(list[k])
	}

	started := metav1.NewTime(f.Started.UTC().Truncate(time.Second))
	done := metav1.NewTime(started.Add(5 * time.Second))
	ttl := b.Spec.TTL.Duration
	if ttl == 0 {
		ttl = 720 * time.Hour
		b.Spec.TTL = metav1.Duration{Duration: ttl}
	}
	expires := metav1.NewTime(started.Add(ttl))
	b.TypeMeta = metav1.TypeMeta{APIVersion: "velero.io/v1", Kind: "Backup"}
	if b.Spec.CSISnapshotTimeout.Duration == 0 {
		b.Spec.CSISnapshotTimeout = metav1.Duration{Duration: 10 * time.Minute}
	}
	b.Status = v1.BackupStatus{
		Phase: v1.BackupPhaseCompleted, Version: 1, FormatVersion: tarballFormatVersion,
		StartTimestamp: &started, CompletionTimestamp: &done, Expiration: &expires,
		Progress:                    &v1.BackupProgress{TotalItems: len(items), ItemsBackedUp: len(items)},
		CSIVolumeSnapshotsAttempted: len(f.Volumes), CSIVolumeSnapshotsCompleted: len(f.Volumes),
		BackupItemOperationsAttempted: len(ops), BackupItemOperationsCompleted: len(ops),
	}
	meta, err := json.Marshal(b)
	if err != nil {
		return nil, err
	}

	if !f.WithoutTarball {
		tarball, err := tarballOf(items)
		if err != nil {
			return nil, err
		}
		if err := store.PutBackupContents(ctx, name, bytes.NewReader(tarball)); err != nil {
			return nil, err
		}
	}
	logs, err := gzipped("time=\"" + started.Format(time.RFC3339) + "\" level=info msg=\"Setting up backup log\" backup=" + b.Namespace + "/" + name + "\n")
	if err != nil {
		return nil, err
	}
	for _, put := range []func() error{
		func() error { return store.PutBackupLog(ctx, name, bytes.NewReader(logs)) },
		func() error { return store.PutResourceList(ctx, name, resourcelist.FromMap(list)) },
		func() error {
			return store.PutBackupResults(ctx, name, map[string]any{"errors": map[string]any{}, "warnings": map[string]any{}})
		},
		func() error { return store.PutItemOperations(ctx, name, ops) },
		func() error { return store.PutVolumeSnapshots(ctx, name, []any{}) },
		func() error { return store.PutPodVolumeBackups(ctx, name, []any{}) },
		func() error { return store.PutCSIVolumeSnapshots(ctx, name, vss) },
		func() error { return store.PutCSIVolumeSnapshotContents(ctx, name, vsc) },
		func() error { return store.PutCSIVolumeSnapshotClasses(ctx, name, classes) },
		func() error { return store.PutVolumeInfo(ctx, name, infos) },
		// Last, as Velero's persistence does: the backup is there once
		// this is.
		func() error { return store.PutBackupMetadata(ctx, name, meta) },
	} {
		if err := put(); err != nil {
			return nil, fmt.Errorf("writing the fixture of backup %s: %w", name, err)
		}
	}
	return b, nil
}

// restoreSize is the content's status.restoreSize, an integer however it
// was decoded.
func restoreSize(content *unstructured.Unstructured) int64 {
	v, _, _ := unstructured.NestedFieldNoCopy(content.Object, "status", "restoreSize")
	switch n := v.(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	}
	return 0
}

// tarballOf writes Velero's layout: metadata/version, then each item's
// plain copy followed by its copy under v1-preferredversion/ (every
// snapshot and core kind here is at v1), in path order.
func tarballOf(items map[string]*unstructured.Unstructured) ([]byte, error) {
	paths := make([]string, 0, len(items))
	for p := range items {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	entries := []archivetest.Entry{{Name: "metadata/version", Data: []byte(tarballFormatVersion + "\n")}}
	for _, p := range paths {
		data, err := json.Marshal(items[p].Object)
		if err != nil {
			return nil, err
		}
		rest := strings.TrimPrefix(p, "resources/")
		gr, tail, _ := strings.Cut(rest, "/")
		entries = append(entries,
			archivetest.Entry{Name: p, Data: data},
			archivetest.Entry{Name: "resources/" + gr + "/v1-preferredversion/" + tail, Data: data})
	}
	var buf bytes.Buffer
	if err := archivetest.Tarball(&buf, entries); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// clean is obj as Velero's item backupper stores it: as read, without
// managedFields.
func clean(obj *unstructured.Unstructured) *unstructured.Unstructured {
	c := obj.DeepCopy()
	unstructured.RemoveNestedField(c.Object, "metadata", "managedFields")
	return c
}

func setLabel(obj *unstructured.Unstructured, k, v string) {
	l := obj.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	l[k] = v
	obj.SetLabels(l)
}

func setAnnotation(obj *unstructured.Unstructured, k, v string) {
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[k] = v
	obj.SetAnnotations(a)
}

func dedupe(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}

func gzipped(s string) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write([]byte(s)); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

var (
	vsGVR  = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshots"}
	vscGVR = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshotcontents"}
)

// Finalize does what Velero does to the cluster when the backup ends: the
// VolumeSnapshot's content is labelled with the backup (done during the
// backup) and set to Retain, then deleted, then the VolumeSnapshot; it
// waits until both are gone. The storage snapshot stays.
func Finalize(ctx context.Context, dyn dynamic.Interface, vs *unstructured.Unstructured) error {
	content, _, _ := unstructured.NestedString(vs.Object, "status", "boundVolumeSnapshotContentName")
	if content == "" {
		return fmt.Errorf("VolumeSnapshot %s/%s is not bound to a content", vs.GetNamespace(), vs.GetName())
	}
	retain := []byte(`{"spec":{"deletionPolicy":"Retain"}}`)
	if _, err := dyn.Resource(vscGVR).Patch(ctx, content, types.MergePatchType, retain, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("setting VolumeSnapshotContent %s to Retain: %w", content, err)
	}
	if err := dyn.Resource(vscGVR).Delete(ctx, content, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting VolumeSnapshotContent %s: %w", content, err)
	}
	if err := dyn.Resource(vsGVR).Namespace(vs.GetNamespace()).Delete(ctx, vs.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting VolumeSnapshot %s/%s: %w", vs.GetNamespace(), vs.GetName(), err)
	}
	for {
		_, errVS := dyn.Resource(vsGVR).Namespace(vs.GetNamespace()).Get(ctx, vs.GetName(), metav1.GetOptions{})
		_, errVSC := dyn.Resource(vscGVR).Get(ctx, content, metav1.GetOptions{})
		if apierrors.IsNotFound(errVS) && apierrors.IsNotFound(errVSC) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for VolumeSnapshot %s/%s and VolumeSnapshotContent %s to go: %w", vs.GetNamespace(), vs.GetName(), content, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// LabelContent patches the backup's label onto the live content, as
// Velero's VolumeSnapshot action does during the backup.
func LabelContent(ctx context.Context, dyn dynamic.Interface, content, backup string) error {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{v1.BackupNameLabel: v1.LabelValue(backup)}}})
	_, err := dyn.Resource(vscGVR).Patch(ctx, content, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

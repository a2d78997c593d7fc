package deleteactions

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/csisnapshot"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

const snapshotGroup = "snapshot.storage.k8s.io"

var (
	volumeSnapshots        = schema.GroupResource{Group: snapshotGroup, Resource: "volumesnapshots"}
	volumeSnapshotContents = schema.GroupResource{Group: snapshotGroup, Resource: "volumesnapshotcontents"}
)

// What the external-snapshotter (v8) reads and writes on a content.
const (
	// ContentFinalizer is the finalizer that keeps a VolumeSnapshotContent
	// until the csi-snapshotter sidecar has dealt with its storage
	// snapshot.
	ContentFinalizer = "snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection"
	// TempContentLabel marks the VolumeSnapshotContents this action
	// creates to have a storage snapshot deleted; its value is the
	// snapshot handle's digest.
	TempContentLabel = "lifeboat.io/deletes-snapshot"
)

// DefaultCSIWait bounds each wait for the snapshot controllers: for the
// sidecar to find the snapshot a re-created content names, and for the
// content to be gone once deleted.
const DefaultCSIWait = 2 * time.Minute

// csiPoll is how often a wait looks again, at most; a wait for the
// sidecar starts at csiFirstPoll and doubles up to it. The sidecar
// usually answers within tens of milliseconds, so a fixed 250 ms made
// each of a deletion's snapshots take half a second in its two waits
// (8 at a time: 100 snapshots took 8 s, a plain program 3).
const (
	csiPoll      = 250 * time.Millisecond
	csiFirstPoll = 10 * time.Millisecond
)

// orphanGrace is how long the controllers get to finish a deleted content
// before the action releases it.
var orphanGrace = 3 * time.Second

// deletePolicyPatch makes the CSI driver delete the storage snapshot along
// with the content object; with Retain it would outlive the backup.
var deletePolicyPatch = []byte(`{"spec":{"deletionPolicy":"Delete"}}`)

// CSISnapshotCleanup deletes, when a backup is deleted, the storage
// snapshots of the VolumeSnapshotContents stored in it, whether or not the
// contents and their VolumeSnapshots still exist in the cluster, and the
// backup's VolumeSnapshots and VolumeSnapshotContents that do.
//
// Velero removes a backup's VolumeSnapshot and VolumeSnapshotContent from
// the cluster when the backup ends (the content set to Retain first), so
// at deletion time only the stored content says which storage snapshot
// the backup holds. As Velero's action does, a content is created again
// from the stored one under a new name, with deletionPolicy Delete and the
// snapshot handle as its source, and then deleted: the csi-snapshotter
// sidecar calls the driver's DeleteSnapshot for it. Unlike Velero's, which
// waits two seconds between the two and returns, the action waits for the
// sidecar to have found the snapshot before it deletes the content (a
// content deleted before that goes without a DeleteSnapshot call, and the
// snapshot leaks), and then for the content to be gone, so an error means
// the snapshot may still exist and the backup is kept.
type CSISnapshotCleanup struct {
	c *Clients
	// noCRDs says once per instance (per deletion) that the snapshot kinds
	// are not served, not once per item.
	noCRDs sync.Once
}

// NewCSISnapshotCleanup returns the action.
func NewCSISnapshotCleanup(c *Clients) *CSISnapshotCleanup { return &CSISnapshotCleanup{c: c} }

// AppliesTo implements api.DeleteItemAction.
func (a *CSISnapshotCleanup) AppliesTo() (api.ResourceSelector, error) {
	return api.ResourceSelector{IncludedResources: []string{volumeSnapshots.String(), volumeSnapshotContents.String()}}, nil
}

// Execute implements api.DeleteItemAction.
func (a *CSISnapshotCleanup) Execute(in *api.DeleteItemActionExecuteInput) error {
	item := &unstructured.Unstructured{Object: in.Item.UnstructuredContent()}
	gk := item.GroupVersionKind().GroupKind()
	if gk.Group != snapshotGroup {
		return nil
	}
	var gr schema.GroupResource
	switch gk.Kind {
	case "VolumeSnapshot":
		gr = volumeSnapshots
	case "VolumeSnapshotContent":
		gr = volumeSnapshotContents
	default:
		return nil
	}
	m, err := a.c.resolve(gr)
	if meta.IsNoMatchError(err) {
		a.noCRDs.Do(func() {
			a.c.log().Info("the CSI snapshot CRDs are not installed; the backup's snapshots have nothing left to clean up",
				"backup", in.Backup.Namespace+"/"+in.Backup.Name, "item", describe(gr, item.GetNamespace(), item.GetName()))
		})
		return nil
	}
	if err != nil {
		return fmt.Errorf("finding the served version of %s: %w", gr, err)
	}
	if gr == volumeSnapshots {
		return a.deleteSnapshot(m, item.GetNamespace(), item.GetName(), in.Backup)
	}
	return a.deleteContent(m, item, in.Backup)
}

func (a *CSISnapshotCleanup) deleteSnapshot(m *meta.RESTMapping, namespace, name string, b *v1.Backup) error {
	what := describe(volumeSnapshots, namespace, name)
	res := a.c.resource(m, namespace)
	vs, err := get(res, name)
	if err != nil || vs == nil {
		return wrap(what, "reading", err)
	}
	if !madeFor(vs, b) {
		a.c.log().Debug("snapshot not made by this backup; left alone", "backup", b.Name, "item", what)
		return nil
	}
	content, _, _ := unstructured.NestedString(vs.Object, "status", "boundVolumeSnapshotContentName")
	if content != "" {
		cm, err := a.c.resolve(volumeSnapshotContents)
		if err != nil {
			return fmt.Errorf("%s: finding the served version of %s: %w", what, volumeSnapshotContents, err)
		}
		if err := a.retainNoMore(cm, content); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	if err := a.c.deleteObject(res, vs); err != nil {
		return wrap(what, "deleting", err)
	}
	a.c.log().Info("deleted the backup's VolumeSnapshot", "backup", b.Name, "item", what, "content", content)
	return nil
}

// deleteContent deletes the storage snapshot the stored content names,
// then the content of that name if it is still in the cluster.
func (a *CSISnapshotCleanup) deleteContent(m *meta.RESTMapping, stored *unstructured.Unstructured, b *v1.Backup) error {
	name := stored.GetName()
	what := describe(volumeSnapshotContents, "", name)
	// Velero's rule: only a content the backup labelled is its own; one a
	// user made and the backup merely stored is left alone.
	if !madeFor(stored, b) {
		a.c.log().Debug("snapshot content not made by this backup; left alone", "backup", b.Name, "item", what)
		return nil
	}
	res := a.c.resource(m, "")
	// The error is reported with the item (the stored content) named
	// already.
	if err := a.deleteStorageSnapshot(res, m, stored, b); err != nil {
		return err
	}
	vsc, err := get(res, name)
	if err != nil || vsc == nil {
		return wrap(what, "reading", err)
	}
	if !madeFor(vsc, b) {
		a.c.log().Debug("snapshot content of that name not made by this backup; left alone", "backup", b.Name, "item", what)
		return nil
	}
	if err := a.retainNoMore(m, name); err != nil {
		return err
	}
	if err := a.c.deleteObject(res, vsc); err != nil {
		return wrap(what, "deleting", err)
	}
	if err := a.releaseOrphan(res, m, name); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	a.c.log().Info("deleted the backup's VolumeSnapshotContent", "backup", b.Name, "item", what)
	return nil
}

// releaseOrphan lets a deleted content bound to a VolumeSnapshot that no
// longer exists go. The controllers finish such a content only when they
// saw its VolumeSnapshot being deleted (the sidecar deletes unbound
// contents and those marked as their snapshot's being deleted); one whose
// snapshot went otherwise would stay in the cluster for good. So after a
// moment for the controllers, the action drops the finalizer itself: the
// storage snapshot is gone already (deleteStorageSnapshot ran first).
func (a *CSISnapshotCleanup) releaseOrphan(res dynamic.ResourceInterface, m *meta.RESTMapping, name string) error {
	deadline := time.Now().Add(orphanGrace)
	for attempt := 0; ; attempt++ {
		vsc, err := get(res, name)
		if err != nil || vsc == nil || vsc.GetDeletionTimestamp() == nil || !hasFinalizer(vsc, ContentFinalizer) {
			return err
		}
		if time.Now().Before(deadline) {
			time.Sleep(csiPoll)
			continue
		}
		uid, _, _ := unstructured.NestedString(vsc.Object, "spec", "volumeSnapshotRef", "uid")
		if uid == "" {
			// Unbound: the sidecar deletes it.
			return nil
		}
		ns, _, _ := unstructured.NestedString(vsc.Object, "spec", "volumeSnapshotRef", "namespace")
		vsName, _, _ := unstructured.NestedString(vsc.Object, "spec", "volumeSnapshotRef", "name")
		sm, err := a.c.resolve(volumeSnapshots)
		if err != nil {
			return fmt.Errorf("finding the served version of %s: %w", volumeSnapshots, err)
		}
		vs, err := get(a.c.resource(sm, ns), vsName)
		if err != nil {
			return wrap(describe(volumeSnapshots, ns, vsName), "reading", err)
		}
		if vs != nil && string(vs.GetUID()) == uid {
			// Its snapshot still exists: deleting that (the backup's
			// VolumeSnapshot item) lets the controllers finish.
			return nil
		}
		err = removeFinalizer(res, vsc, ContentFinalizer)
		if apierrors.IsConflict(err) && attempt < 10 {
			continue // a controller changed it meanwhile; look again
		}
		if err == nil {
			a.c.log().Info("released a VolumeSnapshotContent whose VolumeSnapshot is gone", "content", name, "volumeSnapshot", ns+"/"+vsName)
		}
		return err
	}
}

// deleteStorageSnapshot has the CSI driver delete the storage snapshot the
// stored content names, through a content created for that and deleted.
// It can be repeated: the content's name is derived from the backup and
// the snapshot, so a retry finds the one an interrupted call created, and
// a snapshot already deleted in the driver lets the content go too.
func (a *CSISnapshotCleanup) deleteStorageSnapshot(res dynamic.ResourceInterface, m *meta.RESTMapping, stored *unstructured.Unstructured, b *v1.Backup) error {
	handle := snapshotHandle(stored)
	if handle == "" {
		a.c.log().Info("the stored content names no snapshot handle (the snapshot was never taken); nothing to delete in the driver",
			"backup", b.Name, "content", stored.GetName())
		return nil
	}
	driver, _, _ := unstructured.NestedString(stored.Object, "spec", "driver")
	if driver == "" {
		return fmt.Errorf("the stored content has no spec.driver, so no CSI driver can be asked to delete snapshot %s", handle)
	}
	temp := TempContent(stored, b, handle)
	// At the version the cluster serves: a backup from before v1 stored
	// v1beta1 contents, whose fields used here are the same.
	temp.SetAPIVersion(m.GroupVersionKind.GroupVersion().String())
	name := temp.GetName()
	log := a.c.log().With("backup", b.Name, "content", stored.GetName(), "tempContent", name, "snapshotHandle", handle, "driver", driver)

	ctx, cancel := callCtx()
	_, err := res.Create(ctx, temp, metav1.CreateOptions{})
	cancel()
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating VolumeSnapshotContent %s to delete snapshot %s: %w", name, handle, err)
	}

	// The sidecar deletes the snapshot only once it has recorded the
	// handle in the content's status; deleted before that, the content
	// would go without a DeleteSnapshot call.
	found, err := a.waitContent(res, name, func(vsc *unstructured.Unstructured) (bool, error) {
		if vsc == nil {
			return true, nil // deleted by an earlier call, which waited for it
		}
		if vsc.GetDeletionTimestamp() != nil {
			return true, nil
		}
		if h, _, _ := unstructured.NestedString(vsc.Object, "status", "snapshotHandle"); h != "" {
			return true, nil
		}
		return snapshotNotFound(vsc), nil
	})
	if err != nil && !errors.Is(err, errGaveUp) {
		return err
	}
	if err != nil {
		// Nothing may be left behind that no controller deals with: the
		// content goes (without a DeleteSnapshot call, as the sidecar has
		// not recorded the handle) and the next attempt makes it again.
		a.abandon(res, name)
		return fmt.Errorf("snapshot %s: the csi-snapshotter of driver %s did not take up VolumeSnapshotContent %s, made to delete it (is the driver's csi-snapshotter running?): %w%s",
			handle, driver, name, err, statusError(found))
	}
	if found != nil && found.GetDeletionTimestamp() == nil {
		if snapshotNotFound(found) {
			log.Info("the CSI driver no longer has the snapshot; removing the content made to delete it")
		}
		ctx, cancel := callCtx()
		err := res.Delete(ctx, name, metav1.DeleteOptions{})
		cancel()
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting VolumeSnapshotContent %s: %w", name, err)
		}
	}
	left, err := a.waitContent(res, name, func(vsc *unstructured.Unstructured) (bool, error) { return vsc == nil, nil })
	if err != nil && !errors.Is(err, errGaveUp) {
		return err
	}
	if err != nil {
		return fmt.Errorf("snapshot %s: the csi-snapshotter of driver %s has not deleted it: VolumeSnapshotContent %s, made to delete it, is still there (see its events): %w%s",
			handle, driver, name, err, statusError(left))
	}
	log.Info("storage snapshot of the backup deleted")
	return nil
}

// abandon removes a content the sidecar never took up: deleted, and its
// finalizer (set by the action) dropped.
func (a *CSISnapshotCleanup) abandon(res dynamic.ResourceInterface, name string) {
	ctx, cancel := callCtx()
	err := res.Delete(ctx, name, metav1.DeleteOptions{})
	cancel()
	if err != nil && !apierrors.IsNotFound(err) {
		a.c.log().Warn("removing a VolumeSnapshotContent the CSI snapshotter did not take up", "content", name, "error", err)
		return
	}
	vsc, err := get(res, name)
	if err == nil && vsc != nil {
		err = removeFinalizer(res, vsc, ContentFinalizer)
	}
	if err != nil {
		a.c.log().Warn("removing a VolumeSnapshotContent the CSI snapshotter did not take up", "content", name, "error", err)
	}
}

// errGaveUp says a wait for the snapshot controllers reached its bound.
var errGaveUp = errors.New("gave up")

// waitContent reads the content until done says so, or the wait's bound
// passes; it returns the content last read (nil: not found).
func (a *CSISnapshotCleanup) waitContent(res dynamic.ResourceInterface, name string, done func(*unstructured.Unstructured) (bool, error)) (*unstructured.Unstructured, error) {
	deadline := time.Now().Add(a.c.csiWait())
	delay := csiFirstPoll
	for {
		vsc, err := get(res, name)
		if err != nil {
			return nil, fmt.Errorf("reading VolumeSnapshotContent %s: %w", name, err)
		}
		ok, err := done(vsc)
		if err != nil || ok {
			return vsc, err
		}
		if time.Now().After(deadline) {
			return vsc, fmt.Errorf("%w after %s", errGaveUp, a.c.csiWait())
		}
		time.Sleep(delay)
		delay = min(2*delay, csiPoll)
	}
}

// TempContent is the VolumeSnapshotContent that has the storage snapshot
// of stored (a content as a backup stored it) deleted: the stored object
// under a name of its own, pointing at the snapshot by handle, with
// deletionPolicy Delete, bound to no VolumeSnapshot (the sidecar deletes
// an unbound pre-provisioned content's snapshot), without a class (so its
// deletion does not depend on one), and with the snapshotter's finalizer
// from the start (so it cannot go before the sidecar has seen it).
func TempContent(stored *unstructured.Unstructured, b *v1.Backup, handle string) *unstructured.Unstructured {
	driver, _, _ := unstructured.NestedString(stored.Object, "spec", "driver")
	digest := contentDigest(b, driver, handle)
	obj := csisnapshot.PreProvisionedContent(stored, "lifeboat-delete-"+digest, handle, "Delete", digest)
	obj.SetFinalizers([]string{ContentFinalizer})
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[TempContentLabel] = digest
	obj.SetLabels(labels)
	return obj
}

// contentDigest names the temporary content of one snapshot of one backup.
func contentDigest(b *v1.Backup, driver, handle string) string {
	h := sha256.Sum256([]byte(string(b.UID) + "\x00" + b.Name + "\x00" + driver + "\x00" + handle))
	return hex.EncodeToString(h[:16])
}

// snapshotHandle is the storage snapshot a stored content names.
func snapshotHandle(vsc *unstructured.Unstructured) string { return csisnapshot.ContentHandle(vsc) }

// snapshotNotFound reports whether the sidecar recorded that the driver
// does not have the content's snapshot (deleted already).
func snapshotNotFound(vsc *unstructured.Unstructured) bool { return csisnapshot.SnapshotNotFound(vsc) }

func statusError(vsc *unstructured.Unstructured) string {
	if vsc == nil {
		return ""
	}
	if msg, _, _ := unstructured.NestedString(vsc.Object, "status", "error", "message"); msg != "" {
		return "; its status says: " + msg
	}
	return ""
}

// retainNoMore sets the content's deletionPolicy to Delete; a content that
// is gone needs nothing.
func (a *CSISnapshotCleanup) retainNoMore(m *meta.RESTMapping, name string) error {
	what := describe(volumeSnapshotContents, "", name)
	res := a.c.resource(m, "")
	vsc, err := get(res, name)
	if err != nil || vsc == nil {
		return wrap(what, "reading", err)
	}
	if policy, _, _ := unstructured.NestedString(vsc.Object, "spec", "deletionPolicy"); policy == "Delete" {
		return nil
	}
	ctx, cancel := callCtx()
	defer cancel()
	_, err = res.Patch(ctx, name, types.MergePatchType, deletePolicyPatch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return wrap(what, "setting spec.deletionPolicy=Delete on", err)
}

func hasFinalizer(obj *unstructured.Unstructured, f string) bool {
	for _, x := range obj.GetFinalizers() {
		if x == f {
			return true
		}
	}
	return false
}

// removeFinalizer drops f from obj, guarded by its resourceVersion. A
// merge patch, not an update: the server's role grants patch everywhere
// and update nowhere outside its namespace.
func removeFinalizer(res dynamic.ResourceInterface, obj *unstructured.Unstructured, f string) error {
	keep := []string{}
	for _, x := range obj.GetFinalizers() {
		if x != f {
			keep = append(keep, x)
		}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": keep, "resourceVersion": obj.GetResourceVersion()}})
	if err != nil {
		return err
	}
	ctx, cancel := callCtx()
	defer cancel()
	_, err = res.Patch(ctx, obj.GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return wrap(describe(volumeSnapshotContents, "", obj.GetName()), "removing finalizer "+f+" from", err)
}

// get reads one object; nil, nil when it does not exist.
func get(res dynamic.ResourceInterface, name string) (*unstructured.Unstructured, error) {
	ctx, cancel := callCtx()
	defer cancel()
	obj, err := res.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return obj, err
}

func wrap(what, doing string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s %s: %w", doing, what, err)
}

var _ api.DeleteItemAction = (*CSISnapshotCleanup)(nil)

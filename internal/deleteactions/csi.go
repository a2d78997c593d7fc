package deleteactions

import (
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

const snapshotGroup = "snapshot.storage.k8s.io"

var (
	volumeSnapshots        = schema.GroupResource{Group: snapshotGroup, Resource: "volumesnapshots"}
	volumeSnapshotContents = schema.GroupResource{Group: snapshotGroup, Resource: "volumesnapshotcontents"}
)

// deletePolicyPatch makes the CSI driver delete the storage snapshot along
// with the content object; with Retain it would outlive the backup.
var deletePolicyPatch = []byte(`{"spec":{"deletionPolicy":"Delete"}}`)

// CSISnapshotCleanup deletes, when a backup is deleted, the VolumeSnapshots
// and VolumeSnapshotContents stored in it that still exist in the cluster
// and were made for it, after switching their contents' deletionPolicy to
// Delete.
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
	return a.deleteContent(m, item.GetName(), in.Backup)
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

func (a *CSISnapshotCleanup) deleteContent(m *meta.RESTMapping, name string, b *v1.Backup) error {
	what := describe(volumeSnapshotContents, "", name)
	res := a.c.resource(m, "")
	vsc, err := get(res, name)
	if err != nil || vsc == nil {
		return wrap(what, "reading", err)
	}
	if !madeFor(vsc, b) {
		a.c.log().Debug("snapshot content not made by this backup; left alone", "backup", b.Name, "item", what)
		return nil
	}
	if err := a.retainNoMore(m, name); err != nil {
		return err
	}
	if err := a.c.deleteObject(res, vsc); err != nil {
		return wrap(what, "deleting", err)
	}
	a.c.log().Info("deleted the backup's VolumeSnapshotContent", "backup", b.Name, "item", what)
	return nil
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

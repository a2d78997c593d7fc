// Command restore-point is an example of a DeleteItemAction that removes,
// when a backup is deleted, what a companion BackupItemAction made for a
// CSI volume outside the backup. Both live in this one binary:
//
//   - example.io/restore-point (BackupItemAction) takes, for every claim
//     it backs up that asks for it (label example.io/restore-point:
//     "true") and whose volume is a CSI volume, a VolumeSnapshot of the
//     claim in its namespace: a quick local restore point that lives as
//     long as the backup, labelled velero.io/backup-name=<backup> and kept
//     out of every backup;
//   - example.io/restore-point-cleanup (DeleteItemAction) deletes that
//     VolumeSnapshot, and with it the storage snapshot, when the server
//     hands it the claim from the backup being deleted.
//
// See README.md.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/framework"
)

// The plugins' names.
const (
	RestorePointName = "example.io/restore-point"
	CleanupName      = "example.io/restore-point-cleanup"
)

// The kinds the plugins read and write.
var (
	Claims          = schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}
	Volumes         = schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumes"}
	Snapshots       = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshots"}
	SnapshotClasses = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshotclasses"}
	Contents        = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshotcontents"}
)

// Labels and annotations.
const (
	// BackupNameLabel is Velero's label naming the backup an object
	// belongs to.
	BackupNameLabel = v1.BackupNameLabel
	// RestorePointLabel marks the restore points, so they can be listed
	// apart from other snapshots.
	RestorePointLabel = "example.io/restore-point"
	// ExcludeFromBackupLabel is Velero's opt-out: a restore point is made
	// while the backup is still listing the cluster, so without it whether
	// the backup holds the snapshot would be down to timing, and a restore
	// must not bring back a snapshot that no deletion would remove.
	ExcludeFromBackupLabel = "velero.io/exclude-from-backup"
	// ClassLabel is Velero's label for the VolumeSnapshotClass to use for
	// a driver; ClassAnnotation on a claim names another class.
	ClassLabel      = "velero.io/csi-volumesnapshot-class"
	ClassAnnotation = "example.io/restore-point-class"
	// OptInLabel, set to "true" on a claim, asks for restore points of
	// it. Snapshots cost storage, so a claim gets them only when asked.
	OptInLabel = "example.io/restore-point"
)

// selector: the claims that ask for restore points, the item both plugins
// work from. A label, not an annotation, so that the server passes the
// plugins no other claim at all: an action that runs on a claim counts as
// having handled its volume when the volume policy says custom.
var selector = api.ResourceSelector{IncludedResources: []string{"persistentvolumeclaims"}, LabelSelector: OptInLabel + "=true"}

// callTimeout bounds each API call: the plugin interface gives no context.
const callTimeout = 30 * time.Second

// deleteWait bounds how long the cleanup waits for a restore point to be
// gone. The snapshot controller removes a VolumeSnapshot only after the
// driver deleted its storage snapshot, so "gone" means the storage is
// free. It stays under the server's 1-minute timeout for item actions; a
// deletion that takes longer fails this attempt, and the server retries.
var deleteWait = 45 * time.Second

func main() {
	newServer().Serve()
}

// newServer registers both plugins; the tests serve the same Server.
func newServer() *framework.Server {
	return framework.NewServer().
		RegisterBackupItemAction(RestorePointName, func(log *slog.Logger) (api.BackupItemAction, error) {
			c, err := newClient()
			return &restorePoint{log: log, dyn: c}, err
		}).
		RegisterDeleteItemAction(CleanupName, func(log *slog.Logger) (api.DeleteItemAction, error) {
			c, err := newClient()
			return &cleanup{log: log, dyn: c}, err
		})
}

// SnapshotName is the restore point's name for a claim and a backup: the
// same inputs always give the same name, so the DeleteItemAction finds
// the snapshot from the stored claim alone, and a retried backup makes
// nothing twice.
func SnapshotName(backup, namespace, claim string) string {
	sum := sha256.Sum256([]byte(backup + "\x00" + namespace + "\x00" + claim))
	return "restore-point-" + hex.EncodeToString(sum[:])[:20]
}

// NewSnapshot is the restore point the BackupItemAction creates.
func NewSnapshot(backup, namespace, claim, class string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"source":                  map[string]any{"persistentVolumeClaimName": claim},
			"volumeSnapshotClassName": class,
		},
	}}
	u.SetAPIVersion(Snapshots.GroupVersion().String())
	u.SetKind("VolumeSnapshot")
	u.SetNamespace(namespace)
	u.SetName(SnapshotName(backup, namespace, claim))
	u.SetLabels(map[string]string{
		BackupNameLabel:        v1.LabelValue(backup),
		RestorePointLabel:      "true",
		ExcludeFromBackupLabel: "true",
	})
	return u
}

type restorePoint struct {
	log *slog.Logger
	dyn dynamic.Interface
}

func (r *restorePoint) AppliesTo() (api.ResourceSelector, error) { return selector, nil }

// Execute takes the restore point of a bound claim on a CSI volume that
// asks for one (OptInLabel; the server passes only those, and the check
// repeats it) and stores the claim unchanged. Other claims are left alone. An error fails the item, and so the backup
// partially: the backup did not get what it was configured to make.
func (r *restorePoint) Execute(item runtime.Unstructured, backup *v1.Backup) (runtime.Unstructured, []api.ResourceIdentifier, error) {
	claim := &unstructured.Unstructured{Object: item.UnstructuredContent()}
	if claim.GetLabels()[OptInLabel] != "true" {
		return item, nil, nil
	}
	volume, _, _ := unstructured.NestedString(claim.Object, "spec", "volumeName")
	if volume == "" {
		return item, nil, nil // not bound: nothing to snapshot
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	pv, err := r.dyn.Resource(Volumes).Get(ctx, volume, metav1.GetOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("reading PersistentVolume %s of claim %s/%s: %w", volume, claim.GetNamespace(), claim.GetName(), err)
	}
	driver, _, _ := unstructured.NestedString(pv.Object, "spec", "csi", "driver")
	if driver == "" {
		return item, nil, nil // not a CSI volume
	}
	class, err := r.class(ctx, claim, driver)
	if err != nil {
		return nil, nil, err
	}
	vs := NewSnapshot(backup.Name, claim.GetNamespace(), claim.GetName(), class)
	_, err = r.dyn.Resource(Snapshots).Namespace(vs.GetNamespace()).Create(ctx, vs, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, nil, fmt.Errorf("creating restore point %s/%s of claim %s: %w", vs.GetNamespace(), vs.GetName(), claim.GetName(), err)
	}
	r.log.Info("restore point taken", "snapshot", vs.GetNamespace()+"/"+vs.GetName(), "class", class, "backup", backup.Name)
	return item, nil, nil
}

// class is the claim's ClassAnnotation, else the one VolumeSnapshotClass
// of the driver labelled velero.io/csi-volumesnapshot-class=true (Velero's
// rule for choosing a class).
func (r *restorePoint) class(ctx context.Context, claim *unstructured.Unstructured, driver string) (string, error) {
	if c := claim.GetAnnotations()[ClassAnnotation]; c != "" {
		return c, nil
	}
	list, err := r.dyn.Resource(SnapshotClasses).List(ctx, metav1.ListOptions{LabelSelector: ClassLabel + "=true"})
	if err != nil {
		return "", fmt.Errorf("listing VolumeSnapshotClasses labelled %s=true: %w", ClassLabel, err)
	}
	var found []string
	for _, c := range list.Items {
		if d, _, _ := unstructured.NestedString(c.Object, "driver"); d == driver {
			found = append(found, c.GetName())
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return "", fmt.Errorf("claim %s/%s: no VolumeSnapshotClass of driver %s is labelled %s=true; label one, or name one in the claim's annotation %s",
			claim.GetNamespace(), claim.GetName(), driver, ClassLabel, ClassAnnotation)
	}
	return "", fmt.Errorf("claim %s/%s: VolumeSnapshotClasses %v of driver %s are all labelled %s=true; keep one, or name one in the claim's annotation %s",
		claim.GetNamespace(), claim.GetName(), found, driver, ClassLabel, ClassAnnotation)
}

type cleanup struct {
	log *slog.Logger
	dyn dynamic.Interface
}

func (c *cleanup) AppliesTo() (api.ResourceSelector, error) { return selector, nil }

// Execute deletes the claim's restore point and waits until it is gone.
// A restore point that is already gone is fine: deletions are retried,
// and a retry must not fail on what the first attempt removed. One not
// labelled with this backup is not its own, and is left alone.
func (c *cleanup) Execute(in *api.DeleteItemActionExecuteInput) error {
	claim := &unstructured.Unstructured{Object: in.Item.UnstructuredContent()}
	ns, name := claim.GetNamespace(), SnapshotName(in.Backup.Name, claim.GetNamespace(), claim.GetName())
	what := fmt.Sprintf("restore point %s/%s of claim %s", ns, name, claim.GetName())
	snapshots := c.dyn.Resource(Snapshots).Namespace(ns)
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	vs, err := snapshots.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", what, err)
	}
	if vs.GetLabels()[BackupNameLabel] != v1.LabelValue(in.Backup.Name) || vs.GetLabels()[RestorePointLabel] != "true" {
		c.log.Info("a snapshot of that name is not this backup's restore point; left alone", "snapshot", ns+"/"+name)
		return nil
	}
	// A class with deletionPolicy Retain would keep the storage snapshot
	// after the VolumeSnapshot; the restore point is the backup's, so it
	// goes with it.
	if content, _, _ := unstructured.NestedString(vs.Object, "status", "boundVolumeSnapshotContentName"); content != "" {
		_, err := c.dyn.Resource(Contents).Patch(ctx, content, types.MergePatchType, []byte(`{"spec":{"deletionPolicy":"Delete"}}`), metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("%s: setting deletionPolicy Delete on its VolumeSnapshotContent %s: %w", what, content, err)
		}
	}
	uid := vs.GetUID()
	err = snapshots.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting %s: %w", what, err)
	}
	if err := c.waitGone(snapshots, name); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	c.log.Info("restore point removed", "snapshot", ns+"/"+name, "backup", in.Backup.Name)
	return nil
}

var errStillThere = errors.New("still there: the snapshot controller has not deleted its storage snapshot yet (see the VolumeSnapshot's and its content's events)")

func (c *cleanup) waitGone(snapshots dynamic.ResourceInterface, name string) error {
	deadline := time.Now().Add(deleteWait)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		_, err := snapshots.Get(ctx, name, metav1.GetOptions{})
		cancel()
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading it back: %w", err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w after %s", errStillThere, deleteWait)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// newClient connects to the cluster the server runs in: the in-cluster
// config when the server runs in a pod, else the kubeconfig file named by
// KUBECONFIG (the plugin process inherits the server's environment).
func newClient() (dynamic.Interface, error) {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		path := os.Getenv("KUBECONFIG")
		if path == "" {
			return nil, fmt.Errorf("no cluster to talk to: not running in a pod and KUBECONFIG is not set")
		}
		if cfg, err = clientcmd.BuildConfigFromFlags("", path); err != nil {
			return nil, fmt.Errorf("reading KUBECONFIG %s: %w", path, err)
		}
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the dynamic client: %w", err)
	}
	return dyn, nil
}

package deletion

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/archive"
	"github.com/lifeboat-io/lifeboat/internal/storage"
)

// VolumeInfoSource is added to an action's name in the checkpoint and the
// report for the items rebuilt from the volume information: they are
// numbered among themselves, not among the tarball's items.
const VolumeInfoSource = " (from volume info)"

// VolumeInfoAnnotation marks a VolumeSnapshotContent item rebuilt from the
// volume information; its value is the file it came from.
const VolumeInfoAnnotation = "lifeboat.io/rebuilt-from"

var volumeSnapshotContents = schema.GroupResource{Group: "snapshot.storage.k8s.io", Resource: "volumesnapshotcontents"}

// csiSnapshotVolume is what a deletion reads of one entry of Velero's
// volume information (<backup>-volumeinfo.json.gz, Velero's field names).
type csiSnapshotVolume struct {
	PVCName           string `json:"pvcName,omitempty"`
	PVCNamespace      string `json:"pvcNamespace,omitempty"`
	PVName            string `json:"pvName,omitempty"`
	BackupMethod      string `json:"backupMethod,omitempty"`
	SnapshotDataMoved bool   `json:"snapshotDataMoved"`
	CSISnapshotInfo   *struct {
		SnapshotHandle string `json:"snapshotHandle"`
		Driver         string `json:"driver"`
		VSCName        string `json:"vscName"`
	} `json:"csiSnapshotInfo,omitempty"`
}

// volumeInfoItems calls fn with one VolumeSnapshotContent item for each CSI
// snapshot the backup's volume information names, numbered from 0: what
// the DeleteItemActions for contents get when the tarball is gone, so the
// storage snapshots are deleted all the same. An item holds what the
// built-in CSI action needs (name, driver, snapshot handle, the backup's
// label); Velero's CSI action reads the same fields. Entries whose data
// was moved (Velero deleted the snapshot once it was uploaded), and those
// that name no handle, give none. It returns errNoVolumeInfo when the file
// is not there.
func volumeInfoItems(ctx context.Context, store *storage.BackupStore, b *v1.Backup, fn func(*tarItem) error) error {
	file := storage.BackupVolumeInfoFile(b.Name)
	var infos []csiSnapshotVolume
	err := store.GetGzipJSON(ctx, store.BackupKey(b.Name, file), &infos)
	if errors.Is(err, storage.ErrNotFound) {
		return errNoVolumeInfo
	}
	if err != nil {
		return fmt.Errorf("reading the volume information of backup %s: %w", b.Name, err)
	}
	var pos int64
	for i, v := range infos {
		if err := ctx.Err(); err != nil {
			return err
		}
		ci := v.CSISnapshotInfo
		if v.BackupMethod != "CSISnapshot" || v.SnapshotDataMoved || ci == nil || ci.SnapshotHandle == "" || ci.SnapshotHandle == "unknown" {
			continue
		}
		name := ci.VSCName
		if name == "" || name == "unknown" {
			name = fmt.Sprintf("%s-volume-%d", b.Name, i)
		}
		item := map[string]any{
			"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotContent",
			"metadata": map[string]any{
				"name":        name,
				"labels":      map[string]any{v1.BackupNameLabel: v1.LabelValue(b.Name)},
				"annotations": map[string]any{VolumeInfoAnnotation: file},
			},
			"spec": map[string]any{
				"driver": ci.Driver, "deletionPolicy": "Retain",
				"source": map[string]any{"snapshotHandle": ci.SnapshotHandle},
			},
			"status": map[string]any{"snapshotHandle": ci.SnapshotHandle},
		}
		data, err := json.Marshal(item)
		if err != nil {
			return err
		}
		it := &tarItem{pos: pos, ref: archive.ItemRef{GroupResource: volumeSnapshotContents.String(), Name: name}, gr: volumeSnapshotContents, data: data}
		pos++
		if err := fn(it); err != nil {
			return err
		}
	}
	return nil
}

// errNoVolumeInfo says the backup has no volume information in the store
// (or none naming a CSI snapshot, to the callers of volumeInfoItems).
var errNoVolumeInfo = errors.New("the backup's volume information is not in the store")

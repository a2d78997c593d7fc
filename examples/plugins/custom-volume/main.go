// Command custom-volume is an example BackupItemAction that takes care of
// PersistentVolumeClaims' data itself, the way a plugin claiming a
// `custom` volume policy action will (see README.md for what exists today).
//
// For each PVC it applies to, it "handles" the volume — here it only
// decides what a real plugin would record — and writes what it did into an
// annotation on the stored PVC, so a restore (or a DeleteItemAction) can
// find it:
//
//	example.lifeboat.io/custom-volume: {"handledBy":"example.io/custom-volume",...}
package main

import (
	"encoding/json"
	"fmt"
	"log/slog"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/framework"
)

// Name is the plugin's name.
const Name = "example.io/custom-volume"

// AnnotationKey holds the record of what the plugin did, as JSON.
const AnnotationKey = "example.lifeboat.io/custom-volume"

// Record is what the plugin writes into the annotation.
type Record struct {
	HandledBy string `json:"handledBy"`
	Backup    string `json:"backup"`
	// Volume is the PersistentVolume the claim is bound to; empty for a
	// claim that is still Pending.
	Volume       string `json:"volume,omitempty"`
	StorageClass string `json:"storageClass,omitempty"`
	// Handle is where a real plugin would say how to find the copy of the
	// data (a snapshot ID in an external system, a path, ...).
	Handle string `json:"handle"`
}

func main() {
	framework.NewServer().
		RegisterBackupItemAction(Name, func(log *slog.Logger) (api.BackupItemAction, error) {
			return &customVolume{log: log}, nil
		}).
		Serve()
}

type customVolume struct{ log *slog.Logger }

func (c *customVolume) AppliesTo() (api.ResourceSelector, error) {
	return api.ResourceSelector{IncludedResources: []string{"persistentvolumeclaims"}}, nil
}

func (c *customVolume) Execute(item runtime.Unstructured, backup *v1.Backup) (runtime.Unstructured, []api.ResourceIdentifier, error) {
	pvc, ok := item.(*unstructured.Unstructured)
	if !ok {
		return nil, nil, fmt.Errorf("unexpected item type %T", item)
	}
	volume, _, _ := unstructured.NestedString(pvc.Object, "spec", "volumeName")
	class, _, _ := unstructured.NestedString(pvc.Object, "spec", "storageClassName")

	// A real plugin copies or snapshots the volume's data here, in its own
	// way, and keeps the ID of the copy. This example copies nothing; its
	// handle only names the claim and the backup.
	rec := Record{
		HandledBy:    Name,
		Backup:       backup.Name,
		Volume:       volume,
		StorageClass: class,
		Handle:       fmt.Sprintf("example-copy://%s/%s/%s", backup.Name, pvc.GetNamespace(), pvc.GetName()),
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return nil, nil, err
	}
	ann := pvc.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[AnnotationKey] = string(data)
	pvc.SetAnnotations(ann)
	c.log.Debug("handled volume", "pvc", pvc.GetNamespace()+"/"+pvc.GetName(), "volume", volume)
	return pvc, nil, nil
}

package main

import (
	"fmt"

	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	velerov1 "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	"github.com/vmware-tanzu/velero/pkg/plugin/velero"
	biav1 "github.com/vmware-tanzu/velero/pkg/plugin/velero/backupitemaction/v1"
)

// HandledKey is set on every claim the custom-volume action sees; its value
// is the backup's name.
const HandledKey = "compat.example.io/volume-handled-by"

// CustomVolumeLabel selects the claims the custom-volume action takes.
const CustomVolumeLabel = "compat.example.io/custom-volume"

// customVolume stands for a Velero plugin that takes care of the volumes a
// resource policy gives a custom action: it records the claim as handled
// in its own way, knowing nothing of Lifeboat's claimed-by annotation.
type customVolume struct{ log logrus.FieldLogger }

func newCustomVolume(log logrus.FieldLogger) (any, error) { return &customVolume{log: log}, nil }

func (c *customVolume) AppliesTo() (velero.ResourceSelector, error) {
	return velero.ResourceSelector{IncludedResources: []string{"persistentvolumeclaims"}, LabelSelector: CustomVolumeLabel + "=yes"}, nil
}

func (c *customVolume) Execute(item runtime.Unstructured, backup *velerov1.Backup) (runtime.Unstructured, []velero.ResourceIdentifier, error) {
	u, ok := item.(*unstructured.Unstructured)
	if !ok {
		return nil, nil, fmt.Errorf("unexpected item type %T", item)
	}
	ann := u.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[HandledKey] = backup.Name
	u.SetAnnotations(ann)
	c.log.WithField("claim", u.GetNamespace()+"/"+u.GetName()).Debug("handled")
	return u, nil, nil
}

var _ biav1.BackupItemAction = (*customVolume)(nil)

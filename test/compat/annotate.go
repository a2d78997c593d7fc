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

// AnnotationKey is set on every ConfigMap the action sees; its value is the
// backup's name, read from the velero.io/v1 Backup the host sent.
const AnnotationKey = "compat.example.io/backed-up-by"

// annotate is a v1 BackupItemAction (the interface of Velero's
// pkg/plugin/velero/backupitemaction/v1).
type annotate struct{ log logrus.FieldLogger }

func newAnnotate(log logrus.FieldLogger) (any, error) { return &annotate{log: log}, nil }

func (a *annotate) AppliesTo() (velero.ResourceSelector, error) {
	return velero.ResourceSelector{IncludedResources: []string{"configmaps"}}, nil
}

func (a *annotate) Execute(item runtime.Unstructured, backup *velerov1.Backup) (runtime.Unstructured, []velero.ResourceIdentifier, error) {
	u, ok := item.(*unstructured.Unstructured)
	if !ok {
		return nil, nil, fmt.Errorf("unexpected item type %T", item)
	}
	ann := u.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[AnnotationKey] = backup.Name
	u.SetAnnotations(ann)
	a.log.WithField("item", u.GetNamespace()+"/"+u.GetName()).Debug("annotated")
	return u, nil, nil
}

var _ biav1.BackupItemAction = (*annotate)(nil)

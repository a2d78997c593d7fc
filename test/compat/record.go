package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vmware-tanzu/velero/pkg/plugin/velero"
)

// StateDirEnv names the directory where recordDeletes appends one line per
// call to deletes.log: "<backup> <kind> <namespace>/<name>". The plugin
// process inherits the host's environment, so a test sets it for the host.
const StateDirEnv = "COMPAT_PLUGIN_STATE_DIR"

// recordDeletes is a DeleteItemAction that only writes down what it was
// called for, so a test can see which items of which backup the host sent.
type recordDeletes struct {
	log logrus.FieldLogger
	mu  sync.Mutex
}

func newRecordDeletes(log logrus.FieldLogger) (any, error) { return &recordDeletes{log: log}, nil }

func (r *recordDeletes) AppliesTo() (velero.ResourceSelector, error) {
	return velero.ResourceSelector{IncludedResources: []string{"configmaps"}}, nil
}

func (r *recordDeletes) Execute(in *velero.DeleteItemActionExecuteInput) error {
	dir := os.Getenv(StateDirEnv)
	if dir == "" {
		return fmt.Errorf("%s is not set", StateDirEnv)
	}
	u, ok := in.Item.(*unstructured.Unstructured)
	if !ok {
		return fmt.Errorf("unexpected item type %T", in.Item)
	}
	line := fmt.Sprintf("%s %s %s/%s\n", in.Backup.Name, u.GetKind(), u.GetNamespace(), u.GetName())
	r.mu.Lock()
	defer r.mu.Unlock()
	f, err := os.OpenFile(filepath.Join(dir, "deletes.log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(line); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

var _ velero.DeleteItemAction = (*recordDeletes)(nil)

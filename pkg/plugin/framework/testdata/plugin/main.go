// Command plugin is a plugin binary for the framework's out-of-process
// test: one DeleteItemAction and one BackupItemAction, served the way a
// real plugin author would serve them.
package main

import (
	"log/slog"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/framework"
)

func main() {
	framework.NewServer().
		RegisterDeleteItemAction("example.io/cleanup", func(log *slog.Logger) (api.DeleteItemAction, error) {
			return &cleanup{log: log}, nil
		}).
		RegisterBackupItemAction("example.io/annotate", func(*slog.Logger) (api.BackupItemAction, error) {
			return annotate{}, nil
		}).
		Serve()
}

type cleanup struct{ log *slog.Logger }

func (c *cleanup) AppliesTo() (api.ResourceSelector, error) {
	return api.ResourceSelector{IncludedResources: []string{"configmaps"}}, nil
}

// Execute acts on the item's name, so the test can steer it: "fail" fails
// with a stack, "features" reports the feature flags it was started with,
// "exit" ends the process as a crash would.
func (c *cleanup) Execute(in *api.DeleteItemActionExecuteInput) error {
	u := in.Item.(*unstructured.Unstructured)
	c.log.Info("cleaning up", "item", u.GetName(), "backup", in.Backup.Name)
	switch u.GetName() {
	case "fail":
		return framework.Errorf("cannot clean up %s of backup %s", u.GetName(), in.Backup.Name)
	case "features":
		return framework.Errorf("features: %s", strings.Join(framework.Features(), ","))
	case "exit":
		os.Exit(3)
	}
	return nil
}

type annotate struct{}

func (annotate) AppliesTo() (api.ResourceSelector, error) { return api.ResourceSelector{}, nil }

// Execute annotates the item with the backup's name and its own; the
// item's name steers it as for cleanup, and "hang" never returns.
func (annotate) Execute(item runtime.Unstructured, backup *v1.Backup) (runtime.Unstructured, []api.ResourceIdentifier, error) {
	u := item.(*unstructured.Unstructured)
	switch u.GetName() {
	case "fail":
		return nil, nil, framework.Errorf("cannot annotate %s of backup %s", u.GetName(), backup.Name)
	case "hang":
		select {}
	case "exit":
		os.Exit(3)
	}
	u.SetAnnotations(map[string]string{"example.io/backup": backup.Name, "example.io/item": u.GetName()})
	return u, nil, nil
}

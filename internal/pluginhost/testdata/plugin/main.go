// Command plugin is a plugin binary for the plugin host's tests. Its
// DeleteItemAction and BackupItemAction steer by item name so a test can
// make them crash once, hang, or fail; they count calls in files under
// $TEST_STATE_DIR so the test can see what happened across process
// restarts.
package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/framework"
)

func main() {
	framework.NewServer().
		RegisterDeleteItemAction("hosttest.io/steer", func(*slog.Logger) (api.DeleteItemAction, error) { return steer{}, nil }).
		RegisterBackupItemAction("hosttest.io/steer", func(*slog.Logger) (api.BackupItemAction, error) { return backupSteer{}, nil }).
		Serve()
}

type steer struct{}

func (steer) AppliesTo() (api.ResourceSelector, error) { return api.ResourceSelector{}, nil }

func (steer) Execute(in *api.DeleteItemActionExecuteInput) error {
	return act(in.Item.(*unstructured.Unstructured).GetName())
}

// backupSteer is steer as a BackupItemAction: it returns the item as it
// came.
type backupSteer struct{}

func (backupSteer) AppliesTo() (api.ResourceSelector, error) { return api.ResourceSelector{}, nil }

func (backupSteer) Execute(item runtime.Unstructured, _ *v1.Backup) (runtime.Unstructured, []api.ResourceIdentifier, error) {
	return item, nil, act(item.(*unstructured.Unstructured).GetName())
}

func act(name string) error {
	state := os.Getenv("TEST_STATE_DIR")
	calls := filepath.Join(state, name)
	f, err := os.OpenFile(calls, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, _ = f.WriteString("x")
	_ = f.Close()
	data, _ := os.ReadFile(calls)
	switch name {
	case "crash-once":
		if len(data) == 1 {
			os.Exit(2)
		}
	case "crash-always":
		os.Exit(2)
	case "hang":
		time.Sleep(time.Hour)
	case "fail":
		return framework.Errorf("refusing %s", name)
	}
	return nil
}

// Command holdplugin holds a backup or a restore in the middle, so that the
// crash tests can kill the server at a known point: its BackupItemAction
// and RestoreItemAction apply to ConfigMaps labelled "hold" and, while the
// file "hold" exists in the directory named by HOLD_PLUGIN_STATE_DIR (the
// plugin inherits the server's environment), do not answer. On entering
// the wait they create "backup-held" or "restore-held" there, so the test
// knows the server has reached that point.
package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/framework"
)

// Names of the actions.
const (
	BackupName  = "e2e.lifeboat.io/hold-backup"
	RestoreName = "e2e.lifeboat.io/hold-restore"
)

// maxHold bounds the wait, so that a test that dies before removing the
// file does not leave a plugin waiting for ever.
const maxHold = 5 * time.Minute

func main() {
	dir := os.Getenv("HOLD_PLUGIN_STATE_DIR")
	framework.NewServer().
		RegisterBackupItemAction(BackupName, func(*slog.Logger) (api.BackupItemAction, error) {
			if dir == "" {
				return nil, fmt.Errorf("HOLD_PLUGIN_STATE_DIR is not set")
			}
			return holdBackup{dir: dir}, nil
		}).
		RegisterRestoreItemAction(RestoreName, func(*slog.Logger) (api.RestoreItemAction, error) {
			if dir == "" {
				return nil, fmt.Errorf("HOLD_PLUGIN_STATE_DIR is not set")
			}
			return holdRestore{dir: dir}, nil
		}).
		Serve()
}

var selector = api.ResourceSelector{IncludedResources: []string{"configmaps"}, LabelSelector: "hold"}

// hold marks that it was reached, then waits while the hold file exists.
func hold(dir, marker string) error {
	if err := os.WriteFile(filepath.Join(dir, marker), nil, 0o600); err != nil {
		return fmt.Errorf("marking %s: %w", marker, err)
	}
	deadline := time.Now().Add(maxHold)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(filepath.Join(dir, "hold")); os.IsNotExist(err) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("held for %s: the test never let go", maxHold)
}

type holdBackup struct{ dir string }

func (holdBackup) AppliesTo() (api.ResourceSelector, error) { return selector, nil }

func (h holdBackup) Execute(item runtime.Unstructured, _ *v1.Backup) (runtime.Unstructured, []api.ResourceIdentifier, error) {
	return item, nil, hold(h.dir, "backup-held")
}

type holdRestore struct{ dir string }

func (holdRestore) AppliesTo() (api.ResourceSelector, error) { return selector, nil }

func (h holdRestore) Execute(in *api.RestoreItemActionExecuteInput) (*api.RestoreItemActionExecuteOutput, error) {
	if err := hold(h.dir, "restore-held"); err != nil {
		return nil, err
	}
	return &api.RestoreItemActionExecuteOutput{UpdatedItem: in.Item}, nil
}

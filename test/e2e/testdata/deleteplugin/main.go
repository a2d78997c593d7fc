// Command deleteplugin is the DeleteItemAction of the deletion end-to-end
// tests: e2e.lifeboat.io/record-deletes, for ConfigMaps. It is steered
// through files in the directory named by DELETE_PLUGIN_STATE_DIR (the
// plugin inherits the server's environment):
//
//   - calls: one line appended per call, "ok <backup> <ns>/<name>" or
//     "fail <backup> <ns>/<name>", so a test can count what it was passed;
//   - fail-<ns>_<name>: while it exists, the call for that item fails;
//   - delay: a duration (e.g. 300ms) each call waits before answering.
package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/framework"
)

// Name is the plugin's name.
const Name = "e2e.lifeboat.io/record-deletes"

func main() {
	framework.NewServer().
		RegisterDeleteItemAction(Name, func(*slog.Logger) (api.DeleteItemAction, error) {
			dir := os.Getenv("DELETE_PLUGIN_STATE_DIR")
			if dir == "" {
				return nil, fmt.Errorf("DELETE_PLUGIN_STATE_DIR is not set")
			}
			return &recorder{dir: dir}, nil
		}).
		Serve()
}

type recorder struct {
	dir string
	mu  sync.Mutex
}

func (*recorder) AppliesTo() (api.ResourceSelector, error) {
	return api.ResourceSelector{IncludedResources: []string{"configmaps"}}, nil
}

func (r *recorder) Execute(in *api.DeleteItemActionExecuteInput) error {
	u, ok := in.Item.(*unstructured.Unstructured)
	if !ok {
		return fmt.Errorf("unexpected item type %T", in.Item)
	}
	if d, err := os.ReadFile(filepath.Join(r.dir, "delay")); err == nil {
		if wait, err := time.ParseDuration(strings.TrimSpace(string(d))); err == nil {
			time.Sleep(wait)
		}
	}
	item := u.GetNamespace() + "/" + u.GetName()
	_, err := os.Stat(filepath.Join(r.dir, "fail-"+u.GetNamespace()+"_"+u.GetName()))
	failing := err == nil
	outcome := "ok"
	if failing {
		outcome = "fail"
	}
	if err := r.record(fmt.Sprintf("%s %s %s\n", outcome, in.Backup.Name, item)); err != nil {
		return err
	}
	if failing {
		return fmt.Errorf("refusing to clean up ConfigMap %s (the test's fail file is there)", item)
	}
	return nil
}

func (r *recorder) record(line string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	f, err := os.OpenFile(filepath.Join(r.dir, "calls"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("recording the call: %w", err)
	}
	if _, err := f.WriteString(line); err != nil {
		f.Close()
		return fmt.Errorf("recording the call: %w", err)
	}
	return f.Close()
}

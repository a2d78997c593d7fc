// Command asyncplugin holds the plugins of the end-to-end tests: a v2
// BackupItemAction that, for ConfigMaps labelled async=<outcome>, starts an
// "operation" that completes (or fails, for outcome=fail) after a few
// Progress calls, and a v1 one that crashes or hangs on request.
package main

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/framework"
)

func main() {
	framework.NewServer().
		RegisterBackupItemActionV2("e2e.lifeboat.io/async", func(*slog.Logger) (api.BackupItemActionV2, error) {
			return &async{polls: map[string]int{}}, nil
		}).
		RegisterBackupItemAction("e2e.lifeboat.io/faulty", func(*slog.Logger) (api.BackupItemAction, error) {
			return faulty{}, nil
		}).
		Serve()
}

type async struct {
	mu    sync.Mutex
	polls map[string]int
}

func (*async) Name() string { return "e2e.lifeboat.io/async" }

func (*async) AppliesTo() (api.ResourceSelector, error) {
	return api.ResourceSelector{IncludedResources: []string{"configmaps"}, LabelSelector: "async"}, nil
}

func (*async) Execute(item runtime.Unstructured, _ *v1.Backup) (runtime.Unstructured, []api.ResourceIdentifier, string, []api.ResourceIdentifier, error) {
	u := item.(*unstructured.Unstructured)
	return u, nil, u.GetLabels()["async"] + "/" + u.GetNamespace() + "/" + u.GetName(), nil, nil
}

func (a *async) Progress(opID string, _ *v1.Backup) (api.OperationProgress, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.polls[opID]++
	p := api.OperationProgress{NCompleted: int64(a.polls[opID]), NTotal: 2, OperationUnits: "polls", Started: time.Now(), Updated: time.Now()}
	if a.polls[opID] >= 2 {
		p.Completed = true
		if opID[:4] == "fail" {
			p.Err = fmt.Sprintf("operation %s failed on purpose", opID)
		}
	}
	return p, nil
}

func (*async) Cancel(string, *v1.Backup) error { return nil }

package deletion

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

// A DeleteItemAction that keeps failing holds the deletion back, until the
// operator consents to go past it: then the failing items are listed with
// their errors, every other step runs, and a later attempt never passes
// them again.
func TestSkipFailedActionsGoesPastFailingItemsAndListsThem(t *testing.T) {
	w := newWorld(t)
	w.putTarball(sampleItems())
	w.putBackupFiles(nil)
	log := &callLog{}
	stuck := w.plugins.add(log, "example.io/stuck", api.ResourceSelector{IncludedResources: []string{"configmaps"}})
	stuck.setFail("shop/features", true)
	stuck.setFail("web/settings", true)
	e := w.engine()

	res := e.Run(t.Context(), Input{Backup: w.backup, Store: w.store})
	if res.Err == nil || len(w.objects.deletions()) != 0 {
		t.Fatalf("without consent: err %v, deletions %v; want the failure to keep everything", res.Err, w.objects.deletions())
	}

	log.reset()
	res = e.Run(t.Context(), Input{Backup: w.backup, Store: w.store, State: res.State, SkipFailedActions: true})
	if res.Err != nil {
		t.Fatalf("with consent: %v", res.Messages())
	}
	if calls := log.all(); len(calls) != 2 {
		t.Errorf("calls with consent %+v: want the two failing items tried once more", calls)
	}
	if left := w.keys(); len(left) != 0 || !slices.Equal(w.cluster.removedBackups(), []string{"nightly"}) {
		t.Errorf("keys left %v, backups removed %v: want the deletion to go on to the end", left, w.cluster.removedBackups())
	}
	rep := res.Report
	if rep.SkippedCount != 2 || len(rep.SkippedItems) != 2 {
		t.Fatalf("report skipped %d %+v, want the two items", rep.SkippedCount, rep.SkippedItems)
	}
	var names []string
	for _, s := range rep.SkippedItems {
		if s.Plugin != "example.io/stuck" || s.Resource != "configmaps" || !strings.Contains(s.Message, "cannot clean up "+s.Name) {
			t.Errorf("skipped item %+v: want plugin, item and the plugin's error", s)
		}
		names = append(names, s.Namespace+"/"+s.Name)
	}
	if slices.Sort(names); !slices.Equal(names, []string{"shop/features", "web/settings"}) {
		t.Errorf("skipped %v", names)
	}
	if a := rep.Actions[0]; a.Skipped != 2 || a.Failed != 0 || a.Items != 1 {
		t.Errorf("action report %+v: want 1 item done, 2 skipped, no failures", a)
	}
	// The skipped items are done: a resumed attempt passes them no more.
	log.reset()
	again := res.State
	again.Checkpoint.CompletedSteps = nil
	res = e.Run(t.Context(), Input{Backup: w.backup, Store: w.store, State: again})
	if calls := log.all(); len(calls) != 0 {
		t.Errorf("a resumed attempt passed %+v again", calls)
	}
	if res.State.SkippedCount != 2 {
		t.Errorf("skipped count after resuming %d, want it kept", res.State.SkippedCount)
	}
}

// The list is bounded, the count is not.
func TestSkippedItemsAreBounded(t *testing.T) {
	w := newWorld(t)
	var items []item
	for i := range v1.DeletionSkippedItemsMax + 50 {
		items = append(items, item{gr: "configmaps", ns: "shop", name: fmt.Sprintf("cm-%05d", i)})
	}
	w.putTarball(items)
	w.putBackupFiles(nil)
	a := w.plugins.add(nil, "example.io/broken", api.ResourceSelector{})
	for _, it := range items {
		a.setFail("shop/"+it.name, true)
	}
	res := w.engine().Run(t.Context(), Input{Backup: w.backup, Store: w.store, SkipFailedActions: true})
	if res.Err != nil {
		t.Fatalf("run: %v", res.Messages())
	}
	if res.Report.SkippedCount != int64(len(items)) || len(res.Report.SkippedItems) != v1.DeletionSkippedItemsMax {
		t.Errorf("skipped count %d list %d, want %d and %d", res.Report.SkippedCount, len(res.Report.SkippedItems), len(items), v1.DeletionSkippedItemsMax)
	}
}

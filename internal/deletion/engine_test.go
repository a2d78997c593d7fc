package deletion

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/archive"
	"github.com/lifeboat-io/lifeboat/internal/archive/archivetest"
	"github.com/lifeboat-io/lifeboat/internal/selection"
	"github.com/lifeboat-io/lifeboat/internal/storage"
	"github.com/lifeboat-io/lifeboat/internal/volumefiles"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

// sampleItems: ConfigMaps and Secrets in two namespaces, a Deployment, and
// cluster-scoped Namespaces and a ClusterRole.
func sampleItems() []item {
	app := map[string]string{"app": "shop"}
	return []item{
		{gr: "clusterroles.rbac.authorization.k8s.io", name: "reader"},
		{gr: "configmaps", ns: "shop", name: "settings", labels: app},
		{gr: "configmaps", ns: "shop", name: "features"},
		{gr: "configmaps", ns: "web", name: "settings", labels: app},
		{gr: "deployments.apps", ns: "shop", name: "api", labels: app},
		{gr: "namespaces", name: "shop"},
		{gr: "namespaces", name: "web"},
		{gr: "secrets", ns: "shop", name: "token", labels: app},
		{gr: "secrets", ns: "web", name: "token"},
	}
}

// resolver knows the short names the selectors below use.
type resolver map[string]schema.GroupResource

func (r resolver) ResolveResource(name string) (schema.GroupResource, bool, error) {
	gr, ok := r[name]
	if !ok {
		return schema.GroupResource{}, false, selection.ErrUnknownResource
	}
	return gr, true, nil
}

func TestPlanAndRunPassTheSameItemsOnceAndThePlainCopy(t *testing.T) {
	w := newWorld(t)
	extra := []archivetest.Entry{
		// Stored only under a non-preferred version: Velero never hands
		// such an item to DeleteItemActions, and neither does Lifeboat.
		{Name: "resources/widgets.example.io/v2beta1/namespaces/shop/old.json", Data: []byte(`{"metadata":{"name":"old","namespace":"shop"}}`)},
		// Not an item at all.
		{Name: "resources/configmaps/README", Data: []byte("hello")},
	}
	w.putTarball(sampleItems(), extra...)
	w.putBackupFiles(nil)
	log := &callLog{}
	w.plugins.add(log, "example.io/configmaps-in-shop", api.ResourceSelector{IncludedResources: []string{"cm"}, IncludedNamespaces: []string{"shop"}})
	w.plugins.add(log, "example.io/labelled", api.ResourceSelector{LabelSelector: "app=shop", ExcludedResources: []string{"deploy"}})
	w.plugins.add(log, "example.io/everything", api.ResourceSelector{})
	w.plugins.add(log, "example.io/nothing", api.ResourceSelector{IncludedResources: []string{"pods"}})
	w.plugins.remote = map[string]bool{"example.io/labelled": true}
	e := w.engine()
	e.Resolver = func(context.Context) (selection.ResourceResolver, error) {
		return resolver{"cm": {Resource: "configmaps"}, "deploy": {Group: "apps", Resource: "deployments"}, "pods": {Resource: "pods"}}, nil
	}

	plan, err := e.Plan(t.Context(), w.backup, w.store)
	if err != nil {
		t.Fatal(err)
	}
	planned := map[string][]string{}
	var names []string
	for _, a := range plan.Actions {
		names = append(names, a.Name)
		for _, it := range a.Items {
			planned[a.Name] = append(planned[a.Name], fmt.Sprintf("%d %s %s", it.Position, it.Resource, qualified(it.Namespace, it.Name)))
		}
	}
	if want := []string{"example.io/configmaps-in-shop", "example.io/everything", "example.io/labelled", "example.io/nothing"}; !slices.Equal(names, want) {
		t.Errorf("plan actions %v, want %v (sorted by name)", names, want)
	}
	want := map[string][]string{
		"example.io/configmaps-in-shop": {"1 configmaps shop/settings", "2 configmaps shop/features"},
		"example.io/labelled":           {"1 configmaps shop/settings", "3 configmaps web/settings", "7 secrets shop/token"},
		"example.io/everything": {"0 clusterroles.rbac.authorization.k8s.io reader", "1 configmaps shop/settings", "2 configmaps shop/features",
			"3 configmaps web/settings", "4 deployments.apps shop/api", "5 namespaces shop", "6 namespaces web", "7 secrets shop/token", "8 secrets web/token"},
	}
	for name, items := range want {
		if !slices.Equal(planned[name], items) {
			t.Errorf("plan of %s:\n got %v\nwant %v", name, planned[name], items)
		}
	}
	if len(planned["example.io/nothing"]) != 0 {
		t.Errorf("example.io/nothing planned %v", planned["example.io/nothing"])
	}

	res := e.Run(t.Context(), Input{Backup: w.backup, Store: w.store})
	if res.Err != nil {
		t.Fatalf("run: %v (%v)", res.Err, res.Messages())
	}
	got := map[string][]string{}
	seen := map[call]int{}
	for _, c := range log.all() {
		if c.copy != "plain" {
			t.Errorf("%s got the %q copy of %s; want the plain one, as Velero passes", c.action, c.copy, qualified(c.ns, c.name))
		}
		seen[c]++
		got[c.action] = append(got[c.action], qualified(c.ns, c.name))
	}
	for c, n := range seen {
		if n != 1 {
			t.Errorf("%s got %s %d times", c.action, qualified(c.ns, c.name), n)
		}
	}
	// Run passes what Plan listed: the same items per action.
	for _, a := range plan.Actions {
		var fromPlan []string
		for _, it := range a.Items {
			fromPlan = append(fromPlan, qualified(it.Namespace, it.Name))
		}
		slices.Sort(fromPlan)
		ran := slices.Sorted(slices.Values(got[a.Name]))
		if !slices.Equal(ran, fromPlan) {
			t.Errorf("%s: run passed %v, plan listed %v", a.Name, ran, fromPlan)
		}
	}
	rep := map[string]int64{}
	for _, a := range res.Report.Actions {
		rep[a.Name] = a.Items
	}
	if rep["example.io/everything"] != 9 || rep["example.io/labelled"] != 3 || rep["example.io/configmaps-in-shop"] != 2 {
		t.Errorf("report actions %+v", res.Report.Actions)
	}
}

func TestRunDeletesEverythingInOrderAndMarkerLast(t *testing.T) {
	w := newWorld(t)
	w.putTarball(sampleItems())
	snaps := []volumefiles.Snapshot{
		{Spec: volumefiles.SnapshotSpec{Location: "vsl-a", PersistentVolumeName: "pv-1"}, Status: volumefiles.SnapshotStatus{ProviderSnapshotID: "snap-1", Phase: volumefiles.SnapshotPhaseCompleted}},
		{Spec: volumefiles.SnapshotSpec{Location: "vsl-a", PersistentVolumeName: "pv-2"}, Status: volumefiles.SnapshotStatus{ProviderSnapshotID: "snap-gone", Phase: volumefiles.SnapshotPhaseCompleted}},
		{Spec: volumefiles.SnapshotSpec{Location: "vsl-b", PersistentVolumeName: "pv-3"}, Status: volumefiles.SnapshotStatus{ProviderSnapshotID: "snap-3", Phase: volumefiles.SnapshotPhaseCompleted}},
		// Never taken: nothing to delete, nothing to fail on.
		{Spec: volumefiles.SnapshotSpec{Location: "vsl-b", PersistentVolumeName: "pv-4"}, Status: volumefiles.SnapshotStatus{Phase: volumefiles.SnapshotPhaseFailed}},
	}
	w.putBackupFiles(snaps)
	w.putRestore("nightly-restore-1")
	w.putRestore("nightly-restore-2")
	w.cluster.locations["vsl-a"] = v1.VolumeSnapshotLocationSpec{Provider: "example.io/disk", Config: map[string]string{"region": "a"}}
	w.cluster.locations["vsl-b"] = v1.VolumeSnapshotLocationSpec{Provider: "example.io/other", Config: map[string]string{"region": "b"}}
	disk := &fakeSnapshotter{gone: map[string]bool{"snap-gone": true}}
	other := &fakeSnapshotter{}
	w.plugins.snapshotters["example.io/disk"] = disk
	w.plugins.snapshotters["example.io/other"] = other
	log := &callLog{}
	w.plugins.add(log, "example.io/everything", api.ResourceSelector{})
	keysBefore := w.keys()

	var states []State
	var mu sync.Mutex
	res := w.engine().Run(t.Context(), Input{Backup: w.backup, Store: w.store, OnState: func(s State) {
		mu.Lock()
		states = append(states, s)
		mu.Unlock()
	}})
	if res.Err != nil {
		t.Fatalf("run: %v (%v)", res.Err, res.Messages())
	}
	if left := w.keys(); len(left) != 0 {
		t.Errorf("keys left: %v", left)
	}
	dels := w.objects.deletions()
	marker := w.store.BackupKey("nightly", storage.BackupMetadataFile)
	if len(dels) == 0 || dels[len(dels)-1] != marker {
		t.Errorf("deletion order %v: want %s last", dels, marker)
	}
	if !slices.Equal(slices.Sorted(slices.Values(dels)), keysBefore) {
		t.Errorf("deleted %v, want every key %v", dels, keysBefore)
	}
	if !slices.Equal(disk.deleted, []string{"snap-1"}) || !slices.Equal(other.deleted, []string{"snap-3"}) {
		t.Errorf("snapshots deleted: %v and %v", disk.deleted, other.deleted)
	}
	if disk.config["region"] != "a" || other.config["region"] != "b" {
		t.Errorf("snapshotters initialised with %v and %v, want their locations' config", disk.config, other.config)
	}
	if !slices.Equal(w.cluster.deletedRestore, []string{"nightly-restore-1", "nightly-restore-2"}) {
		t.Errorf("restores deleted: %v", w.cluster.deletedRestore)
	}
	if !slices.Equal(w.cluster.removedBackups(), []string{"nightly"}) {
		t.Errorf("backup objects removed: %v", w.cluster.removedBackups())
	}
	st := res.State
	// snap-gone was not there: deleted all the same, and counted.
	if st.SnapshotsDeleted != 3 || st.RestoresDeleted != 2 || st.KeysRemoved != int64(len(keysBefore)) {
		t.Errorf("counts: snapshots %d restores %d keys %d (want 3, 2, %d)", st.SnapshotsDeleted, st.RestoresDeleted, st.KeysRemoved, len(keysBefore))
	}
	if !slices.Equal(st.Checkpoint.CompletedSteps, Steps) {
		t.Errorf("completed steps %v", st.Checkpoint.CompletedSteps)
	}
	if res.Report.KeysRemoved != st.KeysRemoved || len(res.Report.Actions) != 1 || res.Report.Actions[0].Items != 9 {
		t.Errorf("report %+v", res.Report)
	}
	// Every step's end was handed over, in order.
	var lastSteps int
	for _, s := range states {
		if n := len(s.Checkpoint.CompletedSteps); n < lastSteps {
			t.Errorf("a later state has fewer completed steps: %v", s.Checkpoint.CompletedSteps)
		} else {
			lastSteps = n
		}
	}
	if lastSteps != len(Steps) {
		t.Errorf("last state handed over has %d completed steps", lastSteps)
	}
}

func TestFailingActionKeepsEverythingAndRetryPassesOnlyWhatIsLeft(t *testing.T) {
	w := newWorld(t)
	w.putTarball(sampleItems())
	w.putBackupFiles([]volumefiles.Snapshot{{Spec: volumefiles.SnapshotSpec{Location: "vsl"}, Status: volumefiles.SnapshotStatus{ProviderSnapshotID: "snap-1"}}})
	w.putRestore("r1")
	w.cluster.locations["vsl"] = v1.VolumeSnapshotLocationSpec{Provider: "example.io/disk"}
	disk := &fakeSnapshotter{}
	w.plugins.snapshotters["example.io/disk"] = disk
	log := &callLog{}
	picky := w.plugins.add(log, "example.io/picky", api.ResourceSelector{})
	picky.setFail("shop/features", true)
	w.plugins.add(log, "example.io/calm", api.ResourceSelector{IncludedResources: []string{"configmaps"}})
	keysBefore := w.keys()

	e := w.engine()
	res := e.Run(t.Context(), Input{Backup: w.backup, Store: w.store})
	if res.Err == nil {
		t.Fatal("the deletion succeeded although an action failed")
	}
	if res.ErrorCount != 1 || len(res.Errors) != 1 {
		t.Fatalf("errors %+v (count %d), want exactly the one failure", res.Errors, res.ErrorCount)
	}
	if e := res.Errors[0]; e.Plugin != "example.io/picky" || e.Resource != "configmaps" || e.Namespace != "shop" || e.Name != "features" ||
		!strings.Contains(e.Message, "cannot clean up features") || e.Step != v1.DeletionStepItemActions {
		t.Errorf("error %+v: want plugin, item and the plugin's message", e)
	}
	if msg := res.Messages()[0]; !strings.Contains(msg, "example.io/picky") || !strings.Contains(msg, "configmaps shop/features") {
		t.Errorf("message %q names neither the plugin nor the item", msg)
	}
	// Nothing destructive ran.
	if got := w.keys(); !slices.Equal(got, keysBefore) {
		t.Errorf("keys changed after a failed action:\n got %v\nwant %v", got, keysBefore)
	}
	if len(w.objects.deletions()) != 0 || len(disk.deleted) != 0 || len(w.cluster.deletedRestore) != 0 || len(w.cluster.removedBackups()) != 0 {
		t.Errorf("destructive steps ran: keys %v snapshots %v restores %v backups %v",
			w.objects.deletions(), disk.deleted, w.cluster.deletedRestore, w.cluster.removedBackups())
	}
	if len(res.State.Checkpoint.CompletedSteps) != 0 {
		t.Errorf("completed steps %v after a failed first step", res.State.Checkpoint.CompletedSteps)
	}
	var pickyReport v1.DeletionActionReport
	for _, a := range res.Report.Actions {
		if a.Name == "example.io/picky" {
			pickyReport = a
		}
	}
	if pickyReport.Failed != 1 || pickyReport.Items != 8 {
		t.Errorf("report for picky %+v, want 8 items and 1 failure", pickyReport)
	}

	// The plugin is fixed; the retry resumes from the state.
	picky.setFail("shop/features", false)
	log.reset()
	res2 := e.Run(t.Context(), Input{Backup: w.backup, Store: w.store, State: res.State})
	if res2.Err != nil {
		t.Fatalf("retry: %v (%v)", res2.Err, res2.Messages())
	}
	calls := log.all()
	if len(calls) != 1 || calls[0] != (call{action: "example.io/picky", ns: "shop", name: "features", copy: "plain"}) {
		t.Errorf("retry passed %+v; want only the item that failed, to the action that failed", calls)
	}
	if left := w.keys(); len(left) != 0 {
		t.Errorf("keys left after the retry: %v", left)
	}
	if !slices.Equal(disk.deleted, []string{"snap-1"}) {
		t.Errorf("snapshots deleted %v", disk.deleted)
	}
	for _, a := range res2.Report.Actions {
		want := map[string]int64{"example.io/picky": 9, "example.io/calm": 3}[a.Name]
		if a.Items != want || a.Failed != 0 {
			t.Errorf("report for %s: %+v, want %d items over both attempts", a.Name, a, want)
		}
	}
}

func TestResumeFromACheckpointSkipsDoneItems(t *testing.T) {
	w := newWorld(t)
	w.putTarball(sampleItems())
	w.putBackupFiles(nil)
	log := &callLog{}
	w.plugins.add(log, "example.io/everything", api.ResourceSelector{})
	w.plugins.add(log, "example.io/configmaps", api.ResourceSelector{IncludedResources: []string{"configmaps"}})
	state := State{Checkpoint: v1.DeletionCheckpoint{Actions: []v1.DeletionProgress{
		{Name: "example.io/everything", Watermark: 3, Done: []int64{5, 7}, Succeeded: 5},
		// Position 3 is the web/settings ConfigMap.
		{Name: "example.io/configmaps", Watermark: 0, Done: []int64{3}, Succeeded: 1},
	}}}
	res := w.engine().Run(t.Context(), Input{Backup: w.backup, Store: w.store, State: state})
	if res.Err != nil {
		t.Fatalf("run: %v (%v)", res.Err, res.Messages())
	}
	var got []string
	for _, c := range log.all() {
		got = append(got, c.action+" "+qualified(c.ns, c.name))
	}
	slices.Sort(got)
	want := []string{
		"example.io/configmaps shop/features", "example.io/configmaps shop/settings",
		"example.io/everything shop/api", "example.io/everything web", "example.io/everything web/settings", "example.io/everything web/token",
	}
	if !slices.Equal(got, want) {
		t.Errorf("resumed run passed\n %v\nwant\n %v", got, want)
	}
}

// An attempt stopped mid-way (a server shutting down) hands over a state
// from which the next attempt passes every remaining item exactly once.
func TestCancelledAttemptResumesWithoutRepeats(t *testing.T) {
	w := newWorld(t)
	var items []item
	for i := range 300 {
		items = append(items, item{gr: "configmaps", ns: "shop", name: fmt.Sprintf("cm-%03d", i)})
	}
	w.putTarball(items)
	w.putBackupFiles(nil)
	log := &callLog{}
	ctx, cancel := context.WithCancel(t.Context())
	var n atomic.Int64
	a := w.plugins.add(log, "example.io/slow", api.ResourceSelector{})
	a.before = func(string, string) {
		if n.Add(1) == 120 {
			cancel()
		}
		time.Sleep(time.Millisecond)
	}
	e := w.engine()
	e.CheckpointInterval = time.Hour // only the step's end hands over
	var last State
	res := e.Run(ctx, Input{Backup: w.backup, Store: w.store, OnState: func(s State) { last = s }})
	if !errors.Is(res.Err, context.Canceled) {
		t.Fatalf("run: %v, want cancelled", res.Err)
	}
	if len(w.objects.deletions()) != 0 || len(w.cluster.removedBackups()) != 0 {
		t.Fatal("a cancelled attempt deleted things")
	}
	first := len(log.all())
	if first == 0 || first >= len(items) {
		t.Fatalf("first attempt passed %d items; the test wants it stopped mid-way", first)
	}
	if !equalStates(last, res.State) {
		t.Errorf("the last state handed over differs from the result's:\n%+v\n%+v", last.Checkpoint, res.State.Checkpoint)
	}

	a.before = nil
	res2 := e.Run(t.Context(), Input{Backup: w.backup, Store: w.store, State: last})
	if res2.Err != nil {
		t.Fatalf("resume: %v", res2.Err)
	}
	count := map[string]int{}
	for _, c := range log.all() {
		count[c.name]++
	}
	for _, it := range items {
		if count[it.name] != 1 {
			t.Errorf("%s passed %d times over both attempts, want once", it.name, count[it.name])
		}
	}
	if got := res2.Report.Actions[0].Items; got != int64(len(items)) {
		t.Errorf("report counts %d items, want %d", got, len(items))
	}
}

func equalStates(a, b State) bool {
	return fmt.Sprint(a.Checkpoint.Actions) == fmt.Sprint(b.Checkpoint.Actions) &&
		slices.Equal(a.Checkpoint.CompletedSteps, b.Checkpoint.CompletedSteps)
}

func TestMissingTarballContinuesWithAWarning(t *testing.T) {
	w := newWorld(t)
	w.putBackupFiles(nil) // no tarball
	log := &callLog{}
	w.plugins.add(log, "example.io/everything", api.ResourceSelector{})
	e := w.engine()
	plan, err := e.Plan(t.Context(), w.backup, w.store)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Warnings) != 1 || !strings.Contains(plan.Warnings[0], "tarball") || len(plan.Actions[0].Items) != 0 {
		t.Errorf("plan warnings %v, items %v", plan.Warnings, plan.Actions[0].Items)
	}
	res := e.Run(t.Context(), Input{Backup: w.backup, Store: w.store})
	if res.Err != nil {
		t.Fatalf("run: %v", res.Err)
	}
	if len(res.Report.Warnings) != 1 || !strings.Contains(res.Report.Warnings[0], "tarball of backup nightly is not in the store") {
		t.Errorf("warnings %v", res.Report.Warnings)
	}
	if len(w.keys()) != 0 || len(w.cluster.removedBackups()) != 1 {
		t.Errorf("keys %v, removed %v: want the deletion to go on", w.keys(), w.cluster.removedBackups())
	}
}

func TestStorageErrorReadingTheTarballStopsTheDeletion(t *testing.T) {
	w := newWorld(t)
	w.putTarball(sampleItems())
	w.putBackupFiles(nil)
	w.objects.getErr = map[string]error{w.store.BackupKey("nightly", storage.BackupContentsFile("nightly")): errors.New("503 slow down")}
	log := &callLog{}
	w.plugins.add(log, "example.io/everything", api.ResourceSelector{})
	keys := w.keys()
	res := w.engine().Run(t.Context(), Input{Backup: w.backup, Store: w.store})
	if res.Err == nil || !strings.Contains(res.Err.Error(), "503 slow down") {
		t.Fatalf("run: %v, want the storage error", res.Err)
	}
	if !slices.Equal(w.keys(), keys) || len(w.cluster.removedBackups()) != 0 {
		t.Errorf("a storage error let the deletion go on")
	}
	if len(res.Errors) != 1 || res.Errors[0].Step != v1.DeletionStepItemActions {
		t.Errorf("errors %+v", res.Errors)
	}
}

func TestSnapshotFailureStopsBeforeKeysAndRetryDeletesOnlyTheRest(t *testing.T) {
	w := newWorld(t)
	w.putTarball(nil)
	snaps := []volumefiles.Snapshot{
		{Spec: volumefiles.SnapshotSpec{Location: "vsl"}, Status: volumefiles.SnapshotStatus{ProviderSnapshotID: "snap-1"}},
		{Spec: volumefiles.SnapshotSpec{Location: "vsl"}, Status: volumefiles.SnapshotStatus{ProviderSnapshotID: "snap-busy"}},
		{Spec: volumefiles.SnapshotSpec{Location: "vsl"}, Status: volumefiles.SnapshotStatus{ProviderSnapshotID: "snap-3"}},
		{Spec: volumefiles.SnapshotSpec{Location: "missing-vsl"}, Status: volumefiles.SnapshotStatus{ProviderSnapshotID: "snap-4"}},
	}
	w.putBackupFiles(snaps)
	w.cluster.locations["vsl"] = v1.VolumeSnapshotLocationSpec{Provider: "example.io/disk"}
	disk := &fakeSnapshotter{failing: map[string]bool{"snap-busy": true}}
	w.plugins.snapshotters["example.io/disk"] = disk
	keys := w.keys()
	e := w.engine()
	res := e.Run(t.Context(), Input{Backup: w.backup, Store: w.store})
	if res.Err == nil {
		t.Fatal("deletion succeeded with a snapshot left")
	}
	if !slices.Equal(disk.deleted, []string{"snap-1", "snap-3"}) {
		t.Errorf("deleted %v: want the others deleted despite the failure", disk.deleted)
	}
	if !slices.Equal(w.keys(), keys) {
		t.Errorf("keys removed although a snapshot was not deleted")
	}
	var msgs []string
	for _, e := range res.Errors {
		msgs = append(msgs, e.Name+": "+e.Message)
	}
	if len(res.Errors) != 2 || !strings.Contains(strings.Join(msgs, "\n"), "snap-busy") || !strings.Contains(strings.Join(msgs, "\n"), "missing-vsl") {
		t.Errorf("errors %v: want the busy snapshot and the missing location", msgs)
	}
	if len(res.Report.LeftBehind) != 2 {
		t.Errorf("left behind %v", res.Report.LeftBehind)
	}

	disk.failing = nil
	w.cluster.locations["missing-vsl"] = v1.VolumeSnapshotLocationSpec{Provider: "example.io/disk"}
	res2 := e.Run(t.Context(), Input{Backup: w.backup, Store: w.store, State: res.State})
	if res2.Err != nil {
		t.Fatalf("retry: %v (%v)", res2.Err, res2.Messages())
	}
	if !slices.Equal(disk.deleted, []string{"snap-1", "snap-3", "snap-busy", "snap-4"}) {
		t.Errorf("deleted %v: the retry must not delete snap-1 and snap-3 again", disk.deleted)
	}
	if res2.State.SnapshotsDeleted != 4 {
		t.Errorf("snapshots deleted %d, want 4", res2.State.SnapshotsDeleted)
	}
}

func TestRestoreDeletionFailureKeepsBackupData(t *testing.T) {
	w := newWorld(t)
	w.putTarball(nil)
	w.putBackupFiles(nil)
	w.putRestore("r-ok")
	w.putRestore("r-stuck")
	w.cluster.deleteFails = map[string]bool{"r-stuck": true}
	res := w.engine().Run(t.Context(), Input{Backup: w.backup, Store: w.store})
	if res.Err == nil {
		t.Fatal("deletion succeeded with a restore left")
	}
	for _, k := range w.keys() {
		if strings.HasPrefix(k, "lb/restores/") {
			t.Errorf("restore key %s left: keys go before the Restore object", k)
		}
	}
	if !slices.Contains(w.keys(), w.store.BackupKey("nightly", storage.BackupMetadataFile)) || len(w.cluster.removedBackups()) != 0 {
		t.Errorf("backup data or object removed after a failed restore deletion")
	}
	if res.State.RestoresDeleted != 1 || !slices.Contains(res.Report.LeftBehind, "restore r-stuck") {
		t.Errorf("restores deleted %d, left behind %v", res.State.RestoresDeleted, res.Report.LeftBehind)
	}
}

// While one item is stuck, the run does not read ahead of the window: the
// number of items handed out stays bounded, which is what keeps memory
// flat and checkpoints small however big the backup.
func TestWindowBoundsWorkAheadOfAStuckItem(t *testing.T) {
	w := newWorld(t)
	const n = 3000
	var items []item
	for i := range n {
		items = append(items, item{gr: "configmaps", ns: "shop", name: fmt.Sprintf("cm-%05d", i)})
	}
	w.putTarball(items)
	w.putBackupFiles(nil)
	release := make(chan struct{})
	var calls atomic.Int64
	log := &callLog{}
	a := w.plugins.add(log, "example.io/slow-first", api.ResourceSelector{})
	a.before = func(_, name string) {
		calls.Add(1)
		if name == "cm-00000" {
			<-release
		}
	}
	e := w.engine()
	e.Window = 100
	e.CheckpointInterval = 10 * time.Millisecond
	var mu sync.Mutex
	var maxDone int
	res := make(chan Result, 1)
	go func() {
		res <- e.Run(t.Context(), Input{Backup: w.backup, Store: w.store, OnState: func(s State) {
			mu.Lock()
			defer mu.Unlock()
			for _, p := range s.Checkpoint.Actions {
				maxDone = max(maxDone, len(p.Done))
			}
		}})
	}()
	deadline := time.Now().Add(5 * time.Second)
	for calls.Load() < 100 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // would it go further?
	if got := calls.Load(); got != 100 {
		t.Errorf("%d items handed out while the first is stuck; want exactly the window (100)", got)
	}
	close(release)
	r := <-res
	if r.Err != nil {
		t.Fatalf("run: %v", r.Err)
	}
	mu.Lock()
	defer mu.Unlock()
	if maxDone == 0 || maxDone >= 100 {
		t.Errorf("largest done list checkpointed: %d; want some, fewer than the window", maxDone)
	}
	if calls.Load() != n {
		t.Errorf("%d calls, want %d", calls.Load(), n)
	}
}

func TestCheckpointsAreThrottled(t *testing.T) {
	w := newWorld(t)
	var items []item
	for i := range 5000 {
		items = append(items, item{gr: "configmaps", ns: "shop", name: fmt.Sprintf("cm-%05d", i)})
	}
	w.putTarball(items)
	w.putBackupFiles(nil)
	w.plugins.add(&callLog{}, "example.io/fast", api.ResourceSelector{})
	e := w.engine()
	e.CheckpointInterval = time.Hour // count-based only
	e.CheckpointItems = 1000
	var states []State
	res := e.Run(t.Context(), Input{Backup: w.backup, Store: w.store, OnState: func(s State) { states = append(states, s) }})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	// 5 or so for the items (every 1,000), one per step's end.
	if len(states) < 5 || len(states) > 15 {
		t.Errorf("%d states handed over for 5,000 items; want about one per 1,000 items plus one per step", len(states))
	}
	var prev int64
	for _, s := range states {
		if len(s.Checkpoint.Actions) == 0 {
			continue
		}
		wm := s.Checkpoint.Actions[0].Watermark
		if wm < prev {
			t.Errorf("watermark went back from %d to %d", prev, wm)
		}
		prev = wm
	}
	if prev != 5000 {
		t.Errorf("final watermark %d, want 5000", prev)
	}
}

func TestBackupWithoutLocationDeletesTheObjectOnly(t *testing.T) {
	w := newWorld(t)
	w.putRestore("r1")
	log := &callLog{}
	w.plugins.add(log, "example.io/everything", api.ResourceSelector{})
	res := w.engine().Run(t.Context(), Input{Backup: w.backup})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if len(log.all()) != 0 || len(w.cluster.removedBackups()) != 1 || len(w.cluster.deletedRestore) != 1 {
		t.Errorf("calls %v removed %v restores %v", log.all(), w.cluster.removedBackups(), w.cluster.deletedRestore)
	}
	if len(res.Report.Warnings) != 1 {
		t.Errorf("warnings %v", res.Report.Warnings)
	}
}

// 100,000 items stream through with memory that does not grow with the
// backup: the items are about 50 MB of JSON (100 MB unpacked with the
// preferred-version copies), and the heap stays a fraction of that.
func TestHundredThousandItemsInFlatMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and reads a 100,000-item tarball")
	}
	w := newWorld(t)
	const n = 100_000
	pr, pw := io.Pipe()
	go func() {
		aw := archive.NewWriter(pw, time.Unix(0, 0), archive.Limits{})
		err := aw.WriteVersion()
		pad := make([]byte, 400)
		for i := 0; i < n && err == nil; i++ {
			for j := range pad {
				pad[j] = 'a' + byte((i*7+j*13)%26)
			}
			data := fmt.Appendf(nil, `{"metadata":{"name":"cm-%06d","namespace":"shop"},"data":{"pad":%q}}`, i, pad)
			err = aw.WriteItem(archive.ItemRef{GroupResource: "configmaps", Version: "v1", Namespace: "shop", Name: fmt.Sprintf("cm-%06d", i)}, data)
		}
		if err == nil {
			err = aw.Close()
		}
		pw.CloseWithError(err)
	}()
	if err := w.store.PutBackupContents(t.Context(), w.backup.Name, pr); err != nil {
		t.Fatal(err)
	}
	w.putBackupFiles(nil)
	var calls atomic.Int64
	a := w.plugins.add(nil, "example.io/count", api.ResourceSelector{})
	a.before = func(string, string) { calls.Add(1) }

	runtime.GC()
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			peak.Store(max(peak.Load(), ms.HeapAlloc))
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	var states atomic.Int64
	res := w.engine().Run(t.Context(), Input{Backup: w.backup, Store: w.store, OnState: func(State) { states.Add(1) }})
	close(stop)
	<-sampled
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if calls.Load() != n || res.Report.Actions[0].Items != n {
		t.Errorf("%d calls, report %d; want %d", calls.Load(), res.Report.Actions[0].Items, n)
	}
	t.Logf("peak heap %d MiB, %d states handed over", peak.Load()>>20, states.Load())
	if peak.Load() > 40<<20 {
		t.Errorf("peak heap %d MiB while deleting 100,000 items; the run must stream", peak.Load()>>20)
	}
}

func TestPanickingActionIsAnErrorNotACrash(t *testing.T) {
	w := newWorld(t)
	w.putTarball(sampleItems())
	w.putBackupFiles(nil)
	a := w.plugins.add(&callLog{}, "example.io/buggy", api.ResourceSelector{IncludedResources: []string{"secrets"}})
	a.before = func(ns, _ string) {
		if ns == "web" {
			panic("nil map")
		}
	}
	res := w.engine().Run(t.Context(), Input{Backup: w.backup, Store: w.store})
	if res.Err == nil || len(res.Errors) != 1 || !strings.Contains(res.Errors[0].Message, "panicked: nil map") || res.Errors[0].Namespace != "web" {
		t.Errorf("result %v, errors %+v", res.Err, res.Errors)
	}
	if len(w.cluster.removedBackups()) != 0 {
		t.Error("backup removed after a panic")
	}
}

package plugins

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/testutil/testenv"
)

// Issue 6's acceptance checks, through the CLI: a backup made with the
// cleanup example (a Receipt per ConfigMap) and a native snapshot taken by
// the filesnapshotter example, restored once, then deleted by `backup
// delete` or by its TTL. Everything it made must go, the report must say
// so, and --dry-run must list exactly the items each DeleteItemAction is
// then given.

// The DeleteItemActions these tests watch.
const (
	cleanupAction  = "example.io/cleanup"
	compatDeletes  = "compat.example.io/record-deletes"
	labelledAction = "lifeboat.io/labelled-resource-cleanup"
	csiAction      = "lifeboat.io/csi-snapshot-cleanup"
)

// delApp is a namespace with what a deletion has to clean up after, and
// the locations its backups go to.
type delApp struct {
	ns         string
	configMaps []string
	pv         string
	bsl        *v1.BackupStorageLocation
	bucket     string
	vsl        string
	snapDir    string
}

func newDelApp(t *testing.T, prefix string) *delApp {
	t.Helper()
	a := &delApp{ns: env.NewNamespace(t, prefix), configMaps: []string{"features", "flags", "limits", "settings"}, snapDir: t.TempDir()}
	for _, name := range a.configMaps {
		env.Create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: a.ns, Name: name}, Data: map[string]string{"k": name}})
	}
	a.pv = boundVolume(t, a.ns, "data", "standard", "1Gi", nil,
		corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data/" + a.ns}})
	a.bsl, a.bucket = env.FilesystemLocation(t, env.Name(prefix+"-fs"))
	env.WaitLocationPhase(t, a.bsl.Name, v1.BackupStorageLocationPhaseAvailable, time.Minute)
	vsl := &v1.VolumeSnapshotLocation{
		ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: env.Name(prefix + "-files")},
		Spec:       v1.VolumeSnapshotLocationSpec{Provider: "example.io/filesnapshotter", Config: map[string]string{"dir": a.snapDir}},
	}
	env.Create(t, vsl)
	a.vsl = vsl.Name
	// Both go with the test: with a second location of one provider, a
	// backup that names none fails validation (Velero's rule), and the
	// sync would bring back what --force left in the store.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, obj := range []client.Object{vsl, a.bsl} {
			if err := env.Client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting %s: %v", obj.GetName(), err)
			}
		}
	})
	return a
}

// backupArgs are the CLI arguments that back the app up.
func (a *delApp) backupArgs(name string, extra ...string) []string {
	return append([]string{"backup", "create", name, "--include-namespaces", a.ns, "--storage-location", a.bsl.Name,
		"--volume-snapshot-locations", a.vsl}, extra...)
}

// checkBackup checks what the backup made: Completed, one receipt per
// ConfigMap, one snapshot file, and returns the backup and the snapshot's
// id.
func (a *delApp) checkBackup(t *testing.T, name string) (*v1.Backup, string) {
	t.Helper()
	b := env.WaitBackup(t, name, 2*time.Minute)
	if b.Status.Phase != v1.BackupPhaseCompleted || b.Status.VolumeSnapshotsCompleted != 1 {
		out, _ := lifeboat(t, "backup", "logs", name)
		t.Fatalf("backup %s: phase %s, %d snapshots, %d errors; want Completed with 1 snapshot\n%s",
			name, b.Status.Phase, b.Status.VolumeSnapshotsCompleted, b.Status.Errors, out)
	}
	if got := a.receipts(t, name); !slices.Equal(got, a.configMaps) {
		t.Fatalf("receipts for %v, want one per ConfigMap %v", got, a.configMaps)
	}
	snaps := a.snapshotFiles(t)
	if len(snaps) != 1 {
		t.Fatalf("snapshot files %v, want 1", snaps)
	}
	return b, snaps[0]
}

// receipts names the ConfigMaps that have a receipt for backup.
func (a *delApp) receipts(t *testing.T, backup string) []string {
	t.Helper()
	var out []string
	for _, r := range listReceipts(t, "", backup) {
		spec, _ := r.Object["spec"].(map[string]any)
		cm, _ := spec["configMap"].(string)
		out = append(out, cm)
	}
	slices.Sort(out)
	return out
}

// snapshotFiles are the filesnapshotter's snapshots: ids, from file names.
func (a *delApp) snapshotFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(a.snapDir, "snapshots", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, f := range files {
		ids = append(ids, strings.TrimSuffix(filepath.Base(f), ".json"))
	}
	return ids
}

// keys lists the store's keys under dir ("backups/<name>", "restores/<name>"),
// as "<dir>/<file>".
func (a *delApp) keys(t *testing.T, dir string) []string {
	t.Helper()
	root := filepath.Join(a.bucket, "lifeboat")
	var out []string
	err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			out = append(out, strings.TrimPrefix(p, root+"/"))
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// export is a ConfigMap made for the backup after it ran, as a plugin
// would; lifeboat.io/labelled-resource-cleanup, configured by
// configureLabelledCleanup, deletes it with the backup.
func (a *delApp) export(t *testing.T, backup string) {
	t.Helper()
	env.Create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: a.ns, Name: "export-" + backup,
		Labels: map[string]string{v1.BackupNameLabel: v1.LabelValue(backup)}}})
}

func (a *delApp) exportExists(t *testing.T, backup string) bool {
	t.Helper()
	err := env.Client.Get(testenv.Ctx(t), client.ObjectKey{Namespace: a.ns, Name: "export-" + backup}, &corev1.ConfigMap{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

// configureLabelledCleanup has the built-in labelled-resource cleanup
// delete ConfigMaps labelled with a deleted backup's name, for the rest of
// the test.
func configureLabelledCleanup(t *testing.T) {
	t.Helper()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: env.Name("cleanup-resources"),
			Labels: map[string]string{"lifeboat.io/cleanup-resources": "true"}},
		Data: map[string]string{"resources": "configmaps\n"},
	}
	env.Create(t, cm)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), cm) })
}

// restore restores the backup's ConfigMaps into a new namespace through
// the API (polled more often than the CLI's --wait does) and returns the
// restore's name and that namespace.
func (a *delApp) restore(t *testing.T, backup string) (string, string) {
	t.Helper()
	target := env.Name("restored")
	rs := &v1.Restore{
		ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: env.Name("rs")},
		Spec: v1.RestoreSpec{BackupName: backup, NamespaceMapping: map[string]string{a.ns: target},
			IncludedResources: []string{"configmaps"}},
	}
	env.Create(t, rs)
	if got := waitRestore(t, rs.Name); got.Status.Phase != v1.RestorePhaseCompleted {
		t.Fatalf("restore %s: phase %s (%d errors)", rs.Name, got.Status.Phase, got.Status.Errors)
	}
	return rs.Name, target
}

func gone(t *testing.T, obj client.Object) bool {
	t.Helper()
	err := env.Client.Get(testenv.Ctx(t), client.ObjectKeyFromObject(obj), obj)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return apierrors.IsNotFound(err)
}

// cliPlan is what `backup delete --dry-run` printed.
type cliPlan struct {
	actions    map[string][]string
	counts     map[string]int
	snapshots  []string
	podVolumes []string
	restores   []string
	keys       int
	keyList    []string
	cut        bool
	steps      []string // the numbered steps' kinds, in order
}

// The dry run's steps, told apart by what they say (their numbers follow
// the order, which grows as the deletion learns new steps).
const (
	stepActions    = "actions"
	stepSnapshots  = "snapshots"
	stepPodVolumes = "pod volumes"
	stepRestores   = "restores"
	stepKeys       = "keys"
	stepBackup     = "backup"
)

func planStep(rest string) string {
	switch {
	case strings.HasPrefix(rest, "call the DeleteItemActions"):
		return stepActions
	case strings.Contains(rest, "native volume snapshot"):
		return stepSnapshots
	case strings.Contains(rest, "pod volume snapshot"):
		return stepPodVolumes
	case strings.HasPrefix(rest, "delete ") && strings.Contains(rest, " restore"):
		return stepRestores
	case strings.Contains(rest, "object store key"):
		return stepKeys
	case strings.HasPrefix(rest, "remove the Backup object"):
		return stepBackup
	}
	return ""
}

// parsePlan reads the dry run's numbered steps back.
func parsePlan(t *testing.T, out string) cliPlan {
	t.Helper()
	p := cliPlan{actions: map[string][]string{}, counts: map[string]int{}}
	step, action := "", ""
	for line := range strings.SplitSeq(out, "\n") {
		text := strings.TrimSpace(line)
		if n, rest, ok := strings.Cut(line, ". "); ok && n != "" && strings.Trim(n, "0123456789") == "" {
			if step = planStep(rest); step == "" {
				t.Fatalf("dry run step %q: not a step this test knows", line)
			}
			p.steps = append(p.steps, step)
			if step == stepKeys {
				if _, err := fmt.Sscanf(rest, "remove %d object store keys", &p.keys); err != nil {
					t.Fatalf("dry run step %q: %v", line, err)
				}
			}
			continue
		}
		switch {
		case strings.HasPrefix(text, "... and "):
			p.cut = true
		case strings.HasPrefix(text, "- "):
			item := strings.TrimPrefix(text, "- ")
			switch step {
			case stepActions:
				p.actions[action] = append(p.actions[action], item)
			case stepSnapshots:
				p.snapshots = append(p.snapshots, item)
			case stepPodVolumes:
				p.podVolumes = append(p.podVolumes, item)
			case stepRestores:
				p.restores = append(p.restores, item)
			case stepKeys:
				p.keyList = append(p.keyList, item)
			}
		case step == stepActions && (strings.HasSuffix(text, " items") || strings.HasSuffix(text, " item")):
			i := strings.LastIndex(text, ": ")
			if i < 0 {
				t.Fatalf("dry run action line %q", line)
			}
			action = text[:i]
			n, err := strconv.Atoi(strings.Fields(text[i+2:])[0])
			if err != nil {
				t.Fatalf("dry run action line %q: %v", line, err)
			}
			p.counts[action] = n
			p.actions[action] = []string{}
		}
	}
	if want := []string{stepActions, stepSnapshots, stepPodVolumes, stepRestores, stepKeys, stepBackup}; !slices.Equal(p.steps, want) {
		t.Fatalf("the dry run's steps %v, want %v:\n%s", p.steps, want, out)
	}
	return p
}

// calls reads which items of backup an action was given, from the call
// logs the cleanup example and the Velero-SDK plugin keep, as
// "<resource> <namespace>/<name>".
func calls(t *testing.T, action, backup string) []string {
	t.Helper()
	file := cleanupCallLog
	if action == compatDeletes {
		file = filepath.Join(compatStateDir, "deletes.log")
	}
	f, err := os.Open(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 || fields[0] != backup {
			continue
		}
		resource, item := fields[1], fields[2]
		if action == compatDeletes {
			// "<backup> <kind> <ns>/<name>": the plugin sees kinds.
			if resource != "ConfigMap" {
				t.Fatalf("%s was given a %s; it applies to ConfigMaps only", action, resource)
			}
			resource = "configmaps"
		} else if len(fields) != 4 || fields[3] != "ok" {
			t.Errorf("%s call %q did not succeed", action, sc.Text())
		}
		out = append(out, resource+" "+item)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// deleteRequests lists the (non dry-run) DeleteBackupRequests of a backup.
func deleteRequests(t *testing.T, backup string) []v1.DeleteBackupRequest {
	t.Helper()
	var list v1.DeleteBackupRequestList
	if err := env.Client.List(testenv.Ctx(t), &list, client.InNamespace(env.Namespace),
		client.MatchingLabels{v1.BackupNameLabel: v1.LabelValue(backup)}); err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(list.Items, func(r v1.DeleteBackupRequest) bool { return r.Spec.DryRun })
}

// describedLines is `delete-request describe` with each line's runs of
// blanks made single spaces, so that table alignment does not matter.
func describedLines(t *testing.T, req string) []string {
	t.Helper()
	out := mustLifeboat(t, "delete-request", "describe", req)
	var lines []string
	for l := range strings.SplitSeq(out, "\n") {
		lines = append(lines, strings.Join(strings.Fields(l), " "))
	}
	t.Logf("lifeboat delete-request describe %s:\n%s", req, out)
	return lines
}

// checkDeleted checks that nothing the backup made is left: receipts, the
// snapshot file, the restore and its keys, the backup's keys, the Backup,
// and the object the labelled-resource cleanup was configured for; and
// that what was restored from the backup stays.
func (a *delApp) checkDeleted(t *testing.T, b *v1.Backup, restore, restoredNS string) {
	t.Helper()
	if got := a.receipts(t, b.Name); len(got) != 0 {
		t.Errorf("receipts left for %v; example.io/cleanup should have deleted them", got)
	}
	if got := a.snapshotFiles(t); len(got) != 0 {
		t.Errorf("snapshot files left: %v", got)
	}
	if !gone(t, &v1.Restore{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: restore}}) {
		t.Errorf("restore %s is still there", restore)
	}
	if got := a.keys(t, "restores/"+restore); len(got) != 0 {
		t.Errorf("keys left under restores/%s/: %v", restore, got)
	}
	if got := a.keys(t, "backups/"+b.Name); len(got) != 0 {
		t.Errorf("keys left under backups/%s/: %v", b.Name, got)
	}
	if !gone(t, &v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: b.Name}}) {
		t.Errorf("backup %s is still there", b.Name)
	}
	if a.exportExists(t, b.Name) {
		t.Errorf("ConfigMap export-%s, labelled with the backup's name, is still there; %s should have deleted it", b.Name, labelledAction)
	}
	for _, name := range a.configMaps {
		if err := env.Client.Get(testenv.Ctx(t), client.ObjectKey{Namespace: restoredNS, Name: name}, &corev1.ConfigMap{}); err != nil {
			t.Errorf("restored ConfigMap %s/%s: %v; what a restore made is not the backup's to delete", restoredNS, name, err)
		}
	}
}

// checkReport checks a finished request's report: per action the items
// it was expected to get, one snapshot, one restore, every key, nothing
// left behind.
func checkReport(t *testing.T, req *v1.DeleteBackupRequest, items map[string]int, keys int) {
	t.Helper()
	rep := req.Status.Report
	if req.Status.Phase != v1.DeleteBackupRequestPhaseProcessed || len(req.Status.Errors) != 0 || rep == nil {
		t.Fatalf("request %s: phase %s errors %v report %+v", req.Name, req.Status.Phase, req.Status.Errors, rep)
	}
	got := map[string]int{}
	for _, a := range rep.Actions {
		got[a.Name] = int(a.Items)
		if a.Failed != 0 {
			t.Errorf("report: %s failed on %d items", a.Name, a.Failed)
		}
	}
	for name, n := range items {
		if got[name] != n {
			t.Errorf("report: %s was called for %d items, want %d (report %+v)", name, got[name], n, rep.Actions)
		}
	}
	if rep.SnapshotsDeleted != 1 || rep.RestoresDeleted != 1 || rep.KeysRemoved != int64(keys) || len(rep.LeftBehind) != 0 {
		t.Errorf("report: snapshots %d restores %d keys %d left behind %v; want 1, 1, %d and nothing",
			rep.SnapshotsDeleted, rep.RestoresDeleted, rep.KeysRemoved, rep.LeftBehind, keys)
	}
}

func TestBackupDeleteRemovesEverythingTheDryRunListed(t *testing.T) {
	a := newDelApp(t, "del")
	configureLabelledCleanup(t)
	name := env.Name("del")
	mustLifeboat(t, a.backupArgs(name, "--wait")...)
	b, snap := a.checkBackup(t, name)
	a.export(t, name)
	restore, restoredNS := a.restoreCLI(t, name)
	backupKeys, restoreKeys := a.keys(t, "backups/"+name), a.keys(t, "restores/"+restore)
	if !slices.Contains(backupKeys, "backups/"+name+"/velero-backup.json") || len(restoreKeys) == 0 {
		t.Fatalf("before: backup keys %v, restore keys %v", backupKeys, restoreKeys)
	}

	out := mustLifeboat(t, "backup", "delete", name, "--dry-run")
	t.Logf("lifeboat backup delete %s --dry-run:\n%s", name, out)
	plan := parsePlan(t, out)
	if plan.cut {
		t.Fatalf("the dry run cut a list short:\n%s", out)
	}
	var wantCMs []string
	for _, cm := range a.configMaps {
		wantCMs = append(wantCMs, "configmaps "+a.ns+"/"+cm)
	}
	for action, want := range map[string][]string{
		cleanupAction:  wantCMs,
		compatDeletes:  wantCMs,
		labelledAction: {"namespaces " + a.ns},
		csiAction:      {},
	} {
		got := slices.Sorted(slices.Values(plan.actions[action]))
		if _, listed := plan.counts[action]; !listed || !slices.Equal(got, want) || plan.counts[action] != len(want) {
			t.Errorf("dry run: %s gets %d items %v, want %v", action, plan.counts[action], got, want)
		}
	}
	if want := []string{a.vsl + "/" + snap + " (" + a.pv + ")"}; !slices.Equal(plan.snapshots, want) {
		t.Errorf("dry run: snapshots %v, want %v", plan.snapshots, want)
	}
	if len(plan.podVolumes) != 0 {
		t.Errorf("dry run: pod volume snapshots %v, want none (the backup took no fs-backup)", plan.podVolumes)
	}
	if !slices.Equal(plan.restores, []string{restore}) {
		t.Errorf("dry run: restores %v, want [%s]", plan.restores, restore)
	}
	wantKeys := slices.Concat(restoreKeys, backupKeys)
	var listedKeys []string
	for _, k := range plan.keyList {
		listedKeys = append(listedKeys, strings.TrimPrefix(k, "lifeboat/"))
	}
	if plan.keys != len(wantKeys) || !slices.Equal(slices.Sorted(slices.Values(listedKeys)), slices.Sorted(slices.Values(wantKeys))) {
		t.Errorf("dry run: %d keys %v, want %v", plan.keys, listedKeys, wantKeys)
	}
	// The marker goes last: while any other key is left, the backup stays
	// listed and can be synced, so a failed deletion can be retried.
	if n := len(listedKeys); n == 0 || listedKeys[n-1] != "backups/"+name+"/velero-backup.json" {
		t.Errorf("dry run: keys in the order %v, want velero-backup.json last", listedKeys)
	}

	t.Run("the dry run changed nothing", func(t *testing.T) {
		if got := a.receipts(t, name); !slices.Equal(got, a.configMaps) {
			t.Errorf("receipts %v", got)
		}
		if got := a.snapshotFiles(t); !slices.Equal(got, []string{snap}) {
			t.Errorf("snapshot files %v", got)
		}
		if !slices.Equal(a.keys(t, "backups/"+name), backupKeys) || !slices.Equal(a.keys(t, "restores/"+restore), restoreKeys) {
			t.Error("keys changed")
		}
		cur := &v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: name}}
		if gone(t, cur) || cur.Status.Phase != v1.BackupPhaseCompleted || cur.DeletionTimestamp != nil {
			t.Errorf("backup: phase %q deletionTimestamp %v", cur.Status.Phase, cur.DeletionTimestamp)
		}
		if gone(t, &v1.Restore{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: restore}}) {
			t.Error("the restore is gone")
		}
		if !a.exportExists(t, name) {
			t.Error("the labelled ConfigMap is gone")
		}
		for _, action := range []string{cleanupAction, compatDeletes} {
			if got := calls(t, action, name); len(got) != 0 {
				t.Errorf("%s was called: %v", action, got)
			}
		}
		// The CLI removes the request it asked for the plan with.
		if reqs := deleteRequests(t, name); len(reqs) != 0 {
			t.Errorf("deletion requests after a dry run: %d", len(reqs))
		}
	})
	if t.Failed() {
		t.FailNow()
	}

	start := time.Now()
	out, err := lifeboat(t, "backup", "delete", name, "--confirm", "--wait")
	t.Logf("lifeboat backup delete %s --confirm --wait (%s):\n%s", name, time.Since(start).Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("backup delete: %v", err)
	}
	for _, want := range []string{"Report:", cleanupAction + ":", "Snapshots deleted:", "Restores deleted:", "Keys removed:", "Left behind:", "Backup " + name + " deleted."} {
		if !strings.Contains(out, want) {
			t.Errorf("backup delete --wait output lacks %q", want)
		}
	}

	t.Run("each action got exactly what the dry run listed", func(t *testing.T) {
		for _, action := range []string{cleanupAction, compatDeletes} {
			if got, want := calls(t, action, name), slices.Sorted(slices.Values(plan.actions[action])); !slices.Equal(got, want) {
				t.Errorf("%s was given %v; the dry run listed %v", action, got, want)
			}
		}
	})
	t.Run("everything the backup made is gone", func(t *testing.T) {
		a.checkDeleted(t, b, restore, restoredNS)
	})

	reqs := deleteRequests(t, name)
	if len(reqs) != 1 {
		t.Fatalf("deletion requests labelled %s=%s: %d, want 1", v1.BackupNameLabel, name, len(reqs))
	}
	req := &reqs[0]
	t.Run("the report says so", func(t *testing.T) {
		items := map[string]int{}
		for action, n := range plan.counts {
			items[action] = n
		}
		checkReport(t, req, items, len(wantKeys))
		lines := describedLines(t, req.Name)
		want := []string{
			"Phase: Processed",
			fmt.Sprintf("%s: %d items", cleanupAction, len(a.configMaps)),
			fmt.Sprintf("%s: %d items", compatDeletes, len(a.configMaps)),
			labelledAction + ": 1 item",
			"Snapshots deleted: 1",
			"Restores deleted: 1",
			fmt.Sprintf("Keys removed: %d", len(wantKeys)),
			"Left behind: <none>",
		}
		for _, w := range want {
			if !slices.Contains(lines, w) {
				t.Errorf("delete-request describe lacks the line %q", w)
			}
		}
	})
}

// restoreCLI restores the backup's ConfigMaps into a new namespace through
// the CLI.
func (a *delApp) restoreCLI(t *testing.T, backup string) (string, string) {
	t.Helper()
	name, target := env.Name("rs"), env.Name("restored")
	mustLifeboat(t, "restore", "create", name, "--from-backup", backup, "--namespace-mappings", a.ns+":"+target,
		"--include-resources", "configmaps", "--wait")
	if rs := waitRestore(t, name); rs.Status.Phase != v1.RestorePhaseCompleted {
		t.Fatalf("restore %s: phase %s (%d errors)", name, rs.Status.Phase, rs.Status.Errors)
	}
	return name, target
}

func TestExpiredBackupIsDeletedWithEverythingItMade(t *testing.T) {
	a := newDelApp(t, "ttl")
	configureLabelledCleanup(t)
	name := env.Name("ttl")
	// No --wait: the CLI polls every second, and the restore must be done
	// before the TTL is up, or the deletion waits for it. 15 s leaves room
	// on a busy machine (the backup and restore take about a second here).
	mustLifeboat(t, a.backupArgs(name, "--ttl", "15s")...)
	b, _ := a.checkBackup(t, name)
	a.export(t, name)
	restore, restoredNS := a.restore(t, name)
	keys := len(a.keys(t, "backups/"+name)) + len(a.keys(t, "restores/"+restore))
	if b.Status.Expiration == nil {
		t.Fatal("the backup has no expiration")
	}
	expiration := b.Status.Expiration.Time
	if left := time.Until(expiration); left < 0 {
		t.Logf("the backup and its restore took longer than its TTL; it expired %s before they were done", -left)
	} else {
		t.Logf("the backup and its restore were done %s before the backup expired", left.Round(time.Millisecond))
	}

	// No delete: the backup must go by itself, long before an hourly scan.
	var goneAt time.Time
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(b), &v1.Backup{})
		if apierrors.IsNotFound(err) {
			goneAt = time.Now()
			return true, nil
		}
		return false, err
	})
	if err != nil {
		for _, r := range deleteRequests(t, name) {
			t.Logf("deletion request %s: %+v", r.Name, r.Status)
		}
		t.Fatalf("the expired backup is still there 60s on: %v", err)
	}
	late := goneAt.Sub(expiration)
	t.Logf("backup %s gone %s after its expiration (%s)", name, late.Round(time.Millisecond), expiration.Format(time.RFC3339Nano))
	if late > 20*time.Second {
		t.Errorf("the expired backup went %s after its expiration; want within seconds", late)
	}

	a.checkDeleted(t, b, restore, restoredNS)
	reqs := deleteRequests(t, name)
	if len(reqs) != 1 {
		t.Fatalf("deletion requests for the expired backup: %d, want the one garbage collection made", len(reqs))
	}
	if got := calls(t, cleanupAction, name); len(got) != len(a.configMaps) {
		t.Errorf("%s was given %v, want the %d ConfigMaps", cleanupAction, got, len(a.configMaps))
	}
	checkReport(t, &reqs[0], map[string]int{cleanupAction: len(a.configMaps), compatDeletes: len(a.configMaps), labelledAction: 1}, keys)
}

func TestBackupDeleteWithoutConfirmationAndForce(t *testing.T) {
	a := newDelApp(t, "force")
	name := env.Name("force")
	mustLifeboat(t, a.backupArgs(name, "--wait")...)
	_, snap := a.checkBackup(t, name)
	restore, _ := a.restore(t, name)
	keys := a.keys(t, "backups/"+name)
	restoreKeys := a.keys(t, "restores/"+restore)

	t.Run("a non-terminal stdin without --confirm is refused", func(t *testing.T) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		// An answer on a pipe is no confirmation: nobody was asked.
		if _, err := w.WriteString("y\n"); err != nil {
			t.Fatal(err)
		}
		w.Close()
		for _, args := range [][]string{{"backup", "delete", name}, {"backup", "delete", name, "--force"}} {
			out, err := lifeboatWithInput(t, r, args...)
			if err == nil || !strings.Contains(err.Error(), "--confirm") {
				t.Errorf("lifeboat %s with stdin a pipe: error %v, want a refusal naming --confirm\n%s", strings.Join(args, " "), err, out)
			}
		}
		if _, err := lifeboatWithInput(t, strings.NewReader("y\n"), "backup", "delete", name); err == nil || !strings.Contains(err.Error(), "--confirm") {
			t.Errorf("backup delete with stdin a reader: error %v, want a refusal naming --confirm", err)
		}
		if gone(t, &v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: name}}) || len(deleteRequests(t, name)) != 0 {
			t.Error("a refused delete deleted the backup or asked for its deletion")
		}
	})

	out := mustLifeboat(t, "backup", "delete", name, "--force", "--confirm")
	t.Logf("lifeboat backup delete %s --force --confirm:\n%s", name, out)
	if !gone(t, &v1.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: name}}) {
		t.Error("the Backup object is still there after --force")
	}
	if got := a.keys(t, "backups/"+name); !slices.Equal(got, keys) {
		t.Errorf("keys after --force: %v, want all of %v still there", got, keys)
	}
	if got := a.snapshotFiles(t); !slices.Equal(got, []string{snap}) {
		t.Errorf("snapshot files after --force: %v, want %s still there", got, snap)
	}
	if got := a.receipts(t, name); !slices.Equal(got, a.configMaps) {
		t.Errorf("receipts after --force: %v, want all still there (no DeleteItemAction runs)", got)
	}
	if reqs := deleteRequests(t, name); len(reqs) != 0 {
		t.Errorf("--force made %d deletion requests", len(reqs))
	}
	if gone(t, &v1.Restore{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: restore}}) || !slices.Equal(a.keys(t, "restores/"+restore), restoreKeys) {
		t.Errorf("--force removed the restore %s or its keys", restore)
	}
	for _, want := range []string{"backups/" + name + "/", a.bsl.Name, "1 native volume snapshot", a.vsl, "restores " + restore, "no DeleteItemAction ran"} {
		if !strings.Contains(out, want) {
			t.Errorf("--force output does not name %q among what is left behind", want)
		}
	}
}

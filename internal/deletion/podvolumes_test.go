package deletion

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/podvolume"
	"github.com/lifeboat-io/lifeboat/internal/podvolume/repository"
	"github.com/lifeboat-io/lifeboat/internal/storage"
)

// fakeForgetter records what it forgets; failing snapshots fail.
type fakeForgetter struct {
	mu      sync.Mutex
	failing map[string]bool
	// failingSweep: ForgetBackup fails in the repository of this volume
	// namespace.
	failingSweep map[string]bool
	// missing: the repository of this volume namespace was never created.
	missing   map[string]bool
	forgotten []string
	// swept records ForgetBackup calls as "<ns>@<location>/<backup UID>",
	// and order every call, both kinds, as they came.
	swept []string
	order []string
	// unrecorded is what ForgetBackup finds, by volume namespace.
	unrecorded map[string][]string
}

func (f *fakeForgetter) ForgetBackup(_ context.Context, r podvolume.Repository, uid string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Location == nil {
		return nil, errors.New("no location")
	}
	if f.missing[r.VolumeNamespace] {
		return nil, fmt.Errorf("opening: %w", repository.ErrNotFound)
	}
	if f.failingSweep[r.VolumeNamespace] {
		return nil, errors.New("listing manifests: repository busy")
	}
	call := r.VolumeNamespace + "@" + r.Location.Name + "/" + uid
	f.swept = append(f.swept, call)
	f.order = append(f.order, "sweep "+call)
	ids := f.unrecorded[r.VolumeNamespace]
	delete(f.unrecorded, r.VolumeNamespace)
	return ids, nil
}

func (f *fakeForgetter) sweeps() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.swept)
}

func (f *fakeForgetter) Forget(_ context.Context, r podvolume.Repository, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Location == nil {
		return errors.New("no location")
	}
	if f.missing[r.VolumeNamespace] {
		return fmt.Errorf("opening: %w", repository.ErrNotFound)
	}
	if f.failing[id] {
		return fmt.Errorf("snapshot %s: repository busy", id)
	}
	f.forgotten = append(f.forgotten, r.VolumeNamespace+"@"+r.Location.Name+"/"+id)
	f.order = append(f.order, "forget "+id)
	return nil
}

func (f *fakeForgetter) all() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.forgotten)
}

// fakePodVolumes holds in-cluster PodVolumeBackups.
type fakePodVolumes struct {
	mu       sync.Mutex
	objects  []v1.PodVolumeBackup
	deleted  []string
	failDel  bool
	location map[string]bool
}

func (c *fakePodVolumes) PodVolumeBackups(_ context.Context, b *v1.Backup) ([]v1.PodVolumeBackup, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []v1.PodVolumeBackup
	for _, o := range c.objects {
		if o.Labels[v1.BackupNameLabel] == v1.LabelValue(b.Name) {
			out = append(out, o)
		}
	}
	return out, nil
}

func (c *fakePodVolumes) DeletePodVolumeBackup(_ context.Context, p *v1.PodVolumeBackup) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failDel {
		return fmt.Errorf("podvolumebackup %s: forbidden", p.Name)
	}
	c.deleted = append(c.deleted, p.Name)
	c.objects = slices.DeleteFunc(c.objects, func(o v1.PodVolumeBackup) bool { return o.Name == p.Name })
	return nil
}

func (c *fakePodVolumes) StorageLocation(_ context.Context, name string) (*v1.BackupStorageLocation, error) {
	if c.location != nil && !c.location[name] {
		return nil, fmt.Errorf("no BackupStorageLocation named %q", name)
	}
	return &v1.BackupStorageLocation{ObjectMeta: metav1.ObjectMeta{Name: name}}, nil
}

func pvb(name, ns, pod, volume, id string, labels map[string]string) v1.PodVolumeBackup {
	p := v1.PodVolumeBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: name, Labels: labels}}
	p.Spec.Pod = corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod}
	p.Spec.Volume = volume
	p.Spec.BackupStorageLocation = "default"
	p.Status.SnapshotID = id
	return p
}

func (w *world) putPodVolumeBackups(pvbs []v1.PodVolumeBackup) {
	w.t.Helper()
	if err := w.store.PutPodVolumeBackups(w.t.Context(), w.backup.Name, pvbs); err != nil {
		w.t.Fatal(err)
	}
}

// podVolumeWorld is a backup with three pod volume snapshots: two in the
// stored file (one of them also in the cluster), one only in the cluster,
// an empty volume, and a same-named backup's object that is not this one's.
func podVolumeWorld(t *testing.T) (*world, *fakePodVolumes) {
	w := newWorld(t)
	w.putTarball(nil)
	w.putBackupFiles(nil)
	mine := map[string]string{v1.BackupNameLabel: "nightly", v1.BackupUIDLabel: "uid-1"}
	w.putPodVolumeBackups([]v1.PodVolumeBackup{
		pvb("nightly-a", "shop", "db-0", "data", "k1", mine),
		pvb("nightly-b", "shop", "web-0", "cache", "k2", mine),
		pvb("nightly-empty", "shop", "web-0", "empty", "", mine),
	})
	other := map[string]string{v1.BackupNameLabel: "nightly", v1.BackupUIDLabel: "uid-other"}
	pv := &fakePodVolumes{objects: []v1.PodVolumeBackup{
		pvb("nightly-b", "shop", "web-0", "cache", "k2", mine),
		pvb("nightly-c", "blog", "wp-0", "uploads", "k3", mine),
		pvb("old-nightly-x", "shop", "db-0", "data", "k-not-mine", other),
	}}
	return w, pv
}

func TestPodVolumeSnapshotsAreForgottenOnceAndTheirObjectsDeleted(t *testing.T) {
	w, pv := podVolumeWorld(t)
	f := &fakeForgetter{}
	e := w.engine()
	e.PodVolumes, e.Forgetter = pv, f
	res := e.Run(t.Context(), Input{Backup: w.backup, Store: w.store})
	if res.Err != nil {
		t.Fatalf("%v (%v)", res.Err, res.Messages())
	}
	want := []string{"blog@default/k3", "shop@default/k1", "shop@default/k2"}
	if got := f.all(); !slices.Equal(got, want) {
		t.Errorf("forgotten %v, want %v (each once, the stored and the in-cluster ones, not another backup's)", got, want)
	}
	if res.Report.PodVolumeSnapshotsForgotten != 3 {
		t.Errorf("report counts %d forgotten, want 3", res.Report.PodVolumeSnapshotsForgotten)
	}
	if !slices.Equal(pv.deleted, []string{"nightly-b", "nightly-c"}) {
		t.Errorf("deleted PodVolumeBackups %v, want this backup's objects only", pv.deleted)
	}
	if len(w.keys()) != 0 {
		t.Errorf("keys left: %v", w.keys())
	}
	if !slices.Contains(res.State.Checkpoint.CompletedSteps, v1.DeletionStepPodVolumeSnapshots) {
		t.Errorf("completed steps %v", res.State.Checkpoint.CompletedSteps)
	}
}

func TestPodVolumeSnapshotFailureKeepsTheBackupAndRetryForgetsOnlyTheRest(t *testing.T) {
	w, pv := podVolumeWorld(t)
	f := &fakeForgetter{failing: map[string]bool{"k2": true}}
	e := w.engine()
	e.PodVolumes, e.Forgetter = pv, f
	keys := w.keys()
	var last State
	res := e.Run(t.Context(), Input{Backup: w.backup, Store: w.store, SkipFailedActions: true, OnState: func(s State) { last = s }})
	if res.Err == nil {
		t.Fatal("deletion succeeded with a pod volume snapshot left")
	}
	if !slices.Equal(w.keys(), keys) || len(w.cluster.removedBackups()) != 0 {
		t.Error("the backup's keys or object went although a snapshot was not forgotten")
	}
	if len(pv.deleted) != 0 {
		t.Errorf("PodVolumeBackups %v deleted before every snapshot was forgotten", pv.deleted)
	}
	msgs := strings.Join(res.Messages(), "\n")
	for _, want := range []string{"k2", "shop/web-0", "volume cache", "repository busy"} {
		if !strings.Contains(msgs, want) {
			t.Errorf("errors %q do not name %q", msgs, want)
		}
	}
	if !slices.ContainsFunc(res.Report.LeftBehind, func(s string) bool { return strings.Contains(s, "k2") }) {
		t.Errorf("left behind %v", res.Report.LeftBehind)
	}
	// The two forgotten snapshots, and both repositories (blog's, shop's)
	// searched for unrecorded ones: k2's failure does not hold those up.
	if cp := last.Checkpoint.PodVolumeSnapshots; cp == nil || cp.Succeeded != 4 || cp.Watermark != 2 || !slices.Equal(cp.Done, []int64{3, 4}) {
		t.Fatalf("checkpoint %+v: want the two forgotten snapshots and the two searched repositories recorded, k2 (position 2) not", cp)
	}

	f.failing = nil
	res2 := e.Run(t.Context(), Input{Backup: w.backup, Store: w.store, State: last})
	if res2.Err != nil {
		t.Fatalf("retry: %v (%v)", res2.Err, res2.Messages())
	}
	want := []string{"blog@default/k3", "shop@default/k1", "shop@default/k2"}
	if got := f.all(); !slices.Equal(got, want) {
		t.Errorf("forgotten %v, want %v: the retry must forget only k2", got, want)
	}
	if res2.Report.PodVolumeSnapshotsForgotten != 3 {
		t.Errorf("forgotten over both attempts: %d, want 3", res2.Report.PodVolumeSnapshotsForgotten)
	}
}

func TestPodVolumeSnapshotOfAMissingRepositoryCountsAsGone(t *testing.T) {
	w, pv := podVolumeWorld(t)
	f := &fakeForgetter{missing: map[string]bool{"blog": true}}
	e := w.engine()
	e.PodVolumes, e.Forgetter = pv, f
	res := e.Run(t.Context(), Input{Backup: w.backup, Store: w.store})
	if res.Err != nil {
		t.Fatalf("%v (%v)", res.Err, res.Messages())
	}
	if got := f.all(); !slices.Equal(got, []string{"shop@default/k1", "shop@default/k2"}) {
		t.Errorf("forgotten %v", got)
	}
}

func TestSyncedBackupForgetsWhatItsStoredFileNames(t *testing.T) {
	w, _ := podVolumeWorld(t)
	// The stored file names the other cluster's location ("default"); the
	// repository is the one in the location the backup is in here.
	w.backup.Spec.StorageLocation = "shared"
	f := &fakeForgetter{}
	e := w.engine()
	// No PodVolumeBackup in this cluster: the backup came from another.
	e.PodVolumes, e.Forgetter = &fakePodVolumes{}, f
	res := e.Run(t.Context(), Input{Backup: w.backup, Store: w.store})
	if res.Err != nil {
		t.Fatalf("%v (%v)", res.Err, res.Messages())
	}
	if got := f.all(); !slices.Equal(got, []string{"shop@shared/k1", "shop@shared/k2"}) {
		t.Errorf("forgotten %v, want both in the backup's location", got)
	}
}

func TestPodVolumeSnapshotsWithoutARepositoryAccessFail(t *testing.T) {
	w, pv := podVolumeWorld(t)
	e := w.engine()
	e.PodVolumes = pv
	res := e.Run(t.Context(), Input{Backup: w.backup, Store: w.store})
	if res.Err == nil || !strings.Contains(strings.Join(res.Messages(), "\n"), "no access to file-system backup repositories") {
		t.Fatalf("err %v (%v): want a failure naming the missing repository access", res.Err, res.Messages())
	}
	if len(w.cluster.removedBackups()) != 0 {
		t.Error("backup removed")
	}
}

func TestPodVolumeObjectDeletionFailureKeepsTheBackup(t *testing.T) {
	w, pv := podVolumeWorld(t)
	pv.failDel = true
	e := w.engine()
	e.PodVolumes, e.Forgetter = pv, &fakeForgetter{}
	res := e.Run(t.Context(), Input{Backup: w.backup, Store: w.store})
	if res.Err == nil || len(w.cluster.removedBackups()) != 0 {
		t.Fatalf("err %v: want the deletion to stop before the backup goes", res.Err)
	}
}

func TestPlanListsPodVolumeSnapshots(t *testing.T) {
	w, pv := podVolumeWorld(t)
	e := w.engine()
	e.PodVolumes, e.Forgetter = pv, &fakeForgetter{}
	p, err := e.Plan(t.Context(), w.backup, w.store)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.MarshalIndent(struct {
		Snapshots    []PodVolumeSnapshotPlan   `json:"podVolumeSnapshots"`
		Repositories []PodVolumeRepositoryPlan `json:"podVolumeRepositories"`
	}{p.PodVolumeSnapshots, p.PodVolumeRepositories}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	golden := filepath.Join("testdata", "plan-podvolumes.golden")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test -run TestPlanListsPodVolumeSnapshots -update writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("plan differs from %s:\n%s", golden, got)
	}
	if len(pv.deleted) != 0 {
		t.Error("the plan deleted PodVolumeBackups")
	}
	if _, err := w.store.ObjectStore().GetObject(t.Context(), bucket, w.store.BackupKey(w.backup.Name, storage.PodVolumeBackupsFile(w.backup.Name))); err != nil {
		t.Errorf("the plan changed the store: %v", err)
	}
}

// failedPVB is a PodVolumeBackup whose transfer failed before it had a
// snapshot (its node agent was killed mid-upload, say): nothing to forget
// by ID, but its upload may have left checkpoints in its repository.
func failedPVB(name, ns, pod, volume string, labels map[string]string) v1.PodVolumeBackup {
	p := pvb(name, ns, pod, volume, "", labels)
	p.Status.Phase = v1.PodVolumePhaseFailed
	p.Status.Message = "the node agent on node n1 restarted while this transfer was InProgress"
	return p
}

func TestUnrecordedPodVolumeSnapshotsAreForgottenInEveryRepositoryAfterTheRecordedOnes(t *testing.T) {
	w, pv := podVolumeWorld(t)
	mine := map[string]string{v1.BackupNameLabel: "nightly", v1.BackupUIDLabel: "uid-1"}
	pv.objects = append(pv.objects, failedPVB("nightly-d", "crm", "api-0", "spool", mine))
	f := &fakeForgetter{unrecorded: map[string][]string{"shop": {"checkpoint-1", "checkpoint-2"}, "crm": {"checkpoint-3"}}}
	e := w.engine()
	e.PodVolumes, e.Forgetter = pv, f
	var last State
	res := e.Run(t.Context(), Input{Backup: w.backup, Store: w.store, OnState: func(s State) { last = s }})
	if res.Err != nil {
		t.Fatalf("%v (%v)", res.Err, res.Messages())
	}
	// Each repository a PodVolumeBackup used, the failed one's too, once,
	// with the backup's UID; another backup's object (old-nightly-x) adds
	// no repository of its own but shares shop's.
	want := []string{"blog@default/uid-1", "crm@default/uid-1", "shop@default/uid-1"}
	if got := f.sweeps(); !slices.Equal(got, want) {
		t.Errorf("repositories rid of the backup's unrecorded snapshots: %v, want %v", got, want)
	}
	firstSweep := slices.IndexFunc(f.order, func(s string) bool { return strings.HasPrefix(s, "sweep ") })
	if firstSweep != 3 {
		t.Errorf("calls %v: want the three recorded snapshots forgotten before any repository is swept", f.order)
	}
	if res.Report.PodVolumeSnapshotsForgotten != 6 {
		t.Errorf("report counts %d forgotten, want 6 (3 recorded, 3 found by their tag)", res.Report.PodVolumeSnapshotsForgotten)
	}
	if cp := last.Checkpoint.PodVolumeSnapshots; cp == nil || cp.Succeeded != 6 || cp.Watermark != 6 {
		t.Errorf("checkpoint %+v: want the 3 snapshots and the 3 repositories recorded done", cp)
	}
	if !slices.Contains(pv.deleted, "nightly-d") {
		t.Errorf("deleted PodVolumeBackups %v: the failed one must go too", pv.deleted)
	}
	if len(w.keys()) != 0 {
		t.Errorf("keys left: %v", w.keys())
	}
}

func TestUnrecordedSnapshotFailureKeepsTheBackupAndRetrySweepsOnlyThatRepository(t *testing.T) {
	w, pv := podVolumeWorld(t)
	f := &fakeForgetter{failingSweep: map[string]bool{"shop": true}}
	e := w.engine()
	e.PodVolumes, e.Forgetter = pv, f
	keys := w.keys()
	var last State
	res := e.Run(t.Context(), Input{Backup: w.backup, Store: w.store, SkipFailedActions: true, OnState: func(s State) { last = s }})
	if res.Err == nil {
		t.Fatal("deletion succeeded with a repository's unrecorded snapshots not forgotten")
	}
	if !slices.Equal(w.keys(), keys) || len(w.cluster.removedBackups()) != 0 || len(pv.deleted) != 0 {
		t.Error("the backup's keys, object or PodVolumeBackups went although its snapshots may be left in a repository")
	}
	msgs := strings.Join(res.Messages(), "\n")
	for _, want := range []string{"backup-uid uid-1", "namespace shop", "location default", "repository busy"} {
		if !strings.Contains(msgs, want) {
			t.Errorf("errors %q do not name %q", msgs, want)
		}
	}
	if !slices.ContainsFunc(res.Report.LeftBehind, func(s string) bool { return strings.Contains(s, "backup-uid uid-1") && strings.Contains(s, "shop") }) {
		t.Errorf("left behind %v", res.Report.LeftBehind)
	}
	if got := f.sweeps(); !slices.Equal(got, []string{"blog@default/uid-1"}) {
		t.Errorf("swept %v in the first attempt", got)
	}

	f.failingSweep = nil
	res2 := e.Run(t.Context(), Input{Backup: w.backup, Store: w.store, State: last})
	if res2.Err != nil {
		t.Fatalf("retry: %v (%v)", res2.Err, res2.Messages())
	}
	if got := f.sweeps(); !slices.Equal(got, []string{"blog@default/uid-1", "shop@default/uid-1"}) {
		t.Errorf("swept %v over both attempts: the retry must sweep only shop's repository", got)
	}
	if got := f.all(); len(got) != 3 {
		t.Errorf("forgotten %v over both attempts: the recorded snapshots once each", got)
	}
}

// A Backup the sync created: its data, and so its snapshots' backup-uid
// tag, carry the UID of the Backup that wrote it, not this object's.
func TestSyncedBackupsUnrecordedSnapshotsAreFoundByTheStoredUID(t *testing.T) {
	w, _ := podVolumeWorld(t)
	w.putMarker("uid-written")
	w.backup.Annotations = map[string]string{v1.StoredUIDAnnotation: "uid-written"}
	w.backup.Spec.StorageLocation = "shared"
	f := &fakeForgetter{}
	e := w.engine()
	e.PodVolumes, e.Forgetter = &fakePodVolumes{}, f
	res := e.Run(t.Context(), Input{Backup: w.backup, Store: w.store})
	if res.Err != nil {
		t.Fatalf("%v (%v)", res.Err, res.Messages())
	}
	if got := f.sweeps(); !slices.Equal(got, []string{"shop@shared/uid-written"}) {
		t.Errorf("swept %v, want shop's repository in the backup's location, by the stored UID", got)
	}
}

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
	// missing: the repository of this volume namespace was never created.
	missing   map[string]bool
	forgotten []string
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
	if cp := last.Checkpoint.PodVolumeSnapshots; cp == nil || cp.Succeeded != 2 {
		t.Fatalf("checkpoint %+v: want the two forgotten snapshots recorded", cp)
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
	got, err := json.MarshalIndent(p.PodVolumeSnapshots, "", "  ")
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

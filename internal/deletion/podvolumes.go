package deletion

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/cluster"
	"github.com/lifeboat-io/lifeboat/internal/podvolume"
	"github.com/lifeboat-io/lifeboat/internal/podvolume/repository"
	"github.com/lifeboat-io/lifeboat/internal/storage"
)

// PodVolumeCluster is what the pod volume snapshot step needs from the API
// server. Implementations bound each call with a timeout.
type PodVolumeCluster interface {
	// PodVolumeBackups returns the PodVolumeBackups labelled with the
	// backup's name (Velero's velero.io/backup-name), as Velero finds them.
	PodVolumeBackups(ctx context.Context, b *v1.Backup) ([]v1.PodVolumeBackup, error)
	// DeletePodVolumeBackup deletes one; one already gone is fine.
	DeletePodVolumeBackup(ctx context.Context, pvb *v1.PodVolumeBackup) error
	// StorageLocation reads a BackupStorageLocation: the repositories of
	// pod volumes live in one.
	StorageLocation(ctx context.Context, name string) (*v1.BackupStorageLocation, error)
}

// PodVolumeSnapshotPlan is one kopia snapshot of a pod volume to forget.
type PodVolumeSnapshotPlan struct {
	SnapshotID string `json:"snapshotID"`
	// VolumeNamespace and Location name the repository: one per (volume
	// namespace, backup storage location), as in Velero.
	VolumeNamespace string `json:"volumeNamespace"`
	Location        string `json:"location"`
	Pod             string `json:"pod"`
	Volume          string `json:"volume"`
	// PodVolumeBackup is the object's name; Source says where it was
	// read: "stored" (the backup's podvolumebackups file), "cluster" or
	// "both".
	PodVolumeBackup string `json:"podVolumeBackup"`
	Source          string `json:"source"`
}

// PodVolumeRepositoryPlan is one repository the backup's PodVolumeBackups
// used (failed ones too). Once the recorded snapshots are forgotten, every
// other pod volume snapshot in it tagged with BackupUID is forgotten as
// well: checkpoints of uploads that failed, and a snapshot whose node agent
// was killed before it recorded the ID. Nothing records those, so without
// this they would stay for good.
type PodVolumeRepositoryPlan struct {
	VolumeNamespace string `json:"volumeNamespace"`
	Location        string `json:"location"`
	// BackupUID is the snapshots' backup-uid tag: the UID of the Backup
	// that wrote them (for a Backup the sync created, the stored UID).
	BackupUID string `json:"backupUID"`
}

// podVolumeWork is what the step forgets and then deletes.
type podVolumeWork struct {
	snaps []PodVolumeSnapshotPlan
	// repos come after snaps, in positions len(snaps) onwards.
	repos []PodVolumeRepositoryPlan
	// objects are the in-cluster PodVolumeBackups, deleted once every
	// snapshot is forgotten, as Velero's owner references have them go
	// with the Backup.
	objects []v1.PodVolumeBackup
}

// podVolumeSnapshots finds the backup's pod volume snapshots in both places
// Velero keeps PodVolumeBackups: the stored <name>-podvolumebackups.json.gz
// (all a backup synced from another cluster has) and the objects in the
// cluster labelled with the backup's name (Velero's deletion reads only
// these; a backup that failed before its files were written has only
// these). They are merged by object name. Where both have a PodVolumeBackup
// of one name and disagree, the stored one wins: it passed the identity
// check (it is this Backup's), while an object found by the name label
// alone may be a leftover of another backup of the same name. An object
// whose velero.io/backup-uid label names another Backup is left out for the
// same reason. Entries without a snapshot ID (empty volumes, failed ones)
// have nothing to forget, but their repositories are among those swept for
// the backup's unrecorded snapshots. The repository is the one in the backup's
// location, as Velero's deletion picks it: a stored PodVolumeBackup of a
// backup synced from another cluster names that cluster's location (the
// PodVolumeBackup's own location only when the Backup names none). The
// list is sorted, so positions are stable across attempts.
//
// uid is the UID the backup's data was written under (dataUID): its
// snapshots are tagged with it.
func (e *Engine) podVolumeSnapshots(ctx context.Context, store *storage.BackupStore, b *v1.Backup, uid string) (podVolumeWork, error) {
	var w podVolumeWork
	var stored []v1.PodVolumeBackup
	if store != nil {
		err := store.GetGzipJSON(ctx, store.BackupKey(b.Name, storage.PodVolumeBackupsFile(b.Name)), &stored)
		if err != nil && !errors.Is(err, storage.ErrNotFound) {
			return w, fmt.Errorf("reading the PodVolumeBackups of backup %s: %w", b.Name, err)
		}
	}
	if e.PodVolumes != nil {
		objs, err := e.PodVolumes.PodVolumeBackups(ctx, b)
		if err != nil {
			return w, err
		}
		for _, o := range objs {
			if uid, ok := o.Labels[v1.BackupUIDLabel]; ok && b.UID != "" && uid != string(b.UID) {
				continue
			}
			w.objects = append(w.objects, o)
		}
	}
	byName := map[string]int{}
	add := func(p v1.PodVolumeBackup, source string) {
		if i, ok := byName[p.Name]; ok {
			w.snaps[i].Source = "both"
			return
		}
		byName[p.Name] = len(w.snaps)
		w.snaps = append(w.snaps, PodVolumeSnapshotPlan{
			SnapshotID: p.Status.SnapshotID, VolumeNamespace: p.Spec.Pod.Namespace,
			Location: cmp.Or(b.Spec.StorageLocation, p.Spec.BackupStorageLocation),
			Pod:      p.Spec.Pod.Name, Volume: p.Spec.Volume, PodVolumeBackup: p.Name, Source: source,
		})
	}
	for _, p := range stored {
		add(p, "stored")
	}
	for _, p := range w.objects {
		add(p, "cluster")
	}
	if uid != "" {
		for _, s := range w.snaps {
			w.repos = append(w.repos, PodVolumeRepositoryPlan{VolumeNamespace: s.VolumeNamespace, Location: s.Location, BackupUID: uid})
		}
		slices.SortFunc(w.repos, func(a, b PodVolumeRepositoryPlan) int {
			return cmp.Or(cmp.Compare(a.VolumeNamespace, b.VolumeNamespace), cmp.Compare(a.Location, b.Location))
		})
		w.repos = slices.Compact(w.repos)
	}
	w.snaps = slices.DeleteFunc(w.snaps, func(s PodVolumeSnapshotPlan) bool { return s.SnapshotID == "" })
	slices.SortFunc(w.snaps, func(a, b PodVolumeSnapshotPlan) int {
		return cmp.Or(cmp.Compare(a.VolumeNamespace, b.VolumeNamespace), cmp.Compare(a.Location, b.Location),
			cmp.Compare(a.SnapshotID, b.SnapshotID), cmp.Compare(a.PodVolumeBackup, b.PodVolumeBackup))
	})
	// Two PodVolumeBackups naming one snapshot: it is forgotten once.
	w.snaps = slices.CompactFunc(w.snaps, func(a, b PodVolumeSnapshotPlan) bool {
		return a.VolumeNamespace == b.VolumeNamespace && a.Location == b.Location && a.SnapshotID == b.SnapshotID
	})
	return w, nil
}

// podVolumes is the pod volume snapshot step: each kopia snapshot of the
// backup's PodVolumeBackups is forgotten (its manifest deleted; the
// repository's maintenance reclaims the data only it held, as in Velero),
// one at a time, then each repository they used is rid of the backup's
// snapshots nothing recorded, checkpointed by position (the snapshots,
// then the repositories); then the PodVolumeBackup objects go. Like the
// native snapshot step, and unlike DeleteItemActions, a failure is never
// skipped: the snapshot would be left with nothing recording it.
func (r *run) podVolumes(ctx context.Context) error {
	w, err := r.e.podVolumeSnapshots(ctx, r.in.Store, r.in.Backup, dataUID(r.in.Backup, r.storedUID))
	if err != nil {
		return r.fail(v1.DeletionError{Step: v1.DeletionStepPodVolumeSnapshots, Message: err.Error()})
	}
	r.mu.Lock()
	if r.pvSnaps == nil {
		r.pvSnaps = newProgress(v1.DeletionProgress{}, r.e.window())
	}
	p := r.pvSnaps
	r.mu.Unlock()

	locs := map[string]*v1.BackupStorageLocation{}
	for i := range len(w.snaps) + len(w.repos) {
		pos := int64(i)
		if err := ctx.Err(); err != nil {
			return err
		}
		r.mu.Lock()
		done := p.isDone(pos)
		adm := p.admit(pos)
		if !done && adm == admitDefer {
			p.skip()
		}
		if !done && adm == admitStart {
			p.start(pos)
		}
		r.mu.Unlock()
		if done || adm != admitStart {
			r.mu.Lock()
			p.scannedTo(pos + 1)
			r.mu.Unlock()
			continue
		}
		var (
			forgotten int64
			left      string
			err       error
		)
		if i < len(w.snaps) {
			s := w.snaps[i]
			err = r.forget(ctx, s, locs)
			forgotten = 1
			left = fmt.Sprintf("pod volume snapshot %s (pod %s/%s, volume %s)", s.SnapshotID, s.VolumeNamespace, s.Pod, s.Volume)
		} else {
			rp := w.repos[i-len(w.snaps)]
			forgotten, err = r.forgetUnrecorded(ctx, rp, locs)
			left = fmt.Sprintf("pod volume snapshots tagged backup-uid %s in the repository of namespace %s in location %s", rp.BackupUID, rp.VolumeNamespace, rp.Location)
		}
		r.mu.Lock()
		ok := err == nil
		if ok {
			r.state.PodVolumeSnapshotsForgotten += forgotten
		}
		p.finish(pos, ok)
		p.scannedTo(pos + 1)
		r.dirty = true
		r.mu.Unlock()
		if !ok {
			r.leftBehind(left)
		}
		r.flush()
	}
	r.mu.Lock()
	complete, failures := p.complete(), p.failures
	r.mu.Unlock()
	if !complete {
		return fmt.Errorf("%d pod volume snapshots (or repositories' unrecorded ones) not forgotten", failures)
	}
	for i := range w.objects {
		o := &w.objects[i]
		if err := r.e.PodVolumes.DeletePodVolumeBackup(ctx, o); err != nil {
			r.leftBehind("podvolumebackup " + o.Name)
			return r.fail(v1.DeletionError{Step: v1.DeletionStepPodVolumeSnapshots, Name: o.Name, Message: err.Error()})
		}
	}
	return nil
}

// location reads a BackupStorageLocation once per attempt.
func (r *run) location(ctx context.Context, name string, locs map[string]*v1.BackupStorageLocation) (*v1.BackupStorageLocation, error) {
	if bsl, ok := locs[name]; ok {
		return bsl, nil
	}
	bsl, err := r.e.PodVolumes.StorageLocation(ctx, name)
	if err != nil {
		return nil, err
	}
	locs[name] = bsl
	return bsl, nil
}

// forgetUnrecorded forgets the backup's snapshots in one repository that no
// PodVolumeBackup names (after those that are named are gone: all that
// remains of the backup there) and returns how many there were.
func (r *run) forgetUnrecorded(ctx context.Context, rp PodVolumeRepositoryPlan, locs map[string]*v1.BackupStorageLocation) (int64, error) {
	fail := func(err error) error {
		r.log.Error("forgetting a backup's unrecorded pod volume snapshots", "backupUID", rp.BackupUID, "namespace", rp.VolumeNamespace,
			"location", rp.Location, "error", err)
		return r.fail(v1.DeletionError{
			Step: v1.DeletionStepPodVolumeSnapshots, Name: rp.VolumeNamespace + "@" + rp.Location,
			Message: fmt.Sprintf("forgetting the snapshots tagged backup-uid %s that no PodVolumeBackup records (checkpoints of failed uploads) in the repository of namespace %s in location %s: %v",
				rp.BackupUID, rp.VolumeNamespace, rp.Location, err),
		})
	}
	if r.e.Forgetter == nil || r.e.PodVolumes == nil {
		return 0, fail(errors.New("the server has no access to file-system backup repositories"))
	}
	bsl, err := r.location(ctx, rp.Location, locs)
	if err != nil {
		return 0, fail(err)
	}
	ids, err := r.e.Forgetter.ForgetBackup(ctx, podvolume.Repository{Location: bsl, VolumeNamespace: rp.VolumeNamespace}, rp.BackupUID)
	if errors.Is(err, repository.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fail(err)
	}
	if len(ids) > 0 {
		r.log.Info("unrecorded pod volume snapshots of the backup forgotten", "snapshots", ids, "namespace", rp.VolumeNamespace, "location", rp.Location)
	}
	return int64(len(ids)), nil
}

func (r *run) forget(ctx context.Context, s PodVolumeSnapshotPlan, locs map[string]*v1.BackupStorageLocation) error {
	fail := func(err error) error {
		r.log.Error("forgetting a pod volume snapshot", "snapshot", s.SnapshotID, "namespace", s.VolumeNamespace, "pod", s.Pod,
			"volume", s.Volume, "location", s.Location, "error", err)
		return r.fail(v1.DeletionError{
			Step: v1.DeletionStepPodVolumeSnapshots, Name: s.SnapshotID,
			Message: fmt.Sprintf("forgetting the snapshot of pod %s/%s volume %s (repository of namespace %s in location %s): %v",
				s.VolumeNamespace, s.Pod, s.Volume, s.VolumeNamespace, s.Location, err),
		})
	}
	if r.e.Forgetter == nil || r.e.PodVolumes == nil {
		return fail(errors.New("the server has no access to file-system backup repositories"))
	}
	bsl, err := r.location(ctx, s.Location, locs)
	if err != nil {
		return fail(err)
	}
	err = r.e.Forgetter.Forget(ctx, podvolume.Repository{Location: bsl, VolumeNamespace: s.VolumeNamespace}, s.SnapshotID)
	if errors.Is(err, repository.ErrNotFound) {
		// No repository, so no snapshot in it: what forgetting was for.
		r.log.Info("pod volume snapshot already gone: its repository does not exist", "snapshot", s.SnapshotID,
			"namespace", s.VolumeNamespace, "location", s.Location)
		return nil
	}
	if err != nil {
		return fail(err)
	}
	r.log.Info("pod volume snapshot forgotten", "snapshot", s.SnapshotID, "namespace", s.VolumeNamespace, "pod", s.Pod, "volume", s.Volume)
	return nil
}

// PodVolumeBackups implements PodVolumeCluster.
func (c *APICluster) PodVolumeBackups(ctx context.Context, b *v1.Backup) ([]v1.PodVolumeBackup, error) {
	var list v1.PodVolumeBackupList
	err := cluster.Call(ctx, func(ctx context.Context) error {
		return c.Access.Client.List(ctx, &list, client.InNamespace(c.Namespace),
			client.MatchingLabels{v1.BackupNameLabel: v1.LabelValue(b.Name)})
	})
	if err != nil {
		return nil, fmt.Errorf("listing the PodVolumeBackups of backup %s: %w", b.Name, err)
	}
	return list.Items, nil
}

// DeletePodVolumeBackup implements PodVolumeCluster, guarded by the
// object's UID.
func (c *APICluster) DeletePodVolumeBackup(ctx context.Context, pvb *v1.PodVolumeBackup) error {
	uid := pvb.UID
	err := cluster.Call(ctx, func(ctx context.Context) error {
		return c.Access.Client.Delete(ctx, pvb, client.Preconditions{UID: &uid})
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting PodVolumeBackup %s/%s: %w", pvb.Namespace, pvb.Name, err)
	}
	return nil
}

// StorageLocation implements PodVolumeCluster.
func (c *APICluster) StorageLocation(ctx context.Context, name string) (*v1.BackupStorageLocation, error) {
	return c.Locations.Find(ctx, name)
}

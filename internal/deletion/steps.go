package deletion

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/storage"
	"github.com/lifeboat-io/lifeboat/internal/volumefiles"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

// snapshotGone reports whether a DeleteSnapshot error says the snapshot is
// not there, which is what deleting it was for. Only a gRPC NotFound counts,
// and it is unambiguous here: the other NotFound a plugin process sends
// (no plugin of that name in the binary) fails Init first, which is not
// treated this way.
func snapshotGone(err error) bool { return status.Code(err) == codes.NotFound }

// snapshotter is a location's VolumeSnapshotter, or why there is none.
type snapshotter struct {
	vs  api.VolumeSnapshotter
	err error
}

// snapshots is the second step: each native snapshot of the backup is
// deleted through the VolumeSnapshotter of the VolumeSnapshotLocation that
// took it, one at a time, in the order of the backup's snapshots file.
func (r *run) snapshots(ctx context.Context) error {
	if r.in.Store == nil {
		return nil
	}
	snaps, err := volumefiles.GetSnapshots(ctx, r.in.Store, r.in.Backup.Name)
	if err != nil {
		return r.fail(v1.DeletionError{Step: v1.DeletionStepVolumeSnapshots, Message: err.Error()})
	}
	r.mu.Lock()
	if r.snaps == nil {
		r.snaps = newProgress(v1.DeletionProgress{}, r.e.window())
	}
	p := r.snaps
	r.mu.Unlock()

	byLocation := map[string]snapshotter{}
	for i, s := range snaps {
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
		err := r.deleteSnapshot(ctx, s, byLocation)
		r.mu.Lock()
		ok := err == nil
		if ok && s.Status.ProviderSnapshotID != "" {
			r.state.SnapshotsDeleted++
		}
		p.finish(pos, ok)
		p.scannedTo(pos + 1)
		r.dirty = true
		r.mu.Unlock()
		if !ok {
			r.leftBehind(fmt.Sprintf("snapshot %s (volume %s, location %s)", s.Status.ProviderSnapshotID, s.Spec.PersistentVolumeName, s.Spec.Location))
		}
		r.flush()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !p.complete() {
		return fmt.Errorf("%d volume snapshots not deleted", p.failures)
	}
	return nil
}

func (r *run) deleteSnapshot(ctx context.Context, s volumefiles.Snapshot, byLocation map[string]snapshotter) error {
	id := s.Status.ProviderSnapshotID
	if id == "" {
		// Never taken (the snapshot failed at backup time): nothing exists
		// to delete.
		return nil
	}
	fail := func(err error) error {
		r.log.Error("deleting a volume snapshot", "snapshot", id, "location", s.Spec.Location, "error", err)
		return r.fail(v1.DeletionError{Step: v1.DeletionStepVolumeSnapshots, Name: id, Message: err.Error()})
	}
	sn, ok := byLocation[s.Spec.Location]
	if !ok {
		sn.vs, sn.err = r.openSnapshotter(ctx, s.Spec.Location)
		byLocation[s.Spec.Location] = sn
	}
	if sn.err != nil {
		return fail(sn.err)
	}
	err := sn.vs.DeleteSnapshot(id)
	if err != nil && snapshotGone(err) {
		r.log.Info("volume snapshot already gone", "snapshot", id, "location", s.Spec.Location)
		return nil
	}
	if err != nil {
		return fail(fmt.Errorf("deleting snapshot %s of volume %s: %w", id, s.Spec.PersistentVolumeName, err))
	}
	r.log.Info("volume snapshot deleted", "snapshot", id, "location", s.Spec.Location)
	return nil
}

func (r *run) openSnapshotter(ctx context.Context, location string) (api.VolumeSnapshotter, error) {
	if location == "" {
		return nil, errors.New("the snapshot names no VolumeSnapshotLocation (spec.location), so there is no plugin to delete it with")
	}
	if r.e.Cluster == nil || r.e.Plugins == nil {
		return nil, fmt.Errorf("VolumeSnapshotLocation %q: the server has no access to snapshot locations", location)
	}
	provider, config, err := r.e.Cluster.SnapshotLocation(ctx, location)
	if err != nil {
		return nil, err
	}
	vs, err := r.e.Plugins.VolumeSnapshotter(provider)
	if err != nil {
		return nil, fmt.Errorf("VolumeSnapshotLocation %q: spec.provider %q: %w", location, provider, err)
	}
	if err := vs.Init(config); err != nil {
		return nil, fmt.Errorf("VolumeSnapshotLocation %q: initialising VolumeSnapshotter %s: %w", location, provider, err)
	}
	return vs, nil
}

// restores is the third step: each Restore of the backup loses its files
// under restores/<name>/ first and its object last, so a failure leaves a
// Restore that a retry finds again.
func (r *run) restores(ctx context.Context) error {
	if r.e.Cluster == nil {
		return nil
	}
	names, err := r.e.Cluster.Restores(ctx, r.in.Backup.Name)
	if err != nil {
		return r.fail(v1.DeletionError{Step: v1.DeletionStepRestores, Message: err.Error()})
	}
	var failed int
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := r.deleteRestore(ctx, name); err != nil {
			failed++
			r.leftBehind("restore " + name)
		}
		r.flush()
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d restores not deleted", failed, len(names))
	}
	return nil
}

func (r *run) deleteRestore(ctx context.Context, name string) error {
	if st := r.in.Store; st != nil {
		if err := r.removeUnfinishedUploads(ctx, st.RemoveUnfinishedRestoreUploads, name, v1.DeletionStepRestores); err != nil {
			return err
		}
		keys, err := st.ObjectStore().ListObjects(ctx, st.Bucket(), st.RestoreDir(name))
		if err != nil {
			return r.fail(v1.DeletionError{Step: v1.DeletionStepRestores, Name: name, Message: fmt.Sprintf("listing %s: %v", st.RestoreDir(name), err)})
		}
		err = st.DeleteKeys(ctx, keys)
		r.countKeys(len(keys), err)
		if err != nil {
			return r.fail(v1.DeletionError{Step: v1.DeletionStepRestores, Name: name, Message: err.Error()})
		}
	}
	if err := r.e.Cluster.DeleteRestore(ctx, name); err != nil {
		return r.fail(v1.DeletionError{Step: v1.DeletionStepRestores, Name: name, Message: err.Error()})
	}
	r.mu.Lock()
	r.state.RestoresDeleted++
	r.dirty = true
	r.mu.Unlock()
	r.log.Info("restore of the backup deleted", "restore", name)
	return nil
}

// countKeys adds the keys a DeleteKeys call removed.
func (r *run) countKeys(total int, err error) {
	removed := total
	var dk *storage.DeleteKeysError
	if errors.As(err, &dk) {
		removed = total - len(dk.Failed)
		for _, f := range dk.Failed {
			r.leftBehind("key " + f.Key)
		}
	} else if err != nil {
		removed = 0
	}
	r.mu.Lock()
	r.state.KeysRemoved += int64(removed)
	r.dirty = true
	r.mu.Unlock()
}

// backupData is the fourth step: every key under backups/<name>/ goes,
// velero-backup.json last. While any other key is left the marker stays,
// so a backup half removed is still listed by the store and synced back
// into the cluster, where its deletion can be asked for again.
func (r *run) backupData(ctx context.Context) error {
	st := r.in.Store
	if st == nil {
		return nil
	}
	name := r.in.Backup.Name
	if err := r.removeUnfinishedUploads(ctx, st.RemoveUnfinishedBackupUploads, name, v1.DeletionStepBackupData); err != nil {
		return err
	}
	keys, err := backupKeys(ctx, st, name)
	if err != nil {
		return r.fail(v1.DeletionError{Step: v1.DeletionStepBackupData, Message: err.Error()})
	}
	if len(keys) == 0 {
		return nil
	}
	marker := st.BackupKey(name, storage.BackupMetadataFile)
	rest := keys
	if keys[len(keys)-1] == marker {
		rest = keys[:len(keys)-1]
	}
	err = st.DeleteKeys(ctx, rest)
	r.countKeys(len(rest), err)
	if err != nil {
		r.leftBehind("key " + marker)
		return r.fail(v1.DeletionError{Step: v1.DeletionStepBackupData, Message: fmt.Sprintf("%v (kept %s so the backup stays visible and its deletion can be retried)", err, storage.BackupMetadataFile)})
	}
	r.flush()
	if len(rest) < len(keys) {
		err = st.DeleteKeys(ctx, []string{marker})
		r.countKeys(1, err)
		if err != nil {
			return r.fail(v1.DeletionError{Step: v1.DeletionStepBackupData, Message: err.Error()})
		}
	}
	return nil
}

// backupKeys lists the keys under backups/<name>/ in the order they are
// deleted: velero-backup.json last.
func backupKeys(ctx context.Context, st *storage.BackupStore, name string) ([]string, error) {
	dir := st.BackupDir(name)
	keys, err := st.ObjectStore().ListObjects(ctx, st.Bucket(), dir)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", dir, err)
	}
	marker := st.BackupKey(name, storage.BackupMetadataFile)
	keys = slices.Clone(keys)
	slices.Sort(keys)
	if i := slices.Index(keys, marker); i >= 0 {
		keys = append(slices.Delete(keys, i, i+1), marker)
	}
	return keys, nil
}

// backupObject is the last step: the Backup object goes, finalizer first.
func (r *run) backupObject(ctx context.Context) error {
	if r.e.Cluster == nil {
		return nil
	}
	if err := r.e.Cluster.RemoveBackup(ctx, r.in.Backup); err != nil {
		return r.fail(v1.DeletionError{Step: v1.DeletionStepBackup, Name: r.in.Backup.Name, Message: err.Error()})
	}
	return nil
}

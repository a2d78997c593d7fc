// Package kopiapath is the data path of file-system backup: it moves a
// volume's files to and from the kopia repositories of package repository,
// as Velero's kopia uploader does (the same snapshot source, tags, policy,
// parent lookup and restore options), so that either restores what the
// other stored.
//
// Memory stays flat in the volume's size: kopia's uploader and restorer
// walk one directory at a time, and nothing here lists a volume.
package kopiapath

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kopia/kopia/fs"
	"github.com/kopia/kopia/fs/localfs"
	"github.com/kopia/kopia/repo"
	"github.com/kopia/kopia/repo/compression"
	"github.com/kopia/kopia/repo/manifest"
	"github.com/kopia/kopia/snapshot"
	"github.com/kopia/kopia/snapshot/policy"
	"github.com/kopia/kopia/snapshot/restore"
	"github.com/kopia/kopia/snapshot/snapshotfs"
	"github.com/kopia/kopia/snapshot/upload"
	"golang.org/x/sys/unix"

	"github.com/lifeboat-io/lifeboat/internal/podvolume"
	"github.com/lifeboat-io/lifeboat/internal/podvolume/repository"
)

// Velero's names in the snapshots of pod volumes.
const (
	// Requester is the snapshot-requester tag of pod volume snapshots and
	// the first element of their source path.
	Requester = "snapshot-pod-volume"
	// UploaderType is the snapshot-uploader tag.
	UploaderType = "kopia"

	tagRequester = "snapshot-requester"
	tagUploader  = "snapshot-uploader"
	description  = "Kopia Uploader"
	pin          = "velero-pin"
	// maxErrorsReported bounds the files named in a failed backup's error.
	maxErrorsReported = 10
	progressInterval  = time.Second
)

// DataPath implements podvolume.DataPath and podvolume.Forgetter.
type DataPath struct {
	Repositories *repository.Manager
	Log          *slog.Logger
	// CheckpointInterval is how often a running backup saves a checkpoint
	// snapshot (kopia's, incomplete, tagged as the final snapshot will be):
	// zero means kopia's default, 45 minutes, which is also the most kopia
	// accepts. Tests shorten it.
	CheckpointInterval time.Duration
}

var (
	_ podvolume.DataPath  = (*DataPath)(nil)
	_ podvolume.Forgetter = (*DataPath)(nil)
)

// SourcePath is the snapshot source Velero gives a pod volume:
// snapshot-pod-volume/kopia/<namespace>/<pod>/<PVC name, else volume>.
func SourcePath(tags map[string]string, pvcName string) string {
	vol := pvcName
	if vol == "" {
		vol = tags["volume"]
	}
	return strings.Join([]string{Requester, UploaderType, tags["ns"], tags["pod"], vol}, "/")
}

// Backup stores the files under req.Path as a snapshot.
func (d *DataPath) Backup(ctx context.Context, req podvolume.BackupRequest) (podvolume.BackupResult, error) {
	ctx = repository.WithKopiaLog(ctx, d.Log)
	if req.Path == "" {
		return podvolume.BackupResult{}, errors.New("backup: the volume's path is empty")
	}
	rep, release, err := d.open(ctx, req.Repository)
	if err != nil {
		return podvolume.BackupResult{}, err
	}
	defer release()
	src, err := sourceEntry(req.Path)
	if err != nil {
		return podvolume.BackupResult{}, err
	}
	tags := map[string]string{}
	for k, v := range req.Tags {
		tags[k] = v
	}
	tags[tagRequester] = Requester
	tags[tagUploader] = UploaderType
	si := snapshot.SourceInfo{UserName: repository.UserName, Host: repository.Hostname, Path: filepath.Clean(SourcePath(req.Tags, req.PVCName))}

	wctx, w, err := rep.NewWriter(ctx, repo.WriteSessionOptions{Purpose: description})
	if err != nil {
		return podvolume.BackupResult{}, fmt.Errorf("opening a repository writer: %w", err)
	}
	defer w.Close(ctx)

	previous, err := previousSnapshot(wctx, w, si, tags)
	if err != nil {
		return podvolume.BackupResult{}, err
	}
	compressor, err := repository.Compressor(wctx, w)
	if err != nil {
		return podvolume.BackupResult{}, err
	}
	if err := policy.SetPolicy(wctx, w, si, veleroPolicy(req.ParallelFilesUpload, compressor)); err != nil {
		return podvolume.BackupResult{}, fmt.Errorf("setting the snapshot policy: %w", err)
	}
	if err := w.Flush(wctx); err != nil {
		return podvolume.BackupResult{}, fmt.Errorf("flushing the snapshot policy: %w", err)
	}
	tree, err := policy.TreeForSource(wctx, w, si)
	if err != nil {
		return podvolume.BackupResult{}, fmt.Errorf("reading the snapshot policy: %w", err)
	}

	u := upload.NewUploader(w)
	u.FailFast = true
	// kopia saves checkpoints with these labels only: without them a
	// checkpoint of an upload that then fails (the node agent killed an
	// hour in) names no backup, so deleting the backup cannot find it, and
	// kopia's retention removes it only once a later complete snapshot of
	// the same source exists, which never comes for a pod of a Deployment
	// (its name is in the source). Tagged, it goes with its backup.
	u.CheckpointLabels = maps.Clone(tags)
	if d.CheckpointInterval > 0 {
		u.CheckpointInterval = d.CheckpointInterval
	}
	prog := &uploadProgress{}
	u.Progress = prog
	stop := watch(ctx, u.Cancel, func() {
		if req.Progress != nil {
			req.Progress(prog.get())
		}
	})
	start := time.Now()
	man, err := u.Upload(wctx, src, tree, si, previous...)
	stop()
	// A cancelled upload may end without an error, its manifest marked
	// incomplete: never store that as a snapshot.
	if ctx.Err() != nil || u.IsCanceled() {
		return podvolume.BackupResult{}, fmt.Errorf("backup of %s cancelled: %w", req.Path, cmp.Or(ctx.Err(), context.Canceled))
	}
	if err != nil {
		return podvolume.BackupResult{}, fmt.Errorf("uploading %s: %w", req.Path, err)
	}
	if man.IncompleteReason != "" {
		return podvolume.BackupResult{}, fmt.Errorf("uploading %s: incomplete (%s)", req.Path, man.IncompleteReason)
	}
	man.Tags = tags
	man.Description = description
	man.Pins = []string{pin}
	id, err := snapshot.SaveSnapshot(wctx, w, man)
	if err != nil {
		return podvolume.BackupResult{}, fmt.Errorf("saving the snapshot manifest: %w", err)
	}
	// Velero's retention keeps everything; applying it as Velero does
	// keeps the repositories' manifests the same.
	if _, err := policy.ApplyRetentionPolicy(wctx, w, si, true); err != nil {
		return podvolume.BackupResult{}, fmt.Errorf("applying the retention policy: %w", err)
	}
	if err := w.Flush(wctx); err != nil {
		return podvolume.BackupResult{}, fmt.Errorf("flushing the repository: %w", err)
	}
	size := man.Stats.TotalFileSize
	if req.Progress != nil {
		req.Progress(podvolume.Progress{TotalBytes: size, BytesDone: size})
	}
	d.log().Info("volume backed up", "path", req.Path, "source", si.Path, "snapshot", id, "bytes", size,
		"files", man.Stats.TotalFileCount, "cachedFiles", man.Stats.CachedFiles, "parallelFiles", defaultParallel(req.ParallelFilesUpload), "parent", parentID(previous), "duration", time.Since(start).Round(time.Millisecond))
	res := podvolume.BackupResult{SnapshotID: string(id), TotalBytes: size, Empty: man.Stats.TotalFileCount == 0 && size == 0}
	if err := failedEntries(man, tree); err != nil {
		return res, err
	}
	return res, nil
}

// veleroPolicy is the policy Velero sets on each source before a backup:
// keep every snapshot, no compression, ignore unknown file types (sockets,
// devices), reads as parallel as parallelFiles asks (Velero's
// ParallelFilesUpload) or else as there are CPUs, manual scheduling.
// Velero applies ParallelFilesUpload through the policy, not the
// uploader's own override, so the policy stored in the repository says
// what the last backup of the source used. The one difference: a
// repository whose global policy names a compressor (one Lifeboat created
// with --fs-backup-compression) compresses with it.
func veleroPolicy(parallelFiles int, compressor string) *policy.Policy {
	if compressor == "" {
		compressor = "none"
	}
	keep := policy.OptionalInt(math.MaxInt32)
	par := policy.OptionalInt(defaultParallel(parallelFiles))
	above := policy.OptionalInt64(math.MaxInt64)
	ignore := policy.OptionalBool(true)
	return &policy.Policy{
		RetentionPolicy: policy.RetentionPolicy{
			KeepLatest: &keep, KeepAnnual: &keep, KeepDaily: &keep,
			KeepHourly: &keep, KeepMonthly: &keep, KeepWeekly: &keep,
		},
		CompressionPolicy: policy.CompressionPolicy{CompressorName: compression.Name(compressor)},
		UploadPolicy: policy.UploadPolicy{
			MaxParallelFileReads:    &par,
			ParallelUploadAboveSize: &above,
		},
		SchedulingPolicy:    policy.SchedulingPolicy{Manual: true},
		ErrorHandlingPolicy: policy.ErrorHandlingPolicy{IgnoreUnknownTypes: &ignore},
	}
}

// previousSnapshot finds the parent of an incremental backup as Velero
// does: the latest complete snapshot of the same source made by the same
// requester and uploader.
func previousSnapshot(ctx context.Context, rep repo.Repository, si snapshot.SourceInfo, tags map[string]string) ([]*snapshot.Manifest, error) {
	mans, err := snapshot.ListSnapshots(ctx, rep, si)
	if err != nil {
		return nil, fmt.Errorf("listing the snapshots of %s: %w", si.Path, err)
	}
	var best *snapshot.Manifest
	for _, m := range mans {
		if m.Tags[tagRequester] != tags[tagRequester] || m.Tags[tagUploader] != tags[tagUploader] {
			continue
		}
		if m.IncompleteReason == "" && (best == nil || m.StartTime.After(best.StartTime)) {
			best = m
		}
	}
	if best == nil {
		return nil, nil
	}
	return []*snapshot.Manifest{best}, nil
}

func parentID(prev []*snapshot.Manifest) string {
	if len(prev) == 0 {
		return ""
	}
	return string(prev[0].ID)
}

// failedEntries turns the files kopia could not read into an error, as
// Velero does (a backup with unreadable files is not a success).
func failedEntries(man *snapshot.Manifest, tree *policy.Tree) error {
	ds := man.RootEntry.DirSummary
	if ds == nil {
		return nil
	}
	pol := tree.EffectivePolicy()
	ignoreUnknown := pol != nil && pol.ErrorHandlingPolicy.IgnoreUnknownTypes != nil && bool(*pol.ErrorHandlingPolicy.IgnoreUnknownTypes)
	var msgs []string
	for _, e := range ds.FailedEntries {
		if ignoreUnknown && strings.Contains(e.Error, fs.ErrUnknown.Error()) {
			continue
		}
		if len(msgs) == maxErrorsReported {
			msgs = append(msgs, "more errors not shown")
			break
		}
		msgs = append(msgs, fmt.Sprintf("%s: %s", e.EntryPath, e.Error))
	}
	if len(msgs) > 0 {
		return fmt.Errorf("snapshot %s is missing files: %s", man.ID, strings.Join(msgs, "; "))
	}
	return nil
}

// sourceEntry is what Backup reads a volume through; tests wrap it.
var sourceEntry = localEntry

// localEntry is the volume's directory, through a symlink if it is one.
func localEntry(path string) (fs.Entry, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("volume path %s: %w", path, err)
	}
	st, err := os.Lstat(abs)
	if err != nil {
		return nil, fmt.Errorf("volume path: %w", err)
	}
	if st.Mode()&os.ModeSymlink != 0 {
		if abs, err = filepath.EvalSymlinks(abs); err != nil {
			return nil, fmt.Errorf("volume path: %w", err)
		}
	}
	e, err := localfs.NewEntry(abs)
	if err != nil {
		return nil, fmt.Errorf("volume path %s: %w", abs, err)
	}
	return e, nil
}

// Restore writes the snapshot's files under req.Path, as Velero does:
// existing files, directories and symlinks are overwritten, owners and
// modes are restored where the process may set them.
func (d *DataPath) Restore(ctx context.Context, req podvolume.RestoreRequest) (int64, error) {
	ctx = repository.WithKopiaLog(ctx, d.Log)
	if req.SnapshotID == "" {
		return 0, errors.New("restore: no snapshot ID")
	}
	rep, release, err := d.open(ctx, req.Repository)
	if err != nil {
		return 0, err
	}
	defer release()
	man, err := snapshot.LoadSnapshot(ctx, rep, manifest.ID(req.SnapshotID))
	if err != nil {
		return 0, fmt.Errorf("snapshot %s: %w", req.SnapshotID, err)
	}
	root, err := snapshotfs.SnapshotRoot(rep, man)
	if err != nil {
		return 0, fmt.Errorf("snapshot %s: %w", req.SnapshotID, err)
	}
	target, err := filepath.Abs(req.Path)
	if err != nil {
		return 0, fmt.Errorf("restore path %s: %w", req.Path, err)
	}
	out := &restore.FilesystemOutput{
		TargetPath:             target,
		OverwriteDirectories:   true,
		OverwriteFiles:         true,
		OverwriteSymlinks:      true,
		IgnorePermissionErrors: true,
		WriteSparseFiles:       req.WriteSparseFiles,
	}
	if err := out.Init(ctx); err != nil {
		return 0, fmt.Errorf("restore target %s: %w", target, err)
	}
	var done, total atomic.Int64
	cancel := make(chan struct{})
	stop := watch(ctx, func() { close(cancel) }, func() {
		if req.Progress != nil {
			req.Progress(podvolume.Progress{TotalBytes: total.Load(), BytesDone: done.Load()})
		}
	})
	// kopia's restore stops on its cancel channel; a cancelled context
	// would make it fail with an unrelated error instead.
	stats, err := restoreEntry(context.WithoutCancel(ctx), rep, out, root, restore.Options{
		Parallel:               defaultParallel(req.ParallelFilesDownload),
		RestoreDirEntryAtDepth: math.MaxInt32,
		Cancel:                 cancel,
		ProgressCallback: func(_ context.Context, s restore.Stats) {
			done.Store(s.RestoredTotalFileSize)
			total.Store(s.EnqueuedTotalFileSize)
		},
	})
	stop()
	if ctx.Err() != nil {
		return 0, fmt.Errorf("restore of snapshot %s cancelled: %w", req.SnapshotID, ctx.Err())
	}
	if err != nil {
		return 0, fmt.Errorf("restoring snapshot %s into %s: %w", req.SnapshotID, target, err)
	}
	if err := syncFS(target); err != nil {
		return 0, err
	}
	if req.Progress != nil {
		req.Progress(podvolume.Progress{TotalBytes: stats.RestoredTotalFileSize, BytesDone: stats.RestoredTotalFileSize})
	}
	d.log().Info("volume restored", "path", target, "snapshot", req.SnapshotID, "bytes", stats.RestoredTotalFileSize,
		"writeSparseFiles", req.WriteSparseFiles, "parallelFiles", defaultParallel(req.ParallelFilesDownload),
		"files", stats.RestoredFileCount, "dirs", stats.RestoredDirCount, "symlinks", stats.RestoredSymlinkCount)
	return stats.RestoredTotalFileSize, nil
}

// restoreEntry is kopia's restore; tests see the options it is given.
var restoreEntry = restore.Entry

// defaultParallel is Velero's parallelism for a count of files: the count
// when positive, else the node's CPUs.
func defaultParallel(n int) int {
	if n > 0 {
		return n
	}
	return runtime.NumCPU()
}

// syncFS writes the restored data to the volume's disk before the pod is
// let go, as Velero flushes a restored volume.
func syncFS(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("flushing %s: %w", dir, err)
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return fmt.Errorf("flushing %s: %w", dir, err)
	}
	return nil
}

// Forget deletes the snapshot's manifest; the data only it references is
// reclaimed by the repository's maintenance.
func (d *DataPath) Forget(ctx context.Context, r podvolume.Repository, snapshotID string) error {
	ctx = repository.WithKopiaLog(ctx, d.Log)
	if snapshotID == "" {
		return nil
	}
	rep, release, err := d.open(ctx, r)
	if err != nil {
		return err
	}
	defer release()
	err = repo.WriteSession(ctx, rep, repo.WriteSessionOptions{Purpose: "forget"}, func(ctx context.Context, w repo.RepositoryWriter) error {
		return w.DeleteManifest(ctx, manifest.ID(snapshotID))
	})
	if err != nil {
		return fmt.Errorf("forgetting snapshot %s: %w", snapshotID, err)
	}
	d.log().Info("snapshot forgotten", "snapshot", snapshotID, "volumeNamespace", r.VolumeNamespace, "location", r.Location.Name)
	return nil
}

// ForgetBackup deletes the manifest of every pod volume snapshot in the
// repository tagged with the backup's UID, complete or not; the data only
// they reference is reclaimed by maintenance. Snapshots of other
// requesters (Velero's data mover keeps its snapshots in the same
// repositories, tagged with the backup too) are left alone.
func (d *DataPath) ForgetBackup(ctx context.Context, r podvolume.Repository, backupUID string) ([]string, error) {
	ctx = repository.WithKopiaLog(ctx, d.Log)
	if backupUID == "" {
		// An empty tag would match snapshots without one: never all.
		return nil, errors.New("forgetting a backup's snapshots: no backup UID")
	}
	rep, release, err := d.open(ctx, r)
	if err != nil {
		return nil, err
	}
	defer release()
	ids, err := snapshot.ListSnapshotManifests(ctx, rep, nil, map[string]string{
		podvolume.BackupUIDTag: backupUID, tagRequester: Requester,
	})
	if err != nil {
		return nil, fmt.Errorf("listing the snapshots of backup %s: %w", backupUID, err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	err = repo.WriteSession(ctx, rep, repo.WriteSessionOptions{Purpose: "forget"}, func(ctx context.Context, w repo.RepositoryWriter) error {
		for _, id := range ids {
			if err := w.DeleteManifest(ctx, id); err != nil {
				return fmt.Errorf("snapshot %s: %w", id, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("forgetting the snapshots of backup %s: %w", backupUID, err)
	}
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = string(id)
	}
	d.log().Info("snapshots of a backup forgotten", "backupUID", backupUID, "snapshots", out,
		"volumeNamespace", r.VolumeNamespace, "location", r.Location.Name)
	return out, nil
}

// open opens a repository with its view brought up to date. Repositories
// stay open while they are in use, and another process may have written
// or removed snapshots since (the node agent of another node, the
// server): kopia reads manifests from its own view, so without a refresh
// a restore would not find a newer snapshot, a backup would miss its
// parent, and a forget would silently skip a manifest it does not know.
func (d *DataPath) open(ctx context.Context, r podvolume.Repository) (repo.Repository, func(), error) {
	rep, release, err := d.Repositories.Open(ctx, r)
	if err != nil {
		return nil, nil, err
	}
	if err := rep.Refresh(ctx); err != nil {
		release()
		return nil, nil, fmt.Errorf("refreshing the repository of namespace %s in location %s: %w", r.VolumeNamespace, r.Location.Name, err)
	}
	return rep, release, nil
}

func (d *DataPath) log() *slog.Logger {
	if d.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return d.Log
}

// watch calls report every progressInterval and cancel when ctx ends,
// until the returned stop is called.
func watch(ctx context.Context, cancel, report func()) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(progressInterval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				cancel()
				return
			case <-t.C:
				report()
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

// uploadProgress counts what kopia's uploader has read: hashed bytes and
// the sizes of files unchanged since the parent snapshot.
type uploadProgress struct {
	upload.NullUploadProgress
	done, total atomic.Int64
}

// Enabled turns on kopia's estimate of the volume's size (a parallel walk
// of the tree), which gives the total.
func (p *uploadProgress) Enabled() bool { return true }

func (p *uploadProgress) HashedBytes(n int64)              { p.done.Add(n) }
func (p *uploadProgress) CachedFile(_ string, n int64)     { p.done.Add(n) }
func (p *uploadProgress) EstimatedDataSize(_, total int64) { p.total.Store(total) }

func (p *uploadProgress) get() podvolume.Progress {
	d, t := p.done.Load(), p.total.Load()
	return podvolume.Progress{TotalBytes: max(t, d), BytesDone: d}
}

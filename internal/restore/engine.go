// Package restore brings the items of a backup back into a cluster. It reads
// the backup's tarball once, as a stream, into a bounded spool on local disk
// (one file per resource type, not one per item), then creates the items in
// Velero's resource priority order, transformed for their new home.
package restore

import (
	"context"
	"log/slog"
	"time"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/archive"
	"github.com/lifeboat-io/lifeboat/internal/cluster"
	"github.com/lifeboat-io/lifeboat/internal/hooks"
	"github.com/lifeboat-io/lifeboat/internal/storage"
)

// Engine runs restores against one cluster.
type Engine struct {
	acc *cluster.Access
	log *slog.Logger
	// Limits bound what a backup's archive may unpack to (zero fields:
	// archive's defaults); the server gives its backup engine the same.
	Limits archive.Limits
	// Plugins supplies restore item actions; nil runs none.
	Plugins Plugins
	// WorkDir holds the spools and run logs; "" is the system temp dir.
	WorkDir string
	// SnapshotLocations opens the VolumeSnapshotLocations of a backup's
	// native snapshots; nil restores no volume from a snapshot.
	SnapshotLocations SnapshotLocations
	// Hooks runs restore exec hooks' commands in pods; nil fails every
	// exec hook.
	Hooks hooks.Executor
	// HookWait bounds the wait for a pod's containers of exec hooks
	// without a wait timeout; zero is DefaultHookWait.
	HookWait time.Duration
	// PodVolumes restores the volumes of pods backed up by file-system
	// backup through the node agent; nil restores such pods with empty
	// volumes and a warning.
	PodVolumes *PodVolumeOptions
}

// DefaultHookWait is how long a restore waits for the containers of exec
// hooks that give no wait timeout: Velero's default resource timeout,
// which bounds its wait for hooks too.
const DefaultHookWait = 10 * time.Minute

func (e *Engine) hookWait() time.Duration {
	if e.HookWait > 0 {
		return e.HookWait
	}
	return DefaultHookWait
}

// SnapshotLocations opens a VolumeSnapshotLocation for use: the
// VolumeSnapshotter's name and the config to Init it with, credentials
// included (locations.Resolver).
type SnapshotLocations interface {
	SnapshotLocation(ctx context.Context, name string) (provider string, config map[string]string, err error)
}

// NewEngine builds an engine over the cluster acc reaches.
func NewEngine(acc *cluster.Access, log *slog.Logger) *Engine {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Engine{acc: acc, log: log, Hooks: hooks.NewRemoteExecutor(acc.Config, acc.Typed.CoreV1().RESTClient())}
}

// ProgressFunc receives the running counts of a restore, at most once a second.
type ProgressFunc func(v1.RestoreProgress)

// Outcome is how a restore ended: the status fields the caller records.
type Outcome struct {
	Phase         v1.RestorePhase
	FailureReason string
	Warnings      int
	Errors        int
	Progress      v1.RestoreProgress
	Completion    time.Time
	// HooksAttempted and HooksFailed count the exec hooks, as Velero's
	// status.hookStatus does.
	HooksAttempted, HooksFailed int
	// DryRun is what a dry run found; nil for a restore.
	DryRun *v1.RestoreDryRun
}

// Run restores b (read from store) as rs's spec says, and uploads the
// restore's log, results and resource list to store. Per-item problems are
// warnings or errors in the results (phase PartiallyFailed when there are
// errors); an unreadable or hostile archive fails the whole restore before
// anything is created.
func (e *Engine) Run(ctx context.Context, rs *v1.Restore, b *v1.Backup, store *storage.BackupStore, progress ProgressFunc) Outcome {
	start := time.Now()
	r, err := e.newRun(rs, b, store, progress)
	if err != nil {
		return Outcome{Phase: v1.RestorePhaseFailed, FailureReason: err.Error(), Completion: time.Now()}
	}
	defer r.close()
	e.log.Info("restore started", "restore", rs.Namespace+"/"+rs.Name, "backup", b.Name)
	r.log.Info("starting restore", "backup", b.Name)

	err = r.execute(ctx)
	res := r.results.Snapshot()
	out := Outcome{
		Completion: time.Now(),
		Progress:   v1.RestoreProgress{TotalItems: r.total, ItemsRestored: int(r.restored.Load())},
		Warnings:   res.Warnings.Count(),
		Errors:     res.Errors.Count(),

		HooksAttempted: r.hooksAttempted,
		HooksFailed:    r.hooksFailed,
	}
	if r.dry != nil {
		out.DryRun = r.dry.result()
	}
	switch {
	case err != nil:
		out.Phase, out.FailureReason = v1.RestorePhaseFailed, err.Error()
		r.log.Error("restore failed", "error", err)
	case out.Errors > 0:
		out.Phase = v1.RestorePhasePartiallyFailed
	default:
		out.Phase = v1.RestorePhaseCompleted
	}
	r.log.Info("restore finished", "phase", out.Phase, "items", out.Progress.ItemsRestored, "total", r.total,
		"warnings", out.Warnings, "errors", out.Errors, "duration", time.Since(start).Round(time.Millisecond).String())
	if uerr := r.upload(ctx, res); uerr != nil {
		// The restore itself happened; only its record is incomplete.
		e.log.Error("uploading restore files", "restore", rs.Namespace+"/"+rs.Name, "error", uerr)
		if out.Phase == v1.RestorePhaseCompleted {
			out.Phase = v1.RestorePhasePartiallyFailed
		}
		out.Errors++
		if out.FailureReason == "" {
			out.FailureReason = "the restore's log and results could not be uploaded: " + uerr.Error()
		}
	}
	e.log.Info("restore ended", "restore", rs.Namespace+"/"+rs.Name, "phase", out.Phase, "items", out.Progress.ItemsRestored,
		"warnings", out.Warnings, "errors", out.Errors, "duration", time.Since(start).Round(time.Millisecond).String(),
		"failureReason", out.FailureReason)
	return out
}

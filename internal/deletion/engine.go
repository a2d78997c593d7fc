// Package deletion is the backup deletion engine: it plans and runs the
// deletion of one backup, step by step (DeleteItemActions over the items of
// the backup's tarball, native volume snapshots, pod volume snapshots, the
// backup's Restores, the
// backup's keys in object storage, the Backup object), and reports how far
// it got in a checkpoint the caller persists, so that a failed or
// interrupted deletion resumes where it stopped.
//
// It holds no Kubernetes client of its own: what it needs from the cluster
// comes through the Cluster interface, and plugins through Plugins.
package deletion

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"
	"unicode/utf8"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/archive"
	"github.com/lifeboat-io/lifeboat/internal/podvolume"
	"github.com/lifeboat-io/lifeboat/internal/selection"
	"github.com/lifeboat-io/lifeboat/internal/storage"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

// Defaults for Engine fields left at zero.
const (
	DefaultWorkers = 8
	// DefaultStreamWorkers bounds the calls in flight to actions whose
	// calls go over Lifeboat's stream (measured in bench/README.md's
	// deletion section): a streamed call costs the plugin process a
	// goroutine, not a gRPC stream, and many in flight share messages.
	DefaultStreamWorkers = 64
	// A checkpoint write runs beside the workers, so writing often costs
	// them nothing, and it shrinks the crash window: the calls finished
	// after the last write are passed again after a SIGKILL (about 320
	// items in the kill test when writes were 500 ms apart).
	DefaultCheckpointInterval = 100 * time.Millisecond
	DefaultCheckpointItems    = 1000
	// MaxErrors bounds the errors a Result (and so a request's status)
	// carries; the rest are counted.
	MaxErrors = 20
	// maxLeftBehind bounds Report.LeftBehind.
	maxLeftBehind = 20
	// maxWarnings bounds Report.Warnings.
	maxWarnings = 10
	// maxMessage bounds one message: a plugin's error can be as long as
	// it likes, a request's status cannot.
	maxMessage = 1024
)

// Steps in the order they run.
var Steps = []v1.DeletionStep{
	v1.DeletionStepItemActions, v1.DeletionStepVolumeSnapshots, v1.DeletionStepPodVolumeSnapshots, v1.DeletionStepRestores,
	v1.DeletionStepBackupData, v1.DeletionStepBackup,
}

// Plugins are where the engine finds DeleteItemActions and
// VolumeSnapshotters (the plugin host).
type Plugins interface {
	Names(kind api.Kind) []string
	DeleteItemAction(name string) (api.DeleteItemAction, error)
	VolumeSnapshotter(name string) (api.VolumeSnapshotter, error)
}

// Cluster is what the engine needs from the API server. Implementations
// bound each call with a timeout.
type Cluster interface {
	// SnapshotLocation returns the provider of the VolumeSnapshotLocation
	// called name and the config to Init its VolumeSnapshotter with
	// (credentials included, as Velero passes them).
	SnapshotLocation(ctx context.Context, name string) (provider string, config map[string]string, err error)
	// Restores returns the names of the Restores of backup, sorted.
	Restores(ctx context.Context, backup string) ([]string, error)
	// DeleteRestore deletes a Restore object; one already gone is fine.
	DeleteRestore(ctx context.Context, name string) error
	// RemoveBackup drops v1.BackupFinalizer from the Backup and deletes it;
	// one already gone is fine.
	RemoveBackup(ctx context.Context, b *v1.Backup) error
}

// ResolverFunc returns a resolver for the resource names of AppliesTo
// selectors, read from discovery when a deletion starts.
type ResolverFunc func(ctx context.Context) (selection.ResourceResolver, error)

// Engine deletes backups. It is safe for concurrent use by deletions of
// different backups.
type Engine struct {
	Plugins Plugins
	Cluster Cluster
	// PodVolumes finds and deletes the backup's PodVolumeBackup objects;
	// nil: only the stored podvolumebackups file is read.
	PodVolumes PodVolumeCluster
	// Forgetter forgets pod volume snapshots in their kopia repositories;
	// nil fails a deletion that has some to forget.
	Forgetter podvolume.Forgetter
	// Resolver resolves AppliesTo names; nil keeps names as written.
	Resolver ResolverFunc
	// Workers bounds concurrent DeleteItemAction calls (default 8). The
	// plugin host bounds each call with its kind's timeout and restarts a
	// crashed plugin once.
	Workers int
	// StreamWorkers bounds DeleteItemAction calls in flight to actions
	// whose calls go over Lifeboat's stream (default 64); the calls of
	// other actions stay within Workers.
	StreamWorkers int
	// Window bounds how far past its first unfinished item an action is
	// handed items (default 1000), and so the size of checkpoints.
	Window int64
	// CheckpointInterval and CheckpointItems say how often a running step
	// hands its checkpoint to Input.OnState: after this long or this many
	// finished calls, whichever comes first (defaults 100 ms and 1,000).
	// Every step's end is handed over too.
	CheckpointInterval time.Duration
	CheckpointItems    int
	// Limits bound what is accepted from the tarball (zero fields:
	// archive's defaults); the server gives its backup engine the same.
	Limits archive.Limits
	Log    *slog.Logger
}

// State is what a deletion has done, over all its attempts: the caller
// persists it and hands it back to resume.
type State struct {
	Checkpoint                  v1.DeletionCheckpoint
	SnapshotsDeleted            int64
	PodVolumeSnapshotsForgotten int64
	RestoresDeleted             int64
	KeysRemoved                 int64
	// UnfinishedUploadsRemoved counts the uploads a stopped server left,
	// removed with the backup's and its restores' keys.
	UnfinishedUploadsRemoved int64
	// Warnings are what the deletion went on without (bounded).
	Warnings []string
	// Skipped are the items whose DeleteItemAction failed and that the
	// deletion went past (Input.SkipFailedActions), bounded by
	// v1.DeletionSkippedItemsMax; SkippedCount counts them all.
	Skipped      []v1.DeletionError
	SkippedCount int64
}

// Input is one attempt at deleting a backup.
type Input struct {
	// Backup is the Backup object; it is what DeleteItemActions receive.
	Backup *v1.Backup
	// Store is the backup's storage location, opened; nil when the backup
	// has none recorded (a backup that failed validation stored nothing).
	Store *storage.BackupStore
	// State is where earlier attempts got to; zero for the first.
	State State
	// OnState receives the state while the attempt runs, from one
	// goroutine at a time and never after Run has returned.
	OnState func(State)
	// SkipFailedActions is the operator's consent to go past items whose
	// DeleteItemAction fails: each is recorded in State.Skipped and
	// counted done, so the step completes and the deletion goes on.
	SkipFailedActions bool
}

// Result is how an attempt ended.
type Result struct {
	// Err is nil when the backup is gone; otherwise it says which step
	// stopped the deletion.
	Err error
	// Errors are the failures, with what failed (the first MaxErrors).
	Errors []v1.DeletionError
	// ErrorCount counts every failure.
	ErrorCount int
	// State is where the attempt got to.
	State State
	// Report sums the deletion up (over all attempts).
	Report v1.DeletionReport
}

// Messages renders Errors as Velero's flat strings, with a last line
// counting the failures left out.
func (r Result) Messages() []string {
	var out []string
	for _, e := range r.Errors {
		out = append(out, ErrorMessage(e))
	}
	if more := r.ErrorCount - len(r.Errors); more > 0 {
		out = append(out, fmt.Sprintf("... and %d more errors", more))
	}
	if len(out) == 0 && r.Err != nil {
		out = append(out, r.Err.Error())
	}
	return out
}

// ErrorMessage renders one failure as a line of status.errors.
func ErrorMessage(e v1.DeletionError) string {
	switch {
	case e.Plugin != "" && e.Resource != "":
		return fmt.Sprintf("DeleteItemAction %s failed for %s %s: %s", e.Plugin, e.Resource, qualified(e.Namespace, e.Name), e.Message)
	case e.Name != "":
		return fmt.Sprintf("%s %s: %s", e.Step, e.Name, e.Message)
	case e.Step != "":
		return fmt.Sprintf("%s: %s", e.Step, e.Message)
	}
	return e.Message
}

func qualified(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

// run is one attempt.
type run struct {
	e   *Engine
	in  Input
	log *slog.Logger

	mu      sync.Mutex
	state   State
	actions []*progress // by action, from the checkpoint and the item step
	snaps   *progress
	pvSnaps *progress
	errs    []v1.DeletionError
	nerrs   int
	// leaveLocation: the backup stored nothing, so the steps that work on
	// its stored data are passed over.
	leaveLocation bool
	// storedUID is the UID velero-backup.json records, once checked.
	storedUID string
	left      []string
	// pending counts calls finished since the last checkpoint handed over.
	pending int
	dirty   bool

	flushMu sync.Mutex
	// closed is set when Run returns: no state is handed over after that.
	closed bool
}

// Run makes one attempt at deleting the backup: the steps not completed
// yet run in order, and the first one that fails stops the attempt, so
// that nothing a later step removes is gone while an earlier step still has
// work to do.
func (e *Engine) Run(ctx context.Context, in Input) Result {
	r := &run{e: e, in: in, log: e.logger().With("backup", in.Backup.Namespace+"/"+in.Backup.Name)}
	r.state = cloneState(in.State)
	for _, cp := range r.state.Checkpoint.Actions {
		r.actions = append(r.actions, newProgress(cp, e.window()))
	}
	if cp := r.state.Checkpoint.Snapshots; cp != nil {
		r.snaps = newProgress(*cp, e.window())
	}
	if cp := r.state.Checkpoint.PodVolumeSnapshots; cp != nil {
		r.pvSnaps = newProgress(*cp, e.window())
	}
	start := time.Now()
	r.log.Info("backup deletion attempt started", "completedSteps", r.state.Checkpoint.CompletedSteps)

	err := r.checkLocationSteps(ctx)
	for _, step := range Steps {
		if err != nil {
			break
		}
		if slices.Contains(r.state.Checkpoint.CompletedSteps, step) {
			continue
		}
		if err = ctx.Err(); err != nil {
			break
		}
		switch {
		case r.leaveLocation && touchesLocation(step):
			// Nothing of this backup is in the location.
		case step == v1.DeletionStepItemActions:
			err = r.itemActions(ctx)
		case step == v1.DeletionStepVolumeSnapshots:
			err = r.snapshots(ctx)
		case step == v1.DeletionStepPodVolumeSnapshots:
			err = r.podVolumes(ctx)
		case step == v1.DeletionStepRestores:
			err = r.restores(ctx)
		case step == v1.DeletionStepBackupData:
			err = r.backupData(ctx)
		case step == v1.DeletionStepBackup:
			err = r.backupObject(ctx)
		}
		if err != nil {
			err = fmt.Errorf("step %s: %w", step, err)
			break
		}
		r.mu.Lock()
		r.state.Checkpoint.CompletedSteps = append(r.state.Checkpoint.CompletedSteps, step)
		r.dirty = true
		r.mu.Unlock()
		r.flush()
	}
	r.flush()
	r.flushMu.Lock()
	r.closed = true
	r.flushMu.Unlock()

	res := r.result(err)
	switch {
	case err != nil && ctx.Err() != nil:
		r.log.Info("backup deletion attempt interrupted", "error", err, "duration", time.Since(start).Round(time.Millisecond))
	case err != nil:
		r.log.Warn("backup deletion attempt failed", "error", err, "errors", res.ErrorCount, "duration", time.Since(start).Round(time.Millisecond))
	default:
		r.log.Info("backup deleted", "keysRemoved", res.State.KeysRemoved, "snapshotsDeleted", res.State.SnapshotsDeleted,
			"podVolumeSnapshotsForgotten", res.State.PodVolumeSnapshotsForgotten, "restoresDeleted", res.State.RestoresDeleted, "duration", time.Since(start).Round(time.Millisecond))
	}
	return res
}

// touchesLocation says whether a step works on what the backup stored: its
// items, its snapshot records, its keys.
func touchesLocation(step v1.DeletionStep) bool {
	switch step {
	case v1.DeletionStepItemActions, v1.DeletionStepVolumeSnapshots, v1.DeletionStepPodVolumeSnapshots, v1.DeletionStepBackupData:
		return true
	}
	return false
}

// checkLocationSteps decides, before any step runs, whether the steps that
// work on what the backup stored may run: not at all for a Backup that
// stored nothing (what is under its name is another backup's), and only
// once the stored backup is shown to be this Backup's.
func (r *run) checkLocationSteps(ctx context.Context) error {
	if r.in.Store == nil || !slices.ContainsFunc(Steps, func(s v1.DeletionStep) bool {
		return touchesLocation(s) && !slices.Contains(r.state.Checkpoint.CompletedSteps, s)
	}) {
		return nil
	}
	b := r.in.Backup
	if b.StoredNothing() {
		r.leaveLocation = true
		r.warn(storedNothingWarning(b))
		return nil
	}
	uid, err := checkIdentity(ctx, r.in.Store, b)
	if err != nil {
		r.log.Error("backup deletion refused: the stored backup is not this Backup's", "error", err)
		_ = r.fail(v1.DeletionError{Message: err.Error()})
		return err
	}
	r.storedUID = uid
	return nil
}

func storedNothingWarning(b *v1.Backup) string {
	return fmt.Sprintf("backup %s stored nothing in storage location %q (%s): its DeleteItemActions, snapshots and keys were left alone, since whatever is stored under its name is another backup's",
		b.Name, b.Spec.StorageLocation, cmp.Or(string(b.Status.Phase), "never run"))
}

// fail records a failure (bounded) and returns it as an error.
func (r *run) fail(de v1.DeletionError) error {
	de.Message = clip(de.Message)
	r.mu.Lock()
	r.nerrs++
	if len(r.errs) < MaxErrors {
		r.errs = append(r.errs, de)
	}
	r.mu.Unlock()
	return errors.New(ErrorMessage(de))
}

// skip records an item whose DeleteItemAction failed and that the
// deletion goes past with the operator's consent. Every one is logged;
// the state lists the first v1.DeletionSkippedItemsMax.
func (r *run) skip(de v1.DeletionError) {
	r.log.Warn("DeleteItemAction failed; going past the item (skipFailedActions)", "action", de.Plugin, "resource", de.Resource,
		"namespace", de.Namespace, "name", de.Name, "error", de.Message)
	de.Message = clipTo(de.Message, skippedMessageMax)
	r.mu.Lock()
	r.state.SkippedCount++
	if len(r.state.Skipped) < v1.DeletionSkippedItemsMax {
		r.state.Skipped = append(r.state.Skipped, de)
	}
	r.dirty = true
	r.mu.Unlock()
}

func (r *run) leftBehind(what string) {
	what = clip(what)
	r.mu.Lock()
	if len(r.left) < maxLeftBehind {
		r.left = append(r.left, what)
	}
	r.mu.Unlock()
}

func (r *run) warn(msg string) {
	r.log.Warn(msg)
	msg = clip(msg)
	r.mu.Lock()
	if len(r.state.Warnings) < maxWarnings && !slices.Contains(r.state.Warnings, msg) {
		r.state.Warnings = append(r.state.Warnings, msg)
	}
	r.dirty = true
	r.mu.Unlock()
}

// snapshotState builds the state to hand over; r.mu held.
func (r *run) snapshotState() State {
	s := cloneState(r.state)
	s.Checkpoint.Actions = nil
	for _, p := range r.actions {
		s.Checkpoint.Actions = append(s.Checkpoint.Actions, p.checkpoint())
	}
	if r.snaps != nil {
		cp := r.snaps.checkpoint()
		s.Checkpoint.Snapshots = &cp
	}
	if r.pvSnaps != nil {
		cp := r.pvSnaps.checkpoint()
		s.Checkpoint.PodVolumeSnapshots = &cp
	}
	return s
}

// flush hands the state over if it changed. Calls are serialised, so the
// caller never sees an older state after a newer one.
func (r *run) flush() {
	r.flushMu.Lock()
	defer r.flushMu.Unlock()
	if r.closed || r.in.OnState == nil {
		return
	}
	r.mu.Lock()
	if !r.dirty {
		r.mu.Unlock()
		return
	}
	s := r.snapshotState()
	r.dirty, r.pending = false, 0
	r.mu.Unlock()
	r.in.OnState(s)
}

func (r *run) result(err error) Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := Result{Err: err, Errors: slices.Clone(r.errs), ErrorCount: r.nerrs, State: r.snapshotState()}
	if err != nil && res.ErrorCount == 0 {
		// A failure that is not one item's (a storage error, a
		// cancellation) is still a failure to show.
		res.ErrorCount = 1
		res.Errors = []v1.DeletionError{{Message: err.Error()}}
	}
	rep := v1.DeletionReport{
		SnapshotsDeleted: res.State.SnapshotsDeleted, PodVolumeSnapshotsForgotten: res.State.PodVolumeSnapshotsForgotten,
		RestoresDeleted: res.State.RestoresDeleted,
		KeysRemoved:     res.State.KeysRemoved, Warnings: slices.Clone(res.State.Warnings),
		UnfinishedUploadsRemoved: res.State.UnfinishedUploadsRemoved,
		SkippedItems:             slices.Clone(res.State.Skipped), SkippedCount: res.State.SkippedCount,
	}
	for _, p := range r.actions {
		rep.Actions = append(rep.Actions, v1.DeletionActionReport{Name: p.name, Items: p.succeeded, Failed: p.failures, Skipped: p.skipped})
	}
	if err != nil {
		rep.LeftBehind = slices.Clone(r.left)
	}
	res.Report = rep
	return res
}

// clip shortens s to maxMessage bytes, on a rune boundary.
func clip(s string) string { return clipTo(s, maxMessage) }

// skippedMessageMax bounds the message of a skipped item: there may be a
// thousand of them in the request.
const skippedMessageMax = 256

func clipTo(s string, maxMessage int) string {
	if len(s) <= maxMessage {
		return s
	}
	cut := maxMessage
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "... (cut)"
}

func cloneState(s State) State {
	out := s
	out.Checkpoint = *s.Checkpoint.DeepCopy()
	out.Warnings = slices.Clone(s.Warnings)
	out.Skipped = slices.Clone(s.Skipped)
	return out
}

func (e *Engine) logger() *slog.Logger {
	if e.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return e.Log
}

func (e *Engine) workers() int {
	return cmp.Or(max(e.Workers, 0), DefaultWorkers)
}

func (e *Engine) streamWorkers() int {
	return max(cmp.Or(max(e.StreamWorkers, 0), DefaultStreamWorkers), e.workers())
}

func (e *Engine) window() int64 {
	return cmp.Or(max(e.Window, 0), DefaultWindow)
}

func (e *Engine) checkpointInterval() time.Duration {
	return cmp.Or(max(e.CheckpointInterval, 0), DefaultCheckpointInterval)
}

func (e *Engine) checkpointItems() int {
	return cmp.Or(max(e.CheckpointItems, 0), DefaultCheckpointItems)
}

// actionNames returns the DeleteItemActions' names, sorted, each once.
func (e *Engine) actionNames() []string {
	if e.Plugins == nil {
		return nil
	}
	names := slices.Clone(e.Plugins.Names(api.KindDeleteItemAction))
	sort.Strings(names)
	return slices.Compact(names)
}

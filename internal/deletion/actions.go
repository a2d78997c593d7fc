package deletion

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/metrics"
	"github.com/lifeboat-io/lifeboat/internal/selection"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

// action is a DeleteItemAction with its AppliesTo resolved.
type action struct {
	name      string
	selector  api.ResourceSelector
	appliesTo *selection.AppliesTo
	impl      api.DeleteItemAction
	// remote actions run in another process and get items as JSON.
	remote bool
	// streaming, when set, says whether the action's calls go over
	// Lifeboat's stream just now, so that many may be in flight.
	streaming func() bool
	// streamed is set once streaming said so: the plugin's binary serves
	// the stream, and a process restarted from it does too.
	streamed atomic.Bool
}

// unbounded says whether a call to the action may go beyond the engine's
// Workers bound: its calls go over a plugin's stream.
func (a *action) unbounded() bool {
	if a.streamed.Load() {
		return true
	}
	if a.streaming != nil && a.streaming() {
		a.streamed.Store(true)
		return true
	}
	return false
}

// matches is the one rule, shared by Plan and Run, for which items an
// action receives.
func (a *action) matches(it *tarItem) bool {
	if !a.appliesTo.MatchesResource(it.gr, it.ref.Namespace != "") {
		return false
	}
	var l map[string]string
	if a.appliesTo.NeedsLabels() {
		l = it.itemLabels()
	}
	return a.appliesTo.Matches(it.gr, it.ref.Namespace, l)
}

// loadActions asks every DeleteItemAction, in name order, what it applies
// to and resolves the answer as Velero does.
func (e *Engine) loadActions(ctx context.Context) ([]*action, error) {
	names := e.actionNames()
	if len(names) == 0 {
		return nil, nil
	}
	var resolver selection.ResourceResolver
	if e.Resolver != nil {
		var err error
		if resolver, err = e.Resolver(ctx); err != nil {
			return nil, fmt.Errorf("resolving the resources DeleteItemActions apply to: %w", err)
		}
	}
	var out []*action
	for _, name := range names {
		impl, err := e.Plugins.DeleteItemAction(name)
		if err != nil {
			return nil, fmt.Errorf("DeleteItemAction %s: %w", name, err)
		}
		sel, err := impl.AppliesTo()
		if err != nil {
			return nil, fmt.Errorf("DeleteItemAction %s: AppliesTo: %w", name, err)
		}
		at, err := selection.NewAppliesTo(sel, resolver)
		if err != nil {
			return nil, fmt.Errorf("DeleteItemAction %s: AppliesTo: %w", name, err)
		}
		_, remote := impl.(interface{ RemotePlugin() })
		act := &action{name: name, selector: sel, appliesTo: at, impl: impl, remote: remote}
		if s, ok := impl.(interface{ Streaming() bool }); ok && remote {
			act.streaming = s.Streaming
		}
		out = append(out, act)
	}
	return out, nil
}

// progressOf returns the progress of each action over one source of items
// (the tarball: suffix ""), from the checkpoint or new.
func (r *run) progressOf(actions []*action, suffix string) []*progress {
	r.mu.Lock()
	defer r.mu.Unlock()
	progs := make([]*progress, len(actions))
	for i, a := range actions {
		name := a.name + suffix
		for _, p := range r.actions {
			if p.name == name {
				progs[i] = p
			}
		}
		if progs[i] == nil {
			progs[i] = newProgress(v1.DeletionProgress{Name: name}, r.e.window())
			r.actions = append(r.actions, progs[i])
		}
	}
	return progs
}

// task is one item and the actions it is still to be passed to.
type task struct {
	it      *tarItem
	actions []int
}

// itemActions is the first step: every DeleteItemAction gets each item of
// the tarball it applies to, once, through a pool of workers. An action
// that fails on an item does not stop the others (nor the same action on
// other items, within the window); the step fails if any call failed, and
// the failed items are passed again by the next attempt.
func (r *run) itemActions(ctx context.Context) error {
	if r.in.Store == nil {
		r.warn("the backup records no storage location, so there is no tarball: DeleteItemActions were not called")
		return nil
	}
	actions, err := r.e.loadActions(ctx)
	if err != nil {
		return r.fail(v1.DeletionError{Step: v1.DeletionStepItemActions, Message: err.Error()})
	}
	if len(actions) == 0 {
		return nil
	}
	progs := r.progressOf(actions, "")

	// waiting is signalled whenever a call finishes, for a scanner waiting
	// on the window; and on cancellation, so it stops waiting.
	waiting := sync.NewCond(&r.mu)
	stopWake := context.AfterFunc(ctx, func() {
		r.mu.Lock()
		waiting.Broadcast()
		r.mu.Unlock()
	})
	defer stopWake()

	// The checkpoint writer: time-based here, count-based through kick.
	kick := make(chan struct{}, 1)
	flusherDone := make(chan struct{})
	stopFlusher := make(chan struct{})
	go func() {
		defer close(flusherDone)
		t := time.NewTicker(r.e.checkpointInterval())
		defer t.Stop()
		for {
			select {
			case <-stopFlusher:
				return
			case <-t.C:
			case <-kick:
			}
			r.flush()
		}
	}()

	// Calls that go over a plugin's stream are cheap to have in flight;
	// the others (unary, in-process) hold one of Workers tokens each. An
	// action's first calls are bounded until its process has answered on
	// the stream, so a process without it never sees more than Workers.
	tasks := make(chan task)
	bounded := make(chan struct{}, r.e.workers())
	var wg sync.WaitGroup
	for range r.e.streamWorkers() {
		wg.Go(func() {
			for t := range tasks {
				r.runTask(ctx, t, actions, progs, waiting, kick, bounded)
			}
		})
	}

	backup := r.in.Backup.Name
	onItem := func(it *tarItem) error {
		// Matching decodes the item's labels, so it happens outside the
		// lock. Whether this position is done cannot change meanwhile: only
		// calls for earlier positions are running.
		var candidates []int
		r.mu.Lock()
		for i := range actions {
			if !progs[i].isDone(it.pos) {
				candidates = append(candidates, i)
			}
		}
		r.mu.Unlock()
		candidates = slices.DeleteFunc(candidates, func(i int) bool { return !actions[i].matches(it) })
		var todo []int
		r.mu.Lock()
		for _, i := range candidates {
			p := progs[i]
			for {
				adm := p.admit(it.pos)
				if adm == admitWait && ctx.Err() == nil {
					waiting.Wait()
					continue
				}
				if adm == admitStart && ctx.Err() == nil {
					todo = append(todo, i)
				} else if adm == admitDefer {
					p.skip()
				}
				break
			}
		}
		if err := ctx.Err(); err != nil {
			r.mu.Unlock()
			return err
		}
		for _, i := range todo {
			progs[i].start(it.pos)
		}
		r.mu.Unlock()
		if len(todo) > 0 {
			select {
			case tasks <- task{it: it, actions: todo}:
			case <-ctx.Done():
				r.mu.Lock()
				for _, i := range todo {
					progs[i].abandon(it.pos)
				}
				r.mu.Unlock()
				return ctx.Err()
			}
		}
		r.mu.Lock()
		for _, p := range progs {
			p.scannedTo(it.pos + 1)
		}
		r.dirty = true
		r.mu.Unlock()
		return nil
	}
	scanErr := scanAhead(ctx, r.in.Store, backup, r.e.Limits, onItem)
	fromVolumeInfo := false
	if errors.Is(scanErr, errNoTarball) {
		// No task was handed out: the workers wait for the first, which is
		// sent after progs is replaced.
		fromVolumeInfo = true
		progs = r.progressOf(actions, VolumeInfoSource)
		var rebuilt int
		scanErr = volumeInfoItems(ctx, r.in.Store, r.in.Backup, func(it *tarItem) error { rebuilt++; return onItem(it) })
		if scanErr == nil && rebuilt == 0 {
			scanErr = errNoVolumeInfo // nothing in it to pass
		}
	}
	close(tasks)
	wg.Wait()
	close(stopFlusher)
	<-flusherDone

	if errors.Is(scanErr, errNoVolumeInfo) {
		r.warn(fmt.Sprintf("the tarball of backup %s is not in the store; DeleteItemActions were not called", backup))
		return nil
	}
	if fromVolumeInfo && scanErr == nil {
		r.warn(fmt.Sprintf("the tarball of backup %s is not in the store; DeleteItemActions got only the CSI snapshots its volume information names", backup))
	}
	if scanErr != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return r.fail(v1.DeletionError{Step: v1.DeletionStepItemActions, Message: scanErr.Error()})
	}
	if err := ctx.Err(); err != nil {
		return err
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	var failed, deferred int64
	for _, p := range progs {
		if !p.complete() {
			failed += p.failures
			deferred += p.deferred + p.abandoned
		}
	}
	if failed > 0 || deferred > 0 {
		msg := fmt.Sprintf("%d DeleteItemAction calls failed", failed)
		if deferred > 0 {
			msg += fmt.Sprintf("; %d more items are left to the next attempt", deferred)
		}
		return errors.New(msg)
	}
	return nil
}

// runTask passes one item to its actions, in name order.
func (r *run) runTask(ctx context.Context, t task, actions []*action, progs []*progress, waiting *sync.Cond, kick chan<- struct{}, bounded chan struct{}) {
	var raw *api.RawItem
	for _, i := range t.actions {
		a, p := actions[i], progs[i]
		// An attempt that is being stopped calls nothing new: what was
		// handed out but not called is left to the next attempt.
		if ctx.Err() != nil {
			r.mu.Lock()
			p.abandon(t.it.pos)
			waiting.Broadcast()
			r.mu.Unlock()
			continue
		}
		var item runtime.Unstructured
		if a.remote {
			// An out-of-process action gets the bytes as stored, never
			// decoded and re-encoded on the way.
			if raw == nil {
				raw = api.NewRawItem(t.it.data)
			}
			item = raw
		} else {
			// In-process actions are written against Unstructured, and
			// each gets its own copy to do with as it likes.
			item = api.NewRawItem(t.it.data).Unstructured()
		}
		var err error
		if a.unbounded() {
			err = execute(a, &api.DeleteItemActionExecuteInput{Item: item, Backup: r.in.Backup})
		} else {
			select {
			case bounded <- struct{}{}:
				err = execute(a, &api.DeleteItemActionExecuteInput{Item: item, Backup: r.in.Backup})
				<-bounded
			case <-ctx.Done():
				r.mu.Lock()
				p.abandon(t.it.pos)
				waiting.Broadcast()
				r.mu.Unlock()
				continue
			}
		}
		metrics.DeleteItemActionCalled(a.name, err)
		skipped := false
		if err != nil {
			de := v1.DeletionError{
				Step: v1.DeletionStepItemActions, Plugin: a.name, Resource: t.it.ref.GroupResource,
				Namespace: t.it.ref.Namespace, Name: t.it.ref.Name, Message: err.Error(),
			}
			if skipped = r.in.SkipFailedActions; skipped {
				r.skip(de)
			} else {
				r.log.Error("DeleteItemAction failed", "action", a.name, "resource", t.it.ref.GroupResource,
					"namespace", t.it.ref.Namespace, "name", t.it.ref.Name, "position", t.it.pos, "error", err)
				_ = r.fail(de)
			}
		}
		r.mu.Lock()
		if skipped {
			p.finishSkipped(t.it.pos)
		} else {
			p.finish(t.it.pos, err == nil)
		}
		r.dirty = true
		r.pending++
		full := r.pending >= r.e.checkpointItems()
		waiting.Broadcast()
		r.mu.Unlock()
		if full {
			select {
			case kick <- struct{}{}:
			default:
			}
		}
	}
}

// execute calls the action, turning a panic of an in-process action into
// its error: it runs on a worker goroutine, where a panic would take the
// whole server down.
func execute(a *action, in *api.DeleteItemActionExecuteInput) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("DeleteItemAction %s panicked: %v", a.name, p)
		}
	}()
	return a.impl.Execute(in)
}

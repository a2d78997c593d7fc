package deletion

import (
	"slices"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// DefaultWindow bounds how far past its first unfinished item an action is
// handed items, and so how many positions a checkpoint lists above its
// watermark.
const DefaultWindow = 1000

// admission is what may happen to an item an action has not done yet.
type admission int

const (
	// admitStart: pass the item now.
	admitStart admission = iota
	// admitWait: the item is too far past an item still in flight; wait
	// for that one to finish.
	admitWait
	// admitDefer: the item is too far past an item this attempt will not
	// finish (it failed); leave it to the next attempt.
	admitDefer
)

// progress follows one action (or the snapshot step) through the items of
// one attempt. Positions are the items' numbers in the tarball. It is not
// safe for concurrent use; the caller holds a lock.
//
// The invariant that keeps checkpoints small: an item is started only when
// it lies less than window positions past the watermark, so done positions
// above the watermark are always fewer than window. A failed item holds the
// watermark down for the rest of the attempt; items past it by window or
// more are deferred rather than waited for.
type progress struct {
	name   string
	window int64

	// watermark: every position below it is done.
	watermark int64
	// done holds done positions above the watermark.
	done map[int64]struct{}
	// inflight holds positions started and not yet finished.
	inflight map[int64]struct{}
	// held is the lowest position this attempt will not finish (it failed,
	// or it was started and then abandoned on cancellation); -1 when none.
	held int64
	// scanned: every position below it has been looked at in this attempt
	// (started, found done, or not meant for this action).
	scanned int64

	// succeeded counts successful calls, over all attempts.
	succeeded int64
	// failures counts failed calls in this attempt.
	failures int64
	// skipped counts failed calls gone past in this attempt (they count
	// as done, not as failures).
	skipped int64
	// deferred counts items left to the next attempt because of held.
	deferred int64
	// abandoned counts items started but never called (cancellation).
	abandoned int64
}

// newProgress resumes from cp (zero for a first attempt).
func newProgress(cp v1.DeletionProgress, window int64) *progress {
	if window <= 0 {
		window = DefaultWindow
	}
	p := &progress{
		name: cp.Name, window: window, watermark: max(cp.Watermark, 0),
		done: map[int64]struct{}{}, inflight: map[int64]struct{}{},
		held: -1, succeeded: cp.Succeeded,
	}
	for _, pos := range cp.Done {
		if pos >= p.watermark {
			p.done[pos] = struct{}{}
		}
	}
	p.recompute()
	return p
}

// isDone reports whether pos was done, in this attempt or an earlier one.
func (p *progress) isDone(pos int64) bool {
	if pos < p.watermark {
		return true
	}
	_, ok := p.done[pos]
	return ok
}

// admit decides about pos, an item not done yet and meant for this action.
func (p *progress) admit(pos int64) admission {
	if pos < p.watermark+p.window {
		return admitStart
	}
	// The watermark can rise as far as the held position and no further
	// in this attempt.
	if p.held >= 0 && pos >= p.held+p.window {
		return admitDefer
	}
	return admitWait
}

func (p *progress) start(pos int64) { p.inflight[pos] = struct{}{} }

// finish records the end of a call for pos.
func (p *progress) finish(pos int64, ok bool) {
	delete(p.inflight, pos)
	if ok {
		p.succeeded++
		p.done[pos] = struct{}{}
	} else {
		p.failures++
		p.hold(pos)
	}
	p.recompute()
}

// finishSkipped records a failed call for pos that the deletion goes
// past: pos is done, and never passed again.
func (p *progress) finishSkipped(pos int64) {
	delete(p.inflight, pos)
	p.skipped++
	p.done[pos] = struct{}{}
	p.recompute()
}

// abandon records that pos was started but will not be called in this
// attempt.
func (p *progress) abandon(pos int64) {
	delete(p.inflight, pos)
	p.abandoned++
	p.hold(pos)
	p.recompute()
}

// skip records that pos is left to the next attempt (admitDefer).
func (p *progress) skip() { p.deferred++ }

func (p *progress) hold(pos int64) {
	if p.held < 0 || pos < p.held {
		p.held = pos
	}
}

// scannedTo records that every position below pos has been looked at.
func (p *progress) scannedTo(pos int64) {
	if pos > p.scanned {
		p.scanned = pos
		p.recompute()
	}
}

// recompute moves the watermark to the lowest position not known done:
// one in flight, one held, or the first one past the scan that no earlier
// attempt did.
func (p *progress) recompute() {
	w := max(p.scanned, p.watermark)
	for {
		if _, ok := p.done[w]; !ok {
			break
		}
		w++
	}
	for pos := range p.inflight {
		w = min(w, pos)
	}
	if p.held >= 0 {
		w = min(w, p.held)
	}
	if w <= p.watermark {
		return
	}
	p.watermark = w
	for pos := range p.done {
		if pos < w {
			delete(p.done, pos)
		}
	}
}

// complete reports whether this attempt did everything it looked at.
func (p *progress) complete() bool {
	return p.held < 0 && p.deferred == 0 && p.abandoned == 0 && len(p.inflight) == 0
}

// checkpoint is what to persist.
func (p *progress) checkpoint() v1.DeletionProgress {
	cp := v1.DeletionProgress{Name: p.name, Watermark: p.watermark, Succeeded: p.succeeded}
	if len(p.done) > 0 {
		cp.Done = make([]int64, 0, len(p.done))
		for pos := range p.done {
			cp.Done = append(cp.Done, pos)
		}
		slices.Sort(cp.Done)
	}
	return cp
}

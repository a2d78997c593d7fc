package backup

import (
	"context"
	"sync"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// listJob is one LIST (all pages) the backup needs: a resource type, either
// cluster-wide or in one namespace.
type listJob struct {
	Type      resourceType
	Namespace string
	// Keep decides per item whether it belongs in the backup; nil keeps all.
	Keep func(rawItem) bool
	// LabelSelector is passed to the server so it filters before sending.
	LabelSelector string
	// Preloaded, when set, holds the job's items already: nothing is listed.
	Preloaded []rawItem
	// WriteIf, when set, is checked by the writer just before an item is
	// stored, after every earlier job has been written.
	WriteIf func(rawItem) bool
}

// pageOrErr is what a lister hands the writer: a page, or why it stopped.
type pageOrErr struct {
	page *page
	err  error
}

// collector runs list jobs concurrently, at most `window` at a time, and
// hands their pages to the caller strictly in job order, so the archive is
// deterministic while the API server is kept busy. Memory is bounded by the
// window: each job buffers at most bufferedPages pages.
type collector struct {
	lister pageLister
	window int
	// total estimates how many items the jobs will yield.
	total atomic.Int64
}

const bufferedPages = 2

// run calls consume for every page of every job, in order. A job whose LIST
// fails is reported to onListError and skipped; an error from consume stops
// everything and is returned.
func (c *collector) run(ctx context.Context, jobs []listJob, onListError func(listJob, error), consume func(listJob, *page) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	outputs := make([]chan pageOrErr, len(jobs))
	for i := range outputs {
		outputs[i] = make(chan pageOrErr, bufferedPages)
	}
	window := make(chan struct{}, max(c.window, 1))
	var wg sync.WaitGroup
	defer wg.Wait()
	// Jobs start in order and only while a slot in the window is free; the
	// consumer frees a slot when it has drained a job.
	go func() {
		for i, job := range jobs {
			select {
			case window <- struct{}{}:
			case <-ctx.Done():
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.produce(ctx, job, outputs[i])
			}()
		}
	}()

	for i, job := range jobs {
		if err := c.drain(ctx, job, outputs[i], onListError, consume); err != nil {
			return err
		}
		<-window
	}
	return nil
}

func (c *collector) drain(ctx context.Context, job listJob, out <-chan pageOrErr, onListError func(listJob, error), consume func(listJob, *page) error) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case pe, ok := <-out:
			if !ok {
				return nil
			}
			if pe.err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				onListError(job, pe.err)
				continue
			}
			if err := consume(job, pe.page); err != nil {
				return err
			}
		}
	}
}

func (c *collector) produce(ctx context.Context, job listJob, out chan<- pageOrErr) {
	defer close(out)
	if job.Preloaded != nil {
		c.total.Add(int64(len(job.Preloaded)))
		send(ctx, out, pageOrErr{page: &page{Items: job.Preloaded}})
		return
	}
	cont := ""
	first := true
	// estimate is what this job has added to the total; it only grows.
	var seen, estimate int64
	for {
		p, err := c.lister.list(ctx, job.Type, job.Namespace, job.LabelSelector, cont)
		if err != nil {
			// A type that vanished between discovery and the LIST (a CRD
			// deleted meanwhile) has nothing to back up; anything else is an
			// error the backup must report.
			if apierrors.IsNotFound(err) && first {
				return
			}
			send(ctx, out, pageOrErr{err: err})
			return
		}
		seen += int64(len(p.Items))
		want := seen
		if p.Remaining > 0 {
			want += p.Remaining
		}
		if want > estimate {
			c.total.Add(want - estimate)
			estimate = want
		}
		first = false
		if job.Keep != nil {
			kept := p.Items[:0]
			for _, it := range p.Items {
				if job.Keep(it) {
					kept = append(kept, it)
				}
			}
			p.Items = kept
		}
		if !send(ctx, out, pageOrErr{page: p}) || p.Continue == "" {
			return
		}
		cont = p.Continue
	}
}

func send(ctx context.Context, out chan<- pageOrErr, pe pageOrErr) bool {
	select {
	case out <- pe:
		return true
	case <-ctx.Done():
		return false
	}
}

// Package spill sorts more strings than memory should hold: they are
// kept in a chunk of bounded size, each full chunk sorted and written to a
// run file on local disk, and the runs merged when the strings are read
// back in order. Used where a backup or restore must remember something of
// every item (the resource list, which items an archive held) and memory
// must stay the same at any size.
package spill

import (
	"bufio"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
)

// DefaultChunkBytes bounds the strings held in memory before they are
// sorted and written out as a run. The server's own memory is about 70 MiB
// and a backup's growth should stay within a tenth of it, with the garbage
// collector's headroom on top: 1 MiB keeps a list of some 15,000 items in
// memory and makes a run of each further 15,000 (20 runs at 300,000).
const DefaultChunkBytes = 1 << 20

// readBufferBytes is each run's read buffer during the merge: small, since
// a merge reads all runs at once.
const readBufferBytes = 16 << 10

// Sorter collects strings and gives them back sorted. Not safe for
// concurrent use.
type Sorter struct {
	dir        string
	chunkBytes int
	chunk      []string
	held       int
	runs       []string
	err        error
	closed     bool
}

// New makes a sorter whose runs go to dir ("" is the system temp dir);
// chunkBytes <= 0 is DefaultChunkBytes. Close removes the runs.
func New(dir string, chunkBytes int) *Sorter {
	if chunkBytes <= 0 {
		chunkBytes = DefaultChunkBytes
	}
	return &Sorter{dir: dir, chunkBytes: chunkBytes}
}

// Add keeps s. A failure to spill to disk is kept: Sorted and Err return it.
func (s *Sorter) Add(str string) {
	if s.err != nil {
		return
	}
	s.chunk = append(s.chunk, str)
	// The string header is part of what the chunk holds.
	s.held += len(str) + 16
	if s.held >= s.chunkBytes {
		s.err = s.spill()
	}
}

// Fail records err as the sorter's, for a caller that found a string it
// cannot add: Sorted then returns it.
func (s *Sorter) Fail(err error) {
	if s.err == nil {
		s.err = err
	}
}

// Err is the first error of Add or Fail.
func (s *Sorter) Err() error { return s.err }

// Spilled is the number of runs written to disk.
func (s *Sorter) Spilled() int { return len(s.runs) }

// spill sorts the chunk and writes it to a run file of its own.
func (s *Sorter) spill() error {
	slices.Sort(s.chunk)
	f, err := os.CreateTemp(s.dir, "spill-run-")
	if err != nil {
		return fmt.Errorf("spilling to disk: %w", err)
	}
	s.runs = append(s.runs, f.Name())
	w := bufio.NewWriterSize(f, 64<<10)
	var lenBuf [binary.MaxVarintLen64]byte
	for _, rec := range s.chunk {
		n := binary.PutUvarint(lenBuf[:], uint64(len(rec)))
		if _, err := w.Write(lenBuf[:n]); err != nil {
			break
		}
		if _, err := w.WriteString(rec); err != nil {
			break
		}
	}
	err = errors.Join(w.Flush(), f.Close())
	if err != nil {
		return fmt.Errorf("spilling to %s: %w", f.Name(), err)
	}
	clear(s.chunk)
	s.chunk = s.chunk[:0]
	s.held = 0
	return nil
}

// Sorted yields every string added, in order: the in-memory chunk alone
// when nothing was spilled, else a k-way merge of the runs and the chunk.
// stop closes the runs' files; call it when done.
func (s *Sorter) Sorted() (next func() (string, bool, error), stop func(), err error) {
	if s.err != nil {
		return nil, nil, s.err
	}
	if s.closed {
		return nil, nil, errors.New("spill: sorter already closed")
	}
	slices.Sort(s.chunk)
	if len(s.runs) == 0 {
		src := &sliceSource{recs: s.chunk}
		return src.next, func() {}, nil
	}
	h := &mergeHeap{}
	var files []*os.File
	stop = func() {
		for _, f := range files {
			f.Close()
		}
	}
	for _, path := range s.runs {
		f, err := os.Open(path)
		if err != nil {
			stop()
			return nil, nil, fmt.Errorf("reading the run %s: %w", path, err)
		}
		files = append(files, f)
		if err := h.push(&runReader{r: bufio.NewReaderSize(f, readBufferBytes), path: path}); err != nil {
			stop()
			return nil, nil, err
		}
	}
	if err := h.push(&sliceSource{recs: s.chunk}); err != nil {
		stop()
		return nil, nil, err
	}
	return func() (string, bool, error) {
		if h.Len() == 0 {
			return "", false, nil
		}
		top := (*h)[0]
		rec := top.head
		rest, ok, err := top.src.next()
		switch {
		case err != nil:
			return "", false, err
		case ok:
			top.head = rest
			heap.Fix(h, 0)
		default:
			heap.Pop(h)
		}
		return rec, true, nil
	}, stop, nil
}

// Close removes the runs. The sorter cannot be read after.
func (s *Sorter) Close() error {
	s.closed = true
	var errs []error
	for _, path := range s.runs {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	s.runs, s.chunk = nil, nil
	return errors.Join(errs...)
}

type source interface {
	next() (string, bool, error)
}

type sliceSource struct {
	recs []string
	i    int
}

func (s *sliceSource) next() (string, bool, error) {
	if s.i == len(s.recs) {
		return "", false, nil
	}
	s.i++
	return s.recs[s.i-1], true, nil
}

// runReader reads a run file: each string its length as a uvarint, then
// its bytes. The file is the sorter's own, but a short read still says so
// rather than ending the strings early.
type runReader struct {
	r    *bufio.Reader
	path string
}

func (s *runReader) next() (string, bool, error) {
	n, err := binary.ReadUvarint(s.r)
	if errors.Is(err, io.EOF) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("reading the run %s: %w", s.path, err)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(s.r, buf); err != nil {
		return "", false, fmt.Errorf("reading the run %s: %w", s.path, err)
	}
	return string(buf), true, nil
}

type mergeItem struct {
	head string
	src  source
}

type mergeHeap []*mergeItem

func (h mergeHeap) Len() int           { return len(h) }
func (h mergeHeap) Less(i, j int) bool { return h[i].head < h[j].head }
func (h mergeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *mergeHeap) Push(x any)        { *h = append(*h, x.(*mergeItem)) }
func (h *mergeHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}

// push adds src to the merge with its first string, if it has one.
func (h *mergeHeap) push(src source) error {
	rec, ok, err := src.next()
	if err != nil || !ok {
		return err
	}
	heap.Push(h, &mergeItem{head: rec, src: src})
	return nil
}

// Package resourcelist builds the resource list a backup or restore stores
// beside its archive (Velero's `<name>-resource-list.json.gz`: a JSON object
// from "<group/version>/<Kind>" to the sorted list of "ns/name" entries)
// without holding the list in memory. A backup of 300,000 items would
// otherwise keep 300,000 strings alive until its end and then encode them
// all at once; here the entries go to sorted runs on local disk in chunks
// of bounded size, and are merged while the JSON is written, so memory
// stays the same at any size.
package resourcelist

import (
	"bufio"
	"container/heap"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// DefaultChunkBytes bounds the entries held in memory before they are
// sorted and written out as a run: a few MiB keeps a small backup's list
// entirely in memory and a large one's memory flat.
const DefaultChunkBytes = 4 << 20

// sep joins a record's key and entry. Kubernetes names, kinds and groups
// never hold a NUL, and NUL sorts before every other byte, so records sort
// by key first, then by entry: the order the file wants.
const sep = "\x00"

// List collects entries and writes them as the resource list. Not safe for
// concurrent use.
type List struct {
	dir        string
	chunkBytes int
	chunk      []string
	held       int
	runs       []string
	err        error
	closed     bool
}

// New makes a list whose runs go to dir ("" is the system temp dir). Close
// removes them.
func New(dir string) *List {
	return &List{dir: dir, chunkBytes: DefaultChunkBytes}
}

// Add records entry ("ns/name", or "name" for cluster-scoped items, with
// whatever suffix the file's writer uses) under key ("v1/ConfigMap"). A
// failure to spill to disk is kept and returned by WriteJSON.
func (l *List) Add(key, entry string) {
	if l.err != nil {
		return
	}
	if strings.Contains(key, sep) || strings.Contains(entry, sep) {
		l.err = fmt.Errorf("resource list entry %q of %q holds a NUL byte", entry, key)
		return
	}
	rec := key + sep + entry
	l.chunk = append(l.chunk, rec)
	// The string header is part of what the chunk holds.
	l.held += len(rec) + 16
	if l.held >= l.chunkBytes {
		l.err = l.spill()
	}
}

// spill sorts the chunk and writes it to a run file of its own.
func (l *List) spill() error {
	slices.Sort(l.chunk)
	f, err := os.CreateTemp(l.dir, "resource-list-run-")
	if err != nil {
		return fmt.Errorf("spilling the resource list: %w", err)
	}
	l.runs = append(l.runs, f.Name())
	w := bufio.NewWriterSize(f, 64<<10)
	var lenBuf [binary.MaxVarintLen64]byte
	for _, rec := range l.chunk {
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
		return fmt.Errorf("spilling the resource list to %s: %w", f.Name(), err)
	}
	clear(l.chunk)
	l.chunk = l.chunk[:0]
	l.held = 0
	return nil
}

// WriteJSON writes the list as JSON to w, keys and each key's entries
// sorted, as encoding/json writes a map[string][]string (the same bytes,
// trailing newline included). An empty list is `{}`.
func (l *List) WriteJSON(w io.Writer) error {
	if l.err != nil {
		return l.err
	}
	if l.closed {
		return errors.New("resource list already closed")
	}
	next, stop, err := l.merged()
	if err != nil {
		return err
	}
	defer stop()
	bw := bufio.NewWriterSize(w, 64<<10)
	key, first := "", true
	for {
		rec, ok, err := next()
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		k, entry, _ := strings.Cut(rec, sep)
		switch {
		case first:
			bw.WriteString("{")
			writeString(bw, k)
			bw.WriteString(":[")
		case k != key:
			bw.WriteString("],")
			writeString(bw, k)
			bw.WriteString(":[")
		default:
			bw.WriteString(",")
		}
		writeString(bw, entry)
		key, first = k, false
	}
	if first {
		bw.WriteString("{}\n")
	} else {
		bw.WriteString("]}\n")
	}
	return bw.Flush()
}

// writeString writes s as encoding/json quotes it (HTML characters
// escaped too), so the file is byte for byte what json.Marshal would make.
func writeString(w *bufio.Writer, s string) {
	b, _ := json.Marshal(s)
	w.Write(b)
}

// merged yields every record in order: the in-memory chunk alone when
// nothing was spilled, else a k-way merge of the runs and the chunk.
func (l *List) merged() (next func() (string, bool, error), stop func(), err error) {
	slices.Sort(l.chunk)
	if len(l.runs) == 0 {
		i := 0
		return func() (string, bool, error) {
			if i == len(l.chunk) {
				return "", false, nil
			}
			i++
			return l.chunk[i-1], true, nil
		}, func() {}, nil
	}
	h := &mergeHeap{}
	var files []*os.File
	stop = func() {
		for _, f := range files {
			f.Close()
		}
	}
	for _, path := range l.runs {
		f, err := os.Open(path)
		if err != nil {
			stop()
			return nil, nil, fmt.Errorf("reading the resource list's run %s: %w", path, err)
		}
		files = append(files, f)
		src := &runReader{r: bufio.NewReaderSize(f, 64<<10), path: path}
		if err := h.push(src); err != nil {
			stop()
			return nil, nil, err
		}
	}
	if err := h.push(&sliceSource{recs: l.chunk}); err != nil {
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

// FromMap is a list of m's entries, for writers that have the whole list
// at hand already (tests, fixtures).
func FromMap(m map[string][]string) *List {
	l := New("")
	for k, entries := range m {
		for _, e := range entries {
			l.Add(k, e)
		}
	}
	return l
}

// Close removes the runs. The list cannot be written after.
func (l *List) Close() error {
	l.closed = true
	var errs []error
	for _, path := range l.runs {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	l.runs, l.chunk = nil, nil
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

// runReader reads a run file: each record its length as a uvarint, then
// its bytes. The file is the list's own, but a short read still says so
// rather than ending the list early.
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
		return "", false, fmt.Errorf("reading the resource list's run %s: %w", s.path, err)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(s.r, buf); err != nil {
		return "", false, fmt.Errorf("reading the resource list's run %s: %w", s.path, err)
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

// push adds src to the merge with its first record, if it has one.
func (h *mergeHeap) push(src source) error {
	rec, ok, err := src.next()
	if err != nil || !ok {
		return err
	}
	heap.Push(h, &mergeItem{head: rec, src: src})
	return nil
}

package restore

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/lifeboat-io/lifeboat/internal/archive"
	"github.com/lifeboat-io/lifeboat/internal/spill"
)

// spooledItem is one item of the backup, as stored: its identity as its
// archive path gives it (which the restore's filters judged), the path
// itself for messages, and the JSON, which is checked against the path
// before anything is done with it.
type spooledItem struct {
	Namespace string
	Name      string
	// Version is the path's version directory; empty for the unversioned copy.
	Version string
	Path    string
	JSON    []byte
	// seq numbers the item's copy in the archive (copies next to each
	// other share one): how a later copy of an item is known to skip.
	seq uint64
}

// spool holds the items of one archive on local disk, one file per resource
// type, so a restore can create them in priority order after reading the
// archive once. Only the restore's own temp dir is ever written; paths come
// from sequence numbers, never from the archive.
type spool struct {
	dir   string
	types map[string]*spoolFile
	// keys holds "<key>\x00<seq><mark>" (mark "s" when spooled) of every
	// item copy that did not follow a copy of the same item, sorted on
	// disk: an archive holds the unversioned and the preferred-version
	// copy of each item, side by side in both Lifeboat's and Velero's
	// archives, and only the first copy is restored. Remembering every key in memory would grow with
	// the backup; side-by-side copies are told apart by the previous key,
	// and the sort finds the rest (an archive made otherwise).
	keys *spill.Sorter
	// skip are the seqs of later copies of items, found by the sort once
	// the archive is read; skipped counts them per type.
	skip    map[uint64]bool
	skipped map[string]int
	// index, when not nil, finds an item by key for random access (restore
	// item actions name additional items to restore first).
	index map[string]spoolRef
}

type spoolRef struct {
	gr     string
	offset int64
}

type spoolFile struct {
	path  string
	f     *os.File
	w     *bufio.Writer
	count int
	size  int64
}

// newSpool makes the spool's directory in workDir, the server's work
// directory (see internal/workdir), so that a spool a killed server left
// is removed when the next one starts.
func newSpool(workDir string) (*spool, error) {
	dir, err := os.MkdirTemp(workDir, "restore-spool-")
	if err != nil {
		return nil, fmt.Errorf("creating the restore's temp dir: %w", err)
	}
	return &spool{dir: dir, types: map[string]*spoolFile{}, keys: spill.New(dir, 0), skip: map[uint64]bool{}, skipped: map[string]int{}}, nil
}

func (s *spool) close() error { return errors.Join(s.keys.Close(), os.RemoveAll(s.dir)) }

// filter decides per archived item whether it is restored.
type filter func(ref archive.ItemRef, data []byte) (bool, error)

// fill reads the archive and spools the items keep accepts. The first copy
// of an item wins: the unversioned copy comes first in both Lifeboat's and
// Velero's archives, and both copies hold the same object. The later
// copies are left out as they come when they follow a copy of the same
// item, and found once the archive is read (findLaterCopies) otherwise.
func (s *spool) fill(r io.Reader, limits archive.Limits, keep filter) error {
	ar, err := archive.NewReader(r, limits)
	if err != nil {
		return err
	}
	var prevKey string
	var seq uint64
	for {
		e, err := ar.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if e.Item == nil {
			continue
		}
		ref := *e.Item
		key := itemKey(ref.GroupResource, ref.Namespace, ref.Name)
		if key == prevKey {
			continue
		}
		prevKey = key
		seq++
		ok, err := keep(ref, e.Data)
		if err != nil {
			return fmt.Errorf("archive entry %q: %w", e.Path, err)
		}
		// The mark says whether this copy was spooled: only those need
		// skipping, and count in the total.
		mark := "-"
		if ok {
			mark = "s"
		}
		s.keys.Add(key + "\x00" + fmt.Sprintf("%016x", seq) + mark)
		if !ok {
			continue
		}
		if err := s.add(ref, e.Path, e.Data, seq); err != nil {
			return err
		}
	}
	for gr, sf := range s.types {
		if err := sf.w.Flush(); err != nil {
			return fmt.Errorf("spooling %s: %w", gr, err)
		}
	}
	return s.findLaterCopies()
}

// findLaterCopies marks every copy of an item after its first for
// skipping (those spooled). Keys hold no NUL and seqs are fixed-width hex,
// so the sort puts one item's copies together, first copy first.
func (s *spool) findLaterCopies() error {
	next, stop, err := s.keys.Sorted()
	if err != nil {
		return fmt.Errorf("finding repeated items in the archive: %w", err)
	}
	defer stop()
	prev := ""
	for {
		rec, ok, err := next()
		if err != nil {
			return fmt.Errorf("finding repeated items in the archive: %w", err)
		}
		if !ok {
			return nil
		}
		key, seqMark, _ := strings.Cut(rec, "\x00")
		if key != prev {
			prev = key
			continue
		}
		if len(seqMark) != 17 {
			return fmt.Errorf("finding repeated items in the archive: malformed record %q", rec)
		}
		if seqMark[16] != 's' {
			continue // a later copy the filters left out anyway
		}
		seq, err := strconv.ParseUint(seqMark[:16], 16, 64)
		if err != nil {
			return fmt.Errorf("finding repeated items in the archive: %w", err)
		}
		s.skip[seq] = true
		gr, _, _ := strings.Cut(key, "/")
		s.skipped[gr]++
	}
}

func (s *spool) add(ref archive.ItemRef, path string, data []byte, seq uint64) error {
	sf, ok := s.types[ref.GroupResource]
	if !ok {
		path := filepath.Join(s.dir, strconv.Itoa(len(s.types)))
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
		if err != nil {
			return fmt.Errorf("spooling %s: %w", ref.GroupResource, err)
		}
		sf = &spoolFile{path: path, f: f, w: bufio.NewWriterSize(f, 256<<10)}
		s.types[ref.GroupResource] = sf
	}
	sf.count++
	if s.index != nil {
		// The first copy wins here too.
		key := itemKey(ref.GroupResource, ref.Namespace, ref.Name)
		if _, ok := s.index[key]; !ok {
			s.index[key] = spoolRef{gr: ref.GroupResource, offset: sf.size}
		}
	}
	var seqField [binary.MaxVarintLen64]byte
	seqLen := binary.PutUvarint(seqField[:], seq)
	for _, field := range [][]byte{[]byte(ref.Namespace), []byte(ref.Name), []byte(ref.Version), []byte(path), data, seqField[:seqLen]} {
		var n [binary.MaxVarintLen64]byte
		nn := binary.PutUvarint(n[:], uint64(len(field)))
		if _, err := sf.w.Write(n[:nn]); err != nil {
			return fmt.Errorf("spooling %s: %w", ref.GroupResource, err)
		}
		if _, err := sf.w.Write(field); err != nil {
			return fmt.Errorf("spooling %s: %w", ref.GroupResource, err)
		}
		sf.size += int64(nn + len(field))
	}
	return nil
}

func itemKey(gr, ns, name string) string { return gr + "/" + ns + "/" + name }

// lookup reads one item by key; ok is false when the archive lacks it. It
// is safe to call while each runs: it reads with ReadAt, not the shared
// file offset.
func (s *spool) lookup(gr, ns, name string) (spooledItem, bool, error) {
	ref, ok := s.index[itemKey(gr, ns, name)]
	if !ok {
		return spooledItem{}, false, nil
	}
	sf := s.types[ref.gr]
	br := bufio.NewReader(io.NewSectionReader(sf.f, ref.offset, sf.size-ref.offset))
	it, err := readRecord(br)
	if err != nil {
		return spooledItem{}, false, fmt.Errorf("reading spooled %s: %w", gr, err)
	}
	if s.skip[it.seq] {
		// A later copy, spooled while the first was filtered out.
		return spooledItem{}, false, nil
	}
	return it, true, nil
}

func readRecord(br *bufio.Reader) (spooledItem, error) {
	var fields [6][]byte
	for i := range fields {
		n, err := binary.ReadUvarint(br)
		if err != nil {
			return spooledItem{}, err
		}
		fields[i] = make([]byte, n)
		if _, err := io.ReadFull(br, fields[i]); err != nil {
			return spooledItem{}, err
		}
	}
	seq, n := binary.Uvarint(fields[5])
	if n <= 0 {
		return spooledItem{}, errors.New("a spooled record without its sequence number")
	}
	return spooledItem{Namespace: string(fields[0]), Name: string(fields[1]), Version: string(fields[2]), Path: string(fields[3]), JSON: fields[4], seq: seq}, nil
}

// groupResources lists the spooled types, sorted.
func (s *spool) groupResources() []string {
	out := make([]string, 0, len(s.types))
	for gr := range s.types {
		out = append(out, gr)
	}
	sort.Strings(out)
	return out
}

func (s *spool) total() int {
	n := 0
	for gr, sf := range s.types {
		n += sf.count - s.skipped[gr]
	}
	return n
}

// each calls fn for every spooled item of gr, in archive order.
func (s *spool) each(gr string, fn func(spooledItem) error) error {
	sf, ok := s.types[gr]
	if !ok {
		return nil
	}
	br := bufio.NewReaderSize(io.NewSectionReader(sf.f, 0, sf.size), 256<<10)
	for range sf.count {
		it, err := readRecord(br)
		if err != nil {
			return fmt.Errorf("reading spooled %s: %w", gr, err)
		}
		if s.skip[it.seq] {
			continue
		}
		if err := fn(it); err != nil {
			return err
		}
	}
	return nil
}

// itemHead is what the filters read of an item: its kind and labels.
type itemHead struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
}

func readHead(data []byte) (itemHead, error) {
	var head itemHead
	if err := json.Unmarshal(data, &head); err != nil {
		return head, fmt.Errorf("decoding item: %w", err)
	}
	return head, nil
}

// itemLabels reads an item's labels for label-selector filtering.
func itemLabels(data []byte) (map[string]string, error) {
	var head struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("decoding item: %w", err)
	}
	return head.Metadata.Labels, nil
}

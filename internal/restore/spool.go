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

	"github.com/lifeboat-io/lifeboat/internal/archive"
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
}

// spool holds the items of one archive on local disk, one file per resource
// type, so a restore can create them in priority order after reading the
// archive once. Only the restore's own temp dir is ever written; paths come
// from sequence numbers, never from the archive.
type spool struct {
	dir   string
	types map[string]*spoolFile
	// seen remembers the items already spooled: an archive holds the
	// unversioned and the preferred-version copy of each item.
	seen map[string]struct{}
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
	return &spool{dir: dir, types: map[string]*spoolFile{}, seen: map[string]struct{}{}}, nil
}

func (s *spool) close() error { return os.RemoveAll(s.dir) }

// filter decides per archived item whether it is restored.
type filter func(ref archive.ItemRef, data []byte) (bool, error)

// fill reads the archive and spools the items keep accepts. The first copy
// of an item wins: the unversioned copy comes first in both Lifeboat's and
// Velero's archives, and both copies hold the same object.
func (s *spool) fill(r io.Reader, limits archive.Limits, keep filter) error {
	ar, err := archive.NewReader(r, limits)
	if err != nil {
		return err
	}
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
		key := ref.GroupResource + "/" + ref.Namespace + "/" + ref.Name
		if _, dup := s.seen[key]; dup {
			continue
		}
		s.seen[key] = struct{}{}
		ok, err := keep(ref, e.Data)
		if err != nil {
			return fmt.Errorf("archive entry %q: %w", e.Path, err)
		}
		if !ok {
			continue
		}
		if err := s.add(ref, e.Path, e.Data); err != nil {
			return err
		}
	}
	for gr, sf := range s.types {
		if err := sf.w.Flush(); err != nil {
			return fmt.Errorf("spooling %s: %w", gr, err)
		}
	}
	return nil
}

func (s *spool) add(ref archive.ItemRef, path string, data []byte) error {
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
		s.index[itemKey(ref.GroupResource, ref.Namespace, ref.Name)] = spoolRef{gr: ref.GroupResource, offset: sf.size}
	}
	for _, field := range [][]byte{[]byte(ref.Namespace), []byte(ref.Name), []byte(ref.Version), []byte(path), data} {
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
	return it, true, nil
}

func readRecord(br *bufio.Reader) (spooledItem, error) {
	var fields [5][]byte
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
	return spooledItem{Namespace: string(fields[0]), Name: string(fields[1]), Version: string(fields[2]), Path: string(fields[3]), JSON: fields[4]}, nil
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
	for _, sf := range s.types {
		n += sf.count
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

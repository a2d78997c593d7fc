// Package backupdiff compares two backups item by item: which items one
// has and the other does not, and which differ, by the digest of each
// item's stored JSON. Both backups' items are sorted on local disk
// (internal/spill) and merged, so memory stays the same at any size. The
// items come from a backup's item digests file when it has one, or from
// its tarball, hashed as it streams by (Velero's backups, older ones).
package backupdiff

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/klauspost/compress/gzip"

	"github.com/lifeboat-io/lifeboat/internal/archive"
	"github.com/lifeboat-io/lifeboat/internal/spill"
)

// Item is one item of a backup: Key names it ("configmaps shop/settings",
// "namespaces shop"), SHA256 is the digest of its stored JSON.
type Item struct {
	Key    string
	SHA256 string
	// Copy ranks the tarball's copies of one item (copyRank); the best
	// ranked is the one compared.
	Copy byte
}

// Source hands a backup's items to yield, in any order.
type Source func(yield func(Item) error) error

// Key names an item as the diff and the restore dry run print it:
// "resource.group namespace/name", or "resource.group name" at cluster
// scope.
func Key(ref archive.ItemRef) string {
	if ref.Namespace == "" {
		return ref.GroupResource + " " + ref.Name
	}
	return ref.GroupResource + " " + ref.Namespace + "/" + ref.Name
}

// copyRank orders the copies of one item in a tarball: the unversioned
// copy is the item, the preferred-version copy stands in when there is
// none, other version directories last.
func copyRank(ref archive.ItemRef, preferred bool) byte {
	switch {
	case ref.Version == "":
		return 0
	case preferred:
		return 1
	default:
		return 2
	}
}

// maxDigestLine bounds one line of an item digests file: a path of a few
// hundred bytes and a digest.
const maxDigestLine = 8 << 10

// FromItemDigests reads a backup's item digests file (gzipped JSON lines
// of path, sha256 and size, in tarball order). Lines for entries that are
// not items (metadata/version) are passed over; a line that is not what
// the backup writes is an error naming its number.
func FromItemDigests(r io.Reader) Source {
	return func(yield func(Item) error) error {
		gz, err := gzip.NewReader(r)
		if err != nil {
			return fmt.Errorf("reading the item digests: %w", err)
		}
		defer gz.Close()
		sc := bufio.NewScanner(gz)
		sc.Buffer(make([]byte, 0, 4096), maxDigestLine)
		for n := 1; sc.Scan(); n++ {
			var line struct {
				Path   string `json:"path"`
				SHA256 string `json:"sha256"`
			}
			if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
				return fmt.Errorf("item digests line %d: %w", n, err)
			}
			if sum, err := hex.DecodeString(line.SHA256); err != nil || len(sum) != sha256.Size {
				return fmt.Errorf("item digests line %d: sha256 %q is not a hex SHA-256", n, line.SHA256)
			}
			ref, preferred, ok := archive.ParseItemPath(line.Path)
			if !ok {
				continue
			}
			if err := yield(Item{Key: Key(ref), SHA256: line.SHA256, Copy: copyRank(ref, preferred)}); err != nil {
				return err
			}
		}
		if err := sc.Err(); err != nil {
			return fmt.Errorf("reading the item digests: %w", err)
		}
		return nil
	}
}

// FromTarball hashes every item of a backup's tarball as it streams by,
// held to limits as a restore holds it.
func FromTarball(r io.Reader, limits archive.Limits) Source {
	return func(yield func(Item) error) error {
		ar, err := archive.NewReader(r, limits)
		if err != nil {
			return fmt.Errorf("reading the tarball: %w", err)
		}
		for {
			e, err := ar.Next()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("reading the tarball: %w", err)
			}
			if e.Item == nil {
				continue
			}
			sum := sha256.Sum256(e.Data)
			if err := yield(Item{Key: Key(*e.Item), SHA256: hex.EncodeToString(sum[:]), Copy: copyRank(*e.Item, e.PreferredVersionCopy)}); err != nil {
				return err
			}
		}
	}
}

// ChangeKind says how an item differs between the two backups.
type ChangeKind string

// The kinds of change.
const (
	Added   ChangeKind = "added"
	Removed ChangeKind = "removed"
	Changed ChangeKind = "changed"
)

// Change is one item that differs.
type Change struct {
	Kind ChangeKind
	Key  string
}

// Result counts the items by how they compare.
type Result struct {
	Added, Removed, Changed, Unchanged int64
}

// Diff compares the items of a (the older backup) with those of b and
// hands each difference to emit, in key order. workDir holds the sorted
// runs ("" is the system temporary directory).
func Diff(a, b Source, workDir string, emit func(Change) error) (Result, error) {
	sa, err := sorted(a, workDir)
	if err != nil {
		return Result{}, fmt.Errorf("the first backup: %w", err)
	}
	defer sa.close()
	sb, err := sorted(b, workDir)
	if err != nil {
		return Result{}, fmt.Errorf("the second backup: %w", err)
	}
	defer sb.close()

	var res Result
	ia, err := sa.next()
	if err != nil {
		return res, fmt.Errorf("the first backup: %w", err)
	}
	ib, err := sb.next()
	if err != nil {
		return res, fmt.Errorf("the second backup: %w", err)
	}
	for ia != nil || ib != nil {
		var c Change
		switch {
		case ib == nil || (ia != nil && ia.key < ib.key):
			c = Change{Kind: Removed, Key: ia.key}
			res.Removed++
			ia, err = sa.next()
		case ia == nil || ib.key < ia.key:
			c = Change{Kind: Added, Key: ib.key}
			res.Added++
			ib, err = sb.next()
		default:
			if ia.sum != ib.sum {
				c = Change{Kind: Changed, Key: ia.key}
				res.Changed++
			} else {
				res.Unchanged++
			}
			if ia, err = sa.next(); err == nil {
				ib, err = sb.next()
			}
		}
		if err != nil {
			return res, err
		}
		if c.Kind != "" {
			if err := emit(c); err != nil {
				return res, err
			}
		}
	}
	return res, nil
}

// sortedItems reads a sorter's records back one item at a time: the
// first copy of each key (the best ranked), its other copies passed over.
type sortedItems struct {
	sorter  *spill.Sorter
	read    func() (string, bool, error)
	stop    func()
	pending *record
}

type record struct{ key, sum string }

// The fields of a sorted record: the key sorts first, then the copy's
// rank, so the first record of a key is its best copy. Keys are archive
// path segments, which hold no NUL.
const sep = "\x00"

// chunkBytes is the sorters' in-memory chunk (0: spill's default); tests
// make it small to exercise the merge of runs.
var chunkBytes = 0

func sorted(src Source, workDir string) (*sortedItems, error) {
	s := spill.New(workDir, chunkBytes)
	err := src(func(it Item) error {
		s.Add(it.Key + sep + string('0'+it.Copy) + sep + it.SHA256)
		return s.Err()
	})
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	next, stop, err := s.Sorted()
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	return &sortedItems{sorter: s, read: next, stop: stop}, nil
}

func parseRecord(rec string) (record, error) {
	parts := strings.Split(rec, sep)
	if len(parts) != 3 {
		return record{}, fmt.Errorf("a sorted record has %d fields", len(parts))
	}
	return record{key: parts[0], sum: parts[2]}, nil
}

// next returns the next item, nil at the end.
func (s *sortedItems) next() (*record, error) {
	cur := s.pending
	s.pending = nil
	if cur == nil {
		rec, ok, err := s.read()
		if err != nil || !ok {
			return nil, err
		}
		r, err := parseRecord(rec)
		if err != nil {
			return nil, err
		}
		cur = &r
	}
	for {
		rec, ok, err := s.read()
		if err != nil {
			return nil, err
		}
		if !ok {
			return cur, nil
		}
		r, err := parseRecord(rec)
		if err != nil {
			return nil, err
		}
		if r.key != cur.key {
			s.pending = &r
			return cur, nil
		}
	}
}

func (s *sortedItems) close() {
	s.stop()
	_ = s.sorter.Close()
}

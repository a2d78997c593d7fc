// Package resourcelist builds the resource list a backup or restore stores
// beside its archive (Velero's `<name>-resource-list.json.gz`: a JSON object
// from "<group/version>/<Kind>" to the sorted list of "ns/name" entries)
// without holding the list in memory. A backup of 300,000 items would
// otherwise keep 300,000 strings alive until its end and then encode them
// all at once; here the entries are sorted on local disk (internal/spill)
// and written as they come out of the merge.
package resourcelist

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/lifeboat-io/lifeboat/internal/spill"
)

// sep joins a record's key and entry. Kubernetes names, kinds and groups
// never hold a NUL, and NUL sorts before every other byte, so records sort
// by key first, then by entry: the order the file wants.
const sep = "\x00"

// List collects entries and writes them as the resource list. Not safe for
// concurrent use.
type List struct {
	sorted *spill.Sorter
}

// New makes a list that spills to dir ("" is the system temp dir). Close
// removes what it spilled.
func New(dir string) *List { return newList(dir, 0) }

func newList(dir string, chunkBytes int) *List {
	return &List{sorted: spill.New(dir, chunkBytes)}
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

// Add records entry ("ns/name", or "name" for cluster-scoped items, with
// whatever suffix the file's writer uses) under key ("v1/ConfigMap"). A
// failure to spill to disk is kept and returned by WriteJSON.
func (l *List) Add(key, entry string) {
	if strings.Contains(key, sep) || strings.Contains(entry, sep) {
		l.sorted.Fail(fmt.Errorf("resource list entry %q of %q holds a NUL byte", entry, key))
		return
	}
	l.sorted.Add(key + sep + entry)
}

// WriteJSON writes the list as JSON to w, keys and each key's entries
// sorted, as encoding/json writes a map[string][]string (the same bytes,
// trailing newline included). An empty list is `{}`.
func (l *List) WriteJSON(w io.Writer) error {
	next, stop, err := l.sorted.Sorted()
	if err != nil {
		return fmt.Errorf("resource list: %w", err)
	}
	defer stop()
	bw := bufio.NewWriterSize(w, 64<<10)
	// A bufio.Writer keeps its first error and Flush returns it, so the
	// writes below need no checks of their own.
	put := func(s string) { _, _ = bw.WriteString(s) }
	key, first := "", true
	for {
		rec, ok, err := next()
		if err != nil {
			return fmt.Errorf("resource list: %w", err)
		}
		if !ok {
			break
		}
		k, entry, _ := strings.Cut(rec, sep)
		switch {
		case first:
			put("{")
			put(quoted(k))
			put(":[")
		case k != key:
			put("],")
			put(quoted(k))
			put(":[")
		default:
			put(",")
		}
		put(quoted(entry))
		key, first = k, false
	}
	if first {
		put("{}\n")
	} else {
		put("]}\n")
	}
	return bw.Flush()
}

// quoted is s as encoding/json quotes it (HTML characters escaped too),
// so the file is byte for byte what json.Marshal would make. Kubernetes
// names and kinds need no escaping, and json.Marshal of every entry was
// most of the time a backup's resource list took to write.
func quoted(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s)
			return string(b)
		}
	}
	return `"` + s + `"`
}

// Close removes what the list spilled. It cannot be written after.
func (l *List) Close() error { return l.sorted.Close() }

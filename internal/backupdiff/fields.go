package backupdiff

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"slices"
	"strconv"

	"github.com/lifeboat-io/lifeboat/internal/archive"
)

// ErrItemNotFound says a tarball holds no copy of the item asked for.
var ErrItemNotFound = errors.New("the backup holds no such item")

// FindItem streams a tarball and returns the stored JSON of the item key
// names (its unversioned copy, or the best-ranked copy there is).
func FindItem(r io.Reader, limits archive.Limits, key string) ([]byte, error) {
	ar, err := archive.NewReader(r, limits)
	if err != nil {
		return nil, fmt.Errorf("reading the tarball: %w", err)
	}
	var best []byte
	bestRank := byte(255)
	for {
		e, err := ar.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading the tarball: %w", err)
		}
		if e.Item == nil || Key(*e.Item) != key {
			continue
		}
		if rank := copyRank(*e.Item, e.PreferredVersionCopy); rank < bestRank {
			best, bestRank = e.Data, rank
			if rank == 0 {
				break
			}
		}
	}
	if best == nil {
		return nil, ErrItemNotFound
	}
	return best, nil
}

// FieldChange is one field that differs between two versions of an item.
// Old is nil for an added field, New for a removed one.
type FieldChange struct {
	// Path names the field as kubectl's JSONPath-like notation does:
	// data.greeting, spec.containers[0].image,
	// metadata.labels["app.kubernetes.io/name"].
	Path     string
	Kind     ChangeKind
	Old, New any
}

// Fields lists the fields that differ between a and b (decoded items),
// in path order. Lists are compared entry by entry, by index.
func Fields(a, b map[string]any) []FieldChange {
	var out []FieldChange
	diffValue("", a, b, true, true, &out)
	return out
}

func diffValue(path string, a, b any, hasA, hasB bool, out *[]FieldChange) {
	switch {
	case !hasA:
		*out = append(*out, FieldChange{Path: path, Kind: Added, New: b})
		return
	case !hasB:
		*out = append(*out, FieldChange{Path: path, Kind: Removed, Old: a})
		return
	}
	ma, okA := a.(map[string]any)
	mb, okB := b.(map[string]any)
	if okA && okB {
		keys := make([]string, 0, len(ma)+len(mb))
		for k := range ma {
			keys = append(keys, k)
		}
		for k := range mb {
			if _, ok := ma[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			va, inA := ma[k]
			vb, inB := mb[k]
			diffValue(memberPath(path, k), va, vb, inA, inB, out)
		}
		return
	}
	la, okA := a.([]any)
	lb, okB := b.([]any)
	if okA && okB {
		for i := range max(len(la), len(lb)) {
			var va, vb any
			if i < len(la) {
				va = la[i]
			}
			if i < len(lb) {
				vb = lb[i]
			}
			diffValue(path+"["+strconv.Itoa(i)+"]", va, vb, i < len(la), i < len(lb), out)
		}
		return
	}
	if !reflect.DeepEqual(a, b) {
		*out = append(*out, FieldChange{Path: path, Kind: Changed, Old: a, New: b})
	}
}

// plainName is a member name that reads unambiguously after a dot.
var plainName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

func memberPath(parent, name string) string {
	if !plainName.MatchString(name) {
		return parent + "[" + strconv.Quote(name) + "]"
	}
	if parent == "" {
		return name
	}
	return parent + "." + name
}

// Package pluginhost finds, starts and supervises plugin processes, and
// hands out plugins of every kind as plain Go interfaces (pkg/plugin/api).
// Built-in plugins and external binaries look the same to callers: both are
// entries of one registry, looked up by kind and name.
package pluginhost

import (
	"fmt"
	"sort"

	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

// BuiltIn marks entries served inside the server process.
const BuiltIn = "(built-in)"

// Entry is one plugin the server can run.
type Entry struct {
	Kind api.Kind
	Name string
	// Binary is the plugin's executable, or BuiltIn.
	Binary string
}

type key struct {
	kind api.Kind
	name string
}

// registry maps kind and name to the entry serving it.
type registry struct {
	entries map[key]Entry
}

func newRegistry() *registry { return &registry{entries: map[key]Entry{}} }

// add registers e; a second plugin of the same kind and name is an error
// naming both binaries, since the server could not know which to run. The
// one exception: a plugin binary may replace a built-in (a user who keeps
// Velero's AWS plugin gets that plugin), which it reports.
func (r *registry) add(e Entry) (replaced *Entry, err error) {
	k := key{e.Kind, e.Name}
	if prev, ok := r.entries[k]; ok {
		if prev.Binary != BuiltIn || e.Binary == BuiltIn {
			return nil, fmt.Errorf("%s plugin %q is provided twice: by %s and by %s; remove one of them from the plugin directory", e.Kind, e.Name, prev.Binary, e.Binary)
		}
		replaced = &prev
	}
	r.entries[k] = e
	return replaced, nil
}

// get finds a plugin by kind and name; a name without "/" also finds the
// velero.io/ plugin of that name, as in Velero.
func (r *registry) get(kind api.Kind, name string) (Entry, bool) {
	if e, ok := r.entries[key{kind, name}]; ok {
		return e, true
	}
	e, ok := r.entries[key{kind, api.NormalizeName(name)}]
	return e, ok
}

// list returns the entries: built-ins first, then by kind and name.
func (r *registry) list() []Entry {
	out := make([]Entry, 0, len(r.entries))
	for _, e := range r.entries {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if (a.Binary == BuiltIn) != (b.Binary == BuiltIn) {
			return a.Binary == BuiltIn
		}
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		return a.Name < b.Name
	})
	return out
}

// ofKind returns the entries of one kind, in list order.
func (r *registry) ofKind(kind api.Kind) []Entry {
	var out []Entry
	for _, e := range r.list() {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

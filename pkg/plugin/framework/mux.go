package framework

import (
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strings"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

// initializer creates the implementation of one plugin.
type initializer func(*slog.Logger) (any, error)

// mux holds the plugins of one kind that this process serves. Requests name
// their plugin, and the mux finds it, creating its implementation on the
// first request and reusing it after: a binary may hold many plugins and a
// backup may need only one of them.
//
// Plugins are registered before serving starts and never after, so the map
// itself needs no lock; each entry has its own, so one slow initializer
// delays only requests for its own plugin.
type mux struct {
	kind    api.Kind
	log     func() *slog.Logger
	entries map[string]*entry

	// fallback serves the names this mux lacks from the mux of the older
	// kind, through adapt: a host asking the v2 service for an action
	// registered as v1 finds it.
	fallback *mux
	adapt    func(name string, impl any) any
}

type entry struct {
	mu   sync.Mutex
	init initializer
	impl any
}

func newMux(kind api.Kind, log func() *slog.Logger) *mux {
	return &mux{kind: kind, log: log, entries: map[string]*entry{}}
}

func (m *mux) register(name string, init initializer) error {
	if err := api.ValidateName(name); err != nil {
		return fmt.Errorf("registering %s plugin: %w", m.kind, err)
	}
	if _, dup := m.entries[name]; dup {
		return fmt.Errorf("registering %s plugin %s: the name is registered twice", m.kind, name)
	}
	m.entries[name] = &entry{init: init}
	return nil
}

// names lists the registered plugins, sorted.
func (m *mux) names() []string {
	names := make([]string, 0, len(m.entries))
	for name := range m.entries {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

func (m *mux) get(name string) (any, error) {
	e, ok := m.entries[name]
	if !ok {
		if m.fallback != nil {
			if _, ok := m.fallback.entries[name]; ok {
				impl, err := m.fallback.get(name)
				if err != nil {
					return nil, err
				}
				return m.adapt(name, impl), nil
			}
		}
		return nil, m.notFound(name)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.impl != nil {
		return e.impl, nil
	}
	// A failed initialization is not remembered: the next request tries
	// again, as the cause (an unreachable API, say) may have passed.
	impl, err := e.init(m.log().With("kind", string(m.kind), "plugin", name))
	if err != nil {
		return nil, withStack(status.Newf(codes.Unknown, "initializing %s plugin %s: %v", m.kind, name, err), framesOf(stackPCs(err)))
	}
	if impl == nil {
		return nil, status.Errorf(codes.Internal, "initializing %s plugin %s: the initializer returned no implementation", m.kind, name)
	}
	e.impl = impl
	return impl, nil
}

func (m *mux) notFound(name string) error {
	names := m.names()
	if m.fallback != nil {
		names = append(names, m.fallback.names()...)
	}
	has := "none"
	if len(names) > 0 {
		has = strings.Join(names, ", ")
	}
	return status.Errorf(codes.NotFound, "no %s plugin named %q in this plugin binary (it has: %s)", m.kind, name, has)
}

// serve runs one request for the plugin called name: it finds the
// implementation, runs fn on it, and turns an error, or a panic anywhere on
// the way, into a status the host can read. A panic must never take the
// process down: every other plugin in it would go with it.
func serve[T, R any](m *mux, name, method string, fn func(T) (R, error)) (resp R, err error) {
	defer func() {
		if p := recover(); p != nil {
			frames := panicFrames()
			m.log().Error("plugin panicked", "kind", string(m.kind), "plugin", name, "method", method,
				"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			err = withStack(status.Newf(codes.Aborted, "panic: %v", p), frames)
		}
	}()
	v, err := m.get(name)
	if err != nil {
		return resp, err
	}
	impl, ok := v.(T)
	if !ok {
		return resp, status.Errorf(codes.Internal, "%s plugin %s: %T does not implement the %s interface", m.kind, name, v, m.kind)
	}
	resp, err = fn(impl)
	if err != nil {
		return resp, implStatus(err, v, method)
	}
	return resp, nil
}

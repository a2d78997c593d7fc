package framework

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"

	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/generated"
	biav2 "github.com/lifeboat-io/lifeboat/pkg/plugin/generated/backupitemaction/v2"
	ibav1 "github.com/lifeboat-io/lifeboat/pkg/plugin/generated/itemblockaction/v1"
	pluginv1 "github.com/lifeboat-io/lifeboat/pkg/plugin/generated/lifeboat/plugin/v1"
	riav2 "github.com/lifeboat-io/lifeboat/pkg/plugin/generated/restoreitemaction/v2"
)

// Server is the plugin side: it holds a binary's plugins and serves them.
// Register every plugin, then call Serve; registering after Serve has no
// effect.
type Server struct {
	level *slog.LevelVar
	log   *slog.Logger
	muxes map[api.Kind]*mux
	errs  []error
}

// NewServer returns a Server with no plugins.
func NewServer() *Server {
	s := &Server{level: new(slog.LevelVar), muxes: map[api.Kind]*mux{}}
	// Logs go to stderr: stdout carries go-plugin's handshake, and go-plugin
	// forwards stderr to the host's log.
	s.log = newLogger(os.Stderr, s.level)
	logger := func() *slog.Logger { return s.log }
	for _, kind := range api.AllKinds {
		s.muxes[kind] = newMux(kind, logger)
	}
	bia, biaV2 := s.muxes[api.KindBackupItemAction], s.muxes[api.KindBackupItemActionV2]
	biaV2.fallback, biaV2.adapt = bia, func(name string, impl any) any {
		return AdaptBackupItemAction(name, impl.(api.BackupItemAction))
	}
	ria, riaV2 := s.muxes[api.KindRestoreItemAction], s.muxes[api.KindRestoreItemActionV2]
	riaV2.fallback, riaV2.adapt = ria, func(name string, impl any) any {
		return AdaptRestoreItemAction(name, impl.(api.RestoreItemAction))
	}
	return s
}

// register records a plugin; a bad registration is reported by Serve, so
// that the Register calls can be chained.
func register[T any](s *Server, kind api.Kind, name string, init func(*slog.Logger) (T, error)) *Server {
	if init == nil {
		s.errs = append(s.errs, fmt.Errorf("registering %s plugin %s: no initializer", kind, name))
		return s
	}
	err := s.muxes[kind].register(name, func(log *slog.Logger) (any, error) {
		impl, err := init(log)
		if err != nil {
			return nil, err
		}
		// A nil T must reach the mux as a nil any, not as a typed nil.
		var v any = impl
		if v == nil {
			return nil, nil
		}
		return v, nil
	})
	if err != nil {
		s.errs = append(s.errs, err)
	}
	return s
}

// RegisterObjectStore registers an ObjectStore plugin called name
// ("<DNS-1123 subdomain>/<name>"). init is called with a logger on the
// first request for the plugin; its result serves every request after.
func (s *Server) RegisterObjectStore(name string, init func(*slog.Logger) (api.ObjectStore, error)) *Server {
	return register(s, api.KindObjectStore, name, init)
}

// RegisterVolumeSnapshotter registers a VolumeSnapshotter plugin; see
// RegisterObjectStore.
func (s *Server) RegisterVolumeSnapshotter(name string, init func(*slog.Logger) (api.VolumeSnapshotter, error)) *Server {
	return register(s, api.KindVolumeSnapshotter, name, init)
}

// RegisterBackupItemAction registers a v1 BackupItemAction plugin; see
// RegisterObjectStore. It is listed under the v1 kind only, and a host that
// asks for v2 actions finds it too (see AdaptableTo).
func (s *Server) RegisterBackupItemAction(name string, init func(*slog.Logger) (api.BackupItemAction, error)) *Server {
	return register(s, api.KindBackupItemAction, name, init)
}

// RegisterBackupItemActionV2 registers a v2 BackupItemAction plugin; see
// RegisterObjectStore.
func (s *Server) RegisterBackupItemActionV2(name string, init func(*slog.Logger) (api.BackupItemActionV2, error)) *Server {
	return register(s, api.KindBackupItemActionV2, name, init)
}

// RegisterRestoreItemAction registers a v1 RestoreItemAction plugin; see
// RegisterBackupItemAction.
func (s *Server) RegisterRestoreItemAction(name string, init func(*slog.Logger) (api.RestoreItemAction, error)) *Server {
	return register(s, api.KindRestoreItemAction, name, init)
}

// RegisterRestoreItemActionV2 registers a v2 RestoreItemAction plugin; see
// RegisterObjectStore.
func (s *Server) RegisterRestoreItemActionV2(name string, init func(*slog.Logger) (api.RestoreItemActionV2, error)) *Server {
	return register(s, api.KindRestoreItemActionV2, name, init)
}

// RegisterDeleteItemAction registers a DeleteItemAction plugin; see
// RegisterObjectStore.
func (s *Server) RegisterDeleteItemAction(name string, init func(*slog.Logger) (api.DeleteItemAction, error)) *Server {
	return register(s, api.KindDeleteItemAction, name, init)
}

// RegisterItemBlockAction registers an ItemBlockAction plugin; see
// RegisterObjectStore.
func (s *Server) RegisterItemBlockAction(name string, init func(*slog.Logger) (api.ItemBlockAction, error)) *Server {
	return register(s, api.KindItemBlockAction, name, init)
}

// Err reports what is wrong with the registrations (a bad or duplicate
// name), or nil.
func (s *Server) Err() error {
	return errors.Join(s.errs...)
}

// Serve reads --log-level and --features from the command line (ignoring
// every other flag: hosts pass their own), and serves the registered plugins
// until the host ends the process. A bad registration ends the process with
// a message saying which.
func (s *Server) Serve() {
	flags, err := parseFlags(os.Args[1:])
	s.level.Set(flags.logLevel)
	if err != nil {
		s.log.Warn(err.Error() + "; logging at info")
	}
	setFeatures(flags.features)
	if err := s.Err(); err != nil {
		s.log.Error(fmt.Sprintf("cannot serve plugins: %v", err))
		os.Exit(1)
	}
	var served []string
	for _, id := range s.identifiers("") {
		served = append(served, id.GetKind()+" "+id.GetName())
	}
	s.log.Debug("serving plugins", "plugins", served, "features", flags.features)
	// A server calls an item action once per item, many at a time. A fixed
	// pool of stream workers spares each call a fresh goroutine (whose
	// stack grows while it decodes), and a less eager collector suits a
	// process whose heap is small and short-lived per call.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: Handshake,
		Plugins:         s.PluginSet(),
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(append(opts, grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))))...)
		},
	})
}

// PluginSet is the go-plugin plugin map Serve serves: a service for every
// kind, whether or not it has plugins (asking an empty kind for a plugin
// then fails with NotFound, naming the plugin), plus PluginLister, plus
// Lifeboat's BackupItemActionStream (with the BackupItemAction kind) and
// DeleteItemActionStream (with DeleteItemAction).
// Package plugintest serves it in a test's process.
func (s *Server) PluginSet() plugin.PluginSet {
	set := plugin.PluginSet{}
	add := func(kind api.Kind, register func(*grpc.Server)) {
		set[string(kind)] = &grpcPlugin{kind: kind, register: register}
	}
	add(api.KindObjectStore, func(g *grpc.Server) {
		generated.RegisterObjectStoreServer(g, &objectStoreServer{m: s.muxes[api.KindObjectStore]})
	})
	add(api.KindVolumeSnapshotter, func(g *grpc.Server) {
		generated.RegisterVolumeSnapshotterServer(g, &volumeSnapshotterServer{m: s.muxes[api.KindVolumeSnapshotter]})
	})
	add(api.KindBackupItemAction, func(g *grpc.Server) {
		generated.RegisterBackupItemActionServer(g, &backupItemActionServer{m: s.muxes[api.KindBackupItemAction]})
		// Lifeboat's extension, next to Velero's services: one stream for
		// the Execute calls of both BackupItemAction kinds.
		pluginv1.RegisterBackupItemActionStreamServer(g, &backupItemActionStreamServer{
			v1: s.muxes[api.KindBackupItemAction], v2: s.muxes[api.KindBackupItemActionV2],
		})
	})
	add(api.KindBackupItemActionV2, func(g *grpc.Server) {
		biav2.RegisterBackupItemActionServer(g, &backupItemActionV2Server{m: s.muxes[api.KindBackupItemActionV2]})
	})
	add(api.KindRestoreItemAction, func(g *grpc.Server) {
		generated.RegisterRestoreItemActionServer(g, &restoreItemActionServer{m: s.muxes[api.KindRestoreItemAction]})
	})
	add(api.KindRestoreItemActionV2, func(g *grpc.Server) {
		riav2.RegisterRestoreItemActionServer(g, &restoreItemActionV2Server{m: s.muxes[api.KindRestoreItemActionV2]})
	})
	add(api.KindDeleteItemAction, func(g *grpc.Server) {
		generated.RegisterDeleteItemActionServer(g, &deleteItemActionServer{m: s.muxes[api.KindDeleteItemAction]})
		// Lifeboat's extension, as for BackupItemAction.
		pluginv1.RegisterDeleteItemActionStreamServer(g, &deleteItemActionStreamServer{m: s.muxes[api.KindDeleteItemAction]})
	})
	add(api.KindItemBlockAction, func(g *grpc.Server) {
		ibav1.RegisterItemBlockActionServer(g, &itemBlockActionServer{m: s.muxes[api.KindItemBlockAction]})
	})
	add(api.KindPluginLister, func(g *grpc.Server) {
		generated.RegisterPluginListerServer(g, &pluginListerServer{plugins: s.identifiers(os.Args[0])})
	})
	return set
}

// identifiers lists every registered plugin under its own kind, in
// api.AllKinds order and by name: v1 actions are not repeated under v2
// (Velero's host would run them twice).
func (s *Server) identifiers(command string) []*generated.PluginIdentifier {
	var ids []*generated.PluginIdentifier
	for _, kind := range api.AllKinds {
		for _, name := range s.muxes[kind].names() {
			ids = append(ids, &generated.PluginIdentifier{Command: command, Kind: string(kind), Name: name})
		}
	}
	return ids
}

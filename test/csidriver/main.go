// Command csidriver is Lifeboat's test CSI driver: a host-path driver whose
// volumes are directories of a state directory and whose snapshots are
// real copies of a volume's files. internal/testutil/csistack runs it as a
// host process beside the CSI sidecars (external-provisioner,
// external-snapshotter) and, on the real node, registers it with the
// kubelet itself (the plugin registration socket that node-driver-registrar
// would otherwise serve), so pods mount its volumes as bind mounts.
//
// Not for production: sizes are not enforced, and the state lives on one
// machine.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// Version is the driver's vendor version (GetPluginInfo).
const Version = "v0.1.0"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "csidriver:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		endpoint        = flag.String("endpoint", "", "CSI endpoint, unix:///path/to/csi.sock (required)")
		stateDir        = flag.String("state-dir", "", "directory holding volumes/ and snapshots/ (required; created if missing)")
		nodeID          = flag.String("node-id", "", "node ID NodeGetInfo returns (the Kubernetes node name)")
		name            = flag.String("driver-name", "hostpath.csi.lifeboat.io", "CSI driver name")
		registrationDir = flag.String("kubelet-registration-dir", "", "the kubelet's plugins_registry directory: when set, the driver registers itself with the kubelet there")
	)
	flag.Parse()
	if *endpoint == "" || *stateDir == "" {
		return errors.New("--endpoint and --state-dir are required")
	}
	sock, ok := strings.CutPrefix(*endpoint, "unix://")
	if !ok {
		return fmt.Errorf("--endpoint %q: only unix:///path endpoints are supported", *endpoint)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	d := &driver{name: *name, version: Version, nodeID: *nodeID, state: store{root: *stateDir}}
	if err := d.state.init(); err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	srv := grpc.NewServer(grpc.UnaryInterceptor(logCalls(log)))
	csi.RegisterIdentityServer(srv, d)
	csi.RegisterControllerServer(srv, d)
	csi.RegisterNodeServer(srv, d)
	lis, err := listenUnix(sock)
	if err != nil {
		return err
	}
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(lis) }()
	defer srv.Stop()
	log.Info("serving", "endpoint", *endpoint, "stateDir", *stateDir, "driver", *name, "version", Version)

	if *registrationDir != "" {
		reg := grpc.NewServer()
		registerapi.RegisterRegistrationServer(reg, &registration{name: *name, endpoint: sock, log: log})
		regSock := filepath.Join(*registrationDir, *name+"-reg.sock")
		rl, err := listenUnix(regSock)
		if err != nil {
			return err
		}
		// The kubelet's plugin watcher notices the socket; removing it
		// on exit deregisters the driver.
		defer os.Remove(regSock)
		go func() { errc <- reg.Serve(rl) }()
		defer reg.Stop()
		log.Info("registering with the kubelet", "socket", regSock)
	}

	select {
	case <-ctx.Done():
		log.Info("stopping")
		return nil
	case err := <-errc:
		return err
	}
}

// listenUnix listens on a unix socket, replacing a stale one a killed
// driver left.
func listenUnix(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("removing stale socket %s: %w", path, err)
	}
	return net.Listen("unix", path)
}

func logCalls(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := handler(ctx, req)
		if err != nil {
			log.Warn("call failed", "method", info.FullMethod, "request", req, "error", err)
		} else if !strings.HasSuffix(info.FullMethod, "/Probe") {
			log.Info("call", "method", info.FullMethod, "request", req)
		}
		return resp, err
	}
}

// registration answers the kubelet's plugin watcher, as node-driver-registrar
// does for other drivers: the driver's name and CSI endpoint.
type registration struct {
	registerapi.UnimplementedRegistrationServer
	name, endpoint string
	log            *slog.Logger
}

func (r *registration) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              r.name,
		Endpoint:          r.endpoint,
		SupportedVersions: []string{"1.0.0"},
	}, nil
}

func (r *registration) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if !s.PluginRegistered {
		r.log.Error("the kubelet refused the registration", "error", s.Error)
	} else {
		r.log.Info("registered with the kubelet")
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

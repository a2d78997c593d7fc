package framework

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"testing"
	"time"

	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

// host is the host side of an in-process connection to a Server.
type host struct {
	set  plugin.PluginSet
	conn *grpc.ClientConn
}

// Dispense does what go-plugin's client does: it hands the connection to
// the host-side plugin entry of the kind.
func (h *host) Dispense(kind string) (any, error) {
	p, ok := h.set[kind].(plugin.GRPCPlugin)
	if !ok {
		return nil, fmt.Errorf("no plugin entry %q", kind)
	}
	return p.GRPCClient(context.Background(), nil, h.conn)
}

// connect serves s in process over a real gRPC connection (an in-memory
// listener) and returns the host side, built from ClientPluginSet as a host
// builds it. go-plugin's own path is covered by the out-of-process test.
func connect(t testing.TB, s *Server, opts ...grpc.ServerOption) *host {
	t.Helper()
	s.log = slog.New(slog.DiscardHandler)
	return connectGRPC(t, func(srv *grpc.Server) {
		for kind, p := range s.PluginSet() {
			if err := p.(plugin.GRPCPlugin).GRPCServer(nil, srv); err != nil {
				t.Fatalf("registering %s: %v", kind, err)
			}
		}
	}, opts...)
}

// connectGRPC is connect for a server that register fills with services.
func connectGRPC(t testing.TB, register func(*grpc.Server), opts ...grpc.ServerOption) *host {
	t.Helper()
	srv := grpc.NewServer(opts...)
	register(srv)
	lis := bufconn.Listen(1 << 20)
	go func() { _ = srv.Serve(lis) }()
	conn, err := grpc.NewClient("passthrough:///plugin",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		srv.Stop()
	})
	return &host{set: ClientPluginSet(), conn: conn}
}

func dispense(t testing.TB, c *host, kind api.Kind) any {
	t.Helper()
	raw, err := c.Dispense(string(kind))
	if err != nil {
		t.Fatalf("dispensing %s: %v", kind, err)
	}
	if d, ok := raw.(Dispenser); !ok || d.Kind() != kind {
		t.Fatalf("dispensed %T for %s, want a Dispenser of that kind", raw, kind)
	}
	return raw
}

// must unwraps a client constructor's result.
func must[T any](t testing.TB) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func testItem(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata":   map[string]any{"name": name, "namespace": "default"},
		"data":       map[string]any{"size": "3"},
		"spec":       map[string]any{"replicas": int64(3)},
	}}
}

func testBackup() *v1.Backup {
	b := &v1.Backup{}
	b.Name = "nightly"
	b.Namespace = "velero"
	b.Spec.IncludedNamespaces = []string{"default"}
	return b
}

func testRestore() *v1.Restore {
	r := &v1.Restore{}
	r.Name = "nightly-restore"
	r.Spec.BackupName = "nightly"
	return r
}

// instance lets a test reach the implementation an initializer created.
func instance[T any](v T) func(*slog.Logger) (T, error) {
	return func(*slog.Logger) (T, error) { return v, nil }
}

var testTime = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)

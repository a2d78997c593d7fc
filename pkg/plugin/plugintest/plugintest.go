package plugintest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/framework"
)

// DefaultTimeout bounds each call a client of this package makes, so that
// a plugin that hangs fails its test with a DeadlineExceeded
// *framework.PluginError instead of hanging it until go test's own
// timeout. Conn.WithTimeout changes it.
const DefaultTimeout = time.Minute

// Conn is the host's side of a framework.Server served in process: what
// Lifeboat's plugin host holds for a plugin process, without the process.
type Conn struct {
	t       testing.TB
	client  plugin.ClientProtocol
	timeout time.Duration
}

// Serve serves s over a real gRPC connection (go-plugin's in-process
// helper, on a Unix socket) and returns the host's side of it. Clients
// dispensed from it use framework.ClientPluginSet, as Lifeboat's host
// does. A registration error fails the test; the connection is closed
// when the test ends.
//
// Serve, and the Conn methods that return clients, must be called from the
// test's goroutine (they may call t.Fatal); the clients they return may be
// used from any goroutine.
func Serve(t testing.TB, s *framework.Server) *Conn {
	t.Helper()
	if err := s.Err(); err != nil {
		t.Fatalf("plugintest: the server's registrations: %v", err)
	}
	client, server := plugin.TestPluginGRPCConn(t, false, pluginSet(s.PluginSet(), framework.ClientPluginSet()))
	t.Cleanup(func() {
		// Stop the server first: client.Close asks the server to stop
		// itself, which would race with a Stop of ours.
		server.Stop()
		_ = client.Close()
	})
	return &Conn{t: t, client: client, timeout: DefaultTimeout}
}

// WithTimeout returns a Conn on the same connection whose clients bound
// each call by d (0 means no bound).
func (c *Conn) WithTimeout(d time.Duration) *Conn {
	cc := *c
	cc.timeout = d
	return &cc
}

// Dispense returns what the host's plugin map dispenses for kind, to be
// passed to one of the framework.XxxClient constructors (as Lifeboat's host
// does).
func (c *Conn) Dispense(kind api.Kind) any {
	c.t.Helper()
	d, err := c.client.Dispense(string(kind))
	if err != nil {
		c.t.Fatalf("plugintest: dispensing %s: %v", kind, err)
	}
	return d
}

// Plugins asks the served process which plugins it serves, as `lifeboat
// plugin get` and the server's start-up scan do.
func (c *Conn) Plugins() []framework.PluginIdentifier {
	c.t.Helper()
	ctx, cancel := c.context()
	defer cancel()
	ids, err := framework.PluginListerClient(c.Dispense(api.KindPluginLister)).ListPlugins(ctx)
	if err != nil {
		c.t.Fatalf("plugintest: listing plugins: %v", err)
	}
	return ids
}

func (c *Conn) context() (context.Context, context.CancelFunc) {
	if c.timeout <= 0 {
		return context.WithCancel(context.Background())
	}
	return context.WithTimeout(context.Background(), c.timeout)
}

// ObjectStore returns the host's client of the ObjectStore plugin name.
func (c *Conn) ObjectStore(name string) api.ObjectStore {
	c.t.Helper()
	return newClient(c, api.KindObjectStore, name, framework.ObjectStoreClient)
}

// VolumeSnapshotter returns the host's client of the VolumeSnapshotter
// plugin name.
func (c *Conn) VolumeSnapshotter(name string) api.VolumeSnapshotter {
	c.t.Helper()
	return newClient(c, api.KindVolumeSnapshotter, name, framework.VolumeSnapshotterClient)
}

// BackupItemAction returns the host's client of the v1 BackupItemAction
// plugin name. Its Execute calls travel over Lifeboat's
// BackupItemActionStream, as the server's do.
func (c *Conn) BackupItemAction(name string) api.BackupItemAction {
	c.t.Helper()
	return newClient(c, api.KindBackupItemAction, name, framework.BackupItemActionClient)
}

// BackupItemActionV2 returns the host's client of the v2 BackupItemAction
// plugin name. A v1 action is found too, adapted by the plugin process, as
// a host asking for v2 actions finds it.
func (c *Conn) BackupItemActionV2(name string) api.BackupItemActionV2 {
	c.t.Helper()
	return newClient(c, api.KindBackupItemActionV2, name, framework.BackupItemActionV2Client)
}

// RestoreItemAction returns the host's client of the v1 RestoreItemAction
// plugin name.
func (c *Conn) RestoreItemAction(name string) api.RestoreItemAction {
	c.t.Helper()
	return newClient(c, api.KindRestoreItemAction, name, framework.RestoreItemActionClient)
}

// RestoreItemActionV2 returns the host's client of the v2 RestoreItemAction
// plugin name; a v1 action is found too (see BackupItemActionV2).
func (c *Conn) RestoreItemActionV2(name string) api.RestoreItemActionV2 {
	c.t.Helper()
	return newClient(c, api.KindRestoreItemActionV2, name, framework.RestoreItemActionV2Client)
}

// DeleteItemAction returns the host's client of the DeleteItemAction
// plugin name.
func (c *Conn) DeleteItemAction(name string) api.DeleteItemAction {
	c.t.Helper()
	return newClient(c, api.KindDeleteItemAction, name, framework.DeleteItemActionClient)
}

// ItemBlockAction returns the host's client of the ItemBlockAction plugin
// name.
func (c *Conn) ItemBlockAction(name string) api.ItemBlockAction {
	c.t.Helper()
	return newClient(c, api.KindItemBlockAction, name, framework.ItemBlockActionClient)
}

func newClient[T any](c *Conn, kind api.Kind, name string, construct func(any, string, time.Duration) (T, error)) T {
	c.t.Helper()
	client, err := construct(c.Dispense(kind), name, c.timeout)
	if err != nil {
		c.t.Fatalf("plugintest: %s client for %s: %v", kind, name, err)
	}
	return client
}

// ObjectStore serves impl as the ObjectStore plugin name and returns the
// host's client of it. It is Serve of a Server with that one plugin, for
// testing one implementation; serve a binary's whole Server (the one its
// main serves) with Serve.
func ObjectStore(t testing.TB, name string, impl api.ObjectStore) api.ObjectStore {
	t.Helper()
	return Serve(t, framework.NewServer().RegisterObjectStore(name, instance(impl))).ObjectStore(name)
}

// VolumeSnapshotter serves impl as the VolumeSnapshotter plugin name and
// returns the host's client of it; see ObjectStore.
func VolumeSnapshotter(t testing.TB, name string, impl api.VolumeSnapshotter) api.VolumeSnapshotter {
	t.Helper()
	return Serve(t, framework.NewServer().RegisterVolumeSnapshotter(name, instance(impl))).VolumeSnapshotter(name)
}

// BackupItemAction serves impl as the v1 BackupItemAction plugin name and
// returns the host's client of it; see ObjectStore.
func BackupItemAction(t testing.TB, name string, impl api.BackupItemAction) api.BackupItemAction {
	t.Helper()
	return Serve(t, framework.NewServer().RegisterBackupItemAction(name, instance(impl))).BackupItemAction(name)
}

// BackupItemActionV2 serves impl as the v2 BackupItemAction plugin name
// and returns the host's client of it; see ObjectStore.
func BackupItemActionV2(t testing.TB, name string, impl api.BackupItemActionV2) api.BackupItemActionV2 {
	t.Helper()
	return Serve(t, framework.NewServer().RegisterBackupItemActionV2(name, instance(impl))).BackupItemActionV2(name)
}

// RestoreItemAction serves impl as the v1 RestoreItemAction plugin name
// and returns the host's client of it; see ObjectStore.
func RestoreItemAction(t testing.TB, name string, impl api.RestoreItemAction) api.RestoreItemAction {
	t.Helper()
	return Serve(t, framework.NewServer().RegisterRestoreItemAction(name, instance(impl))).RestoreItemAction(name)
}

// RestoreItemActionV2 serves impl as the v2 RestoreItemAction plugin name
// and returns the host's client of it; see ObjectStore.
func RestoreItemActionV2(t testing.TB, name string, impl api.RestoreItemActionV2) api.RestoreItemActionV2 {
	t.Helper()
	return Serve(t, framework.NewServer().RegisterRestoreItemActionV2(name, instance(impl))).RestoreItemActionV2(name)
}

// DeleteItemAction serves impl as the DeleteItemAction plugin name and
// returns the host's client of it; see ObjectStore.
func DeleteItemAction(t testing.TB, name string, impl api.DeleteItemAction) api.DeleteItemAction {
	t.Helper()
	return Serve(t, framework.NewServer().RegisterDeleteItemAction(name, instance(impl))).DeleteItemAction(name)
}

// ItemBlockAction serves impl as the ItemBlockAction plugin name and
// returns the host's client of it; see ObjectStore.
func ItemBlockAction(t testing.TB, name string, impl api.ItemBlockAction) api.ItemBlockAction {
	t.Helper()
	return Serve(t, framework.NewServer().RegisterItemBlockAction(name, instance(impl))).ItemBlockAction(name)
}

// instance is an initializer that hands out an implementation made by the
// test, so the test can look inside it after the calls.
func instance[T any](impl T) func(*slog.Logger) (T, error) {
	return func(*slog.Logger) (T, error) { return impl, nil }
}

// pluginSet joins the plugin side's map (what a plugin binary serves) and
// the host's (what Lifeboat's host dispenses from) into the one map
// go-plugin's in-process helper takes for both sides.
func pluginSet(served, host plugin.PluginSet) plugin.PluginSet {
	set := plugin.PluginSet{}
	for kind, p := range served {
		s, ok1 := p.(plugin.GRPCPlugin)
		h, ok2 := host[kind].(plugin.GRPCPlugin)
		if ok1 && ok2 {
			set[kind] = &bothSides{plugin: s, host: h}
		}
	}
	return set
}

// bothSides serves with the plugin side's entry and dispenses with the
// host's.
type bothSides struct {
	plugin.NetRPCUnsupportedPlugin
	plugin, host plugin.GRPCPlugin
}

func (b *bothSides) GRPCServer(broker *plugin.GRPCBroker, s *grpc.Server) error {
	return b.plugin.GRPCServer(broker, s)
}

func (b *bothSides) GRPCClient(ctx context.Context, broker *plugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	return b.host.GRPCClient(ctx, broker, conn)
}

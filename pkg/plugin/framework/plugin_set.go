package framework

import (
	"context"
	"fmt"

	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	pluginv1 "github.com/lifeboat-io/lifeboat/pkg/plugin/generated/lifeboat/plugin/v1"
)

// Dispenser hands out clients for the plugins of one kind served by one process.
type Dispenser interface {
	Kind() api.Kind
}

// dispenser is what go-plugin dispenses for a kind: only the connection.
// Clients for single plugins are made from it by the XxxClient constructors,
// as every plugin of the process shares the connection and differs only in
// the name its requests carry.
type dispenser struct {
	kind api.Kind
	conn grpc.ClientConnInterface
	// streams, for the BackupItemAction kinds, is the connection's
	// BackupItemActionStream, shared by every dispenser of the connection;
	// deleteStreams, for DeleteItemAction, its DeleteItemActionStream.
	streams       *executeStreams
	deleteStreams *deleteStreams
}

func (d *dispenser) Kind() api.Kind { return d.kind }

// grpcPlugin is one entry of the go-plugin plugin map: the gRPC service of
// one kind. The plugin side registers the service; the host side dispenses.
type grpcPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	kind     api.Kind
	register func(*grpc.Server)
	// streams (BackupItemAction kinds) or deleteStreams (DeleteItemAction)
	// is set on the host side for the kinds whose Execute calls may go over
	// one of Lifeboat's streams.
	streams       *connStreams[*pluginv1.BackupItemExecute, *pluginv1.BackupItemResult, pluginv1.ExecuteStreamRequest, pluginv1.ExecuteStreamResponse]
	deleteStreams *connStreams[*pluginv1.DeleteItemExecute, *pluginv1.DeleteItemResult, pluginv1.DeleteItemStreamRequest, pluginv1.DeleteItemStreamResponse]
}

func (p *grpcPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	if p.register == nil {
		return fmt.Errorf("the host's %s plugin entry cannot serve", p.kind)
	}
	p.register(s)
	return nil
}

func (p *grpcPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	d := &dispenser{kind: p.kind, conn: conn}
	if p.streams != nil {
		d.streams = p.streams.forConn(conn)
	}
	if p.deleteStreams != nil {
		d.deleteStreams = p.deleteStreams.forConn(conn)
	}
	return d, nil
}

// ClientPluginSet is the plugin map a host gives go-plugin: every kind of
// Velero's protocol plus PluginLister, keyed by kind. Dispensing a kind
// returns a Dispenser for the XxxClient constructors.
//
// go-plugin dispenses anew for every call; the set keeps what must outlive
// one call, per connection: Lifeboat's BackupItemActionStream and
// DeleteItemActionStream, and whether the plugin process serves them (a
// host makes one set per process).
func ClientPluginSet() plugin.PluginSet {
	set := plugin.PluginSet{string(api.KindPluginLister): &grpcPlugin{kind: api.KindPluginLister}}
	streams := &connStreams[*pluginv1.BackupItemExecute, *pluginv1.BackupItemResult, pluginv1.ExecuteStreamRequest, pluginv1.ExecuteStreamResponse]{spec: backupItemActionStream}
	deleteStreams := &connStreams[*pluginv1.DeleteItemExecute, *pluginv1.DeleteItemResult, pluginv1.DeleteItemStreamRequest, pluginv1.DeleteItemStreamResponse]{spec: deleteItemActionStream}
	for _, kind := range api.AllKinds {
		p := &grpcPlugin{kind: kind}
		switch kind {
		case api.KindBackupItemAction, api.KindBackupItemActionV2:
			p.streams = streams
		case api.KindDeleteItemAction:
			p.deleteStreams = deleteStreams
		}
		set[string(kind)] = p
	}
	return set
}

// dispensed checks that d was dispensed for kind and returns its connection.
func dispensed(d any, kind api.Kind, name string) (grpc.ClientConnInterface, error) {
	disp, err := dispenserOf(d, kind, name)
	if err != nil {
		return nil, err
	}
	return disp.conn, nil
}

func dispenserOf(d any, kind api.Kind, name string) (*dispenser, error) {
	disp, ok := d.(*dispenser)
	if !ok {
		return nil, fmt.Errorf("%s client for %s: %T was not dispensed through ClientPluginSet", kind, name, d)
	}
	if disp.kind != kind {
		return nil, fmt.Errorf("%s client for %s: the dispensed value serves %s plugins", kind, name, disp.kind)
	}
	return disp, nil
}

package framework

import (
	"context"
	"fmt"

	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
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
}

func (d *dispenser) Kind() api.Kind { return d.kind }

// grpcPlugin is one entry of the go-plugin plugin map: the gRPC service of
// one kind. The plugin side registers the service; the host side dispenses.
type grpcPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	kind     api.Kind
	register func(*grpc.Server)
}

func (p *grpcPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	if p.register == nil {
		return fmt.Errorf("the host's %s plugin entry cannot serve", p.kind)
	}
	p.register(s)
	return nil
}

func (p *grpcPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	return &dispenser{kind: p.kind, conn: conn}, nil
}

// ClientPluginSet is the plugin map a host gives go-plugin: every kind of
// Velero's protocol plus PluginLister, keyed by kind. Dispensing a kind
// returns a Dispenser for the XxxClient constructors.
func ClientPluginSet() plugin.PluginSet {
	set := plugin.PluginSet{string(api.KindPluginLister): &grpcPlugin{kind: api.KindPluginLister}}
	for _, kind := range api.AllKinds {
		set[string(kind)] = &grpcPlugin{kind: kind}
	}
	return set
}

// dispensed checks that d was dispensed for kind and returns its connection.
func dispensed(d any, kind api.Kind, name string) (grpc.ClientConnInterface, error) {
	disp, ok := d.(*dispenser)
	if !ok {
		return nil, fmt.Errorf("%s client for %s: %T was not dispensed through ClientPluginSet", kind, name, d)
	}
	if disp.kind != kind {
		return nil, fmt.Errorf("%s client for %s: the dispensed value serves %s plugins", kind, name, disp.kind)
	}
	return disp.conn, nil
}

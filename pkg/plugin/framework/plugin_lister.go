package framework

import (
	"context"
	"fmt"

	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/generated"
)

// PluginIdentifier is one plugin a binary serves.
type PluginIdentifier struct {
	// Command is the binary's path, as the binary was started.
	Command string
	Kind    api.Kind
	Name    string
}

// Lister asks a plugin process which plugins it serves.
type Lister interface {
	ListPlugins(ctx context.Context) ([]PluginIdentifier, error)
}

type pluginListerServer struct {
	generated.UnimplementedPluginListerServer
	plugins []*generated.PluginIdentifier
}

func (s *pluginListerServer) ListPlugins(context.Context, *generated.Empty) (*generated.ListPluginsResponse, error) {
	return &generated.ListPluginsResponse{Plugins: s.plugins}, nil
}

// PluginListerClient returns the Lister of the process d was dispensed from
// (for api.KindPluginLister). Kinds this package does not know are returned
// as they are: what to do with a plugin of an unknown kind is the host's
// decision.
func PluginListerClient(d any) Lister {
	conn, err := dispensed(d, api.KindPluginLister, "")
	if err != nil {
		return failedLister{err}
	}
	return &pluginListerClient{base{kind: api.KindPluginLister}, generated.NewPluginListerClient(conn)}
}

type pluginListerClient struct {
	base
	rpc generated.PluginListerClient
}

func (c *pluginListerClient) ListPlugins(ctx context.Context) ([]PluginIdentifier, error) {
	res, err := c.rpc.ListPlugins(ctx, &generated.Empty{})
	if err != nil {
		return nil, c.fail("ListPlugins", err)
	}
	ids := make([]PluginIdentifier, 0, len(res.GetPlugins()))
	for _, id := range res.GetPlugins() {
		ids = append(ids, PluginIdentifier{Command: id.GetCommand(), Kind: api.Kind(id.GetKind()), Name: id.GetName()})
	}
	return ids, nil
}

type failedLister struct{ err error }

func (l failedLister) ListPlugins(context.Context) ([]PluginIdentifier, error) {
	return nil, fmt.Errorf("listing plugins: %w", l.err)
}

package framework

import (
	"context"
	"errors"
	"time"

	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/generated"
	pluginv1 "github.com/lifeboat-io/lifeboat/pkg/plugin/generated/lifeboat/plugin/v1"
)

type deleteItemActionServer struct {
	generated.UnimplementedDeleteItemActionServer
	m *mux
}

func (s *deleteItemActionServer) AppliesTo(_ context.Context, req *generated.DeleteItemActionAppliesToRequest) (*generated.DeleteItemActionAppliesToResponse, error) {
	return serve(s.m, req.GetPlugin(), "AppliesTo", func(impl api.DeleteItemAction) (*generated.DeleteItemActionAppliesToResponse, error) {
		sel, err := impl.AppliesTo()
		if err != nil {
			return nil, err
		}
		return &generated.DeleteItemActionAppliesToResponse{ResourceSelector: selectorToProto(sel)}, nil
	})
}

func (s *deleteItemActionServer) Execute(_ context.Context, req *generated.DeleteItemActionExecuteRequest) (*generated.Empty, error) {
	return serve(s.m, req.GetPlugin(), "Execute", func(impl api.DeleteItemAction) (*generated.Empty, error) {
		if err := executeDeleteItemAction(impl, req.GetItem(), req.GetBackup()); err != nil {
			return nil, err
		}
		return &generated.Empty{}, nil
	})
}

// executeDeleteItemAction is Execute on the plugin's side, for the unary
// call and the stream alike.
func executeDeleteItemAction(impl api.DeleteItemAction, itemJSON, backupJSON []byte) error {
	item, err := requestItem("item", itemJSON)
	if err != nil {
		return err
	}
	backup, err := requestBackup(backupJSON)
	if err != nil {
		return err
	}
	return impl.Execute(&api.DeleteItemActionExecuteInput{Item: item, Backup: backup})
}

// DeleteItemActionClient returns the DeleteItemAction called name, served
// by the process d was dispensed from (for api.KindDeleteItemAction). Each
// call is bounded by timeout; 0 means no bound.
func DeleteItemActionClient(d any, name string, timeout time.Duration) (api.DeleteItemAction, error) {
	disp, err := dispenserOf(d, api.KindDeleteItemAction, name)
	if err != nil {
		return nil, err
	}
	return &deleteItemActionClient{base{api.KindDeleteItemAction, name, timeout}, generated.NewDeleteItemActionClient(disp.conn), disp.deleteStreams}, nil
}

type deleteItemActionClient struct {
	base
	rpc generated.DeleteItemActionClient
	// streams, when set, carries Execute calls if the process serves it.
	streams *deleteStreams
}

// Streaming reports whether Execute calls go over Lifeboat's stream, which
// is known once the process has answered a call on it: callers may then
// keep many more calls in flight than unary calls would bear.
func (c *deleteItemActionClient) Streaming() bool {
	return c.streams != nil && c.streams.streaming()
}

func (c *deleteItemActionClient) AppliesTo() (api.ResourceSelector, error) {
	ctx, cancel := c.context()
	defer cancel()
	res, err := c.rpc.AppliesTo(ctx, &generated.DeleteItemActionAppliesToRequest{Plugin: c.name})
	if err != nil {
		return api.ResourceSelector{}, c.fail("AppliesTo", err)
	}
	return selectorFromProto(res.GetResourceSelector()), nil
}

func (c *deleteItemActionClient) Execute(in *api.DeleteItemActionExecuteInput) error {
	if in == nil {
		return c.local("Execute", errors.New("no input"))
	}
	item, err := encodeItem("item", in.Item)
	if err != nil {
		return c.local("Execute", err)
	}
	// A deletion sends the same Backup with every item.
	backup, err := encodeBackupOnce(in.Backup)
	if err != nil {
		return c.local("Execute", err)
	}
	if _, err := callOver(c.base, c.streams, &pluginv1.DeleteItemExecute{Plugin: c.name, Item: item}, item, backup); !errors.Is(err, errNoStream) {
		return err
	}
	ctx, cancel := c.context()
	defer cancel()
	_, err = c.rpc.Execute(ctx, &generated.DeleteItemActionExecuteRequest{Plugin: c.name, Item: item, Backup: backup})
	return c.fail("Execute", err)
}

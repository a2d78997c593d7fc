package framework

import (
	"context"
	"errors"
	"time"

	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/generated"
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
		item, err := requestItem("item", req.GetItem())
		if err != nil {
			return nil, err
		}
		backup, err := requestBackup(req.GetBackup())
		if err != nil {
			return nil, err
		}
		if err := impl.Execute(&api.DeleteItemActionExecuteInput{Item: item, Backup: backup}); err != nil {
			return nil, err
		}
		return &generated.Empty{}, nil
	})
}

// DeleteItemActionClient returns the DeleteItemAction called name, served
// by the process d was dispensed from (for api.KindDeleteItemAction). Each
// call is bounded by timeout; 0 means no bound.
func DeleteItemActionClient(d any, name string, timeout time.Duration) (api.DeleteItemAction, error) {
	conn, err := dispensed(d, api.KindDeleteItemAction, name)
	if err != nil {
		return nil, err
	}
	return &deleteItemActionClient{base{api.KindDeleteItemAction, name, timeout}, generated.NewDeleteItemActionClient(conn)}, nil
}

type deleteItemActionClient struct {
	base
	rpc generated.DeleteItemActionClient
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
	backup, err := encodeObject("backup", in.Backup)
	if err != nil {
		return c.local("Execute", err)
	}
	ctx, cancel := c.context()
	defer cancel()
	_, err = c.rpc.Execute(ctx, &generated.DeleteItemActionExecuteRequest{Plugin: c.name, Item: item, Backup: backup})
	return c.fail("Execute", err)
}

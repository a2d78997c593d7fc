package framework

import (
	"context"
	"errors"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/generated"
	riav2 "github.com/lifeboat-io/lifeboat/pkg/plugin/generated/restoreitemaction/v2"
)

// restoreInput decodes what both versions of Execute receive. An empty
// itemFromBackup is taken to be the item itself, which is what it is until
// an earlier action changes the item.
func restoreInput(item, itemFromBackup, restore []byte) (*api.RestoreItemActionExecuteInput, error) {
	in := &api.RestoreItemActionExecuteInput{}
	var err error
	if in.Item, err = requestItem("item", item); err != nil {
		return nil, err
	}
	if len(itemFromBackup) == 0 {
		itemFromBackup = item
	}
	if in.ItemFromBackup, err = requestItem("item from the backup", itemFromBackup); err != nil {
		return nil, err
	}
	if in.Restore, err = requestRestore(restore); err != nil {
		return nil, err
	}
	return in, nil
}

// restoreOutput makes nil output mean "restore the item unchanged".
func restoreOutput(out *api.RestoreItemActionExecuteOutput) *api.RestoreItemActionExecuteOutput {
	if out == nil {
		return &api.RestoreItemActionExecuteOutput{}
	}
	return out
}

type restoreItemActionServer struct {
	generated.UnimplementedRestoreItemActionServer
	m *mux
}

func (s *restoreItemActionServer) AppliesTo(_ context.Context, req *generated.RestoreItemActionAppliesToRequest) (*generated.RestoreItemActionAppliesToResponse, error) {
	return serve(s.m, req.GetPlugin(), "AppliesTo", func(impl api.RestoreItemAction) (*generated.RestoreItemActionAppliesToResponse, error) {
		sel, err := impl.AppliesTo()
		if err != nil {
			return nil, err
		}
		return &generated.RestoreItemActionAppliesToResponse{ResourceSelector: selectorToProto(sel)}, nil
	})
}

func (s *restoreItemActionServer) Execute(_ context.Context, req *generated.RestoreItemActionExecuteRequest) (*generated.RestoreItemActionExecuteResponse, error) {
	return serve(s.m, req.GetPlugin(), "Execute", func(impl api.RestoreItemAction) (*generated.RestoreItemActionExecuteResponse, error) {
		in, err := restoreInput(req.GetItem(), req.GetItemFromBackup(), req.GetRestore())
		if err != nil {
			return nil, err
		}
		out, err := impl.Execute(in)
		if err != nil {
			return nil, err
		}
		out = restoreOutput(out)
		item, err := updatedItemJSON(out.UpdatedItem, req.GetItem())
		if err != nil {
			return nil, err
		}
		return &generated.RestoreItemActionExecuteResponse{
			Item:            item,
			AdditionalItems: idsToProto(out.AdditionalItems),
			SkipRestore:     out.SkipRestore,
		}, nil
	})
}

type restoreItemActionV2Server struct {
	riav2.UnimplementedRestoreItemActionServer
	m *mux
}

func (s *restoreItemActionV2Server) AppliesTo(_ context.Context, req *riav2.RestoreItemActionAppliesToRequest) (*riav2.RestoreItemActionAppliesToResponse, error) {
	return serve(s.m, req.GetPlugin(), "AppliesTo", func(impl api.RestoreItemActionV2) (*riav2.RestoreItemActionAppliesToResponse, error) {
		sel, err := impl.AppliesTo()
		if err != nil {
			return nil, err
		}
		return &riav2.RestoreItemActionAppliesToResponse{ResourceSelector: selectorToProto(sel)}, nil
	})
}

func (s *restoreItemActionV2Server) Execute(_ context.Context, req *riav2.RestoreItemActionExecuteRequest) (*riav2.RestoreItemActionExecuteResponse, error) {
	return serve(s.m, req.GetPlugin(), "Execute", func(impl api.RestoreItemActionV2) (*riav2.RestoreItemActionExecuteResponse, error) {
		in, err := restoreInput(req.GetItem(), req.GetItemFromBackup(), req.GetRestore())
		if err != nil {
			return nil, err
		}
		out, err := impl.Execute(in)
		if err != nil {
			return nil, err
		}
		out = restoreOutput(out)
		item, err := updatedItemJSON(out.UpdatedItem, req.GetItem())
		if err != nil {
			return nil, err
		}
		return &riav2.RestoreItemActionExecuteResponse{
			Item:                        item,
			AdditionalItems:             idsToProto(out.AdditionalItems),
			SkipRestore:                 out.SkipRestore,
			OperationID:                 out.OperationID,
			WaitForAdditionalItems:      out.WaitForAdditionalItems,
			AdditionalItemsReadyTimeout: durationpb.New(out.AdditionalItemsReadyTimeout),
		}, nil
	})
}

func (s *restoreItemActionV2Server) Progress(_ context.Context, req *riav2.RestoreItemActionProgressRequest) (*riav2.RestoreItemActionProgressResponse, error) {
	return serve(s.m, req.GetPlugin(), "Progress", func(impl api.RestoreItemActionV2) (*riav2.RestoreItemActionProgressResponse, error) {
		restore, err := requestRestore(req.GetRestore())
		if err != nil {
			return nil, err
		}
		progress, err := impl.Progress(req.GetOperationID(), restore)
		if err != nil {
			return nil, err
		}
		return &riav2.RestoreItemActionProgressResponse{Progress: progressToProto(progress)}, nil
	})
}

func (s *restoreItemActionV2Server) Cancel(_ context.Context, req *riav2.RestoreItemActionCancelRequest) (*emptypb.Empty, error) {
	return serve(s.m, req.GetPlugin(), "Cancel", func(impl api.RestoreItemActionV2) (*emptypb.Empty, error) {
		restore, err := requestRestore(req.GetRestore())
		if err != nil {
			return nil, err
		}
		if err := impl.Cancel(req.GetOperationID(), restore); err != nil {
			return nil, err
		}
		return &emptypb.Empty{}, nil
	})
}

func (s *restoreItemActionV2Server) AreAdditionalItemsReady(_ context.Context, req *riav2.RestoreItemActionItemsReadyRequest) (*riav2.RestoreItemActionItemsReadyResponse, error) {
	return serve(s.m, req.GetPlugin(), "AreAdditionalItemsReady", func(impl api.RestoreItemActionV2) (*riav2.RestoreItemActionItemsReadyResponse, error) {
		restore, err := requestRestore(req.GetRestore())
		if err != nil {
			return nil, err
		}
		ready, err := impl.AreAdditionalItemsReady(idsFromProto(req.GetAdditionalItems()), restore)
		if err != nil {
			return nil, err
		}
		return &riav2.RestoreItemActionItemsReadyResponse{Ready: ready}, nil
	})
}

// RestoreItemActionClient returns the v1 RestoreItemAction called name,
// served by the process d was dispensed from (for
// api.KindRestoreItemAction). Each call is bounded by timeout; 0 means none.
func RestoreItemActionClient(d any, name string, timeout time.Duration) (api.RestoreItemAction, error) {
	conn, err := dispensed(d, api.KindRestoreItemAction, name)
	if err != nil {
		return nil, err
	}
	return &restoreItemActionClient{base{api.KindRestoreItemAction, name, timeout}, generated.NewRestoreItemActionClient(conn)}, nil
}

type restoreItemActionClient struct {
	base
	rpc generated.RestoreItemActionClient
}

func (c *restoreItemActionClient) AppliesTo() (api.ResourceSelector, error) {
	ctx, cancel := c.context()
	defer cancel()
	res, err := c.rpc.AppliesTo(ctx, &generated.RestoreItemActionAppliesToRequest{Plugin: c.name})
	if err != nil {
		return api.ResourceSelector{}, c.fail("AppliesTo", err)
	}
	return selectorFromProto(res.GetResourceSelector()), nil
}

func (c *restoreItemActionClient) Execute(in *api.RestoreItemActionExecuteInput) (*api.RestoreItemActionExecuteOutput, error) {
	item, fromBackup, restore, err := encodeRestoreInput(in)
	if err != nil {
		return nil, c.local("Execute", err)
	}
	ctx, cancel := c.context()
	defer cancel()
	res, err := c.rpc.Execute(ctx, &generated.RestoreItemActionExecuteRequest{Plugin: c.name, Item: item, ItemFromBackup: fromBackup, Restore: restore})
	if err != nil {
		return nil, c.fail("Execute", err)
	}
	updated, err := returnedItem(res.GetItem(), in.Item)
	if err != nil {
		return nil, c.local("Execute", err)
	}
	return &api.RestoreItemActionExecuteOutput{
		UpdatedItem:     updated,
		AdditionalItems: idsFromProto(res.GetAdditionalItems()),
		SkipRestore:     res.GetSkipRestore(),
	}, nil
}

// RestoreItemActionV2Client returns the v2 RestoreItemAction called name,
// served by the process d was dispensed from. Given a Dispenser for
// api.KindRestoreItemAction, it returns the v1 action adapted to v2 (see
// AdaptableTo). Each call is bounded by timeout; 0 means none.
func RestoreItemActionV2Client(d any, name string, timeout time.Duration) (api.RestoreItemActionV2, error) {
	if disp, ok := d.(*dispenser); ok && disp.kind == api.KindRestoreItemAction {
		a, err := RestoreItemActionClient(d, name, timeout)
		if err != nil {
			return nil, err
		}
		return AdaptRestoreItemAction(name, a), nil
	}
	conn, err := dispensed(d, api.KindRestoreItemActionV2, name)
	if err != nil {
		return nil, err
	}
	return &restoreItemActionV2Client{base{api.KindRestoreItemActionV2, name, timeout}, riav2.NewRestoreItemActionClient(conn)}, nil
}

type restoreItemActionV2Client struct {
	base
	rpc riav2.RestoreItemActionClient
}

// Name is not asked of the plugin: the protocol has no such call, and the
// host already knows the name it dispensed.
func (c *restoreItemActionV2Client) Name() string { return c.name }

func (c *restoreItemActionV2Client) AppliesTo() (api.ResourceSelector, error) {
	ctx, cancel := c.context()
	defer cancel()
	res, err := c.rpc.AppliesTo(ctx, &riav2.RestoreItemActionAppliesToRequest{Plugin: c.name})
	if err != nil {
		return api.ResourceSelector{}, c.fail("AppliesTo", err)
	}
	return selectorFromProto(res.GetResourceSelector()), nil
}

func (c *restoreItemActionV2Client) Execute(in *api.RestoreItemActionExecuteInput) (*api.RestoreItemActionExecuteOutput, error) {
	item, fromBackup, restore, err := encodeRestoreInput(in)
	if err != nil {
		return nil, c.local("Execute", err)
	}
	ctx, cancel := c.context()
	defer cancel()
	res, err := c.rpc.Execute(ctx, &riav2.RestoreItemActionExecuteRequest{Plugin: c.name, Item: item, ItemFromBackup: fromBackup, Restore: restore})
	if err != nil {
		return nil, c.fail("Execute", err)
	}
	updated, err := returnedItem(res.GetItem(), in.Item)
	if err != nil {
		return nil, c.local("Execute", err)
	}
	return &api.RestoreItemActionExecuteOutput{
		UpdatedItem:                 updated,
		AdditionalItems:             idsFromProto(res.GetAdditionalItems()),
		SkipRestore:                 res.GetSkipRestore(),
		OperationID:                 res.GetOperationID(),
		WaitForAdditionalItems:      res.GetWaitForAdditionalItems(),
		AdditionalItemsReadyTimeout: res.GetAdditionalItemsReadyTimeout().AsDuration(),
	}, nil
}

func (c *restoreItemActionV2Client) Progress(operationID string, restore *v1.Restore) (api.OperationProgress, error) {
	restoreJSON, err := encodeObject("restore", restore)
	if err != nil {
		return api.OperationProgress{}, c.local("Progress", err)
	}
	ctx, cancel := c.context()
	defer cancel()
	res, err := c.rpc.Progress(ctx, &riav2.RestoreItemActionProgressRequest{Plugin: c.name, OperationID: operationID, Restore: restoreJSON})
	if err != nil {
		return api.OperationProgress{}, c.fail("Progress", err)
	}
	return progressFromProto(res.GetProgress()), nil
}

func (c *restoreItemActionV2Client) Cancel(operationID string, restore *v1.Restore) error {
	restoreJSON, err := encodeObject("restore", restore)
	if err != nil {
		return c.local("Cancel", err)
	}
	ctx, cancel := c.context()
	defer cancel()
	_, err = c.rpc.Cancel(ctx, &riav2.RestoreItemActionCancelRequest{Plugin: c.name, OperationID: operationID, Restore: restoreJSON})
	return c.fail("Cancel", err)
}

func (c *restoreItemActionV2Client) AreAdditionalItemsReady(items []api.ResourceIdentifier, restore *v1.Restore) (bool, error) {
	restoreJSON, err := encodeObject("restore", restore)
	if err != nil {
		return false, c.local("AreAdditionalItemsReady", err)
	}
	ctx, cancel := c.context()
	defer cancel()
	res, err := c.rpc.AreAdditionalItemsReady(ctx, &riav2.RestoreItemActionItemsReadyRequest{Plugin: c.name, Restore: restoreJSON, AdditionalItems: idsToProto(items)})
	if err != nil {
		return false, c.fail("AreAdditionalItemsReady", err)
	}
	return res.GetReady(), nil
}

func encodeRestoreInput(in *api.RestoreItemActionExecuteInput) (item, fromBackup, restore []byte, err error) {
	if in == nil {
		return nil, nil, nil, errors.New("no input")
	}
	if item, err = encodeItem("item", in.Item); err != nil {
		return nil, nil, nil, err
	}
	fromBackup = item
	if in.ItemFromBackup != nil {
		if fromBackup, err = encodeItem("item from the backup", in.ItemFromBackup); err != nil {
			return nil, nil, nil, err
		}
	}
	if restore, err = encodeObject("restore", in.Restore); err != nil {
		return nil, nil, nil, err
	}
	return item, fromBackup, restore, nil
}

package framework

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	ibav1 "github.com/lifeboat-io/lifeboat/pkg/plugin/generated/itemblockaction/v1"
)

type itemBlockActionServer struct {
	ibav1.UnimplementedItemBlockActionServer
	m *mux
}

func (s *itemBlockActionServer) AppliesTo(_ context.Context, req *ibav1.ItemBlockActionAppliesToRequest) (*ibav1.ItemBlockActionAppliesToResponse, error) {
	return serve(s.m, req.GetPlugin(), "AppliesTo", func(impl api.ItemBlockAction) (*ibav1.ItemBlockActionAppliesToResponse, error) {
		sel, err := impl.AppliesTo()
		if err != nil {
			return nil, err
		}
		return &ibav1.ItemBlockActionAppliesToResponse{ResourceSelector: selectorToProto(sel)}, nil
	})
}

func (s *itemBlockActionServer) GetRelatedItems(_ context.Context, req *ibav1.ItemBlockActionGetRelatedItemsRequest) (*ibav1.ItemBlockActionGetRelatedItemsResponse, error) {
	return serve(s.m, req.GetPlugin(), "GetRelatedItems", func(impl api.ItemBlockAction) (*ibav1.ItemBlockActionGetRelatedItemsResponse, error) {
		item, err := requestItem("item", req.GetItem())
		if err != nil {
			return nil, err
		}
		backup, err := requestBackup(req.GetBackup())
		if err != nil {
			return nil, err
		}
		related, err := impl.GetRelatedItems(item, backup)
		if err != nil {
			return nil, err
		}
		return &ibav1.ItemBlockActionGetRelatedItemsResponse{RelatedItems: idsToProto(related)}, nil
	})
}

// ItemBlockActionClient returns the ItemBlockAction called name, served by
// the process d was dispensed from (for api.KindItemBlockAction). Each call
// is bounded by timeout; 0 means no bound.
func ItemBlockActionClient(d any, name string, timeout time.Duration) (api.ItemBlockAction, error) {
	conn, err := dispensed(d, api.KindItemBlockAction, name)
	if err != nil {
		return nil, err
	}
	return &itemBlockActionClient{base{api.KindItemBlockAction, name, timeout}, ibav1.NewItemBlockActionClient(conn)}, nil
}

type itemBlockActionClient struct {
	base
	rpc ibav1.ItemBlockActionClient
}

// Name is not asked of the plugin: the protocol has no such call, and the
// host already knows the name it dispensed.
func (c *itemBlockActionClient) Name() string { return c.name }

func (c *itemBlockActionClient) AppliesTo() (api.ResourceSelector, error) {
	ctx, cancel := c.context()
	defer cancel()
	res, err := c.rpc.AppliesTo(ctx, &ibav1.ItemBlockActionAppliesToRequest{Plugin: c.name})
	if err != nil {
		return api.ResourceSelector{}, c.fail("AppliesTo", err)
	}
	return selectorFromProto(res.GetResourceSelector()), nil
}

func (c *itemBlockActionClient) GetRelatedItems(item runtime.Unstructured, backup *v1.Backup) ([]api.ResourceIdentifier, error) {
	itemJSON, err := encodeItem("item", item)
	if err != nil {
		return nil, c.local("GetRelatedItems", err)
	}
	backupJSON, err := encodeObject("backup", backup)
	if err != nil {
		return nil, c.local("GetRelatedItems", err)
	}
	ctx, cancel := c.context()
	defer cancel()
	res, err := c.rpc.GetRelatedItems(ctx, &ibav1.ItemBlockActionGetRelatedItemsRequest{Plugin: c.name, Item: itemJSON, Backup: backupJSON})
	if err != nil {
		return nil, c.fail("GetRelatedItems", err)
	}
	return idsFromProto(res.GetRelatedItems()), nil
}

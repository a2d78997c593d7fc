package framework

import (
	"context"
	"errors"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/emptypb"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/generated"
	biav2 "github.com/lifeboat-io/lifeboat/pkg/plugin/generated/backupitemaction/v2"
)

// updatedItemJSON is what Execute sends back: a nil updated item means "no
// change", and the host (Velero's included) expects the item either way.
func updatedItemJSON(updated runtime.Unstructured, original []byte) ([]byte, error) {
	if updated == nil {
		return original, nil
	}
	return encodeItem("updated item", updated)
}

type backupItemActionServer struct {
	generated.UnimplementedBackupItemActionServer
	m *mux
}

func (s *backupItemActionServer) AppliesTo(_ context.Context, req *generated.BackupItemActionAppliesToRequest) (*generated.BackupItemActionAppliesToResponse, error) {
	return serve(s.m, req.GetPlugin(), "AppliesTo", func(impl api.BackupItemAction) (*generated.BackupItemActionAppliesToResponse, error) {
		sel, err := impl.AppliesTo()
		if err != nil {
			return nil, err
		}
		return &generated.BackupItemActionAppliesToResponse{ResourceSelector: selectorToProto(sel)}, nil
	})
}

func (s *backupItemActionServer) Execute(_ context.Context, req *generated.ExecuteRequest) (*generated.ExecuteResponse, error) {
	return serve(s.m, req.GetPlugin(), "Execute", func(impl api.BackupItemAction) (*generated.ExecuteResponse, error) {
		item, err := requestItem("item", req.GetItem())
		if err != nil {
			return nil, err
		}
		backup, err := requestBackup(req.GetBackup())
		if err != nil {
			return nil, err
		}
		updated, additional, err := impl.Execute(item, backup)
		if err != nil {
			return nil, err
		}
		out, err := updatedItemJSON(updated, req.GetItem())
		if err != nil {
			return nil, err
		}
		return &generated.ExecuteResponse{Item: out, AdditionalItems: idsToProto(additional)}, nil
	})
}

type backupItemActionV2Server struct {
	biav2.UnimplementedBackupItemActionServer
	m *mux
}

func (s *backupItemActionV2Server) AppliesTo(_ context.Context, req *biav2.BackupItemActionAppliesToRequest) (*biav2.BackupItemActionAppliesToResponse, error) {
	return serve(s.m, req.GetPlugin(), "AppliesTo", func(impl api.BackupItemActionV2) (*biav2.BackupItemActionAppliesToResponse, error) {
		sel, err := impl.AppliesTo()
		if err != nil {
			return nil, err
		}
		return &biav2.BackupItemActionAppliesToResponse{ResourceSelector: selectorToProto(sel)}, nil
	})
}

func (s *backupItemActionV2Server) Execute(_ context.Context, req *biav2.ExecuteRequest) (*biav2.ExecuteResponse, error) {
	return serve(s.m, req.GetPlugin(), "Execute", func(impl api.BackupItemActionV2) (*biav2.ExecuteResponse, error) {
		item, err := requestItem("item", req.GetItem())
		if err != nil {
			return nil, err
		}
		backup, err := requestBackup(req.GetBackup())
		if err != nil {
			return nil, err
		}
		updated, additional, operationID, postOperation, err := impl.Execute(item, backup)
		if err != nil {
			return nil, err
		}
		out, err := updatedItemJSON(updated, req.GetItem())
		if err != nil {
			return nil, err
		}
		return &biav2.ExecuteResponse{
			Item:               out,
			AdditionalItems:    idsToProto(additional),
			OperationID:        operationID,
			PostOperationItems: idsToProto(postOperation),
		}, nil
	})
}

func (s *backupItemActionV2Server) Progress(_ context.Context, req *biav2.BackupItemActionProgressRequest) (*biav2.BackupItemActionProgressResponse, error) {
	return serve(s.m, req.GetPlugin(), "Progress", func(impl api.BackupItemActionV2) (*biav2.BackupItemActionProgressResponse, error) {
		backup, err := requestBackup(req.GetBackup())
		if err != nil {
			return nil, err
		}
		progress, err := impl.Progress(req.GetOperationID(), backup)
		if err != nil {
			return nil, err
		}
		return &biav2.BackupItemActionProgressResponse{Progress: progressToProto(progress)}, nil
	})
}

func (s *backupItemActionV2Server) Cancel(_ context.Context, req *biav2.BackupItemActionCancelRequest) (*emptypb.Empty, error) {
	return serve(s.m, req.GetPlugin(), "Cancel", func(impl api.BackupItemActionV2) (*emptypb.Empty, error) {
		backup, err := requestBackup(req.GetBackup())
		if err != nil {
			return nil, err
		}
		if err := impl.Cancel(req.GetOperationID(), backup); err != nil {
			return nil, err
		}
		return &emptypb.Empty{}, nil
	})
}

// BackupItemActionClient returns the v1 BackupItemAction called name,
// served by the process d was dispensed from (for
// api.KindBackupItemAction). Each call is bounded by timeout; 0 means none.
func BackupItemActionClient(d any, name string, timeout time.Duration) (api.BackupItemAction, error) {
	disp, err := dispenserOf(d, api.KindBackupItemAction, name)
	if err != nil {
		return nil, err
	}
	return &backupItemActionClient{base{api.KindBackupItemAction, name, timeout}, generated.NewBackupItemActionClient(disp.conn), disp.streams}, nil
}

type backupItemActionClient struct {
	base
	rpc generated.BackupItemActionClient
	// streams, when set, carries Execute calls if the process serves it.
	streams *executeStreams
}

func (c *backupItemActionClient) AppliesTo() (api.ResourceSelector, error) {
	ctx, cancel := c.context()
	defer cancel()
	res, err := c.rpc.AppliesTo(ctx, &generated.BackupItemActionAppliesToRequest{Plugin: c.name})
	if err != nil {
		return api.ResourceSelector{}, c.fail("AppliesTo", err)
	}
	return selectorFromProto(res.GetResourceSelector()), nil
}

func (c *backupItemActionClient) Execute(item runtime.Unstructured, backup *v1.Backup) (runtime.Unstructured, []api.ResourceIdentifier, error) {
	itemJSON, backupJSON, err := encodeItemAndBackup(item, backup)
	if err != nil {
		return nil, nil, c.local("Execute", err)
	}
	if r, err := c.executeOver(c.streams, itemJSON, backupJSON); !errors.Is(err, errNoStream) {
		if err != nil {
			return nil, nil, err
		}
		updated, err := returnedItem(r.GetItem(), item)
		if err != nil {
			return nil, nil, c.local("Execute", err)
		}
		return updated, idsFromProto(r.GetAdditionalItems()), nil
	}
	ctx, cancel := c.context()
	defer cancel()
	res, err := c.rpc.Execute(ctx, &generated.ExecuteRequest{Plugin: c.name, Item: itemJSON, Backup: backupJSON})
	if err != nil {
		return nil, nil, c.fail("Execute", err)
	}
	updated, err := returnedItem(res.GetItem(), item)
	if err != nil {
		return nil, nil, c.local("Execute", err)
	}
	return updated, idsFromProto(res.GetAdditionalItems()), nil
}

// BackupItemActionV2Client returns the v2 BackupItemAction called name,
// served by the process d was dispensed from. Given a Dispenser for
// api.KindBackupItemAction, it returns the v1 action adapted to v2 (see
// AdaptableTo). Each call is bounded by timeout; 0 means none.
func BackupItemActionV2Client(d any, name string, timeout time.Duration) (api.BackupItemActionV2, error) {
	if disp, ok := d.(*dispenser); ok && disp.kind == api.KindBackupItemAction {
		a, err := BackupItemActionClient(d, name, timeout)
		if err != nil {
			return nil, err
		}
		return AdaptBackupItemAction(name, a), nil
	}
	disp, err := dispenserOf(d, api.KindBackupItemActionV2, name)
	if err != nil {
		return nil, err
	}
	return &backupItemActionV2Client{base{api.KindBackupItemActionV2, name, timeout}, biav2.NewBackupItemActionClient(disp.conn), disp.streams}, nil
}

type backupItemActionV2Client struct {
	base
	rpc biav2.BackupItemActionClient
	// streams, when set, carries Execute calls if the process serves it.
	streams *executeStreams
}

// Name is not asked of the plugin: the protocol has no such call, and the
// host already knows the name it dispensed.
func (c *backupItemActionV2Client) Name() string { return c.name }

func (c *backupItemActionV2Client) AppliesTo() (api.ResourceSelector, error) {
	ctx, cancel := c.context()
	defer cancel()
	res, err := c.rpc.AppliesTo(ctx, &biav2.BackupItemActionAppliesToRequest{Plugin: c.name})
	if err != nil {
		return api.ResourceSelector{}, c.fail("AppliesTo", err)
	}
	return selectorFromProto(res.GetResourceSelector()), nil
}

func (c *backupItemActionV2Client) Execute(item runtime.Unstructured, backup *v1.Backup) (runtime.Unstructured, []api.ResourceIdentifier, string, []api.ResourceIdentifier, error) {
	itemJSON, backupJSON, err := encodeItemAndBackup(item, backup)
	if err != nil {
		return nil, nil, "", nil, c.local("Execute", err)
	}
	if r, err := c.executeOver(c.streams, itemJSON, backupJSON); !errors.Is(err, errNoStream) {
		if err != nil {
			return nil, nil, "", nil, err
		}
		updated, err := returnedItem(r.GetItem(), item)
		if err != nil {
			return nil, nil, "", nil, c.local("Execute", err)
		}
		return updated, idsFromProto(r.GetAdditionalItems()), r.GetOperationID(), idsFromProto(r.GetPostOperationItems()), nil
	}
	ctx, cancel := c.context()
	defer cancel()
	res, err := c.rpc.Execute(ctx, &biav2.ExecuteRequest{Plugin: c.name, Item: itemJSON, Backup: backupJSON})
	if err != nil {
		return nil, nil, "", nil, c.fail("Execute", err)
	}
	updated, err := returnedItem(res.GetItem(), item)
	if err != nil {
		return nil, nil, "", nil, c.local("Execute", err)
	}
	return updated, idsFromProto(res.GetAdditionalItems()), res.GetOperationID(), idsFromProto(res.GetPostOperationItems()), nil
}

func (c *backupItemActionV2Client) Progress(operationID string, backup *v1.Backup) (api.OperationProgress, error) {
	backupJSON, err := encodeObject("backup", backup)
	if err != nil {
		return api.OperationProgress{}, c.local("Progress", err)
	}
	ctx, cancel := c.context()
	defer cancel()
	res, err := c.rpc.Progress(ctx, &biav2.BackupItemActionProgressRequest{Plugin: c.name, OperationID: operationID, Backup: backupJSON})
	if err != nil {
		return api.OperationProgress{}, c.fail("Progress", err)
	}
	return progressFromProto(res.GetProgress()), nil
}

func (c *backupItemActionV2Client) Cancel(operationID string, backup *v1.Backup) error {
	backupJSON, err := encodeObject("backup", backup)
	if err != nil {
		return c.local("Cancel", err)
	}
	ctx, cancel := c.context()
	defer cancel()
	_, err = c.rpc.Cancel(ctx, &biav2.BackupItemActionCancelRequest{Plugin: c.name, OperationID: operationID, Backup: backupJSON})
	return c.fail("Cancel", err)
}

func encodeItemAndBackup(item runtime.Unstructured, backup *v1.Backup) ([]byte, []byte, error) {
	itemJSON, err := encodeItem("item", item)
	if err != nil {
		return nil, nil, err
	}
	backupJSON, err := encodeBackupOnce(backup)
	if err != nil {
		return nil, nil, err
	}
	return itemJSON, backupJSON, nil
}

// returnedItem is the item a plugin sent back, still as JSON: a server that
// only stores it never pays for decoding and encoding it again. A plugin
// that sent none (not one built with Velero's or this SDK, which always
// send it) leaves the item unchanged rather than lost.
func returnedItem(data []byte, sent runtime.Unstructured) (runtime.Unstructured, error) {
	if len(data) == 0 {
		return sent, nil
	}
	return api.NewRawItem(data), nil
}

// sentBackup remembers the last backup encoded for a plugin call: a backup
// sends the same Backup with every item. Callers pass one unchanging
// Backup (by pointer) for a whole backup; a changed Backup must be a new
// pointer.
var sentBackup struct {
	sync.Mutex
	backup *v1.Backup
	data   []byte
}

func encodeBackupOnce(backup *v1.Backup) ([]byte, error) {
	sentBackup.Lock()
	defer sentBackup.Unlock()
	if backup != nil && sentBackup.backup == backup {
		return sentBackup.data, nil
	}
	data, err := encodeObject("backup", backup)
	if err != nil {
		return nil, err
	}
	sentBackup.backup, sentBackup.data = backup, data
	return data, nil
}

package framework

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	pluginv1 "github.com/lifeboat-io/lifeboat/pkg/plugin/generated/lifeboat/plugin/v1"
)

// backupItemActionStream is how BackupItemAction (v1 and v2) Execute calls
// travel over Lifeboat's BackupItemActionStream.
var backupItemActionStream = &callStreamSpec[*pluginv1.BackupItemExecute, *pluginv1.BackupItemResult, pluginv1.ExecuteStreamRequest, pluginv1.ExecuteStreamResponse]{
	open: func(ctx context.Context, conn grpc.ClientConnInterface) (grpc.BidiStreamingClient[pluginv1.ExecuteStreamRequest, pluginv1.ExecuteStreamResponse], error) {
		return pluginv1.NewBackupItemActionStreamClient(conn).ExecuteStream(ctx)
	},
	setID:     func(c *pluginv1.BackupItemExecute, id uint64) { c.Id = id },
	setBackup: func(c *pluginv1.BackupItemExecute, b []byte) { c.Backup = b },
	callSize:  func(c *pluginv1.BackupItemExecute) int { return len(c.Item) },
	request: func(calls []*pluginv1.BackupItemExecute) *pluginv1.ExecuteStreamRequest {
		return &pluginv1.ExecuteStreamRequest{Calls: calls}
	},
	results:   (*pluginv1.ExecuteStreamResponse).GetResults,
	resultID:  (*pluginv1.BackupItemResult).GetId,
	resultErr: (*pluginv1.BackupItemResult).GetError,

	calls:  (*pluginv1.ExecuteStreamRequest).GetCalls,
	backup: (*pluginv1.BackupItemExecute).GetBackup,
	response: func(results []*pluginv1.BackupItemResult) *pluginv1.ExecuteStreamResponse {
		return &pluginv1.ExecuteStreamResponse{Results: results}
	},
	resultSize: func(r *pluginv1.BackupItemResult) int { return len(r.GetItem()) + perCallBytes },
}

// executeStreams is the host side of BackupItemActionStream for one plugin
// process.
type executeStreams = callStreams[*pluginv1.BackupItemExecute, *pluginv1.BackupItemResult, pluginv1.ExecuteStreamRequest, pluginv1.ExecuteStreamResponse]

// backupItemActionStreamServer is the plugin side of the stream.
type backupItemActionStreamServer struct {
	pluginv1.UnimplementedBackupItemActionStreamServer
	v1, v2 *mux
}

func (s *backupItemActionStreamServer) ExecuteStream(stream pluginv1.BackupItemActionStream_ExecuteStreamServer) error {
	return serveCallStream(backupItemActionStream, stream, s.execute)
}

// execute runs one call as the unary Execute would, through serve (so a
// panic or an error is reported the same way), and returns its result.
func (s *backupItemActionStreamServer) execute(call *pluginv1.BackupItemExecute, backupJSON []byte) *pluginv1.BackupItemResult {
	res := &pluginv1.BackupItemResult{Id: call.GetId()}
	var err error
	switch kind := api.Kind(call.GetKind()); kind {
	case api.KindBackupItemAction:
		_, err = serve(s.v1, call.GetPlugin(), "Execute", func(impl api.BackupItemAction) (struct{}, error) {
			item, backup, err := requestItemAndBackup(call.GetItem(), backupJSON)
			if err != nil {
				return struct{}{}, err
			}
			updated, additional, err := impl.Execute(item, backup)
			if err != nil {
				return struct{}{}, err
			}
			if updated != nil {
				if res.Item, err = encodeItem("updated item", updated); err != nil {
					return struct{}{}, err
				}
			}
			res.AdditionalItems = idsToProto(additional)
			return struct{}{}, nil
		})
	case api.KindBackupItemActionV2:
		_, err = serve(s.v2, call.GetPlugin(), "Execute", func(impl api.BackupItemActionV2) (struct{}, error) {
			item, backup, err := requestItemAndBackup(call.GetItem(), backupJSON)
			if err != nil {
				return struct{}{}, err
			}
			updated, additional, operationID, postOperation, err := impl.Execute(item, backup)
			if err != nil {
				return struct{}{}, err
			}
			if updated != nil {
				if res.Item, err = encodeItem("updated item", updated); err != nil {
					return struct{}{}, err
				}
			}
			res.AdditionalItems = idsToProto(additional)
			res.OperationID = operationID
			res.PostOperationItems = idsToProto(postOperation)
			return struct{}{}, nil
		})
	default:
		err = status.Errorf(codes.InvalidArgument, "the stream serves BackupItemAction and BackupItemActionV2 calls, not %q", kind)
	}
	if err == nil && len(res.Item) > maxResultBytes {
		err = status.Errorf(codes.ResourceExhausted, "the updated item is %d bytes, more than a plugin may return (%d)", len(res.Item), maxResultBytes)
	}
	if err != nil {
		return &pluginv1.BackupItemResult{Id: call.GetId(), Error: callErrorToProto(err)}
	}
	return res
}

func requestItemAndBackup(itemJSON, backupJSON []byte) (*unstructured.Unstructured, *v1.Backup, error) {
	item, err := requestItem("item", itemJSON)
	if err != nil {
		return nil, nil, err
	}
	backup, err := requestBackup(backupJSON)
	if err != nil {
		return nil, nil, err
	}
	return item, backup, nil
}

// executeOver makes a BackupItemAction Execute call over the process's
// stream (see callOver).
func (c base) executeOver(streams *executeStreams, item, backup []byte) (*pluginv1.BackupItemResult, error) {
	return callOver(c, streams, &pluginv1.BackupItemExecute{Kind: string(c.kind), Plugin: c.name, Item: item}, item, backup)
}

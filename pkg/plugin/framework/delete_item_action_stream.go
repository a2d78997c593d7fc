package framework

import (
	"context"

	"google.golang.org/grpc"

	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	pluginv1 "github.com/lifeboat-io/lifeboat/pkg/plugin/generated/lifeboat/plugin/v1"
)

// deleteItemActionStream is how DeleteItemAction Execute calls travel over
// Lifeboat's DeleteItemActionStream: a backup's deletion passes every item
// to each action that applies to it, and unary calls cost more than most
// actions' own work.
var deleteItemActionStream = &callStreamSpec[*pluginv1.DeleteItemExecute, *pluginv1.DeleteItemResult, pluginv1.DeleteItemStreamRequest, pluginv1.DeleteItemStreamResponse]{
	open: func(ctx context.Context, conn grpc.ClientConnInterface) (grpc.BidiStreamingClient[pluginv1.DeleteItemStreamRequest, pluginv1.DeleteItemStreamResponse], error) {
		return pluginv1.NewDeleteItemActionStreamClient(conn).ExecuteStream(ctx)
	},
	setID:     func(c *pluginv1.DeleteItemExecute, id uint64) { c.Id = id },
	setBackup: func(c *pluginv1.DeleteItemExecute, b []byte) { c.Backup = b },
	callSize:  func(c *pluginv1.DeleteItemExecute) int { return len(c.Item) },
	request: func(calls []*pluginv1.DeleteItemExecute) *pluginv1.DeleteItemStreamRequest {
		return &pluginv1.DeleteItemStreamRequest{Calls: calls}
	},
	results:   (*pluginv1.DeleteItemStreamResponse).GetResults,
	resultID:  (*pluginv1.DeleteItemResult).GetId,
	resultErr: (*pluginv1.DeleteItemResult).GetError,

	calls:  (*pluginv1.DeleteItemStreamRequest).GetCalls,
	backup: (*pluginv1.DeleteItemExecute).GetBackup,
	response: func(results []*pluginv1.DeleteItemResult) *pluginv1.DeleteItemStreamResponse {
		return &pluginv1.DeleteItemStreamResponse{Results: results}
	},
	resultSize: func(*pluginv1.DeleteItemResult) int { return perCallBytes },
}

// deleteStreams is the host side of DeleteItemActionStream for one plugin
// process.
type deleteStreams = callStreams[*pluginv1.DeleteItemExecute, *pluginv1.DeleteItemResult, pluginv1.DeleteItemStreamRequest, pluginv1.DeleteItemStreamResponse]

// deleteItemActionStreamServer is the plugin side of the stream.
type deleteItemActionStreamServer struct {
	pluginv1.UnimplementedDeleteItemActionStreamServer
	m *mux
}

func (s *deleteItemActionStreamServer) ExecuteStream(stream pluginv1.DeleteItemActionStream_ExecuteStreamServer) error {
	return serveCallStream(deleteItemActionStream, stream, s.execute)
}

// execute runs one call as the unary Execute would, through serve (so a
// panic or an error is reported the same way), and returns its result.
func (s *deleteItemActionStreamServer) execute(call *pluginv1.DeleteItemExecute, backupJSON []byte) *pluginv1.DeleteItemResult {
	_, err := serve(s.m, call.GetPlugin(), "Execute", func(impl api.DeleteItemAction) (struct{}, error) {
		return struct{}{}, executeDeleteItemAction(impl, call.GetItem(), backupJSON)
	})
	if err != nil {
		return &pluginv1.DeleteItemResult{Id: call.GetId(), Error: callErrorToProto(err)}
	}
	return &pluginv1.DeleteItemResult{Id: call.GetId()}
}

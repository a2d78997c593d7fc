package framework

import (
	"context"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/generated"
)

type objectStoreServer struct {
	generated.UnimplementedObjectStoreServer
	m *mux
}

func (s *objectStoreServer) Init(_ context.Context, req *generated.ObjectStoreInitRequest) (*generated.Empty, error) {
	return serve(s.m, req.GetPlugin(), "Init", func(impl api.ObjectStore) (*generated.Empty, error) {
		if err := impl.Init(req.GetConfig()); err != nil {
			return nil, err
		}
		return &generated.Empty{}, nil
	})
}

// PutObject takes plugin, bucket and key from the first chunk; the host
// repeats them in every chunk, and the later copies are ignored.
func (s *objectStoreServer) PutObject(stream grpc.ClientStreamingServer[generated.PutObjectRequest, generated.Empty]) error {
	first, err := stream.Recv()
	if err == io.EOF {
		return status.Error(codes.InvalidArgument, "PutObject: the stream ended before its first chunk, which names the plugin")
	}
	if err != nil {
		return err
	}
	_, err = serve(s.m, first.GetPlugin(), "PutObject", func(impl api.ObjectStore) (struct{}, error) {
		body := &chunkReader{pending: first.GetBody(), next: func() ([]byte, error) {
			chunk, err := stream.Recv()
			if err == io.EOF {
				return nil, io.EOF
			}
			if err != nil {
				return nil, fmt.Errorf("receiving %s/%s from the host: %w", first.GetBucket(), first.GetKey(), err)
			}
			return chunk.GetBody(), nil
		}}
		return struct{}{}, impl.PutObject(first.GetBucket(), first.GetKey(), body)
	})
	if err != nil {
		return err
	}
	return stream.SendAndClose(&generated.Empty{})
}

func (s *objectStoreServer) ObjectExists(_ context.Context, req *generated.ObjectExistsRequest) (*generated.ObjectExistsResponse, error) {
	return serve(s.m, req.GetPlugin(), "ObjectExists", func(impl api.ObjectStore) (*generated.ObjectExistsResponse, error) {
		exists, err := impl.ObjectExists(req.GetBucket(), req.GetKey())
		if err != nil {
			return nil, err
		}
		return &generated.ObjectExistsResponse{Exists: exists}, nil
	})
}

func (s *objectStoreServer) GetObject(req *generated.GetObjectRequest, stream grpc.ServerStreamingServer[generated.Bytes]) error {
	_, err := serve(s.m, req.GetPlugin(), "GetObject", func(impl api.ObjectStore) (struct{}, error) {
		body, err := impl.GetObject(req.GetBucket(), req.GetKey())
		if err != nil {
			return struct{}{}, err
		}
		defer body.Close()
		for {
			// A fresh buffer per chunk: gRPC may still hold the message
			// after Send returns.
			buf := make([]byte, chunkSize)
			n, err := io.ReadFull(body, buf)
			if n > 0 {
				if serr := stream.Send(&generated.Bytes{Data: buf[:n]}); serr != nil {
					return struct{}{}, &requestError{code: codes.Canceled, err: fmt.Errorf("sending %s/%s to the host: %w", req.GetBucket(), req.GetKey(), serr)}
				}
			}
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return struct{}{}, nil
			}
			if err != nil {
				return struct{}{}, fmt.Errorf("reading %s/%s: %w", req.GetBucket(), req.GetKey(), err)
			}
		}
	})
	return err
}

func (s *objectStoreServer) ListCommonPrefixes(_ context.Context, req *generated.ListCommonPrefixesRequest) (*generated.ListCommonPrefixesResponse, error) {
	return serve(s.m, req.GetPlugin(), "ListCommonPrefixes", func(impl api.ObjectStore) (*generated.ListCommonPrefixesResponse, error) {
		prefixes, err := impl.ListCommonPrefixes(req.GetBucket(), req.GetPrefix(), req.GetDelimiter())
		if err != nil {
			return nil, err
		}
		return &generated.ListCommonPrefixesResponse{Prefixes: prefixes}, nil
	})
}

func (s *objectStoreServer) ListObjects(_ context.Context, req *generated.ListObjectsRequest) (*generated.ListObjectsResponse, error) {
	return serve(s.m, req.GetPlugin(), "ListObjects", func(impl api.ObjectStore) (*generated.ListObjectsResponse, error) {
		keys, err := impl.ListObjects(req.GetBucket(), req.GetPrefix())
		if err != nil {
			return nil, err
		}
		return &generated.ListObjectsResponse{Keys: keys}, nil
	})
}

func (s *objectStoreServer) DeleteObject(_ context.Context, req *generated.DeleteObjectRequest) (*generated.Empty, error) {
	return serve(s.m, req.GetPlugin(), "DeleteObject", func(impl api.ObjectStore) (*generated.Empty, error) {
		if err := impl.DeleteObject(req.GetBucket(), req.GetKey()); err != nil {
			return nil, err
		}
		return &generated.Empty{}, nil
	})
}

func (s *objectStoreServer) CreateSignedURL(_ context.Context, req *generated.CreateSignedURLRequest) (*generated.CreateSignedURLResponse, error) {
	return serve(s.m, req.GetPlugin(), "CreateSignedURL", func(impl api.ObjectStore) (*generated.CreateSignedURLResponse, error) {
		url, err := impl.CreateSignedURL(req.GetBucket(), req.GetKey(), time.Duration(req.GetTtl()))
		if err != nil {
			return nil, err
		}
		return &generated.CreateSignedURLResponse{Url: url}, nil
	})
}

// ObjectStoreClient returns the ObjectStore called name, served by the
// process d was dispensed from (for api.KindObjectStore). Each call is
// bounded by timeout (0: no bound); for PutObject and GetObject, which may
// move any amount of data, the bound is on each wait for the plugin (to
// take or give a chunk), not on the whole transfer.
func ObjectStoreClient(d any, name string, timeout time.Duration) (api.ObjectStore, error) {
	conn, err := dispensed(d, api.KindObjectStore, name)
	if err != nil {
		return nil, err
	}
	return &objectStoreClient{base{api.KindObjectStore, name, timeout}, generated.NewObjectStoreClient(conn)}, nil
}

type objectStoreClient struct {
	base
	rpc generated.ObjectStoreClient
}

func (c *objectStoreClient) Init(config map[string]string) error {
	ctx, cancel := c.context()
	defer cancel()
	_, err := c.rpc.Init(ctx, &generated.ObjectStoreInitRequest{Plugin: c.name, Config: config})
	return c.fail("Init", err)
}

// PutObject always sends a first chunk, empty for an empty body: it is what
// tells the plugin which plugin, bucket and key the upload is for.
func (c *objectStoreClient) PutObject(bucket, key string, body io.Reader) error {
	const method = "PutObject"
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	w := newWatchdog(c.timeout, cancel)
	defer w.disarm()

	w.arm()
	stream, err := c.rpc.PutObject(ctx)
	w.disarm()
	if err != nil {
		return c.streamFail(ctx, w, method, err)
	}
	for first := true; ; first = false {
		buf := make([]byte, chunkSize)
		n, rerr := io.ReadFull(body, buf)
		if rerr != nil && rerr != io.EOF && rerr != io.ErrUnexpectedEOF {
			// Cancelling, not closing, the stream: the plugin must see a
			// broken upload, never a short object that looks complete.
			cancel(rerr)
			return c.local(method, fmt.Errorf("reading the body of %s/%s: %w", bucket, key, rerr))
		}
		if n > 0 || first {
			w.arm()
			err := stream.Send(&generated.PutObjectRequest{Plugin: c.name, Bucket: bucket, Key: key, Body: buf[:n]})
			if err == io.EOF {
				// The plugin ended the call early; its status says why.
				_, err = stream.CloseAndRecv()
			}
			w.disarm()
			if err != nil {
				return c.streamFail(ctx, w, method, err)
			}
		}
		if rerr != nil {
			break
		}
	}
	w.arm()
	_, err = stream.CloseAndRecv()
	w.disarm()
	if err != nil {
		return c.streamFail(ctx, w, method, err)
	}
	return nil
}

func (c *objectStoreClient) ObjectExists(bucket, key string) (bool, error) {
	ctx, cancel := c.context()
	defer cancel()
	res, err := c.rpc.ObjectExists(ctx, &generated.ObjectExistsRequest{Plugin: c.name, Bucket: bucket, Key: key})
	if err != nil {
		return false, c.fail("ObjectExists", err)
	}
	return res.GetExists(), nil
}

// GetObject waits for the first chunk before it returns, so that a missing
// object or an unknown plugin fails here rather than on the first Read.
func (c *objectStoreClient) GetObject(bucket, key string) (io.ReadCloser, error) {
	const method = "GetObject"
	ctx, cancel := context.WithCancelCause(context.Background())
	w := newWatchdog(c.timeout, cancel)
	r := &objectReader{cancel: cancel, w: w}

	w.arm()
	stream, err := c.rpc.GetObject(ctx, &generated.GetObjectRequest{Plugin: c.name, Bucket: bucket, Key: key})
	var first *generated.Bytes
	if err == nil {
		first, err = stream.Recv()
	}
	w.disarm()
	if err == io.EOF {
		r.err = io.EOF
		cancel(nil)
		return r, nil
	}
	if err != nil {
		failure := c.streamFail(ctx, w, method, err)
		cancel(nil)
		return nil, failure
	}
	r.pending = first.GetData()
	r.next = func() ([]byte, error) {
		w.arm()
		chunk, err := stream.Recv()
		w.disarm()
		if err == io.EOF {
			cancel(nil)
			return nil, io.EOF
		}
		if err != nil {
			failure := c.streamFail(ctx, w, method, err)
			cancel(nil)
			return nil, failure
		}
		return chunk.GetData(), nil
	}
	return r, nil
}

func (c *objectStoreClient) ListCommonPrefixes(bucket, prefix, delimiter string) ([]string, error) {
	ctx, cancel := c.context()
	defer cancel()
	res, err := c.rpc.ListCommonPrefixes(ctx, &generated.ListCommonPrefixesRequest{Plugin: c.name, Bucket: bucket, Prefix: prefix, Delimiter: delimiter})
	if err != nil {
		return nil, c.fail("ListCommonPrefixes", err)
	}
	return res.GetPrefixes(), nil
}

func (c *objectStoreClient) ListObjects(bucket, prefix string) ([]string, error) {
	ctx, cancel := c.context()
	defer cancel()
	res, err := c.rpc.ListObjects(ctx, &generated.ListObjectsRequest{Plugin: c.name, Bucket: bucket, Prefix: prefix})
	if err != nil {
		return nil, c.fail("ListObjects", err)
	}
	return res.GetKeys(), nil
}

func (c *objectStoreClient) DeleteObject(bucket, key string) error {
	ctx, cancel := c.context()
	defer cancel()
	_, err := c.rpc.DeleteObject(ctx, &generated.DeleteObjectRequest{Plugin: c.name, Bucket: bucket, Key: key})
	return c.fail("DeleteObject", err)
}

func (c *objectStoreClient) CreateSignedURL(bucket, key string, ttl time.Duration) (string, error) {
	ctx, cancel := c.context()
	defer cancel()
	res, err := c.rpc.CreateSignedURL(ctx, &generated.CreateSignedURLRequest{Plugin: c.name, Bucket: bucket, Key: key, Ttl: int64(ttl)})
	if err != nil {
		return "", c.fail("CreateSignedURL", err)
	}
	return res.GetUrl(), nil
}

package controller

import (
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// readTimeout bounds one read of the API server by a reconciler: a read
// that hangs must not hold a worker (and the objects it serves) forever.
const readTimeout = 30 * time.Second

// timedReader bounds every Get and List of the Reader it wraps by
// readTimeout.
type timedReader struct{ client.Reader }

func (t timedReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	return t.Reader.Get(ctx, key, obj, opts...)
}

func (t timedReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	return t.Reader.List(ctx, list, opts...)
}

package controller

import (
	"context"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// deadlineReader records the deadline each call was given.
type deadlineReader struct{ deadlines []time.Duration }

func (d *deadlineReader) record(ctx context.Context) {
	dl, ok := ctx.Deadline()
	if !ok {
		d.deadlines = append(d.deadlines, -1)
		return
	}
	d.deadlines = append(d.deadlines, time.Until(dl))
}

func (d *deadlineReader) Get(ctx context.Context, _ client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
	d.record(ctx)
	return nil
}

func (d *deadlineReader) List(ctx context.Context, _ client.ObjectList, _ ...client.ListOption) error {
	d.record(ctx)
	return nil
}

func TestTimedReaderBoundsEveryRead(t *testing.T) {
	inner := &deadlineReader{}
	r := timedReader{inner}
	_ = r.Get(context.Background(), client.ObjectKey{Name: "x"}, &v1.Backup{})
	_ = r.List(context.Background(), &v1.BackupList{})
	if len(inner.deadlines) != 2 {
		t.Fatalf("calls %v", inner.deadlines)
	}
	for _, d := range inner.deadlines {
		if d <= 0 || d > readTimeout {
			t.Errorf("a read ran with deadline %v, want one within %v", d, readTimeout)
		}
	}
}

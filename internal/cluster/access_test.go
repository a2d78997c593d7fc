package cluster

import (
	"context"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

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
	for _, tc := range []struct {
		timeout, want time.Duration
	}{{0, CallTimeout}, {time.Second, time.Second}} {
		inner := &deadlineReader{}
		r := TimedReader{Reader: inner, Timeout: tc.timeout}
		_ = r.Get(context.Background(), client.ObjectKey{Name: "x"}, &v1.Backup{})
		_ = r.List(context.Background(), &v1.BackupList{})
		if len(inner.deadlines) != 2 {
			t.Fatalf("calls %v", inner.deadlines)
		}
		for _, d := range inner.deadlines {
			if d <= 0 || d > tc.want {
				t.Errorf("Timeout %v: a read ran with deadline %v, want one within %v", tc.timeout, d, tc.want)
			}
		}
	}
}

func TestRestoresOfNamesOnlyThatBackupsRestoresSorted(t *testing.T) {
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	restore := func(ns, name, backup string) *v1.Restore {
		rs := &v1.Restore{Spec: v1.RestoreSpec{BackupName: backup}}
		rs.Namespace, rs.Name = ns, name
		return rs
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		restore("lifeboat", "r-2", "b"), restore("lifeboat", "r-1", "b"),
		restore("lifeboat", "other", "b-2"), restore("elsewhere", "r-3", "b"),
	).Build()
	got, err := RestoresOf(context.Background(), c, "lifeboat", "b")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != "r-1" || got[1] != "r-2" {
		t.Errorf("RestoresOf = %v, want [r-1 r-2]", got)
	}
}

package csistack_test

import (
	"context"
	"testing"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lifeboat-io/lifeboat/internal/testutil/csistack"
	"github.com/lifeboat-io/lifeboat/internal/testutil/testenv"
)

// TestTestenvCSI checks the stack as the e2e tests get it
// (testenv.Options{CSI: true}), and the pitfall that a snapshot asked for
// before its claim is bound is taken once the claim binds, within the
// stack's short retry interval rather than minutes.
func TestTestenvCSI(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server and the CSI stack")
	}
	env, err := testenv.Start(testenv.Options{CSI: true, WithoutServer: true})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Stop()
	if env.CSI == nil {
		t.Fatal("testenv.Options{CSI: true} gave no env.CSI")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := env.CSI.Client
	ns := env.Name("csi")
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	// The classes are there as named.
	var class snapshotv1.VolumeSnapshotClass
	if err := c.Get(ctx, client.ObjectKey{Name: csistack.SnapshotClass}, &class); err != nil {
		t.Fatal(err)
	}
	if class.Driver != csistack.DriverName || class.Labels["velero.io/csi-volumesnapshot-class"] != "true" || class.DeletionPolicy != snapshotv1.VolumeSnapshotContentDelete {
		t.Fatalf("snapshot class = %+v", class)
	}

	begin := time.Now()
	claim := newClaim(ns, "early", nil)
	snap := &snapshotv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "early-snap"},
		Spec: snapshotv1.VolumeSnapshotSpec{
			Source:                  snapshotv1.VolumeSnapshotSource{PersistentVolumeClaimName: ptr.To(claim.Name)},
			VolumeSnapshotClassName: ptr.To(csistack.SnapshotClass),
		},
	}
	// The snapshot first: its claim does not even exist yet.
	if err := c.Create(ctx, snap); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, claim); err != nil {
		t.Fatal(err)
	}
	poll(ctx, t, "snapshot of a claim created after it ready", func() (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(snap), snap); err != nil {
			return false, err
		}
		return snap.Status != nil && ptr.Deref(snap.Status.ReadyToUse, false), nil
	})
	took := time.Since(begin)
	t.Logf("snapshot created before its claim ready after %s", took.Round(time.Millisecond))
	if took > 30*time.Second {
		t.Errorf("snapshot before its claim took %s: the retry interval is not short", took)
	}
	if snaps, err := env.CSI.Snapshots(); err != nil || len(snaps) != 1 {
		t.Fatalf("driver snapshots = %v, %v; want one", snaps, err)
	}
}

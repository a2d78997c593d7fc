package csistack_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/lifeboat-io/lifeboat/internal/localcluster"
	"github.com/lifeboat-io/lifeboat/internal/testutil/csistack"
)

// TestControllerSide runs the whole controller path on a bare API server:
// a claim is provisioned and bound, a snapshot of it copies its files and
// becomes ready, a claim restored from the snapshot holds the same files,
// and deleting the snapshot and the claims removes them from the driver's
// storage. Stop leaves no process and no state behind.
func TestControllerSide(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server and the CSI stack")
	}
	cluster, err := localcluster.Start(localcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Stop() })
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := cluster.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	begin := time.Now()
	stack, err := csistack.Start(ctx, csistack.Options{Kubeconfig: kubeconfig, Log: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stack started in %s", time.Since(begin).Round(time.Millisecond))
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			stack.Stop()
		}
	})
	defer func() {
		if t.Failed() || os.Getenv("CSISTACK_LOGS") != "" {
			for _, c := range []string{"csidriver", "kube-controller-manager", "snapshot-controller", "csi-provisioner", "csi-snapshotter"} {
				t.Logf("--- %s:\n%s", c, stack.Log(c, 400))
			}
		}
	}()
	c := stack.Client

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "csistack-"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}

	// Provision and bind.
	step := time.Now()
	claim := newClaim(ns.Name, "data", nil)
	if err := c.Create(ctx, claim); err != nil {
		t.Fatal(err)
	}
	pv := waitBound(ctx, t, c, claim)
	t.Logf("claim bound in %s", time.Since(step).Round(time.Millisecond))
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != csistack.DriverName {
		t.Fatalf("PV %s is not a %s volume: %+v", pv.Name, csistack.DriverName, pv.Spec.PersistentVolumeSource)
	}
	handle := pv.Spec.CSI.VolumeHandle
	if vols, err := stack.Volumes(); err != nil || len(vols) != 1 || vols[0] != handle {
		t.Fatalf("driver volumes = %v (%v), want [%s]", vols, err, handle)
	}
	// No pod runs here: write the volume's files where a pod would.
	want := map[string][]byte{"hello.txt": []byte("hello from " + claim.Name), "sub/dir/b.bin": {0, 1, 2, 3}}
	if err := stack.WriteVolumeFiles(handle, want); err != nil {
		t.Fatal(err)
	}
	if err := stack.WriteVolumeFiles(handle, map[string][]byte{"../escape": nil}); err == nil {
		t.Fatal("WriteVolumeFiles wrote outside the volume")
	}

	// Snapshot.
	step = time.Now()
	snap := &snapshotv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "data-snap"},
		Spec: snapshotv1.VolumeSnapshotSpec{
			Source:                  snapshotv1.VolumeSnapshotSource{PersistentVolumeClaimName: ptr.To(claim.Name)},
			VolumeSnapshotClassName: ptr.To(csistack.SnapshotClass),
		},
	}
	if err := c.Create(ctx, snap); err != nil {
		t.Fatal(err)
	}
	var content snapshotv1.VolumeSnapshotContent
	poll(ctx, t, "snapshot ready", func() (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(snap), snap); err != nil {
			return false, err
		}
		st := snap.Status
		if st == nil || st.BoundVolumeSnapshotContentName == nil || !ptr.Deref(st.ReadyToUse, false) {
			return false, nil
		}
		if err := c.Get(ctx, client.ObjectKey{Name: *st.BoundVolumeSnapshotContentName}, &content); err != nil {
			return false, err
		}
		return content.Status != nil && ptr.Deref(content.Status.ReadyToUse, false) && content.Status.SnapshotHandle != nil, nil
	})
	t.Logf("snapshot ready in %s", time.Since(step).Round(time.Millisecond))
	snapID := *content.Status.SnapshotHandle
	if snaps, err := stack.Snapshots(); err != nil || len(snaps) != 1 || snaps[0] != snapID {
		t.Fatalf("driver snapshots = %v (%v), want [%s]", snaps, err, snapID)
	}
	checkFiles(t, "snapshot "+snapID, stack.SnapshotFiles, snapID, want)
	// A copy, not a view: a later write to the volume leaves it as it was.
	if err := stack.WriteVolumeFiles(handle, map[string][]byte{"hello.txt": []byte("changed")}); err != nil {
		t.Fatal(err)
	}
	checkFiles(t, "snapshot "+snapID, stack.SnapshotFiles, snapID, want)

	// Restore into a new claim.
	step = time.Now()
	restored := newClaim(ns.Name, "restored", &corev1.TypedObjectReference{
		APIGroup: ptr.To(snapshotv1.GroupName), Kind: "VolumeSnapshot", Name: snap.Name,
	})
	if err := c.Create(ctx, restored); err != nil {
		t.Fatal(err)
	}
	restoredPV := waitBound(ctx, t, c, restored)
	t.Logf("restored claim bound in %s", time.Since(step).Round(time.Millisecond))
	checkFiles(t, "restored volume", stack.VolumeFiles, restoredPV.Spec.CSI.VolumeHandle, want)

	// Delete the snapshot: its content and the storage snapshot go.
	step = time.Now()
	if err := c.Delete(ctx, snap); err != nil {
		t.Fatal(err)
	}
	poll(ctx, t, "snapshot and content gone", func() (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(&content), &content); !apierrors.IsNotFound(err) {
			return false, err
		}
		snaps, err := stack.Snapshots()
		return len(snaps) == 0, err
	})
	t.Logf("snapshot deleted in %s", time.Since(step).Round(time.Millisecond))

	// Delete the claims: reclaim policy Delete removes the volumes.
	for _, cl := range []*corev1.PersistentVolumeClaim{claim, restored} {
		if err := c.Delete(ctx, cl); err != nil {
			t.Fatal(err)
		}
	}
	poll(ctx, t, "volumes gone", func() (bool, error) {
		var pvs corev1.PersistentVolumeList
		if err := c.List(ctx, &pvs); err != nil {
			return false, err
		}
		vols, err := stack.Volumes()
		return len(pvs.Items) == 0 && len(vols) == 0, err
	})

	if err := stack.Healthy(); err != nil {
		t.Fatal(err)
	}
	// A sidecar that dies is named by Healthy (the last started is the
	// csi-snapshotter).
	pids := stack.PIDs()
	if err := syscall.Kill(pids[len(pids)-1], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	poll(ctx, t, "Healthy to name the killed csi-snapshotter", func() (bool, error) {
		err := stack.Healthy()
		return err != nil && strings.Contains(err.Error(), "csi-snapshotter exited"), nil
	})

	// Stop: no process, no socket dir, no state.
	stack.Stop()
	stopped = true
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("process %d still runs after Stop", pid)
		}
	}
	if _, err := os.Stat(stack.StateDir); !os.IsNotExist(err) {
		t.Errorf("state dir %s still there after Stop (%v)", stack.StateDir, err)
	}
}

// The stack's client is controller-runtime's, which complains on stderr
// when a test binary that runs for more than 30 s never set its logger.
func init() { ctrllog.SetLogger(logr.Discard()) }

func newClaim(ns, name string, source *corev1.TypedObjectReference) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: ptr.To(csistack.StorageClass),
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}},
			DataSourceRef:    source,
		},
	}
}

func waitBound(ctx context.Context, t *testing.T, c client.Client, claim *corev1.PersistentVolumeClaim) *corev1.PersistentVolume {
	t.Helper()
	var pv corev1.PersistentVolume
	poll(ctx, t, "claim "+claim.Name+" bound", func() (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(claim), claim); err != nil {
			return false, err
		}
		if claim.Status.Phase != corev1.ClaimBound {
			return false, nil
		}
		return true, c.Get(ctx, client.ObjectKey{Name: claim.Spec.VolumeName}, &pv)
	})
	return &pv
}

func checkFiles(t *testing.T, what string, read func(string) (map[string][]byte, error), id string, want map[string][]byte) {
	t.Helper()
	got, err := read(id)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if len(got) != len(want) {
		t.Fatalf("%s holds %d files, want %d: %v", what, len(got), len(want), keys(got))
	}
	for name, data := range want {
		if string(got[name]) != string(data) {
			t.Fatalf("%s: %s = %q, want %q", what, name, got[name], data)
		}
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func poll(ctx context.Context, t *testing.T, what string, check func() (bool, error)) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
		ok, err := check()
		last = err
		return ok, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (last error: %v)", what, err, last)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

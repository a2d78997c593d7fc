package plugins

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/testutil/csistack"
	"github.com/lifeboat-io/lifeboat/internal/testutil/testenv"
)

// What the restore-point example makes, as its README describes it.
const (
	restorePointOptIn   = "example.io/restore-point"
	restorePointLabel   = "example.io/restore-point"
	restorePointCleanup = "example.io/restore-point-cleanup"
)

var (
	claimsGVR   = schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}
	snapshotGVR = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshots"}
	contentGVR  = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshotcontents"}
)

func pollFor(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// csiClaim makes a claim on the CSI stack's storage class that asks for
// restore points, and waits until it is bound.
func csiClaim(t *testing.T, d dynamic.Interface, ns, name string) {
	t.Helper()
	pvc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "PersistentVolumeClaim",
		"metadata": map[string]any{"namespace": ns, "name": name, "labels": map[string]any{restorePointOptIn: "true"}},
		"spec": map[string]any{
			"storageClassName": csistack.StorageClass, "accessModes": []any{"ReadWriteOnce"},
			"resources": map[string]any{"requests": map[string]any{"storage": "1Mi"}},
		},
	}}
	if _, err := d.Resource(claimsGVR).Namespace(ns).Create(testenv.Ctx(t), pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pollFor(t, time.Minute, "claim "+ns+"/"+name+" to bind", func(ctx context.Context) (bool, error) {
		got, err := d.Resource(claimsGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		phase, _, _ := unstructured.NestedString(got.Object, "status", "phase")
		return phase == "Bound", nil
	})
}

// The seed scenario of the CSI issue: a BackupItemAction makes something
// for a CSI volume outside the backup (a VolumeSnapshot, so a storage
// snapshot in the driver), and its DeleteItemAction removes it when the
// backup is deleted, by command and by TTL. Nothing may be left: no
// VolumeSnapshot, no content, no snapshot in the driver.
//
// The CSI stack runs for this test only: its kube-controller-manager
// (volume binder, PV and claim protection) would change what the other
// tests here expect of the static volumes they make.
func TestRestorePointGoesWithTheBackup(t *testing.T) {
	stack, err := csistack.Start(context.Background(), csistack.Options{Kubeconfig: env.Kubeconfig, StateDir: t.TempDir()})
	if err != nil {
		t.Fatalf("starting the CSI stack: %v", err)
	}
	t.Cleanup(stack.Stop)
	for _, how := range []string{"command", "ttl"} {
		t.Run(how, func(t *testing.T) {
			d, err := dynamic.NewForConfig(env.Config)
			if err != nil {
				t.Fatal(err)
			}
			ns := env.NewNamespace(t, "restore-point")
			csiClaim(t, d, ns, "data")
			bsl, dir := env.FilesystemLocation(t, env.Name("fs"))
			name := env.Name("rp-" + how)
			args := []string{"backup", "create", name, "--include-namespaces", ns, "--storage-location", bsl.Name, "--snapshot-volumes=false"}
			if how == "ttl" {
				// Long enough for the checks below before it expires.
				args = append(args, "--ttl", "20s")
			}
			mustLifeboat(t, args...)
			b := env.WaitBackup(t, name, 2*time.Minute)
			if b.Status.Phase != v1.BackupPhaseCompleted {
				out, _ := lifeboat(t, "backup", "logs", name)
				t.Fatalf("backup %s: phase %s\n%s", name, b.Status.Phase, out)
			}

			// The restore point: this backup's, ready, its snapshot in the driver.
			var vs *unstructured.Unstructured
			pollFor(t, time.Minute, "the restore point to be ready", func(ctx context.Context) (bool, error) {
				list, err := d.Resource(snapshotGVR).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: restorePointLabel + "=true," + v1.BackupNameLabel + "=" + v1.LabelValue(name)})
				if err != nil || len(list.Items) != 1 {
					return false, err
				}
				vs = &list.Items[0]
				ready, _, _ := unstructured.NestedBool(vs.Object, "status", "readyToUse")
				return ready, nil
			})
			contentName, _, _ := unstructured.NestedString(vs.Object, "status", "boundVolumeSnapshotContentName")
			content, err := d.Resource(contentGVR).Get(testenv.Ctx(t), contentName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			handle, _, _ := unstructured.NestedString(content.Object, "status", "snapshotHandle")
			snaps, err := stack.Snapshots()
			if err != nil || !slices.Contains(snaps, handle) {
				t.Fatalf("the driver has snapshots %v (%v), want the restore point's %s", snaps, err, handle)
			}
			entries := readArchiveFile(t, filepath.Join(dir, "lifeboat", "backups", name, name+".tar.gz"))
			if stored := storedItems(t, entries, "volumesnapshots.snapshot.storage.k8s.io", ns); len(stored) != 0 {
				t.Errorf("the backup holds the restore point: %v", stored)
			}

			if how == "command" {
				plan := mustLifeboat(t, "backup", "delete", name, "--dry-run")
				if !strings.Contains(plan, "persistentvolumeclaims "+ns+"/data") {
					t.Errorf("--dry-run does not list the claim for %s:\n%s", restorePointCleanup, plan)
				}
				mustLifeboat(t, "backup", "delete", name, "--confirm", "--wait")
			}
			pollFor(t, 90*time.Second, "backup "+name+" to be deleted", func(ctx context.Context) (bool, error) {
				err := env.Client.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: name}, &v1.Backup{})
				return apierrors.IsNotFound(err), nil
			})

			if _, err := d.Resource(snapshotGVR).Namespace(ns).Get(testenv.Ctx(t), vs.GetName(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("the restore point %s is still there (%v)", vs.GetName(), err)
			}
			if _, err := d.Resource(contentGVR).Get(testenv.Ctx(t), contentName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("its VolumeSnapshotContent %s is still there (%v)", contentName, err)
			}
			snaps, err = stack.Snapshots()
			if err != nil || slices.Contains(snaps, handle) {
				t.Errorf("the driver still has the restore point's snapshot %s (snapshots %v, %v)", handle, snaps, err)
			}
			reqs := deleteRequests(t, name)
			if len(reqs) != 1 || reqs[0].Status.Report == nil {
				t.Fatalf("deletion requests %+v", reqs)
			}
			for _, a := range reqs[0].Status.Report.Actions {
				if a.Name == restorePointCleanup && (a.Items != 1 || a.Failed != 0) {
					t.Errorf("report: %s called for %d items, %d failed; want 1 and 0", a.Name, a.Items, a.Failed)
				}
			}
		})
	}
}

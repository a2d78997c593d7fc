package volumehelper

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// spread is n claims per namespace in namespaces ns0..ns(k-1), each bound
// to its PV and mounted by one pod; the pod of claim 0 of each namespace
// opts its volume in to fs-backup.
func spread(k, n int) []crclient.Object {
	var objs []crclient.Object
	for i := range k {
		ns := fmt.Sprintf("ns%d", i)
		for j := range n {
			claim, pv := fmt.Sprintf("c%d", j), fmt.Sprintf("pv-%d-%d", i, j)
			var ann map[string]string
			if j == 0 {
				ann = map[string]string{VolumesToBackupAnnotation: "data"}
			}
			objs = append(objs, newPV(pv, claimRef(ns, claim, "")), newPVC(ns, claim, pv),
				newPod(ns, "pod-"+claim, ann, claimVolume("data", claim)))
		}
	}
	return objs
}

func snapshotAll(t *testing.T, vh VolumeHelper, k, n int) {
	t.Helper()
	for i := range k {
		for j := range n {
			ns := fmt.Sprintf("ns%d", i)
			want := j != 0
			got, err := vh.ShouldPerformSnapshot(toUnstructured(t, newPVC(ns, fmt.Sprintf("c%d", j), fmt.Sprintf("pv-%d-%d", i, j))), PersistentVolumeClaims)
			if err != nil || got != want {
				t.Fatalf("%s/c%d: got (%v, %v), want %v", ns, j, got, err, want)
			}
		}
	}
}

func TestPodIndexListsEachNamespaceOnce(t *testing.T) {
	cl, c := newClient(t, spread(3, 5)...)
	vh, err := NewVolumeHelper(nil, nil, nil, cl, false, false, []string{"ns0", "ns1", "ns1"})
	if err != nil {
		t.Fatal(err)
	}
	if n := c.lists.Load(); n != 0 {
		t.Fatalf("constructor listed pods %d times; the index is built on first need", n)
	}
	snapshotAll(t, vh, 3, 5)
	snapshotAll(t, vh, 3, 5)
	// ns0 and ns1 together on first need, ns2 (not the backup's) once when
	// first asked about.
	if got := c.namespacesListed(); !slices.Equal(got, []string{"ns0", "ns1", "ns2"}) {
		t.Errorf("listed namespaces %q, want each of ns0, ns1, ns2 once", got)
	}
	// One GET per PV; the claims were handed in.
	if n := c.gets.Load(); n != 15 {
		t.Errorf("%d GETs for 15 volumes asked about twice, want 15", n)
	}
}

func TestPodIndexAllNamespaces(t *testing.T) {
	cl, c := newClient(t, spread(3, 2)...)
	h := mustHelper(t, config{client: cl, namespaces: []string{"*"}, skipNamespaces: []string{"ns2"}})
	snapshotAll(t, h, 3, 2)
	// One cluster-wide listing; ns2 was left out of it, so it is listed on
	// its own when asked about.
	if got := c.namespacesListed(); !slices.Equal(got, []string{"", "ns2"}) {
		t.Errorf("listed %q, want one cluster-wide listing then ns2", got)
	}
}

func TestPodIndexNoNamespaces(t *testing.T) {
	cl, c := newClient(t, spread(2, 3)...)
	vh, err := NewVolumeHelper(nil, nil, nil, cl, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	snapshotAll(t, vh, 2, 3)
	if got := c.namespacesListed(); !slices.Equal(got, []string{"ns0", "ns1"}) {
		t.Errorf("listed %q, want each namespace once, when first needed", got)
	}
}

// TestPodIndexRetriesAfterError: a failed listing is reported, leaves
// nothing half-indexed, and is tried again on the next call.
func TestPodIndexRetriesAfterError(t *testing.T) {
	var fail atomic.Bool
	fail.Store(true)
	cl := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(spread(1, 2)...).
		WithInterceptorFuncs(interceptor.Funcs{
			List: func(ctx context.Context, w crclient.WithWatch, list crclient.ObjectList, opts ...crclient.ListOption) error {
				if fail.Load() {
					return errors.New("connection refused")
				}
				return w.List(ctx, list, opts...)
			},
		}).Build()
	vh, err := NewVolumeHelper(nil, nil, nil, cl, false, false, []string{"ns0"})
	if err != nil {
		t.Fatal(err)
	}
	obj := toUnstructured(t, newPVC("ns0", "c0", "pv-0-0"))
	_, err = vh.ShouldPerformSnapshot(obj, PersistentVolumeClaims)
	if err == nil || err.Error() != "volumehelper: listing pods in namespace ns0 to find the pods of each claim: connection refused" {
		t.Fatalf("error = %v", err)
	}
	fail.Store(false)
	snapshotAll(t, vh, 1, 2)
}

// TestConcurrentUse runs every kind of question from many goroutines at
// once; run with -race.
func TestConcurrentUse(t *testing.T) {
	const k, n = 4, 25
	cl, c := newClient(t, spread(k, n)...)
	h := mustHelper(t, config{policies: mustParse(t, mixedPolicy), client: cl, namespaces: []string{"*"}})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range k {
				ns := fmt.Sprintf("ns%d", (i+w)%k)
				for j := range n {
					pvc := newPVC(ns, fmt.Sprintf("c%d", j), fmt.Sprintf("pv-%d-%d", (i+w)%k, j))
					obj := toUnstructured(t, pvc)
					snap, err := h.ShouldPerformSnapshot(obj, PersistentVolumeClaims)
					if err != nil || snap != (j != 0) {
						t.Errorf("%s/%s: snapshot (%v, %v)", ns, pvc.Name, snap, err)
					}
					if _, err := h.ShouldPerformCustomAction(obj, PersistentVolumeClaims, map[string]any{"plugin": "vault"}); err != nil {
						t.Error(err)
					}
					if _, _, _, err := h.GetActionParameters(obj, PersistentVolumeClaims); err != nil {
						t.Error(err)
					}
					pod := newPod(ns, "pod-"+pvc.Name, nil, claimVolume("data", pvc.Name))
					if _, err := h.ShouldPerformFSBackup(pod.Spec.Volumes[0], *pod); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	if got := c.lists.Load(); got != 1 {
		t.Errorf("%d pod listings from concurrent first callers, want 1", got)
	}
	// Each PV once, each claim once (for the pod volumes); a lost race may
	// fetch an object twice, never more than once per worker.
	if got := c.gets.Load(); got < 2*k*n || got > 8*2*k*n {
		t.Errorf("%d GETs for %d volumes", got, k*n)
	}
}

// TestIndexedUsesMatchFSDecision: the snapshot fallback's view of a pod
// volume (computed when pods are indexed) agrees with ShouldPerformFSBackup
// for the same volume, in every fallback configuration.
func TestIndexedUsesMatchFSDecision(t *testing.T) {
	pods := []*corev1.Pod{
		newPod("ns", "a", nil, claimVolume("data", "c1")),
		newPod("ns", "b", map[string]string{VolumesToBackupAnnotation: "data"}, claimVolume("data", "c2")),
		newPod("ns", "c", map[string]string{VolumesToExcludeAnnotation: "data"}, claimVolume("data", "c3")),
		newPod("ns", "d", nil, claimVolume("default-token-x", "c4")),
		newPod("ns", "e", nil, ephemeralVolume("data")),
	}
	objs := []crclient.Object{}
	for _, p := range pods {
		objs = append(objs, p)
	}
	for _, defaultFS := range []bool{false, true} {
		for _, excludePVC := range []bool{false, true} {
			cl, _ := newClient(t, objs...)
			h := mustHelper(t, config{client: cl, defaultVolumesToFSBackup: defaultFS, backupExcludePVC: excludePVC})
			for _, p := range pods {
				vol := p.Spec.Volumes[0]
				claim := ephemeralClaimName(p.Name, vol.Name)
				if vol.PersistentVolumeClaim != nil {
					claim = vol.PersistentVolumeClaim.ClaimName
				}
				uses, err := h.pods.uses(context.Background(), "ns", claim)
				if err != nil || len(uses) != 1 {
					t.Fatalf("uses of %s: %v, %v", claim, uses, err)
				}
				indexed := !uses[0].excluded && uses[0].annotated
				direct, err := h.ShouldPerformFSBackup(vol, *p)
				if err != nil || indexed != direct {
					t.Errorf("defaultFS=%v excludePVC=%v pod %s: indexed %v, ShouldPerformFSBackup (%v, %v)", defaultFS, excludePVC, p.Name, indexed, direct, err)
				}
			}
		}
	}
}

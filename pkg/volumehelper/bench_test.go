package volumehelper

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
)

// benchWorld is a cluster of claims (each bound to its PV) spread over 20
// namespaces and pods, half of which mount one claim each while the rest
// carry only the volumes fs-backup never copies plus an emptyDir. Storage
// classes, labels and annotations cycle so that every rule of mixedPolicy
// and every fallback is taken.
type benchWorld struct {
	objs []crclient.Object
	pvcs []*unstructured.Unstructured
	pvs  []*unstructured.Unstructured
	pods []*corev1.Pod
}

func newBenchWorld(tb testing.TB, claims, pods int) *benchWorld {
	w := &benchWorld{}
	classes := []string{"gold", "files", "archive", "gp3", "gp3"}
	for i := range claims {
		ns := fmt.Sprintf("ns%d", i%20)
		name, pvName := fmt.Sprintf("data-%d", i), fmt.Sprintf("pv-%d", i)
		pv := newPV(pvName, storageClass(classes[i%len(classes)]), claimRef(ns, name, ""))
		var opts []pvcOpt
		if i%7 == 0 {
			opts = append(opts, labels("backup", "vault"))
		}
		pvc := newPVC(ns, name, pvName, opts...)
		if i%50 == 0 {
			pvc = newPVC(ns, name, "") // pending: decided by the pvcPhase rule
		}
		w.objs = append(w.objs, pv, pvc)
		w.pvcs = append(w.pvcs, toUnstructured(tb, pvc))
		w.pvs = append(w.pvs, toUnstructured(tb, pv))
	}
	for i := range pods {
		ns := fmt.Sprintf("ns%d", i%20)
		var pod *corev1.Pod
		var ann map[string]string
		if i%3 == 0 {
			ann = map[string]string{VolumesToBackupAnnotation: "data,cache"}
		}
		token := corev1.Volume{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}}
		if i < claims {
			// Pod i mounts claim i, which lives in namespace i%20 too.
			pod = newPod(ns, fmt.Sprintf("app-%d", i), ann, claimVolume("data", fmt.Sprintf("data-%d", i)), token)
		} else {
			pod = newPod(ns, fmt.Sprintf("web-%d", i), ann, emptyDirVolume("cache"), token,
				corev1.Volume{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}})
		}
		w.objs = append(w.objs, pod)
		w.pods = append(w.pods, pod)
	}
	return w
}

// decideAll asks every question a backup asks: for each claim and each PV,
// snapshot; for each claim, the custom action and its parameters; for
// each pod volume, fs-backup. It returns the number of decisions.
func (w *benchWorld) decideAll(tb testing.TB, vh VolumeHelper) int {
	n := 0
	match := map[string]any{"plugin": "vault", "level": 2.0}
	for i, pvc := range w.pvcs {
		if _, err := vh.ShouldPerformSnapshot(pvc, PersistentVolumeClaims); err != nil {
			tb.Fatal(err)
		}
		if _, err := vh.ShouldPerformSnapshot(w.pvs[i], PersistentVolumes); err != nil {
			tb.Fatal(err)
		}
		if _, err := vh.ShouldPerformCustomAction(pvc, PersistentVolumeClaims, match); err != nil {
			tb.Fatal(err)
		}
		if _, _, _, err := vh.GetActionParameters(pvc, PersistentVolumeClaims); err != nil {
			tb.Fatal(err)
		}
		n += 4
	}
	for _, pod := range w.pods {
		for _, vol := range pod.Spec.Volumes {
			if _, err := vh.ShouldPerformFSBackup(vol, *pod); err != nil {
				tb.Fatal(err)
			}
			n++
		}
	}
	return n
}

// memClient serves Get and List from maps, copying each object as a real
// client's decoding would produce a fresh one, without the fake client's
// JSON round trips; it isolates the helper's own cost.
type memClient struct {
	crclient.Client
	pvs  map[string]*corev1.PersistentVolume
	pvcs map[string]*corev1.PersistentVolumeClaim
	pods []*corev1.Pod
}

func newMemClient(objs []crclient.Object) *memClient {
	c := &memClient{pvs: map[string]*corev1.PersistentVolume{}, pvcs: map[string]*corev1.PersistentVolumeClaim{}}
	for _, o := range objs {
		switch x := o.(type) {
		case *corev1.PersistentVolume:
			c.pvs[x.Name] = x
		case *corev1.PersistentVolumeClaim:
			c.pvcs[x.Namespace+"/"+x.Name] = x
		case *corev1.Pod:
			c.pods = append(c.pods, x)
		}
	}
	return c
}

func (c *memClient) Get(_ context.Context, key crclient.ObjectKey, obj crclient.Object, _ ...crclient.GetOption) error {
	switch x := obj.(type) {
	case *corev1.PersistentVolume:
		if pv, ok := c.pvs[key.Name]; ok {
			pv.DeepCopyInto(x)
			return nil
		}
		return apierrors.NewNotFound(corev1.Resource("persistentvolumes"), key.Name)
	case *corev1.PersistentVolumeClaim:
		if pvc, ok := c.pvcs[key.String()]; ok {
			pvc.DeepCopyInto(x)
			return nil
		}
		return apierrors.NewNotFound(corev1.Resource("persistentvolumeclaims"), key.Name)
	}
	return fmt.Errorf("memClient: Get of %T", obj)
}

func (c *memClient) List(_ context.Context, list crclient.ObjectList, opts ...crclient.ListOption) error {
	pl, ok := list.(*corev1.PodList)
	if !ok {
		return fmt.Errorf("memClient: List of %T", list)
	}
	var lo crclient.ListOptions
	lo.ApplyOptions(opts)
	pl.Items = make([]corev1.Pod, 0, len(c.pods))
	for _, p := range c.pods {
		if lo.Namespace == "" || p.Namespace == lo.Namespace {
			pl.Items = append(pl.Items, *p.DeepCopy())
		}
	}
	return nil
}

// BenchmarkDecideAll times every decision for 10,000 claims (and their
// PVs) and 20,000 pods with a fresh helper per op, so the pod index (one
// LIST of all pods) and the lookups (one GET per PV and claim) are paid in
// full each time. One op is the whole backup; ns/decision is reported too.
func BenchmarkDecideAll(b *testing.B) {
	w := newBenchWorld(b, 10000, 20000)
	cl := newMemClient(w.objs)
	p := mustParse(b, mixedPolicy)
	decisions := 0
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		vh, err := NewVolumeHelper(p, nil, nil, cl, false, false, []string{"*"})
		if err != nil {
			b.Fatal(err)
		}
		decisions = w.decideAll(b, vh)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(decisions), "ns/decision")
}

// BenchmarkDecideAllFakeClient is BenchmarkDecideAll through
// controller-runtime's fake client, whose every GET and LIST round-trips
// the objects through JSON; about half its time is that, not the helper.
func BenchmarkDecideAllFakeClient(b *testing.B) {
	w := newBenchWorld(b, 10000, 20000)
	cl, counts := newClient(b, w.objs...)
	p := mustParse(b, mixedPolicy)
	decisions := 0
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		vh, err := NewVolumeHelper(p, nil, nil, cl, false, false, []string{"*"})
		if err != nil {
			b.Fatal(err)
		}
		decisions = w.decideAll(b, vh)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(decisions), "ns/decision")
	b.ReportMetric(float64(counts.gets.Load())/float64(b.N), "gets/op")
	b.ReportMetric(float64(counts.lists.Load())/float64(b.N), "lists/op")
}

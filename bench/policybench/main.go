// Command policybench measures volume policy evaluation the way a backup
// runs it: one VolumeHelper per backup (pkg/volumehelper), a decision for
// every claim's volume (DecideVolume) and every pod volume
// (DecidePodVolume), against a floor measured in the same run: matching
// the same volumes against the same policy with nothing else
// (policy.MatchAction on prebuilt descriptions). It prints a markdown
// table with medians of -runs runs.
//
// The cluster is served from memory, so the figures are the evaluation's
// own cost; reading claims, volumes and pods from an API server is the
// backup's LIST cost, measured by the backup benchmark.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"runtime/pprof"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lifeboat-io/lifeboat/pkg/policy"
	"github.com/lifeboat-io/lifeboat/pkg/volumehelper"
)

// benchPolicy takes every action and needs every kind of condition.
const benchPolicy = `version: v1
volumePolicies:
- conditions: {pvcPhase: [Pending]}
  action: {type: skip}
- conditions: {storageClass: [archive], capacity: "0,5Gi"}
  action: {type: skip}
- conditions: {pvcLabels: {backup: vault}}
  action: {type: custom, parameters: {plugin: vault, level: 2}}
- conditions: {csi: {driver: ebs.csi.aws.com}}
  action: {type: snapshot}
- conditions: {volumeTypes: [emptyDir]}
  action: {type: fs-backup}
`

func main() {
	claims := flag.Int("claims", 10000, "PersistentVolumeClaims, each bound to its own PV and mounted by one pod")
	pods := flag.Int("pods", 20000, "pods (the first -claims of them mount a claim; the rest carry an emptyDir)")
	runs := flag.Int("runs", 5, "measured runs of each side; the table shows medians")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the runs to this file")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	if err := run(*claims, *pods, *runs); err != nil {
		log.Print(err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

type world struct {
	client *memClient
	pvs    []*unstructured.Unstructured
	pods   []*corev1.Pod
	// infos are the floor's prebuilt descriptions, one per decision.
	infos []policy.VolumeInfo
}

func run(claims, pods, runs int) error {
	p, err := policy.Parse([]byte(benchPolicy))
	if err != nil {
		return err
	}
	w, err := newWorld(claims, pods)
	if err != nil {
		return err
	}
	var floor, helper []time.Duration
	decisions := 0
	for range runs {
		start := time.Now()
		for i := range w.infos {
			p.MatchAction(w.infos[i])
		}
		floor = append(floor, time.Since(start))

		start = time.Now()
		n, err := decideAll(w, p)
		if err != nil {
			return err
		}
		helper = append(helper, time.Since(start))
		decisions = n
	}
	f, h := median(floor), median(helper)
	fmt.Println("| claims | pods | decisions | floor (match only) | VolumeHelper (per backup) | ratio | decisions/s |")
	fmt.Println("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	fmt.Printf("| %d | %d | %d | %s | %s | %.1f | %.0f |\n", claims, pods, decisions,
		f.Round(time.Microsecond), h.Round(time.Microsecond), float64(h)/float64(f), float64(decisions)/h.Seconds())
	fmt.Fprintf(os.Stderr, "runs: floor %v, helper %v\n", floor, helper)
	return nil
}

// decideAll is one backup's worth of decisions, with a fresh helper (its
// pod index and lookups are per backup).
func decideAll(w *world, p *policy.Policies) (int, error) {
	vh, err := volumehelper.NewVolumeHelper(p, nil, nil, w.client, false, false, []string{"*"})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, pv := range w.pvs {
		if _, err := vh.DecideVolume(pv, volumehelper.PersistentVolumes); err != nil {
			return 0, err
		}
		n++
	}
	for _, pod := range w.pods {
		for _, vol := range pod.Spec.Volumes {
			if vol.PersistentVolumeClaim != nil {
				continue // decided with its claim's volume
			}
			if _, err := vh.DecidePodVolume(vol, *pod); err != nil {
				return 0, err
			}
			n++
		}
	}
	return n, nil
}

func newWorld(claims, pods int) (*world, error) {
	w := &world{client: &memClient{pvs: map[string]*corev1.PersistentVolume{}, pvcs: map[string]*corev1.PersistentVolumeClaim{}, pods: map[string][]*corev1.Pod{}}}
	classes := []string{"gold", "files", "archive", "gp3", "gp3"}
	for i := range claims {
		ns := fmt.Sprintf("ns%d", i%20)
		name, pvName := fmt.Sprintf("data-%d", i), fmt.Sprintf("pv-%d", i)
		class := classes[i%len(classes)]
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: pvName},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:         corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(fmt.Sprintf("%dGi", 1+i%20))},
				StorageClassName: class,
				ClaimRef:         &corev1.ObjectReference{Namespace: ns, Name: name},
			},
		}
		if i%2 == 0 {
			pv.Spec.CSI = &corev1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com", VolumeHandle: "vol-" + pvName}
		} else {
			pv.Spec.NFS = &corev1.NFSVolumeSource{Server: "nfs.example", Path: "/" + pvName}
		}
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       corev1.PersistentVolumeClaimSpec{StorageClassName: &class, VolumeName: pvName},
			Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
		}
		if i%7 == 0 {
			pvc.Labels = map[string]string{"backup": "vault"}
		}
		if i%50 == 0 {
			pvc.Spec.VolumeName, pvc.Status.Phase = "", corev1.ClaimPending
		}
		w.client.pvs[pvName] = pv
		w.client.pvcs[ns+"/"+name] = pvc
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pv)
		if err != nil {
			return nil, err
		}
		w.pvs = append(w.pvs, &unstructured.Unstructured{Object: obj})
		boundPV := pv
		if pvc.Spec.VolumeName == "" {
			boundPV = nil
		}
		w.infos = append(w.infos, policy.VolumeFromPV(boundPV, pvc))
	}
	for i := range pods {
		ns := fmt.Sprintf("ns%d", i%20)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("pod-%d", i)}}
		if i%3 == 0 {
			pod.Annotations = map[string]string{volumehelper.VolumesToBackupAnnotation: "data,cache"}
		}
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}})
		if i < claims {
			pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: fmt.Sprintf("data-%d", i)}}})
		} else {
			pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		}
		w.client.pods[ns] = append(w.client.pods[ns], pod)
		w.pods = append(w.pods, pod)
		for _, vol := range pod.Spec.Volumes {
			if vol.PersistentVolumeClaim == nil {
				w.infos = append(w.infos, policy.VolumeFromPodVolume(vol, nil, nil))
			}
		}
	}
	return w, nil
}

// memClient serves Get and List from memory, copying each object as a
// client's decoding would hand out a fresh one.
type memClient struct {
	crclient.Client
	pvs  map[string]*corev1.PersistentVolume
	pvcs map[string]*corev1.PersistentVolumeClaim
	pods map[string][]*corev1.Pod
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
	var src []*corev1.Pod
	if lo.Namespace == "" {
		for _, ps := range c.pods {
			src = append(src, ps...)
		}
	} else {
		src = c.pods[lo.Namespace]
	}
	pl.Items = make([]corev1.Pod, len(src))
	for i, p := range src {
		p.DeepCopyInto(&pl.Items[i])
	}
	return nil
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

package volumehelper

import (
	"context"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/lifeboat-io/lifeboat/pkg/policy"
)

// counts records the requests a fake client served, to check that lookups
// are indexed and remembered rather than repeated.
type counts struct {
	lists atomic.Int64
	gets  atomic.Int64
	// listNamespaces records the namespace of each LIST ("" cluster-wide).
	listNamespaces chan string
}

func newClient(t testing.TB, objs ...crclient.Object) (crclient.Client, *counts) {
	t.Helper()
	c := &counts{listNamespaces: make(chan string, 1000)}
	cl := fake.NewClientBuilder().
		WithScheme(clientgoscheme.Scheme).
		WithObjects(objs...).
		WithInterceptorFuncs(interceptor.Funcs{
			Get: func(ctx context.Context, w crclient.WithWatch, key crclient.ObjectKey, obj crclient.Object, opts ...crclient.GetOption) error {
				c.gets.Add(1)
				return w.Get(ctx, key, obj, opts...)
			},
			List: func(ctx context.Context, w crclient.WithWatch, list crclient.ObjectList, opts ...crclient.ListOption) error {
				c.lists.Add(1)
				var lo crclient.ListOptions
				lo.ApplyOptions(opts)
				select {
				case c.listNamespaces <- lo.Namespace:
				default:
				}
				return w.List(ctx, list, opts...)
			},
		}).
		Build()
	return cl, c
}

func (c *counts) namespacesListed() []string {
	var out []string
	for {
		select {
		case ns := <-c.listNamespaces:
			out = append(out, ns)
		default:
			return out
		}
	}
}

func mustParse(t testing.TB, doc string) *policy.Policies {
	t.Helper()
	p, err := policy.Parse([]byte(doc))
	if err != nil {
		t.Fatalf("Parse:\n%v", err)
	}
	return p
}

func ptr[T any](v T) *T { return &v }

type pvOpt func(*corev1.PersistentVolume)

func newPV(name string, opts ...pvOpt) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolume"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				CSI: &corev1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com", VolumeHandle: name},
			},
			StorageClassName: "gp3",
		},
	}
	for _, o := range opts {
		o(pv)
	}
	return pv
}

func claimRef(ns, name string, uid types.UID) pvOpt {
	return func(pv *corev1.PersistentVolume) {
		pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: ns, Name: name, UID: uid}
	}
}

func storageClass(sc string) pvOpt {
	return func(pv *corev1.PersistentVolume) { pv.Spec.StorageClassName = sc }
}

func nfs() pvOpt {
	return func(pv *corev1.PersistentVolume) {
		pv.Spec.PersistentVolumeSource = corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nas", Path: "/export"}}
	}
}

type pvcOpt func(*corev1.PersistentVolumeClaim)

// newPVC is a claim bound to volume, or pending when volume is "".
func newPVC(ns, name, volume string, opts ...pvcOpt) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: volume, StorageClassName: ptr("gp3")},
		Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
	}
	if volume == "" {
		pvc.Status.Phase = corev1.ClaimPending
	}
	for _, o := range opts {
		o(pvc)
	}
	return pvc
}

func labels(kv ...string) pvcOpt {
	return func(pvc *corev1.PersistentVolumeClaim) {
		pvc.Labels = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			pvc.Labels[kv[i]] = kv[i+1]
		}
	}
}

func uid(u types.UID) pvcOpt {
	return func(pvc *corev1.PersistentVolumeClaim) { pvc.UID = u }
}

func phase(p corev1.PersistentVolumeClaimPhase) pvcOpt {
	return func(pvc *corev1.PersistentVolumeClaim) { pvc.Status.Phase = p }
}

func newPod(ns, name string, annotations map[string]string, vols ...corev1.Volume) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
		Spec:       corev1.PodSpec{Volumes: vols},
	}
}

func claimVolume(name, claim string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim},
	}}
}

func ephemeralVolume(name string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}}
}

func emptyDirVolume(name string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
}

func toUnstructured(t testing.TB, obj runtime.Object) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

func mustHelper(t testing.TB, c config) *helper {
	t.Helper()
	h, err := newHelper(c)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

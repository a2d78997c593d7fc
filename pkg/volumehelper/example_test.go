package volumehelper_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/pkg/policy"
	"github.com/lifeboat-io/lifeboat/pkg/volumehelper"
)

const examplePolicy = `
version: v1
volumePolicies:
- conditions: {csi: {driver: array.csi.example.com}}
  action: {type: custom, parameters: {handler: example.io/array, tier: 1}}
- conditions: {storageClass: [gold]}
  action: {type: snapshot}
`

// claim returns a claim in namespace shop bound to a volume of its own, of
// the given class; a CSI volume of driver when driver is set, else a
// hostPath volume.
func claim(name, class, driver string) (*corev1.PersistentVolumeClaim, *corev1.PersistentVolume) {
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-" + name},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName: class,
			Capacity:         corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
			ClaimRef:         &corev1.ObjectReference{Namespace: "shop", Name: name},
		},
	}
	if driver != "" {
		pv.Spec.CSI = &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: "vol-" + name}
	} else {
		pv.Spec.HostPath = &corev1.HostPathVolumeSource{Path: "/srv/" + name}
	}
	pvc := &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name},
		Spec:       corev1.PersistentVolumeClaimSpec{StorageClassName: &class, VolumeName: pv.Name},
		Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
	}
	return pvc, pv
}

// asItem is the claim as a BackupItemAction gets it: unstructured.
func asItem(obj any) runtime.Unstructured {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		panic(err)
	}
	return &unstructured.Unstructured{Object: m}
}

// A BackupItemAction asks the helper, for each claim it is given, what the
// backup does with the claim's volume. The helper looks up the claim's
// volume (and the pods that mount the claim) through its client; here a
// fake client holds them.
func ExampleNewVolumeHelper() {
	array, arrayPV := claim("data", "fast", "array.csi.example.com")
	gold, goldPV := claim("logs", "gold", "")
	plain, plainPV := claim("scratch", "standard", "")
	client := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).
		WithObjects([]crclient.Object{array, arrayPV, gold, goldPV, plain, plainPV}...).Build()

	policies, err := policy.Parse([]byte(examplePolicy))
	if err != nil {
		fmt.Println(err)
		return
	}
	snapshotVolumes := false // the backup's spec.snapshotVolumes
	h, err := volumehelper.NewVolumeHelper(policies, &snapshotVolumes, nil, client, false, false, []string{"shop"})
	if err != nil {
		fmt.Println(err)
		return
	}

	for _, pvc := range []*corev1.PersistentVolumeClaim{array, gold, plain} {
		snapshot, err := h.ShouldPerformSnapshot(asItem(pvc), volumehelper.PersistentVolumeClaims)
		fmt.Printf("%s: snapshot %v %v\n", pvc.Name, snapshot, err)
	}

	// A plugin claims the custom actions whose parameters include its own;
	// values compare by value, so tier 1.0 matches the policy's 1.
	for _, match := range []map[string]any{
		{"handler": "example.io/array"},
		{"handler": "example.io/array", "tier": 1.0},
		{"handler": "example.io/array", "tier": 2},
		{"handler": "example.io/other"},
	} {
		mine, err := h.ShouldPerformCustomAction(asItem(array), volumehelper.PersistentVolumeClaims, match)
		fmt.Printf("custom for %v: %v %v\n", match, mine, err)
	}

	found, action, params, err := h.GetActionParameters(asItem(array), volumehelper.PersistentVolumeClaims)
	fmt.Println(found, action, params, err)
	// Output:
	// data: snapshot false <nil>
	// logs: snapshot true <nil>
	// scratch: snapshot false <nil>
	// custom for map[handler:example.io/array]: true <nil>
	// custom for map[handler:example.io/array tier:1]: true <nil>
	// custom for map[handler:example.io/array tier:2]: false <nil>
	// custom for map[handler:example.io/other]: false <nil>
	// true custom map[handler:example.io/array tier:1] <nil>
}

// A plugin usually builds the helper from the Backup it is given: the
// backup's resource policy ConfigMap, snapshotVolumes, fs-backup default,
// namespaces and filters all come from it.
func ExampleNewVolumeHelperForBackup() {
	gold, goldPV := claim("logs", "gold", "")
	plain, plainPV := claim("scratch", "standard", "")
	policyCM := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: "volume-policy"},
		Data:       map[string]string{"policy.yaml": examplePolicy},
	}
	client := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).
		WithObjects([]crclient.Object{policyCM, gold, goldPV, plain, plainPV}...).Build()
	backup := &v1.Backup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: "nightly"},
		Spec: v1.BackupSpec{
			IncludedNamespaces: []string{"shop"},
			ResourcePolicy:     &corev1.TypedLocalObjectReference{Kind: "configmap", Name: "volume-policy"},
		},
	}

	h, err := volumehelper.NewVolumeHelperForBackup(context.Background(), backup, client, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	// The gold volume by its policy; the other by snapshotVolumes, which
	// the backup leaves unset (snapshot).
	for _, pv := range []*corev1.PersistentVolume{goldPV, plainPV} {
		snapshot, err := h.ShouldPerformSnapshot(asItem(pv), volumehelper.PersistentVolumes)
		fmt.Printf("%s: snapshot %v %v\n", pv.Name, snapshot, err)
	}
	// Output:
	// pv-logs: snapshot true <nil>
	// pv-scratch: snapshot true <nil>
}

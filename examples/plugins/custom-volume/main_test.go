package main

import (
	"encoding/json"
	"errors"
	"log/slog"
	"reflect"
	"strings"
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

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/framework"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/plugintest"
	"github.com/lifeboat-io/lifeboat/pkg/volumehelper"
)

// thePolicy gives CSI volumes of the array driver this plugin's custom
// action, and gold volumes a snapshot.
const thePolicy = `version: v1
volumePolicies:
- conditions: {csi: {driver: array.csi.example.com}}
  action: {type: custom, parameters: {handler: example.io/custom-volume, tier: 1}}
- conditions: {storageClass: [gold]}
  action: {type: snapshot}
`

// claimAndVolume is a claim in namespace shop bound to a volume of class
// class; driver, when set, makes it a CSI volume of that driver.
func claimAndVolume(name, class, driver string) (*corev1.PersistentVolumeClaim, *corev1.PersistentVolume) {
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-" + name},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName: class,
			Capacity:         corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			ClaimRef:         &corev1.ObjectReference{Namespace: "shop", Name: name, UID: types.UID("uid-" + name)},
		},
	}
	if driver != "" {
		pv.Spec.CSI = &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: "h-" + name}
	} else {
		pv.Spec.HostPath = &corev1.HostPathVolumeSource{Path: "/data/" + name}
	}
	pvc := &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID("uid-" + name)},
		Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: pv.Name, StorageClassName: &class},
		Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
	}
	return pvc, pv
}

func unstructuredOf(t *testing.T, obj any) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

// The plugin called as the server calls it, through the plugin protocol
// (served in process by plugintest), with a fake cluster holding the
// backup's resource policy, claims and volumes.
func TestHandlesOnlyItsCustomVolumes(t *testing.T) {
	array, arrayPV := claimAndVolume("data", "fast", "array.csi.example.com")
	gold, goldPV := claimAndVolume("logs", "gold", "")
	policyCM := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: "volume-policy"},
		Data:       map[string]string{"policy.yaml": thePolicy},
	}
	client := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).
		WithObjects([]crclient.Object{policyCM, array, arrayPV, gold, goldPV}...).Build()
	backup := &v1.Backup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: "nightly", UID: "b-1"},
		Spec: v1.BackupSpec{
			IncludedNamespaces: []string{"shop"},
			ResourcePolicy:     &corev1.TypedLocalObjectReference{Kind: "configmap", Name: "volume-policy"},
		},
	}
	impl := &customVolume{
		log: slog.New(slog.DiscardHandler), client: client,
		match: map[string]any{"handler": name}, helpers: map[types.UID]volumehelper.VolumeHelper{},
	}
	bia := plugintest.BackupItemAction(t, name, impl)

	sel, err := bia.AppliesTo()
	if err != nil || !reflect.DeepEqual(sel.IncludedResources, []string{"persistentvolumeclaims"}) {
		t.Errorf("AppliesTo = %+v, %v", sel, err)
	}

	// The array volume is this plugin's: recorded and claimed.
	out, _, err := bia.Execute(unstructuredOf(t, array), backup)
	if err != nil {
		t.Fatal(err)
	}
	ann := (&unstructured.Unstructured{Object: out.UnstructuredContent()}).GetAnnotations()
	if ann[volumehelper.ClaimedByAnnotation] != name {
		t.Errorf("claimed-by %q, want %q", ann[volumehelper.ClaimedByAnnotation], name)
	}
	var rec Record
	if err := json.Unmarshal([]byte(ann[AnnotationKey]), &rec); err != nil {
		t.Fatalf("annotation %s = %q: %v", AnnotationKey, ann[AnnotationKey], err)
	}
	want := Record{
		HandledBy: name, Backup: "nightly", Volume: "pv-data", StorageClass: "fast",
		// Read back from the annotation's JSON, whose numbers are float64.
		Parameters: map[string]any{"handler": name, "tier": float64(1)},
		Handle:     "example-copy://nightly/shop/data",
	}
	if !reflect.DeepEqual(rec, want) {
		t.Errorf("record %+v\nwant   %+v", rec, want)
	}

	// The gold volume is snapshotted by the server: not this plugin's, and
	// returned unchanged.
	out, _, err = bia.Execute(unstructuredOf(t, gold), backup)
	if err != nil {
		t.Fatal(err)
	}
	if ann := (&unstructured.Unstructured{Object: out.UnstructuredContent()}).GetAnnotations(); ann[volumehelper.ClaimedByAnnotation] != "" || ann[AnnotationKey] != "" {
		t.Errorf("the gold claim was annotated %v", ann)
	}
	if len(impl.helpers) != 1 {
		t.Errorf("%d VolumeHelpers for one backup, want 1", len(impl.helpers))
	}
}

// The binary serves the plugin under its name; without a cluster to read
// the backup's resource policy from, its calls fail saying so, and the
// server sees the plugin's error.
func TestServesItsNameAndNeedsACluster(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	conn := plugintest.Serve(t, newServer())
	if ids := conn.Plugins(); len(ids) != 1 || ids[0].Kind != api.KindBackupItemAction || ids[0].Name != name {
		t.Errorf("the binary serves %+v, want only BackupItemAction %s", ids, name)
	}
	pvc, _ := claimAndVolume("data", "fast", "")
	_, _, err := conn.BackupItemAction(name).Execute(unstructuredOf(t, pvc), &v1.Backup{})
	var pe *framework.PluginError
	if !errors.As(err, &pe) || pe.Name != name || !strings.Contains(pe.Message(), "set KUBECONFIG") {
		t.Errorf("Execute without a cluster: %v, want the plugin's error saying to set KUBECONFIG", err)
	}
}

package csisnapshot

import (
	"strings"
	"testing"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

func class(name, driver string, labels, annotations map[string]string) snapshotv1.VolumeSnapshotClass {
	return snapshotv1.VolumeSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations}, Driver: driver,
		DeletionPolicy: snapshotv1.VolumeSnapshotContentDelete}
}

// TestChooseClass follows Velero's order: claim annotation, backup
// annotation per driver, the labelled class, the Kubernetes default, the
// only class; a wrong annotation falls through, as in Velero.
func TestChooseClass(t *testing.T) {
	labelled := map[string]string{ClassSelectorLabel: "true"}
	classes := []snapshotv1.VolumeSnapshotClass{
		class("a-plain", "d.io", nil, nil),
		class("b-labelled", "d.io", labelled, nil),
		class("c-default", "d.io", nil, map[string]string{KubernetesDefaultClassAnnot: "true"}),
		class("other", "other.io", labelled, nil),
		class("single", "single.io", nil, nil),
		class("two-a", "two.io", nil, nil),
		class("two-b", "two.io", nil, nil),
		class("k8s-default", "k8s.io", nil, map[string]string{KubernetesDefaultClassAnnot: "true"}),
		class("k8s-other", "k8s.io", nil, nil),
	}
	for _, tt := range []struct {
		name, driver string
		claimAnn     string
		backupAnn    map[string]string
		want, err    string
	}{
		{name: "labelled", driver: "d.io", want: "b-labelled"},
		{name: "claim annotation", driver: "d.io", claimAnn: "a-plain", want: "a-plain"},
		{name: "claim annotation wins over backup's", driver: "d.io", claimAnn: "c-default", backupAnn: map[string]string{"velero.io/csi-volumesnapshot-class_d.io": "a-plain"}, want: "c-default"},
		{name: "backup annotation", driver: "D.io", backupAnn: map[string]string{"velero.io/csi-volumesnapshot-class_d.io": "a-plain"}, want: "a-plain"},
		{name: "claim annotation of another driver falls through", driver: "d.io", claimAnn: "other", want: "b-labelled"},
		{name: "missing class in annotation falls through", driver: "d.io", claimAnn: "nope", want: "b-labelled"},
		{name: "kubernetes default", driver: "k8s.io", want: "k8s-default"},
		{name: "only class", driver: "single.io", want: "single"},
		{name: "two unlabelled", driver: "two.io", err: "no VolumeSnapshotClass for driver two.io: label the class to use velero.io/csi-volumesnapshot-class=true"},
		{name: "none", driver: "none.io", err: "no VolumeSnapshotClass for driver none.io"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pvc := &corev1.PersistentVolumeClaim{}
			if tt.claimAnn != "" {
				pvc.Annotations = map[string]string{ClassClaimAnnotation: tt.claimAnn}
			}
			b := &v1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "b", Annotations: tt.backupAnn}}
			got, err := ChooseClass(classes, tt.driver, b, pvc)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || got.Name != tt.want {
				t.Fatalf("got %v, %v; want %s", got, err, tt.want)
			}
		})
	}
}

func TestStoredAnnotations(t *testing.T) {
	handle := "snap-1"
	size := int64(1536 << 20)
	vsc := &snapshotv1.VolumeSnapshotContent{Spec: snapshotv1.VolumeSnapshotContentSpec{Driver: "d.io", DeletionPolicy: snapshotv1.VolumeSnapshotContentDelete},
		Status: &snapshotv1.VolumeSnapshotContentStatus{SnapshotHandle: &handle, RestoreSize: &size}}
	got := StoredAnnotations(vsc)
	want := map[string]string{HandleAnnotation: "snap-1", DriverAnnotation: "d.io", ContentDeletionPolicyAnnot: "Delete", RestoreSizeAnnotation: "1536Mi"}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}

// TestRestoredName is Velero's util.GenerateSha256FromRestoreUIDAndVsName:
// the hex sha256 of "<restore UID>/<snapshot name>".
func TestRestoredName(t *testing.T) {
	if got, want := RestoredName("uid-1", "velero-data-abcde"), "c67f1c7b8b8c63622cbbdcf18a505146cf7cd48fd7d1b7fa599f622f8b6de277"; got != want {
		t.Errorf("RestoredName = %q, want %q", got, want)
	}
}

package policy

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Cases of Velero v1.18.3's TestGetMatchAction
// (internal/resourcepolicies/resource_policies_test.go), named as there,
// with Velero's outcome: the volumes are built from Kubernetes objects
// through VolumeFromPV and VolumeFromPodVolume, as the backup builds them.
func TestVeleroMatchCases(t *testing.T) {
	pv := func(capacity string, src corev1.PersistentVolumeSource) *corev1.PersistentVolume {
		v := &corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: src}}
		if capacity != "" {
			v.Spec.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(capacity)}
		}
		return v
	}
	csi := corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com"}}
	nfs := corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: "192.168.1.20"}}
	pvc := func(phase corev1.PersistentVolumeClaimPhase, labels map[string]string, mode *corev1.PersistentVolumeMode, access ...corev1.PersistentVolumeAccessMode) *corev1.PersistentVolumeClaim {
		class := "gp2"
		return &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "claim", Labels: labels},
			Spec:       corev1.PersistentVolumeClaimSpec{StorageClassName: &class, VolumeMode: mode, AccessModes: access},
			Status:     corev1.PersistentVolumeClaimStatus{Phase: phase},
		}
	}
	block, fs := corev1.PersistentVolumeBlock, corev1.PersistentVolumeFilesystem
	claimVolume := corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "claim"}}}
	emptyDir := corev1.Volume{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	tests := []struct {
		name       string
		conditions string
		volume     VolumeInfo
		skip       bool
	}{
		{"empty csi", `csi: {}`, VolumeFromPV(pv("", csi), nil), true},
		{"empty csi with pv no csi driver", `csi: {}`, VolumeFromPV(pv("1Gi", corev1.PersistentVolumeSource{}), nil), false},
		{"csi not configured and testing capacity condition", `capacity: "0,100Gi"`, VolumeFromPV(pv("1Gi", csi), nil), true},
		{"empty nfs", `nfs: {}`, VolumeFromPV(pv("", nfs), nil), true},
		{"nfs not configured", `capacity: "0,100Gi"`, VolumeFromPV(pv("1Gi", nfs), nil), true},
		{"empty nfs with pv no nfs volume source", `capacity: "0,100Gi", nfs: {}`, VolumeFromPV(pv("1Gi", corev1.PersistentVolumeSource{}), nil), false},
		{"PVC labels match, criteria label is a subset of the pvc labels", `pvcLabels: {environment: production}`,
			VolumeFromPV(pv("1Gi", csi), pvc(corev1.ClaimBound, map[string]string{"environment": "production", "app": "db"}, nil)), true},
		{"PodVolume case with PVC labels match", `pvcLabels: {environment: production}`,
			VolumeFromPodVolume(claimVolume, pvc(corev1.ClaimBound, map[string]string{"environment": "production"}, nil), nil), true},
		{"PVC phase matching - Pending phase should skip", `pvcPhase: [Pending]`, VolumeFromPV(nil, pvc(corev1.ClaimPending, nil, nil)), true},
		{"PVC phase matching - Bound phase should not skip", `pvcPhase: [Pending]`, VolumeFromPV(pv("1Gi", csi), pvc(corev1.ClaimBound, nil, nil)), false},
		{"PVC volume mode matching - Block volume mode should skip", `pvcVolumeMode: Block`, VolumeFromPV(pv("1Gi", csi), pvc(corev1.ClaimBound, nil, &block)), true},
		{"PVC volume mode matching - Filesystem volume mode should not skip", `pvcVolumeMode: Block`, VolumeFromPV(pv("1Gi", csi), pvc(corev1.ClaimBound, nil, &fs)), false},
		{"PVC volume mode matching - nil volume mode should not match Filesystem", `pvcVolumeMode: Filesystem`, VolumeFromPV(pv("1Gi", csi), pvc(corev1.ClaimBound, nil, nil)), false},
		{"PVC volume mode matching - non-PVC volume should not match", `pvcVolumeMode: Filesystem`, VolumeFromPodVolume(emptyDir, nil, nil), false},
		{"PVC access modes matching - non-PVC volume should not match", `pvcAccessModes: [ReadWriteOnce]`, VolumeFromPodVolume(emptyDir, nil, nil), false},
		{"PVC access modes matching - ReadWriteOnce should skip", `pvcAccessModes: [ReadWriteOnce]`,
			VolumeFromPV(pv("1Gi", csi), pvc(corev1.ClaimBound, nil, nil, corev1.ReadWriteOnce)), true},
		{"PVC access modes matching - extra PVC access mode should not skip", `pvcAccessModes: [ReadWriteOnce]`,
			VolumeFromPV(pv("1Gi", csi), pvc(corev1.ClaimBound, nil, nil, corev1.ReadWriteOnce, corev1.ReadOnlyMany)), false},
		{"PVC access modes matching - exact access mode set should match regardless of order", `pvcAccessModes: [ReadOnlyMany, ReadWriteOnce]`,
			VolumeFromPV(pv("1Gi", csi), pvc(corev1.ClaimBound, nil, nil, corev1.ReadWriteOnce, corev1.ReadOnlyMany)), true},
		// Not Velero's cases, its rules: a claim alone has no capacity (0)
		// and no storage class.
		{"unbound claim meets an upper bound as size 0", `capacity: ",1Gi"`, VolumeFromPV(nil, pvc(corev1.ClaimPending, nil, nil)), true},
		{"unbound claim has no storage class", `storageClass: [gp2]`, VolumeFromPV(nil, pvc(corev1.ClaimPending, nil, nil)), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse([]byte("version: v1\nvolumePolicies:\n- conditions: {" + tt.conditions + "}\n  action: {type: skip}\n"))
			if err != nil {
				t.Fatal(err)
			}
			idx, _ := p.MatchAction(tt.volume)
			if (idx == 0) != tt.skip {
				t.Errorf("matched %v, Velero says %v (volume %+v, reasons %v)", idx == 0, tt.skip, tt.volume, p.Match(tt.volume).Rejected)
			}
		})
	}
}

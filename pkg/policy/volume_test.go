package policy

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func pvOf(source corev1.PersistentVolumeSource, capacity, class string) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-1"},
		Spec:       corev1.PersistentVolumeSpec{PersistentVolumeSource: source, StorageClassName: class},
	}
	if capacity != "" {
		pv.Spec.Capacity = corev1.ResourceList{corev1.ResourceStorage: *qty(capacity)}
	}
	return pv
}

func pvcOf(phase corev1.PersistentVolumeClaimPhase, labels map[string]string, class *string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "data", Labels: labels},
		Spec:       corev1.PersistentVolumeClaimSpec{StorageClassName: class},
		Status:     corev1.PersistentVolumeClaimStatus{Phase: phase},
	}
}

func TestVolumeFromPV(t *testing.T) {
	csiPV := pvOf(corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
		Driver: "ebs.csi.aws.com", VolumeHandle: "vol-1", VolumeAttributes: map[string]string{"type": "gp3"},
	}}, "20Gi", "gold")
	tests := []struct {
		name string
		pv   *corev1.PersistentVolume
		pvc  *corev1.PersistentVolumeClaim
		want VolumeInfo
	}{
		{
			name: "CSI volume with its claim",
			pv:   csiPV,
			pvc:  pvcOf(corev1.ClaimBound, map[string]string{"app": "db"}, ptr.To("ignored-when-a-pv-is-known")),
			want: VolumeInfo{Type: VolumeCSI, Capacity: qty("20Gi"), StorageClass: "gold",
				CSIDriver: "ebs.csi.aws.com", CSIVolumeAttributes: map[string]string{"type": "gp3"},
				PVC: "shop/data", PVCLabels: map[string]string{"app": "db"}, PVCPhase: corev1.ClaimBound},
		},
		{
			name: "NFS volume without a claim",
			pv:   pvOf(corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nas", Path: "/export"}}, "1Ti", ""),
			want: VolumeInfo{Type: VolumeNFS, Capacity: qty("1Ti"), NFSServer: "nas", NFSPath: "/export"},
		},
		{
			name: "hostPath volume with no capacity",
			pv:   pvOf(corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data"}}, "", "manual"),
			want: VolumeInfo{Type: VolumeHostPath, StorageClass: "manual"},
		},
		{
			name: "a source Velero does not name has no type",
			pv:   pvOf(corev1.PersistentVolumeSource{}, "1Gi", ""),
			want: VolumeInfo{Capacity: qty("1Gi")},
		},
		{
			// Velero takes no storage class from a claim alone.
			name: "an unbound claim alone: no class, no type, no capacity",
			pvc:  pvcOf(corev1.ClaimPending, nil, ptr.To("gp2")),
			want: VolumeInfo{PVC: "shop/data", PVCPhase: corev1.ClaimPending},
		},
		{
			name: "nothing at all",
			want: VolumeInfo{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := VolumeFromPV(tt.pv, tt.pvc)
			if !equality.Semantic.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestVolumeFromPodVolume(t *testing.T) {
	pv := pvOf(corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com"}}, "8Gi", "gold")
	pvc := pvcOf(corev1.ClaimBound, map[string]string{"app": "db"}, ptr.To("gold"))
	tests := []struct {
		name string
		vol  corev1.Volume
		pvc  *corev1.PersistentVolumeClaim
		pv   *corev1.PersistentVolume
		want VolumeInfo
	}{
		{
			name: "a claim reference is described by the PV",
			vol:  corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
			pvc:  pvc, pv: pv,
			want: VolumeInfo{Type: VolumeCSI, Capacity: qty("8Gi"), StorageClass: "gold", CSIDriver: "ebs.csi.aws.com",
				PVC: "shop/data", PVCLabels: map[string]string{"app": "db"}, PVCPhase: corev1.ClaimBound},
		},
		{
			name: "a claim reference with an unbound claim",
			vol:  corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
			pvc:  pvcOf(corev1.ClaimPending, nil, ptr.To("gp2")),
			want: VolumeInfo{PVC: "shop/data", PVCPhase: corev1.ClaimPending},
		},
		{
			name: "emptyDir",
			vol:  corev1.Volume{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: qty("1Gi")}}},
			want: VolumeInfo{Type: VolumeEmptyDir},
		},
		{
			name: "inline NFS",
			vol:  corev1.Volume{Name: "share", VolumeSource: corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nas", Path: "/x"}}},
			want: VolumeInfo{Type: VolumeNFS, NFSServer: "nas", NFSPath: "/x"},
		},
		{
			name: "inline CSI",
			vol: corev1.Volume{Name: "secrets", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{
				Driver: "secrets-store.csi.k8s.io", VolumeAttributes: map[string]string{"secretProviderClass": "vault"}}}},
			want: VolumeInfo{Type: VolumeCSI, CSIDriver: "secrets-store.csi.k8s.io", CSIVolumeAttributes: map[string]string{"secretProviderClass": "vault"}},
		},
		{
			name: "configMap, with Velero's spelling",
			vol:  corev1.Volume{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
			want: VolumeInfo{Type: VolumeConfigMap},
		},
		{
			name: "secret",
			vol:  corev1.Volume{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{}}},
			want: VolumeInfo{Type: VolumeSecret},
		},
		{
			name: "a generic ephemeral volume keeps its type and gets its claim's labels",
			vol:  corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}},
			pvc:  pvc, pv: pv,
			want: VolumeInfo{Type: VolumeEphemeral, PVC: "shop/data", PVCLabels: map[string]string{"app": "db"}, PVCPhase: corev1.ClaimBound},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := VolumeFromPodVolume(tt.vol, tt.pvc, tt.pv)
			if !equality.Semantic.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// TestEveryVolumeTypeIsProduced guards the type list against the source
// switches drifting apart: every name but Velero's placeholder must come out
// of one constructor or the other.
func TestEveryVolumeTypeIsProduced(t *testing.T) {
	produced := map[VolumeType]bool{}
	pvSources := []corev1.PersistentVolumeSource{
		{AWSElasticBlockStore: &corev1.AWSElasticBlockStoreVolumeSource{}}, {AzureDisk: &corev1.AzureDiskVolumeSource{}},
		{AzureFile: &corev1.AzureFilePersistentVolumeSource{}}, {CephFS: &corev1.CephFSPersistentVolumeSource{}},
		{Cinder: &corev1.CinderPersistentVolumeSource{}}, {CSI: &corev1.CSIPersistentVolumeSource{}},
		{FC: &corev1.FCVolumeSource{}}, {FlexVolume: &corev1.FlexPersistentVolumeSource{}},
		{Flocker: &corev1.FlockerVolumeSource{}}, {GCEPersistentDisk: &corev1.GCEPersistentDiskVolumeSource{}},
		{Glusterfs: &corev1.GlusterfsPersistentVolumeSource{}}, {HostPath: &corev1.HostPathVolumeSource{}},
		{ISCSI: &corev1.ISCSIPersistentVolumeSource{}}, {Local: &corev1.LocalVolumeSource{}},
		{NFS: &corev1.NFSVolumeSource{}}, {PhotonPersistentDisk: &corev1.PhotonPersistentDiskVolumeSource{}},
		{PortworxVolume: &corev1.PortworxVolumeSource{}}, {Quobyte: &corev1.QuobyteVolumeSource{}},
		{RBD: &corev1.RBDPersistentVolumeSource{}}, {ScaleIO: &corev1.ScaleIOPersistentVolumeSource{}},
		{StorageOS: &corev1.StorageOSPersistentVolumeSource{}}, {VsphereVolume: &corev1.VsphereVirtualDiskVolumeSource{}},
	}
	for _, s := range pvSources {
		typ := VolumeFromPV(&corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: s}}, nil).Type
		if typ == "" {
			t.Errorf("PV source %+v has no type", s)
		}
		produced[typ] = true
	}
	podSources := []corev1.VolumeSource{
		{ConfigMap: &corev1.ConfigMapVolumeSource{}}, {DownwardAPI: &corev1.DownwardAPIVolumeSource{}},
		{EmptyDir: &corev1.EmptyDirVolumeSource{}}, {Ephemeral: &corev1.EphemeralVolumeSource{}},
		{GitRepo: &corev1.GitRepoVolumeSource{}}, {Projected: &corev1.ProjectedVolumeSource{}},
		{Secret: &corev1.SecretVolumeSource{}}, {AWSElasticBlockStore: &corev1.AWSElasticBlockStoreVolumeSource{}},
		{CephFS: &corev1.CephFSVolumeSource{}}, {Cinder: &corev1.CinderVolumeSource{}}, {FlexVolume: &corev1.FlexVolumeSource{}},
		{Glusterfs: &corev1.GlusterfsVolumeSource{}}, {ISCSI: &corev1.ISCSIVolumeSource{}}, {RBD: &corev1.RBDVolumeSource{}},
		{ScaleIO: &corev1.ScaleIOVolumeSource{}}, {StorageOS: &corev1.StorageOSVolumeSource{}}, {AzureFile: &corev1.AzureFileVolumeSource{}},
		{CSI: &corev1.CSIVolumeSource{}},
	}
	for _, s := range podSources {
		typ := VolumeFromPodVolume(corev1.Volume{VolumeSource: s}, nil, nil).Type
		if typ == "" {
			t.Errorf("pod source %+v has no type", s)
		}
		produced[typ] = true
	}
	for _, typ := range VolumeTypes {
		if !produced[typ] && typ != VolumeAWSAzureDisk {
			t.Errorf("no source produces %q", typ)
		}
	}
}

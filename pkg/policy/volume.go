package policy

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// VolumeType is a volume source kind with the name Velero's volumeTypes
// condition uses (the JSON field name of the source in the Kubernetes API).
type VolumeType string

// The volume types Velero names.
const (
	VolumeAWSElasticBlockStore VolumeType = "awsElasticBlockStore"
	VolumeAzureDisk            VolumeType = "azureDisk"
	VolumeAzureFile            VolumeType = "azureFile"
	VolumeCephFS               VolumeType = "cephfs"
	VolumeCinder               VolumeType = "cinder"
	VolumeConfigMap            VolumeType = "configMap"
	VolumeCSI                  VolumeType = "csi"
	VolumeDownwardAPI          VolumeType = "downwardAPI"
	VolumeEmptyDir             VolumeType = "emptyDir"
	VolumeEphemeral            VolumeType = "ephemeral"
	VolumeFC                   VolumeType = "fc"
	VolumeFlexVolume           VolumeType = "flexVolume"
	VolumeFlocker              VolumeType = "flocker"
	VolumeGCEPersistentDisk    VolumeType = "gcePersistentDisk"
	VolumeGitRepo              VolumeType = "gitRepo"
	VolumeGlusterfs            VolumeType = "glusterfs"
	VolumeHostPath             VolumeType = "hostPath"
	VolumeISCSI                VolumeType = "iscsi"
	VolumeLocal                VolumeType = "local"
	VolumeNFS                  VolumeType = "nfs"
	VolumePhotonPersistentDisk VolumeType = "photonPersistentDisk"
	VolumePortworxVolume       VolumeType = "portworxVolume"
	VolumeProjected            VolumeType = "projected"
	VolumeQuobyte              VolumeType = "quobyte"
	VolumeRBD                  VolumeType = "rbd"
	VolumeScaleIO              VolumeType = "scaleIO"
	VolumeSecret               VolumeType = "secret"
	VolumeStorageOS            VolumeType = "storageOS"
	VolumeVsphereVolume        VolumeType = "vsphereVolume"
	// VolumeAWSAzureDisk names no Kubernetes source; Velero defines and
	// accepts it, so a Velero policy naming it must not fail here. It never
	// matches.
	VolumeAWSAzureDisk VolumeType = "awsAzureDisk"
)

// VolumeTypes lists every volume type Velero names. A volumeTypes condition
// may name any string, as in Velero; others never match and are warned
// about.
var VolumeTypes = []VolumeType{
	VolumeAWSAzureDisk, VolumeAWSElasticBlockStore, VolumeAzureDisk, VolumeAzureFile, VolumeCephFS,
	VolumeCinder, VolumeConfigMap, VolumeCSI, VolumeDownwardAPI, VolumeEmptyDir, VolumeEphemeral,
	VolumeFC, VolumeFlexVolume, VolumeFlocker, VolumeGCEPersistentDisk, VolumeGitRepo, VolumeGlusterfs,
	VolumeHostPath, VolumeISCSI, VolumeLocal, VolumeNFS, VolumePhotonPersistentDisk, VolumePortworxVolume,
	VolumeProjected, VolumeQuobyte, VolumeRBD, VolumeScaleIO, VolumeSecret, VolumeStorageOS, VolumeVsphereVolume,
}

// VolumeInfo is what the conditions look at for one volume, whether a
// PersistentVolume or a pod volume. Build it with VolumeFromPV or
// VolumeFromPodVolume; tests may fill it directly.
type VolumeInfo struct {
	// Type is the volume source kind; empty when it is not one Velero
	// names (or a claim with no bound PV). nfs and csi conditions look at
	// Type, not at the NFS/CSI fields.
	Type VolumeType
	// Capacity is nil when unknown (pod volumes, unbound claims); such a
	// volume meets capacity conditions as a volume of size 0, as in Velero.
	Capacity     *resource.Quantity
	StorageClass string
	NFSServer    string
	NFSPath      string
	CSIDriver    string
	// CSIVolumeAttributes are the CSI source's volumeAttributes.
	CSIVolumeAttributes map[string]string
	// PVC is "namespace/name" of the claim behind the volume, empty when
	// there is none. Matching reads PVCLabels and PVCPhase; PVC only makes
	// explanations say "no PVC" rather than "no labels".
	PVC       string
	PVCLabels map[string]string
	// PVCPhase is empty when there is no claim.
	PVCPhase corev1.PersistentVolumeClaimPhase
	// PVCVolumeMode is the claim's spec.volumeMode, empty when unset.
	PVCVolumeMode string
	// PVCAccessModes are the claim's spec.accessModes.
	PVCAccessModes []string
}

// VolumeFromPV describes a PersistentVolume and, when known, the claim
// bound to it. With pv nil it describes the claim alone (an unbound claim)
// as Velero does: no type, no capacity (0 for capacity conditions) and no
// storage class, its labels, phase and modes only; so a storageClass
// condition never matches an unbound claim, in Velero or here.
func VolumeFromPV(pv *corev1.PersistentVolume, pvc *corev1.PersistentVolumeClaim) VolumeInfo {
	var v VolumeInfo
	if pv != nil {
		s := &pv.Spec
		v.Type = pvSourceType(&s.PersistentVolumeSource)
		if q, ok := s.Capacity[corev1.ResourceStorage]; ok {
			v.Capacity = &q
		}
		v.StorageClass = s.StorageClassName
		if s.NFS != nil {
			v.NFSServer, v.NFSPath = s.NFS.Server, s.NFS.Path
		}
		if s.CSI != nil {
			v.CSIDriver, v.CSIVolumeAttributes = s.CSI.Driver, s.CSI.VolumeAttributes
		}
	}
	v.addPVC(pvc)
	return v
}

// VolumeFromPodVolume describes a volume of a pod. A volume that refers to
// a claim is described by the claim's PV (pv may be nil when the claim is
// unbound or unknown); any other volume by its own source, with no capacity
// or storage class.
func VolumeFromPodVolume(vol corev1.Volume, pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) VolumeInfo {
	if vol.PersistentVolumeClaim != nil {
		return VolumeFromPV(pv, pvc)
	}
	var v VolumeInfo
	v.Type = podSourceType(&vol.VolumeSource)
	if vol.NFS != nil {
		v.NFSServer, v.NFSPath = vol.NFS.Server, vol.NFS.Path
	}
	if vol.CSI != nil {
		v.CSIDriver, v.CSIVolumeAttributes = vol.CSI.Driver, vol.CSI.VolumeAttributes
	}
	// A generic ephemeral volume has a claim of its own; its labels and
	// phase are as meaningful as for any other claim.
	v.addPVC(pvc)
	return v
}

func (v *VolumeInfo) addPVC(pvc *corev1.PersistentVolumeClaim) {
	if pvc == nil {
		return
	}
	v.PVC = pvc.Namespace + "/" + pvc.Name
	v.PVCLabels = pvc.Labels
	v.PVCPhase = pvc.Status.Phase
	if pvc.Spec.VolumeMode != nil {
		v.PVCVolumeMode = string(*pvc.Spec.VolumeMode)
	}
	for _, m := range pvc.Spec.AccessModes {
		v.PVCAccessModes = append(v.PVCAccessModes, string(m))
	}
}

func pvSourceType(s *corev1.PersistentVolumeSource) VolumeType {
	switch {
	case s.AWSElasticBlockStore != nil:
		return VolumeAWSElasticBlockStore
	case s.AzureDisk != nil:
		return VolumeAzureDisk
	case s.AzureFile != nil:
		return VolumeAzureFile
	case s.CephFS != nil:
		return VolumeCephFS
	case s.Cinder != nil:
		return VolumeCinder
	case s.CSI != nil:
		return VolumeCSI
	case s.FC != nil:
		return VolumeFC
	case s.FlexVolume != nil:
		return VolumeFlexVolume
	case s.Flocker != nil:
		return VolumeFlocker
	case s.GCEPersistentDisk != nil:
		return VolumeGCEPersistentDisk
	case s.Glusterfs != nil:
		return VolumeGlusterfs
	case s.HostPath != nil:
		return VolumeHostPath
	case s.ISCSI != nil:
		return VolumeISCSI
	case s.Local != nil:
		return VolumeLocal
	case s.NFS != nil:
		return VolumeNFS
	case s.PhotonPersistentDisk != nil:
		return VolumePhotonPersistentDisk
	case s.PortworxVolume != nil:
		return VolumePortworxVolume
	case s.Quobyte != nil:
		return VolumeQuobyte
	case s.RBD != nil:
		return VolumeRBD
	case s.ScaleIO != nil:
		return VolumeScaleIO
	case s.StorageOS != nil:
		return VolumeStorageOS
	case s.VsphereVolume != nil:
		return VolumeVsphereVolume
	}
	return ""
}

func podSourceType(s *corev1.VolumeSource) VolumeType {
	switch {
	case s.AWSElasticBlockStore != nil:
		return VolumeAWSElasticBlockStore
	case s.AzureDisk != nil:
		return VolumeAzureDisk
	case s.AzureFile != nil:
		return VolumeAzureFile
	case s.CephFS != nil:
		return VolumeCephFS
	case s.Cinder != nil:
		return VolumeCinder
	case s.ConfigMap != nil:
		return VolumeConfigMap
	case s.CSI != nil:
		return VolumeCSI
	case s.DownwardAPI != nil:
		return VolumeDownwardAPI
	case s.EmptyDir != nil:
		return VolumeEmptyDir
	case s.Ephemeral != nil:
		return VolumeEphemeral
	case s.FC != nil:
		return VolumeFC
	case s.FlexVolume != nil:
		return VolumeFlexVolume
	case s.Flocker != nil:
		return VolumeFlocker
	case s.GCEPersistentDisk != nil:
		return VolumeGCEPersistentDisk
	case s.GitRepo != nil:
		return VolumeGitRepo
	case s.Glusterfs != nil:
		return VolumeGlusterfs
	case s.HostPath != nil:
		return VolumeHostPath
	case s.ISCSI != nil:
		return VolumeISCSI
	case s.NFS != nil:
		return VolumeNFS
	case s.PhotonPersistentDisk != nil:
		return VolumePhotonPersistentDisk
	case s.PortworxVolume != nil:
		return VolumePortworxVolume
	case s.Projected != nil:
		return VolumeProjected
	case s.Quobyte != nil:
		return VolumeQuobyte
	case s.RBD != nil:
		return VolumeRBD
	case s.ScaleIO != nil:
		return VolumeScaleIO
	case s.Secret != nil:
		return VolumeSecret
	case s.StorageOS != nil:
		return VolumeStorageOS
	case s.VsphereVolume != nil:
		return VolumeVsphereVolume
	}
	return ""
}

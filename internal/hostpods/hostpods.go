// Package hostpods finds a pod volume's directory in the kubelet's pod
// directory as the node agent sees it (mounted at MountPath, as Velero's
// node agent has it): which directory name the kubelet gives the volume
// (Dir, pure) and where that directory is on this node (Find, a glob).
// Resolve does both from the cluster's objects.
//
// The rules are Velero's (pkg/util/kube GetVolumeDirectory and the exposer's
// glob), so a volume Velero would back up is found at the same place:
//
//   - a volume that is not a claim: its own name (emptyDir, configMap, ...),
//     or <name>/mount for an inline CSI volume;
//   - a claim: its PersistentVolume's name, or <pv>/mount when the volume is
//     provisioned by CSI (spec.csi, or the provisioned-by / migrated-to
//     annotation naming a registered CSIDriver);
//   - searched as <root>/<pod UID>/volumes/*/<dir> (volumeDevices for a
//     block volume), where * is the plugin's directory such as
//     kubernetes.io~empty-dir or kubernetes.io~csi; exactly one must match.
//
// hostPath volumes (inline, or a claim bound to a hostPath PV) are refused,
// as Velero does: the kubelet mounts nothing for them under its pod
// directory, so there is nothing there to read.
package hostpods

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// MountPath is where the node agent's container sees the kubelet's pod
// directory (<kubelet root>/pods on the node), Velero's path.
const MountPath = "/host_pods"

// The PV annotations that name the driver which provisioned a volume (the
// Kubernetes PV controller's keys, read by Velero the same way).
const (
	annProvisionedBy = "pv.kubernetes.io/provisioned-by"
	annMigratedTo    = "pv.kubernetes.io/migrated-to"
)

// ErrHostPath says a volume is a hostPath one, which file-system backup
// cannot read (errors.Is).
var ErrHostPath = errors.New("hostPath volumes are not supported by file-system backup: the kubelet mounts nothing for them under its pod directory")

// Volume is what the kubelet calls a pod volume's directory.
type Volume struct {
	// Dir is the directory's name (possibly with /mount) under the
	// volume plugin's directory.
	Dir string
	// Block: the volume is a raw block device (under volumeDevices).
	Block bool
}

// Facts are what Dir decides from: the pod, the volume's name and, for a
// claim, the claim, its volume and the names of the cluster's CSIDrivers
// (read only when the volume carries a driver annotation).
type Facts struct {
	Pod        *corev1.Pod
	Volume     string
	PVC        *corev1.PersistentVolumeClaim
	PV         *corev1.PersistentVolume
	CSIDrivers []string
}

// PodVolume is the volume named name in pod's spec, or nil.
func PodVolume(pod *corev1.Pod, name string) *corev1.Volume {
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Name == name {
			return &pod.Spec.Volumes[i]
		}
	}
	return nil
}

// Dir is the kubelet's name for the volume's directory. The errors name the
// pod and the volume.
func Dir(f Facts) (Volume, error) {
	where := fmt.Sprintf("volume %q of pod %s/%s", f.Volume, f.Pod.Namespace, f.Pod.Name)
	vol := PodVolume(f.Pod, f.Volume)
	if vol == nil {
		return Volume{}, fmt.Errorf("%s: the pod has no such volume", where)
	}
	if vol.HostPath != nil {
		return Volume{}, fmt.Errorf("%s: %w", where, ErrHostPath)
	}
	if vol.PersistentVolumeClaim == nil {
		if vol.CSI != nil {
			return Volume{Dir: vol.Name + "/mount"}, nil
		}
		return Volume{Dir: vol.Name}, nil
	}
	if f.PVC == nil || f.PV == nil {
		return Volume{}, fmt.Errorf("%s: claim %s is not bound to a volume", where, vol.PersistentVolumeClaim.ClaimName)
	}
	if f.PV.Spec.HostPath != nil {
		return Volume{}, fmt.Errorf("%s (claim %s, volume %s): %w", where, f.PVC.Name, f.PV.Name, ErrHostPath)
	}
	block := f.PV.Spec.VolumeMode != nil && *f.PV.Spec.VolumeMode == corev1.PersistentVolumeBlock
	name := f.PVC.Spec.VolumeName
	if byCSI(f.PV, f.CSIDrivers) && !block {
		return Volume{Dir: name + "/mount"}, nil
	}
	return Volume{Dir: name, Block: block}, nil
}

// byCSI tells whether a PV is a CSI driver's: spec.csi, or (CSI migration)
// an in-tree PV whose provisioned-by or migrated-to annotation names a
// registered CSIDriver.
func byCSI(pv *corev1.PersistentVolume, drivers []string) bool {
	if pv.Spec.CSI != nil {
		return true
	}
	for _, d := range drivers {
		if d != "" && (pv.Annotations[annProvisionedBy] == d || pv.Annotations[annMigratedTo] == d) {
			return true
		}
	}
	return false
}

// NeedsCSIDrivers tells whether Dir needs the CSIDrivers' names for pv:
// only an in-tree PV with a driver annotation does.
func NeedsCSIDrivers(pv *corev1.PersistentVolume) bool {
	return pv != nil && pv.Spec.CSI == nil && (pv.Annotations[annProvisionedBy] != "" || pv.Annotations[annMigratedTo] != "")
}

// Pattern is the glob that finds the volume's directory under root (the
// kubelet's pod directory as this process sees it).
func Pattern(root string, pod *corev1.Pod, v Volume) string {
	sub := "volumes"
	if v.Block {
		sub = "volumeDevices"
	}
	return filepath.Join(root, string(pod.UID), sub, "*", v.Dir)
}

// Find is the one path matching Pattern; none or several is an error that
// names the pattern looked for.
func Find(root string, pod *corev1.Pod, v Volume) (string, error) {
	pattern := Pattern(root, pod, v)
	matches, err := filepath.Glob(pattern)
	if err != nil {
		return "", fmt.Errorf("looking for %s: %w", pattern, err)
	}
	switch len(matches) {
	case 1:
		return matches[0], nil
	case 0:
		return "", fmt.Errorf("no directory of pod %s/%s's volume on this node: nothing matches %s "+
			"(is the pod running on this node, and the kubelet's pod directory mounted at %s?)", pod.Namespace, pod.Name, pattern, root)
	}
	return "", fmt.Errorf("%d directories of pod %s/%s's volume match %s, want one: %v", len(matches), pod.Namespace, pod.Name, pattern, matches)
}

// Resolve finds volume's directory of pod under root, reading the claim,
// its PV and, if needed, the CSIDrivers through r. Every call is bounded by
// ctx.
func Resolve(ctx context.Context, r client.Reader, root string, pod *corev1.Pod, volume string) (string, Volume, error) {
	f := Facts{Pod: pod, Volume: volume}
	if vol := PodVolume(pod, volume); vol != nil && vol.PersistentVolumeClaim != nil {
		where := fmt.Sprintf("volume %q of pod %s/%s", volume, pod.Namespace, pod.Name)
		var pvc corev1.PersistentVolumeClaim
		if err := r.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: vol.PersistentVolumeClaim.ClaimName}, &pvc); err != nil {
			return "", Volume{}, fmt.Errorf("%s: reading claim %s: %w", where, vol.PersistentVolumeClaim.ClaimName, err)
		}
		f.PVC = &pvc
		if pvc.Spec.VolumeName != "" {
			var pv corev1.PersistentVolume
			if err := r.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, &pv); err != nil {
				return "", Volume{}, fmt.Errorf("%s: reading volume %s of claim %s: %w", where, pvc.Spec.VolumeName, pvc.Name, err)
			}
			f.PV = &pv
		}
		if NeedsCSIDrivers(f.PV) {
			var drivers storagev1.CSIDriverList
			if err := r.List(ctx, &drivers); err != nil {
				return "", Volume{}, fmt.Errorf("%s: listing CSI drivers: %w", where, err)
			}
			for _, d := range drivers.Items {
				f.CSIDrivers = append(f.CSIDrivers, d.Name)
			}
		}
	}
	v, err := Dir(f)
	if err != nil {
		return "", Volume{}, err
	}
	path, err := Find(root, pod, v)
	if err != nil {
		return "", v, fmt.Errorf("volume %q: %w", volume, err)
	}
	return path, v, nil
}

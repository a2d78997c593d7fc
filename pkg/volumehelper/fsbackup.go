package volumehelper

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/lifeboat-io/lifeboat/pkg/policy"
)

// The pod annotations that choose volumes for fs-backup when no volume
// policy decides, with Velero's names and meaning: comma-separated volume
// names.
const (
	// VolumesToBackupAnnotation opts volumes in when the backup does not
	// back up pod volumes by default.
	VolumesToBackupAnnotation = "backup.velero.io/backup-volumes"
	// VolumesToExcludeAnnotation opts volumes out when it does.
	VolumesToExcludeAnnotation = "backup.velero.io/backup-volumes-excludes"
)

// NeverFSBackedUpReason says why fs-backup never copies vol, whatever a
// policy says (Velero's list), or "" when it may copy it.
func NeverFSBackedUpReason(vol *corev1.Volume, backupExcludePVC bool) string {
	switch {
	case vol.HostPath != nil:
		// Not under the kubelet's pods directory, so the node agent
		// cannot reach it.
		return "hostPath volumes are never copied by fs-backup"
	case vol.Secret != nil, vol.ConfigMap != nil:
		return "secret and configMap volumes are never copied (their objects are in the backup)"
	case vol.Projected != nil, vol.DownwardAPI != nil:
		// This covers today's service-account token volume, kube-api-access-*.
		return "projected and downwardAPI volumes are never copied (generated from API state)"
	case vol.PersistentVolumeClaim != nil && backupExcludePVC:
		// Copying a claim's data through the pod would bring back what
		// the backup's filters excluded.
		return "the backup's filters leave claims out"
	case strings.HasPrefix(vol.Name, "default-token"):
		// The token volume of clusters before projected tokens.
		return "service-account token volumes are never copied"
	}
	return ""
}

// FSBackupSelection is the fallback when no volume policy decides: by
// default every volume but those opted out, otherwise only those opted in.
// It says why a pod's volume is selected, or "" when it is not.
func FSBackupSelection(annotations map[string]string, volume string, defaultVolumesToFSBackup bool) string {
	if defaultVolumesToFSBackup {
		if listed(annotations[VolumesToExcludeAnnotation], volume) {
			return ""
		}
		return "defaultVolumesToFsBackup, not in " + VolumesToExcludeAnnotation
	}
	if listed(annotations[VolumesToBackupAnnotation], volume) {
		return "listed in " + VolumesToBackupAnnotation
	}
	return ""
}

// selectionSource is the Source of a pod volume FSBackupSelection picked.
func (h *helper) selectionSource() Source {
	if h.defaultVolumesToFSBackup {
		return SourceDefaultVolumesToFsBackup
	}
	return SourcePodAnnotation
}

// listed reports whether name is one of the comma-separated names. Spaces
// around names are ignored (Velero keeps them, so "a, b" never selects b
// there); a volume name cannot contain one, so nothing else can match.
func listed(list, name string) bool {
	if name == "" || list == "" {
		return false
	}
	for item := range strings.SplitSeq(list, ",") {
		if strings.TrimSpace(item) == name {
			return true
		}
	}
	return false
}

// claimUse is one pod volume that mounts a claim, with what the fallbacks
// decide for it, computed once when the pods are indexed.
type claimUse struct {
	namespace, pod, volume string
	// excluded: the volume is one fs-backup never copies.
	excluded bool
	// ephemeral: a generic ephemeral volume, which a policy describes by
	// its own type rather than by the claim's PV, so a rule may pick it
	// for fs-backup even when none matches the PV.
	ephemeral bool
	// annotated: the annotations and defaultVolumesToFsBackup select it;
	// selection is FSBackupSelection's reason.
	annotated bool
	selection string
}

func (h *helper) classifyUse(pod *corev1.Pod, vol *corev1.Volume) claimUse {
	selection := FSBackupSelection(pod.Annotations, vol.Name, h.defaultVolumesToFSBackup)
	return claimUse{
		namespace: pod.Namespace, pod: pod.Name, volume: vol.Name,
		excluded:  NeverFSBackedUpReason(vol, h.backupExcludePVC) != "",
		ephemeral: vol.Ephemeral != nil,
		annotated: selection != "",
		selection: selection,
	}
}

// fsBackedUpBy returns a pod volume whose fs-backup copies v's claim, or
// nil. It is asked only when no volume policy matched v; a claim volume
// then matches none through the pod either (it is described the same way),
// so what DecidePodVolume would answer for it is its fallback.
func (h *helper) fsBackedUpBy(ctx context.Context, v *volume) (*PodVolume, error) {
	uses, err := h.pods.uses(ctx, v.claimNamespace, v.claimName)
	if err != nil {
		return nil, err
	}
	for _, u := range uses {
		if u.excluded {
			continue
		}
		if u.ephemeral && h.policies != nil {
			info := policy.VolumeFromPodVolume(corev1.Volume{VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}}, v.pvc, nil)
			if i, action := h.policies.MatchAction(info); i >= 0 {
				if action.Type == policy.FSBackup {
					return &PodVolume{Namespace: u.namespace, Pod: u.pod, Volume: u.volume, Source: SourceRule, Rule: i}, nil
				}
				continue
			}
		}
		if u.annotated {
			return &PodVolume{Namespace: u.namespace, Pod: u.pod, Volume: u.volume, Source: h.selectionSource(), Rule: NoRule, Reason: u.selection}, nil
		}
	}
	return nil, nil
}

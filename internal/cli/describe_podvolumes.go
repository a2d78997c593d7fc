package cli

import (
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// The pod volume parts of `describe -o json|yaml`. Velero's `backup
// describe -o json` has status.backupVolumes.podVolumeBackups; Lifeboat
// writes that entry with Velero's keys and values (its misspelt
// "uploderType" included) so that scripts reading it keep working. The
// same content as data, one entry per PodVolumeBackup or PodVolumeRestore,
// is beside it (with --details).

// describedBackupStatus is the Backup's status as the API has it, plus
// Velero's backupVolumes entry.
type describedBackupStatus struct {
	v1.BackupStatus `json:",inline"`
	BackupVolumes   map[string]any `json:"backupVolumes,omitempty"`
}

// describedRestoreStatus is the Restore's status as the API has it, plus
// the pod volume restores in the shape of Velero's pod volume backups
// (Velero's restore describe has no structured form to follow).
type describedRestoreStatus struct {
	v1.RestoreStatus  `json:",inline"`
	PodVolumeRestores map[string]any `json:"podVolumeRestores,omitempty"`
}

// describedPodVolume is one PodVolumeBackup or PodVolumeRestore.
type describedPodVolume struct {
	Name             string            `json:"name"`
	PodNamespace     string            `json:"podNamespace"`
	PodName          string            `json:"podName"`
	Volume           string            `json:"volume"`
	Phase            v1.PodVolumePhase `json:"phase,omitempty"`
	Node             string            `json:"node,omitempty"`
	UploaderType     string            `json:"uploaderType,omitempty"`
	SnapshotID       string            `json:"snapshotID,omitempty"`
	TotalBytes       int64             `json:"totalBytes,omitempty"`
	BytesDone        int64             `json:"bytesDone,omitempty"`
	IncrementalBytes int64             `json:"incrementalBytes,omitempty"`
	Started          *metav1.Time      `json:"started,omitempty"`
	Completed        *metav1.Time      `json:"completed,omitempty"`
	Message          string            `json:"message,omitempty"`
}

func describedPVBs(pvbs []v1.PodVolumeBackup) []describedPodVolume {
	out := make([]describedPodVolume, 0, len(pvbs))
	for _, p := range pvbs {
		out = append(out, describedPodVolume{
			Name: p.Name, PodNamespace: p.Spec.Pod.Namespace, PodName: p.Spec.Pod.Name, Volume: p.Spec.Volume,
			Phase: p.Status.Phase, Node: p.Spec.Node, UploaderType: p.Spec.UploaderType, SnapshotID: p.Status.SnapshotID,
			TotalBytes: p.Status.Progress.TotalBytes, BytesDone: p.Status.Progress.BytesDone, IncrementalBytes: p.Status.IncrementalBytes,
			Started: p.Status.StartTimestamp, Completed: p.Status.CompletionTimestamp, Message: p.Status.Message,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func describedPVRs(pvrs []v1.PodVolumeRestore) []describedPodVolume {
	out := make([]describedPodVolume, 0, len(pvrs))
	for _, p := range pvrs {
		out = append(out, describedPodVolume{
			Name: p.Name, PodNamespace: p.Spec.Pod.Namespace, PodName: p.Spec.Pod.Name, Volume: p.Spec.Volume,
			Phase: p.Status.Phase, Node: p.Status.Node, UploaderType: p.Spec.UploaderType, SnapshotID: p.Spec.SnapshotID,
			TotalBytes: p.Status.Progress.TotalBytes, BytesDone: p.Status.Progress.BytesDone,
			Started: p.Status.StartTimestamp, Completed: p.Status.CompletionTimestamp, Message: p.Status.Message,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// veleroPodVolumeBackups is Velero's status.backupVolumes.podVolumeBackups:
// "<none included>", or the uploader type and per phase group (Velero's
// groups and names) a count, or with details a list of {"ns/pod": "vol
// (size: N), vol2"} entries, the volumes labelled as Velero labels them.
func veleroPodVolumeBackups(pvbs []v1.PodVolumeBackup, details bool) any {
	if len(pvbs) == 0 {
		return "<none included>"
	}
	vols := make([]podVolumeEntry, 0, len(pvbs))
	for _, p := range pvbs {
		vols = append(vols, podVolumeEntry{ns: p.Spec.Pod.Namespace, pod: p.Spec.Pod.Name, volume: p.Spec.Volume,
			group: podVolumeGroup(p.Status.Phase), progress: p.Status.Progress, incremental: p.Status.IncrementalBytes})
	}
	return map[string]any{
		"uploderType":             pvbs[0].Spec.UploaderType,
		"podVolumeBackupsDetails": podVolumeDetails(vols, podVolumePhases, details),
	}
}

// veleroPodVolumeRestores is the same for a restore's PodVolumeRestores,
// with the restore's phase groups; nil when there are none, as the text
// description then has no section.
func veleroPodVolumeRestores(pvrs []v1.PodVolumeRestore, details bool) map[string]any {
	if len(pvrs) == 0 {
		return nil
	}
	vols := make([]podVolumeEntry, 0, len(pvrs))
	groups := make([]string, 0, len(pvrPhaseGroups))
	for _, g := range pvrPhaseGroups {
		groups = append(groups, g.label)
	}
	for _, p := range pvrs {
		group := ""
		for _, g := range pvrPhaseGroups {
			if containsPhase(g.phases, p.Status.Phase) {
				group = g.label
			}
		}
		vols = append(vols, podVolumeEntry{ns: p.Spec.Pod.Namespace, pod: p.Spec.Pod.Name, volume: p.Spec.Volume, group: group, progress: p.Status.Progress})
	}
	return map[string]any{
		"uploaderType":             pvrs[0].Spec.UploaderType,
		"podVolumeRestoresDetails": podVolumeDetails(vols, groups, details),
	}
}

type podVolumeEntry struct {
	ns, pod, volume, group string
	progress               v1.DataMoveOperationProgress
	incremental            int64
}

// veleroLabel is the volume as Velero's describe labels it: the percentage
// of one in progress, the sizes of a completed one.
func (e podVolumeEntry) veleroLabel() string {
	switch p := e.progress; {
	case e.group == "In Progress" && p.TotalBytes != 0:
		return fmt.Sprintf("%s (%.2f%%)", e.volume, float64(p.BytesDone)/float64(p.TotalBytes)*100)
	case e.group == "Completed" && e.incremental > 0:
		return fmt.Sprintf("%s (size: %v, incremental size: %v)", e.volume, p.TotalBytes, e.incremental)
	case e.group == "Completed" && p.TotalBytes > 0:
		return fmt.Sprintf("%s (size: %v)", e.volume, p.TotalBytes)
	}
	return e.volume
}

func podVolumeDetails(vols []podVolumeEntry, groups []string, details bool) map[string]any {
	out := map[string]any{}
	for _, g := range groups {
		byPod := map[string][]string{}
		n := 0
		for _, v := range vols {
			if v.group != g {
				continue
			}
			n++
			key := v.ns + "/" + v.pod
			byPod[key] = append(byPod[key], v.veleroLabel())
		}
		if n == 0 {
			continue
		}
		if !details {
			out[g] = n
			continue
		}
		pods := make([]string, 0, len(byPod))
		for k := range byPod {
			pods = append(pods, k)
		}
		sort.Strings(pods)
		entries := make([]map[string]string, 0, len(pods))
		for _, k := range pods {
			sort.Strings(byPod[k])
			entries = append(entries, map[string]string{k: strings.Join(byPod[k], ", ")})
		}
		out[g] = entries
	}
	return out
}

package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// describePodVolumeBackups prints the backup's PodVolumeBackups, read from
// the cluster as Velero's describe reads them (by the backup-name label):
// counts by phase, or with --details the volumes of each pod by phase with
// their bytes and how long the node agent took.
func describePodVolumeBackups(ctx context.Context, c client.Client, w io.Writer, b *v1.Backup, details bool) error {
	pvbs, err := podVolumeBackupsOf(ctx, c, b)
	if err != nil {
		fmt.Fprintf(w, "\nPod Volume Backups:  <%v>\n", err)
		return nil
	}
	return writePodVolumeBackups(w, pvbs, details)
}

func podVolumeBackupsOf(ctx context.Context, c client.Client, b *v1.Backup) ([]v1.PodVolumeBackup, error) {
	var list v1.PodVolumeBackupList
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := c.List(cctx, &list, client.InNamespace(b.Namespace), client.MatchingLabels{v1.BackupNameLabel: v1.LabelValue(b.Name)}); err != nil {
		return nil, fmt.Errorf("error getting pod volume backups: %w", err)
	}
	return list.Items, nil
}

// podVolumePhases is Velero's order of the groups; New includes no phase.
var podVolumePhases = []string{"Completed", "Failed", "Canceled", "In Progress", "Canceling", "Prepared", "Accepted", "New"}

func podVolumeGroup(p v1.PodVolumePhase) string {
	switch p {
	case "":
		return "New"
	case v1.PodVolumePhaseInProgress:
		return "In Progress"
	}
	return string(p)
}

func writePodVolumeBackups(w io.Writer, pvbs []v1.PodVolumeBackup, details bool) error {
	fmt.Fprintln(w)
	if len(pvbs) == 0 {
		fmt.Fprintln(w, "Pod Volume Backups:  <none included>")
		return nil
	}
	uploader := valueOr(pvbs[0].Spec.UploaderType, "kopia")
	if details {
		fmt.Fprintf(w, "Pod Volume Backups - %s:\n", uploader)
	} else {
		fmt.Fprintf(w, "Pod Volume Backups - %s (specify --details for more information):\n", uploader)
	}
	byPhase := map[string][]v1.PodVolumeBackup{}
	for _, p := range pvbs {
		g := podVolumeGroup(p.Status.Phase)
		byPhase[g] = append(byPhase[g], p)
	}
	for _, phase := range podVolumePhases {
		group := byPhase[phase]
		if len(group) == 0 {
			continue
		}
		if !details {
			fmt.Fprintf(w, "  %s:  %d\n", phase, len(group))
			continue
		}
		fmt.Fprintf(w, "  %s:\n", phase)
		byPod := map[string][]string{}
		for _, p := range group {
			key := p.Spec.Pod.Namespace + "/" + p.Spec.Pod.Name
			byPod[key] = append(byPod[key], podVolumeLabel(phase, &p))
		}
		pods := make([]string, 0, len(byPod))
		for k := range byPod {
			pods = append(pods, k)
		}
		sort.Strings(pods)
		for _, pod := range pods {
			vols := byPod[pod]
			sort.Strings(vols)
			fmt.Fprintf(w, "    %s: %s\n", pod, strings.Join(vols, ", "))
		}
	}
	return nil
}

// podVolumeLabel is a volume with what Velero's describe adds to it (the
// percentage done, the sizes), and the time taken once it ended.
func podVolumeLabel(phase string, p *v1.PodVolumeBackup) string {
	var parts []string
	prog := p.Status.Progress
	switch {
	case phase == "In Progress" && prog.TotalBytes != 0:
		parts = append(parts, fmt.Sprintf("%.2f%%", float64(prog.BytesDone)/float64(prog.TotalBytes)*100))
	case phase == "Completed" && p.Status.IncrementalBytes > 0:
		parts = append(parts, fmt.Sprintf("size: %d, incremental size: %d", prog.TotalBytes, p.Status.IncrementalBytes))
	case phase == "Completed" && prog.TotalBytes > 0:
		parts = append(parts, fmt.Sprintf("size: %d", prog.TotalBytes))
	}
	if s, e := p.Status.StartTimestamp, p.Status.CompletionTimestamp; s != nil && e != nil {
		parts = append(parts, "took "+e.Sub(s.Time).Round(time.Second).String())
	}
	if len(parts) == 0 {
		return p.Spec.Volume
	}
	return p.Spec.Volume + " (" + strings.Join(parts, ", ") + ")"
}

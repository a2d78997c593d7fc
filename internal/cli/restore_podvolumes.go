package cli

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/cluster"
)

// podVolumeRestoresOf lists the PodVolumeRestores of a restore, selected
// by its name label as Velero's describe selects them. A failed list is
// reported in place of the section, not as the command's error.
func podVolumeRestoresOf(ctx context.Context, c client.Client, rs *v1.Restore) ([]v1.PodVolumeRestore, error) {
	var list v1.PodVolumeRestoreList
	err := cluster.Call(ctx, func(ctx context.Context) error {
		return c.List(ctx, &list, client.InNamespace(rs.Namespace), client.MatchingLabels{v1.RestoreNameLabel: v1.LabelValue(rs.Name)})
	})
	return list.Items, err
}

// pvrPhaseGroups are Velero's groups of pod volume restores, in its order;
// New stands for no phase too.
var pvrPhaseGroups = []struct {
	label  string
	phases []v1.PodVolumePhase
}{
	{"Completed", []v1.PodVolumePhase{v1.PodVolumePhaseCompleted}},
	{"Canceled", []v1.PodVolumePhase{v1.PodVolumePhaseCanceled}},
	{"Failed", []v1.PodVolumePhase{v1.PodVolumePhaseFailed}},
	{"In Progress", []v1.PodVolumePhase{v1.PodVolumePhaseInProgress}},
	{"Prepared", []v1.PodVolumePhase{v1.PodVolumePhasePrepared}},
	{"Accepted", []v1.PodVolumePhase{v1.PodVolumePhaseAccepted}},
	{"New", []v1.PodVolumePhase{v1.PodVolumePhaseNew, ""}},
}

// describePodVolumeRestores prints Velero's section: the uploader type,
// then per phase a count, or with details the volumes of each pod (with
// the size of a completed one and the percentage of one in progress).
func describePodVolumeRestores(d *describer, pvrs []v1.PodVolumeRestore, listErr error, details bool) {
	if listErr != nil {
		d.blank()
		d.line("Pod volume restores:\t<error listing PodVolumeRestores: %v>", listErr)
		return
	}
	if len(pvrs) == 0 {
		return
	}
	d.blank()
	if details {
		d.line("%s Restores:", pvrs[0].Spec.UploaderType)
	} else {
		d.line("%s Restores (specify --details for more information):", pvrs[0].Spec.UploaderType)
	}
	for _, g := range pvrPhaseGroups {
		byPod := map[string][]string{}
		n := 0
		for _, p := range pvrs {
			if !containsPhase(g.phases, p.Status.Phase) {
				continue
			}
			n++
			vol := p.Spec.Volume
			switch prog := p.Status.Progress; {
			case g.label == "In Progress" && prog.TotalBytes != 0:
				vol = fmt.Sprintf("%s (%.2f%%)", vol, float64(prog.BytesDone)/float64(prog.TotalBytes)*100)
			case g.label == "Completed" && prog.TotalBytes > 0:
				vol = fmt.Sprintf("%s (size: %v)", vol, prog.TotalBytes)
			}
			key := p.Spec.Pod.Namespace + "/" + p.Spec.Pod.Name
			byPod[key] = append(byPod[key], vol)
		}
		if n == 0 {
			continue
		}
		if !details {
			d.line("\t%s:\t%d", g.label, n)
			continue
		}
		d.line("\t%s:", g.label)
		pods := make([]string, 0, len(byPod))
		for k := range byPod {
			pods = append(pods, k)
		}
		sort.Strings(pods)
		for _, k := range pods {
			sort.Strings(byPod[k])
			d.line("\t\t%s: %s", k, strings.Join(byPod[k], ", "))
		}
	}
}

func containsPhase(phases []v1.PodVolumePhase, p v1.PodVolumePhase) bool {
	for _, q := range phases {
		if q == p {
			return true
		}
	}
	return false
}

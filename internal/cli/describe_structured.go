package cli

import (
	"context"
	"errors"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/results"
	"github.com/lifeboat-io/lifeboat/internal/schedules"
	"github.com/lifeboat-io/lifeboat/internal/volumefiles"
)

// The structured descriptions that `describe -o json|yaml` prints: what
// the text description shows, as data. The object's own spec and status
// are included as the API defines them, so their field names are the
// documented velero.io/v1 names; what describe adds (files read through
// the server, deletion requests, the next run of a schedule) sits beside
// them. Fields are only ever added, so scripts can rely on the shape.
// (Velero's `backup describe -o json` has a shape of its own, with values
// preformatted as text; Lifeboat does not copy it, except its
// status.backupVolumes.podVolumeBackups: see describe_podvolumes.go.)

// describedMeta is the part of the metadata a description shows.
type describedMeta struct {
	Name              string            `json:"name"`
	Namespace         string            `json:"namespace"`
	Labels            map[string]string `json:"labels,omitempty"`
	Annotations       map[string]string `json:"annotations,omitempty"`
	CreationTimestamp metav1.Time       `json:"creationTimestamp"`
}

func describeMeta(o metav1.Object) describedMeta {
	return describedMeta{Name: o.GetName(), Namespace: o.GetNamespace(), Labels: o.GetLabels(), Annotations: o.GetAnnotations(), CreationTimestamp: o.GetCreationTimestamp()}
}

// fileError says why a file describe --details reads could not be read:
// "not found" (e.g. a backup still running) or the error.
func fileError(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, errFileNotFound):
		return "not found"
	default:
		return err.Error()
	}
}

// BackupDescription is `lifeboat backup describe -o json`.
type backupDescription struct {
	Kind     string                `json:"kind"` // "BackupDescription"
	Metadata describedMeta         `json:"metadata"`
	Phase    v1.BackupPhase        `json:"phase"`
	Spec     v1.BackupSpec         `json:"spec"`
	Status   describedBackupStatus `json:"status"`
	// ResourceList maps group/version/Kind to namespace/name of each
	// backed-up item (--details); ResourceListError says why it is missing.
	ResourceList      map[string][]string `json:"resourceList,omitempty"`
	ResourceListError string              `json:"resourceListError,omitempty"`
	// Volumes is the backup's volume information (--details): each volume
	// with the action taken, what chose it and the outcome.
	Volumes      []volumefiles.BackupVolumeInfo `json:"volumes,omitempty"`
	VolumesError string                         `json:"volumesError,omitempty"`
	// DeleteBackupRequests are the deletions of this backup (dry runs left out).
	DeleteBackupRequests []describedDeletion `json:"deleteBackupRequests,omitempty"`
	// PodVolumeBackups are the backup's PodVolumeBackups (--details);
	// PodVolumeBackupsError says why they could not be listed.
	PodVolumeBackups      []describedPodVolume `json:"podVolumeBackups,omitempty"`
	PodVolumeBackupsError string               `json:"podVolumeBackupsError,omitempty"`
}

type describedDeletion struct {
	Name    string                       `json:"name"`
	Phase   v1.DeleteBackupRequestPhase  `json:"phase"`
	Created metav1.Time                  `json:"created"`
	Status  v1.DeleteBackupRequestStatus `json:"status"`
}

func (f *Factory) structuredBackup(ctx context.Context, c client.Client, b *v1.Backup, list *resourceListResult, vols *volumeInfoResult, details bool) (any, error) {
	out := backupDescription{Kind: "BackupDescription", Metadata: describeMeta(b), Phase: phaseOf(b), Spec: b.Spec, Status: describedBackupStatus{BackupStatus: b.Status}}
	pvbs, err := podVolumeBackupsOf(ctx, c, b)
	if err != nil {
		// As Velero's describe, which then says none are included.
		out.PodVolumeBackupsError = err.Error()
	}
	out.Status.BackupVolumes = map[string]any{"podVolumeBackups": veleroPodVolumeBackups(pvbs, details)}
	if details {
		out.PodVolumeBackups = describedPVBs(pvbs)
	}
	if list != nil {
		out.ResourceList, out.ResourceListError = list.items, fileError(list.err)
	}
	if vols != nil {
		out.Volumes, out.VolumesError = vols.infos, fileError(vols.err)
	}
	reqs, err := requestsFor(ctx, c, b.Namespace, b.Name)
	if err != nil {
		return nil, err
	}
	reqs = slices.DeleteFunc(reqs, func(r v1.DeleteBackupRequest) bool { return r.Spec.DryRun })
	for i := range reqs {
		r := &reqs[i]
		out.DeleteBackupRequests = append(out.DeleteBackupRequests, describedDeletion{
			Name: r.Name, Phase: requestPhase(r), Created: r.CreationTimestamp, Status: r.Status,
		})
	}
	return out, nil
}

// restoreDescription is `lifeboat restore describe -o json`.
type restoreDescription struct {
	Kind     string                 `json:"kind"` // "RestoreDescription"
	Metadata describedMeta          `json:"metadata"`
	Phase    v1.RestorePhase        `json:"phase"`
	Spec     v1.RestoreSpec         `json:"spec"`
	Status   describedRestoreStatus `json:"status"`
	// Results are the restore's warnings and errors (--details, and only
	// when the status counts any).
	Results           *results.Results    `json:"results,omitempty"`
	ResultsError      string              `json:"resultsError,omitempty"`
	ResourceList      map[string][]string `json:"resourceList,omitempty"`
	ResourceListError string              `json:"resourceListError,omitempty"`
	// Volumes is the restore's volume information (--details): each
	// volume restored from a snapshot, CSI or native, in Velero's shape.
	Volumes      []volumefiles.RestoreVolumeInfo `json:"volumes,omitempty"`
	VolumesError string                          `json:"volumesError,omitempty"`
	// PodVolumeRestores are the restore's PodVolumeRestores (--details);
	// PodVolumeRestoresError says why they could not be listed.
	PodVolumeRestores      []describedPodVolume `json:"podVolumeRestores,omitempty"`
	PodVolumeRestoresError string               `json:"podVolumeRestoresError,omitempty"`
}

func (f *Factory) structuredRestore(rs *v1.Restore, res *restoreResults, list *resourceListResult, vols *restoreVolumesResult, pv podVolumeSection) any {
	out := restoreDescription{Kind: "RestoreDescription", Metadata: describeMeta(rs), Phase: restorePhaseOf(rs), Spec: rs.Spec, Status: describedRestoreStatus{RestoreStatus: rs.Status}}
	if pv.err != nil {
		out.PodVolumeRestoresError = pv.err.Error()
	}
	out.Status.PodVolumeRestores = veleroPodVolumeRestores(pv.pvrs, pv.details)
	if pv.details && len(pv.pvrs) > 0 {
		out.PodVolumeRestores = describedPVRs(pv.pvrs)
	}
	if res != nil && !res.skipped {
		if res.err == nil {
			out.Results = &res.results
		}
		out.ResultsError = fileError(res.err)
	}
	if list != nil {
		out.ResourceList, out.ResourceListError = list.items, fileError(list.err)
	}
	if vols != nil {
		out.Volumes, out.VolumesError = vols.infos, fileError(vols.err)
	}
	return out
}

// scheduleDescription is `lifeboat schedule describe -o json`.
type scheduleDescription struct {
	Kind     string            `json:"kind"` // "ScheduleDescription"
	Metadata describedMeta     `json:"metadata"`
	Phase    v1.SchedulePhase  `json:"phase"`
	Spec     v1.ScheduleSpec   `json:"spec"`
	Status   v1.ScheduleStatus `json:"status"`
	// NextBackup is when the server will next back up; absent when paused,
	// invalid or never. Due is true when a backup is due now.
	NextBackup *metav1.Time `json:"nextBackup,omitempty"`
	Due        bool         `json:"due,omitempty"`
}

func (f *Factory) structuredSchedule(s *v1.Schedule) any {
	out := scheduleDescription{Kind: "ScheduleDescription", Metadata: describeMeta(s), Phase: schedulePhase(s), Spec: s.Spec, Status: s.Status}
	if s.Status.Phase == v1.SchedulePhaseFailedValidation || s.Spec.Paused {
		return out
	}
	if sched, err := schedules.ParseCron(s.Spec.Schedule); err == nil {
		at, due := schedules.NextRun(sched, schedules.TimesOf(s), f.now())
		out.Due = due
		if !at.IsZero() {
			t := metav1.NewTime(at.Truncate(time.Second))
			out.NextBackup = &t
		}
	}
	return out
}

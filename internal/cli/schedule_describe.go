package cli

import (
	"context"
	"io"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/schedules"
)

func newScheduleDescribeCommand(f *Factory) *cobra.Command {
	return newDescribeCommand(f, scheduleKind,
		"Describe prints a schedule's cron expression, backup template and last runs for people\n"+
			"to read. -o json|yaml prints the same as a ScheduleDescription: the schedule's metadata,\n"+
			"phase, spec and status, and nextBackup.",
		func(_ context.Context, _ client.Client, w io.Writer, s *v1.Schedule) error {
			return f.describeSchedule(w, s)
		},
		func(_ context.Context, _ client.Client, s *v1.Schedule) (any, error) {
			return f.structuredSchedule(s), nil
		})
}

func (f *Factory) describeSchedule(w io.Writer, s *v1.Schedule) error {
	d := newDescriber(w)
	spec, status := &s.Spec, &s.Status

	d.objectMeta(s)
	d.blank()
	d.line("Phase:\t%s", schedulePhase(s))
	d.validationErrors(status.ValidationErrors)
	d.blank()
	d.line("Paused:\t%t", spec.Paused)
	d.line("Schedule:\t%s", spec.Schedule)
	d.line("Skip immediately:\t%t", ptr.Deref(spec.SkipImmediately, false))
	d.line("Owner references in backups:\t%t", ptr.Deref(spec.UseOwnerReferencesInBackup, false))
	d.blank()
	describeBackupTemplate(d, &spec.Template)
	d.blank()
	if status.LastBackup != nil {
		d.line("Last Backup:\t%s", f.formatTime(status.LastBackup))
	} else {
		d.line("Last Backup:\t<never>")
	}
	if status.LastSkipped != nil {
		d.line("Last Skipped:\t%s", f.formatTime(status.LastSkipped))
	}
	d.line("Next Backup:\t%s", f.nextBackup(s))

	f.describeConditions(d, status.Conditions)
	return d.tw.Flush()
}

// describeBackupTemplate lists what each backup of a schedule will hold,
// in the words `backup describe` uses for a backup's spec.
func describeBackupTemplate(d *describer, spec *v1.BackupSpec) {
	d.line("Backup Template:")
	d.line("  Namespaces:")
	d.line("    Included:\t%s", listOr(spec.IncludedNamespaces, "*"))
	d.line("    Excluded:\t%s", listOr(spec.ExcludedNamespaces, none))
	describeResourceFilters(d, "  ", spec)
	d.line("  Label selector:\t%s", selectorString(spec.LabelSelector))
	d.line("  Or label selector:\t%s", orSelectorString(spec.OrLabelSelectors))
	d.line("  Storage Location:\t%s", valueOr(spec.StorageLocation, "<default>"))
	d.line("  Velero-Native Snapshot PVs:\t%s", boolPtrString(spec.SnapshotVolumes, "true", "false", "auto"))
	d.line("  TTL:\t%s", ttlString(spec.TTL.Duration))
	describeUploaderConfigForBackup(d, "  ", spec)
	describeBackupHooks(d, "  ", spec.Hooks)
}

// describeUploaderConfigForBackup shows parallelFilesUpload when set, as
// Velero's describe does.
func describeUploaderConfigForBackup(d *describer, indent string, spec *v1.BackupSpec) {
	if c := spec.UploaderConfig; c != nil && c.ParallelFilesUpload > 0 {
		d.line("%sUploader config:", indent)
		d.line("%s  Parallel files upload:\t%d", indent, c.ParallelFilesUpload)
	}
}

// nextBackup says when the server will next back up, by the same rule the
// server uses.
func (f *Factory) nextBackup(s *v1.Schedule) string {
	switch {
	case s.Status.Phase == v1.SchedulePhaseFailedValidation:
		return "<n/a: the schedule failed validation>"
	case s.Spec.Paused:
		return "<paused>"
	}
	sched, err := schedules.ParseCron(s.Spec.Schedule)
	if err != nil {
		return "<n/a: " + err.Error() + ">"
	}
	at, due := schedules.NextRun(sched, schedules.TimesOf(s), f.now())
	switch {
	case due:
		return "due now"
	case at.IsZero():
		return "<never>"
	}
	next := metav1.NewTime(at)
	return f.formatTime(&next) + " (in " + f.relativeTime(at) + ")"
}

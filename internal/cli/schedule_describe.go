package cli

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/controller"
)

func newScheduleDescribeCommand(f *Factory) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "describe NAME...",
		Short: "Show the details of schedules",
		Long: "Describe prints a schedule's cron expression, backup template and last runs for people\n" +
			"to read. -o json|yaml prints the Schedule objects instead.",
		Args: cobra.MinimumNArgs(1),
		RunE: runE(f, func(cmd *cobra.Command, args []string) error {
			if output == "" {
				output = formatTable
			}
			if err := checkFormat(output, formatTable, formatJSON, formatYAML); err != nil {
				return err
			}
			c, err := f.Client()
			if err != nil {
				return err
			}
			schedules, err := getSchedules(cmd.Context(), c, f.Namespace, args, "")
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if output != formatTable {
				if len(schedules.Items) == 1 {
					return printEncoded(out, output, &schedules.Items[0])
				}
				return printEncoded(out, output, schedules)
			}
			for i := range schedules.Items {
				if i > 0 {
					fmt.Fprintln(out)
				}
				if err := f.describeSchedule(out, &schedules.Items[i]); err != nil {
					return err
				}
			}
			return nil
		}),
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "print the Schedule objects as json or yaml instead of a description")
	return cmd
}

func (f *Factory) describeSchedule(w io.Writer, s *v1.Schedule) error {
	d := &describer{tw: tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)}
	spec, status := &s.Spec, &s.Status

	d.line("Name:\t%s", s.Name)
	d.line("Namespace:\t%s", s.Namespace)
	d.line("Labels:\t%s", formatMap(s.Labels))
	d.line("Annotations:\t%s", formatMap(s.Annotations))
	d.blank()
	d.line("Phase:\t%s", schedulePhase(s))
	if len(status.ValidationErrors) > 0 {
		d.blank()
		d.line("Validation errors:")
		for _, e := range status.ValidationErrors {
			d.line("  - %s", e)
		}
	}
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

	if len(status.Conditions) > 0 {
		d.blank()
		d.line("Conditions:")
		d.line("  Type\tStatus\tReason\tLast Transition\tMessage")
		for _, c := range status.Conditions {
			d.line("  %s\t%s\t%s\t%s\t%s", c.Type, c.Status, valueOr(c.Reason, none),
				f.formatTime(&c.LastTransitionTime), valueOr(c.Message, none))
		}
	}
	return d.tw.Flush()
}

// describeBackupTemplate lists what each backup of a schedule will hold,
// in the words `backup describe` uses for a backup's spec.
func describeBackupTemplate(d *describer, spec *v1.BackupSpec) {
	d.line("Backup Template:")
	d.line("  Namespaces:")
	d.line("    Included:\t%s", listOr(spec.IncludedNamespaces, "*"))
	d.line("    Excluded:\t%s", listOr(spec.ExcludedNamespaces, none))
	d.line("  Resources:")
	if usesScopedResourceFilters(spec) {
		d.line("    Included cluster-scoped:\t%s", listOr(spec.IncludedClusterScopedResources, none))
		d.line("    Excluded cluster-scoped:\t%s", listOr(spec.ExcludedClusterScopedResources, none))
		d.line("    Included namespace-scoped:\t%s", listOr(spec.IncludedNamespaceScopedResources, "*"))
		d.line("    Excluded namespace-scoped:\t%s", listOr(spec.ExcludedNamespaceScopedResources, none))
	} else {
		d.line("    Included:\t%s", listOr(spec.IncludedResources, "*"))
		d.line("    Excluded:\t%s", listOr(spec.ExcludedResources, none))
		d.line("    Cluster-scoped:\t%s", boolPtrString(spec.IncludeClusterResources, "included", "excluded", "auto"))
	}
	d.line("  Label selector:\t%s", selectorString(spec.LabelSelector))
	d.line("  Or label selector:\t%s", orSelectorString(spec.OrLabelSelectors))
	d.line("  Storage Location:\t%s", valueOr(spec.StorageLocation, "<default>"))
	d.line("  Velero-Native Snapshot PVs:\t%s", boolPtrString(spec.SnapshotVolumes, "true", "false", "auto"))
	d.line("  TTL:\t%s", ttlString(spec.TTL.Duration))
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
	sched, err := controller.ParseCron(s.Spec.Schedule)
	if err != nil {
		return "<n/a: " + err.Error() + ">"
	}
	times := controller.RunTimes{Created: s.CreationTimestamp.Time}
	if s.Status.LastBackup != nil {
		times.LastBackup = s.Status.LastBackup.Time
	}
	if s.Status.LastSkipped != nil {
		times.LastSkipped = s.Status.LastSkipped.Time
	}
	at, due := controller.NextRun(sched, times, f.now())
	switch {
	case due:
		return "due now"
	case at.IsZero():
		return "<never>"
	}
	next := metav1.NewTime(at)
	return f.formatTime(&next) + " (in " + f.relativeTime(at) + ")"
}

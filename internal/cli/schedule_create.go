package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/schedules"
)

// cronHelp is shown wherever a schedule's cron expression is asked for.
const cronHelp = `The schedule is a cron expression in UTC, five fields:

  minute (0-59)  hour (0-23)  day of month (1-31)  month (1-12)  day of week (0-6, Sunday=0)

or a descriptor: @hourly, @daily (or @midnight), @weekly, @monthly, @yearly,
or "@every DURATION" such as "@every 6h" or "@every 90m".`

func newScheduleCommand(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "schedule",
		Aliases: []string{"schedules"},
		Short:   "Create and manage schedules of backups",
	}
	cmd.AddCommand(
		newScheduleCreateCommand(f),
		newGetCommand(f, scheduleKind),
		newScheduleDescribeCommand(f),
		newSchedulePauseCommand(f, true),
		newSchedulePauseCommand(f, false),
		newObjectDeleteCommand(f, scheduleKind, "Delete schedules",
			"Delete removes the Schedule objects; no more backups are created from them. Their backups\n"+
				"stay, unless a schedule was created with --use-owner-references-in-backup: then Kubernetes\n"+
				"garbage collection deletes its Backup objects too.",
			"  lifeboat schedule delete nightly --confirm\n"+
				"  lifeboat schedule delete --selector team=shop --confirm\n"+
				"  lifeboat schedule delete --all --confirm",
			func(_ context.Context, _ client.Client, out io.Writer, s *v1.Schedule) error {
				fmt.Fprintf(out, "Schedule deleted: %s\n", s.Name)
				return nil
			}),
	)
	return cmd
}

type scheduleCreateOptions struct {
	backupSpecFlags
	schedule           string
	paused             bool
	skipImmediately    optionalBool
	useOwnerReferences optionalBool
	output             string
}

func newScheduleCreateCommand(f *Factory) *cobra.Command {
	o := &scheduleCreateOptions{}
	cmd := &cobra.Command{
		Use:   "create NAME --schedule CRON",
		Short: "Create a schedule",
		Long: "Create a Schedule: the server creates a backup NAME-YYYYMMDDhhmmss from the backup flags\n" +
			"each time the schedule fires. The first backup is taken as soon as the schedule is\n" +
			"created, and one that fell due while it was paused as soon as it is unpaused; with\n" +
			"--skip-immediately both wait for the schedule to fire.\n\n" + cronHelp,
		Example: `  # Back up the shop namespace every day at 03:00 UTC, keeping each backup a week
  lifeboat schedule create shop-nightly --schedule "0 3 * * *" --include-namespaces shop --ttl 168h

  # Every 6 hours, starting with the next firing rather than now
  lifeboat schedule create everything --schedule "@every 6h" --skip-immediately

  # Show the Schedule object without creating it
  lifeboat schedule create shop-nightly --schedule @daily -o yaml`,
		Args: cobra.ExactArgs(1),
		RunE: runE(f, func(cmd *cobra.Command, args []string) error {
			if o.output != "" {
				if err := checkFormat(o.output, formatYAML, formatJSON); err != nil {
					return err
				}
			}
			schedule, err := o.buildSchedule(args[0], f.Namespace, cmd.Flags().Changed("ttl"))
			if err != nil {
				return err
			}
			if o.output != "" {
				return printEncoded(cmd.OutOrStdout(), o.output, schedule)
			}
			return o.run(cmd.Context(), f, cmd.OutOrStdout(), schedule)
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&o.schedule, "schedule", "", `when to back up, as a cron expression in UTC, e.g. "0 3 * * *" or "@every 6h" (required)`)
	o.bind(fl, "each backup")
	fl.BoolVar(&o.paused, "paused", false, "create the schedule paused; `lifeboat schedule unpause` starts it")
	fl.Var(&o.skipImmediately, "skip-immediately", "do not back up at once when the schedule is created or unpaused; wait for it to fire")
	fl.Lookup("skip-immediately").NoOptDefVal = "true"
	fl.Var(&o.useOwnerReferences, "use-owner-references-in-backup",
		"make the schedule own its backups, so that deleting the schedule deletes the Backup objects too")
	fl.Lookup("use-owner-references-in-backup").NoOptDefVal = "true"
	fl.StringVarP(&o.output, "output", "o", "", "print the schedule as yaml or json instead of creating it")
	return cmd
}

// buildSchedule turns the flags into the Schedule to create; pure, like
// buildBackup.
func (o *scheduleCreateOptions) buildSchedule(name, namespace string, ttlSet bool) (*v1.Schedule, error) {
	if o.schedule == "" {
		return nil, errors.New(`--schedule is required, e.g. --schedule "0 3 * * *" (03:00 UTC every day) or --schedule "@every 6h"`)
	}
	// Checked here too, so a typo fails now instead of as a
	// FailedValidation schedule found later.
	if _, err := schedules.ParseCron(o.schedule); err != nil {
		return nil, fmt.Errorf("invalid --schedule: %w", err)
	}
	spec, err := o.spec(ttlSet)
	if err != nil {
		return nil, err
	}
	return &v1.Schedule{
		// Velero puts --labels on the schedule; the server copies them onto
		// each backup it creates.
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: o.objectLabels(), Annotations: nilIfEmpty(o.annotations)},
		Spec: v1.ScheduleSpec{
			Template:                   spec,
			Schedule:                   o.schedule,
			Paused:                     o.paused,
			SkipImmediately:            o.skipImmediately.value,
			UseOwnerReferencesInBackup: o.useOwnerReferences.value,
		},
	}, nil
}

func (o *scheduleCreateOptions) run(ctx context.Context, f *Factory, out io.Writer, s *v1.Schedule) error {
	c, err := f.Client()
	if err != nil {
		return err
	}
	if loc := s.Spec.Template.StorageLocation; loc != "" {
		if err := checkLocation(ctx, c, s.Namespace, loc); err != nil {
			return err
		}
	}
	callCtx, cancel := callCtx(ctx)
	err = c.Create(callCtx, s)
	cancel()
	if apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("schedule %q already exists in namespace %q; pick another name, or delete it first", s.Name, s.Namespace)
	}
	if err != nil {
		return fmt.Errorf("creating schedule %q: %w", s.Name, err)
	}
	fmt.Fprintf(out, "Schedule %q created successfully.\n", s.Name)
	switch {
	case s.Spec.Paused:
		fmt.Fprintf(out, "It is paused; run `lifeboat schedule unpause %s` to start it.\n", s.Name)
	case o.skipImmediately.value != nil && *o.skipImmediately.value:
		fmt.Fprintf(out, "Its first backup is taken when the schedule next fires; see `lifeboat schedule describe %s`.\n", s.Name)
	default:
		fmt.Fprintf(out, "Its first backup starts now; list them with `lifeboat backup get -l %s=%s`.\n", v1.ScheduleNameLabel, v1.LabelValue(s.Name))
	}
	return nil
}

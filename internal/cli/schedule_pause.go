package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// newSchedulePauseCommand builds `schedule pause` (pause true) and
// `schedule unpause` (pause false).
func newSchedulePauseCommand(f *Factory, pause bool) *cobra.Command {
	var (
		all             bool
		selector        string
		skipImmediately optionalBool
	)
	verb, done := "pause", "paused"
	short := "Pause schedules: they create no backups until unpaused"
	if !pause {
		verb, done = "unpause", "unpaused"
		short = "Unpause schedules: a backup that fell due while paused is taken at once, unless --skip-immediately"
	}
	cmd := &cobra.Command{
		Use:   verb + " NAME... | --all | --selector SELECTOR",
		Short: short,
		Args:  cobra.ArbitraryArgs,
		Example: fmt.Sprintf(`  lifeboat schedule %[1]s nightly weekly
  lifeboat schedule %[1]s --selector team=ops
  lifeboat schedule %[1]s --all`, verb),
		RunE: runE(f, func(cmd *cobra.Command, args []string) error {
			chosen := 0
			for _, set := range []bool{len(args) > 0, all, selector != ""} {
				if set {
					chosen++
				}
			}
			if chosen != 1 {
				return fmt.Errorf("say which schedules to %s: names, --all or --selector (exactly one of them)", verb)
			}
			c, err := f.Client()
			if err != nil {
				return err
			}
			var schedules *v1.ScheduleList
			if len(args) > 0 {
				// A missing name must not stop the others from being
				// changed; it is reported at the end.
				schedules = &v1.ScheduleList{}
				var errs []error
				for _, name := range args {
					s, err := scheduleKind.get(cmd.Context(), c, f.Namespace, name)
					if err != nil {
						errs = append(errs, err)
						continue
					}
					schedules.Items = append(schedules.Items, *s)
				}
				err := setPaused(cmd.Context(), c, cmd.OutOrStdout(), schedules.Items, pause, skipImmediately.value, done)
				return errors.Join(append(errs, err)...)
			}
			if schedules, err = scheduleKind.list(cmd.Context(), c, f.Namespace, nil, selector); err != nil {
				return err
			}
			if len(schedules.Items) == 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "No schedules found in namespace %q.\n", f.Namespace)
				return nil
			}
			return setPaused(cmd.Context(), c, cmd.OutOrStdout(), schedules.Items, pause, skipImmediately.value, done)
		}),
	}
	cmd.Flags().BoolVar(&all, "all", false, verb+" every schedule in the namespace")
	cmd.Flags().StringVarP(&selector, "selector", "l", "", verb+" the schedules whose labels match this selector")
	if !pause {
		cmd.Flags().Var(&skipImmediately, "skip-immediately",
			"set spec.skipImmediately: true skips the backup due at once and waits for the schedule to fire")
		cmd.Flags().Lookup("skip-immediately").NoOptDefVal = "true"
	}
	return cmd
}

// setPaused patches spec.paused (and spec.skipImmediately when given) on
// each schedule, going on past failures so one bad schedule does not leave
// the rest unchanged.
func setPaused(ctx context.Context, c client.Client, out io.Writer, schedules []v1.Schedule, pause bool, skip *bool, done string) error {
	var errs []error
	for i := range schedules {
		s := &schedules[i]
		sameSkip := skip == nil || (s.Spec.SkipImmediately != nil && *s.Spec.SkipImmediately == *skip)
		if s.Spec.Paused == pause && sameSkip {
			fmt.Fprintf(out, "Schedule %q is already %s.\n", s.Name, done)
			continue
		}
		orig := s.DeepCopy()
		s.Spec.Paused = pause
		if skip != nil {
			s.Spec.SkipImmediately = skip
		}
		callCtx, cancel := callCtx(ctx)
		err := c.Patch(callCtx, s, client.MergeFrom(orig))
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("updating schedule %q: %w", s.Name, err))
			continue
		}
		fmt.Fprintf(out, "Schedule %q %s.\n", s.Name, done)
	}
	return errors.Join(errs...)
}

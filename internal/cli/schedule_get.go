package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

func newScheduleGetCommand(f *Factory) *cobra.Command {
	var (
		output   string
		selector string
	)
	cmd := &cobra.Command{
		Use:   "get [NAME...]",
		Short: "List schedules",
		RunE: runE(f, func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(output, formatTable, formatJSON, formatYAML); err != nil {
				return err
			}
			if len(args) > 0 && selector != "" {
				return fmt.Errorf("--selector cannot be combined with schedule names")
			}
			c, err := f.Client()
			if err != nil {
				return err
			}
			schedules, err := getSchedules(cmd.Context(), c, f.Namespace, args, selector)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if output != formatTable {
				// Same shapes as `backup get`: one name prints the object,
				// anything else a list.
				if len(args) == 1 {
					return printEncoded(out, output, &schedules.Items[0])
				}
				return printEncoded(out, output, schedules)
			}
			if len(schedules.Items) == 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "No schedules found in namespace %q.\n", f.Namespace)
				return nil
			}
			return f.printScheduleTable(out, schedules.Items)
		}),
	}
	cmd.Flags().StringVarP(&output, "output", "o", formatTable, "output format: table, json or yaml")
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "only list schedules whose labels match this selector")
	return cmd
}

// getSchedules reads the named schedules in the order given, or lists them
// all (filtered by selector) sorted by name.
func getSchedules(ctx context.Context, c client.Client, namespace string, names []string, selector string) (*v1.ScheduleList, error) {
	list := &v1.ScheduleList{}
	if len(names) > 0 {
		for _, name := range names {
			s, err := getSchedule(ctx, c, namespace, name)
			if err != nil {
				return nil, err
			}
			list.Items = append(list.Items, *s)
		}
		return list, nil
	}
	opts, err := listOptions(namespace, selector)
	if err != nil {
		return nil, err
	}
	callCtx, cancel := callCtx(ctx)
	defer cancel()
	if err := c.List(callCtx, list, opts...); err != nil {
		return nil, fmt.Errorf("listing schedules in namespace %q: %w", namespace, err)
	}
	slices.SortFunc(list.Items, func(a, b v1.Schedule) int { return strings.Compare(a.Name, b.Name) })
	return list, nil
}

func getSchedule(ctx context.Context, c client.Client, namespace, name string) (*v1.Schedule, error) {
	callCtx, cancel := callCtx(ctx)
	defer cancel()
	s := &v1.Schedule{}
	err := c.Get(callCtx, client.ObjectKey{Namespace: namespace, Name: name}, s)
	if apierrors.IsNotFound(err) && !isCRDMissing(err) {
		return nil, &notFoundError{kind: "schedule", name: name, namespace: namespace}
	}
	if err != nil {
		return nil, fmt.Errorf("reading schedule %q: %w", name, err)
	}
	return s, nil
}

func (f *Factory) printScheduleTable(w io.Writer, schedules []v1.Schedule) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "NAME\tSTATUS\tCREATED\tSCHEDULE\tBACKUP TTL\tLAST BACKUP\tSELECTOR\tPAUSED")
	for i := range schedules {
		s := &schedules[i]
		var created *metav1.Time
		if !s.CreationTimestamp.IsZero() {
			created = &s.CreationTimestamp
		}
		var last metav1.Time
		if s.Status.LastBackup != nil {
			last = *s.Status.LastBackup
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			s.Name,
			schedulePhase(s),
			f.formatTime(created),
			s.Spec.Schedule,
			templateTTL(s.Spec.Template.TTL.Duration),
			f.relativeTime(last.Time),
			metav1.FormatLabelSelector(s.Spec.Template.LabelSelector),
			strconv.FormatBool(s.Spec.Paused),
		)
	}
	return tw.Flush()
}

// schedulePhase shows "New" for a schedule the server has not seen yet.
func schedulePhase(s *v1.Schedule) v1.SchedulePhase {
	if s.Status.Phase == "" {
		return v1.SchedulePhaseNew
	}
	return s.Status.Phase
}

// templateTTL is the TTL each backup gets; 0 leaves it to the server.
func templateTTL(ttl time.Duration) string {
	if ttl == 0 {
		return "<default>"
	}
	return ttl.String()
}

package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

func newRestoreCommand(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "restore",
		Aliases: []string{"restores"},
		Short:   "Restore backups and inspect restores",
	}
	cmd.AddCommand(
		newRestoreCreateCommand(f),
		newRestoreGetCommand(f),
		newRestoreDescribeCommand(f),
		newRestoreLogsCommand(f),
	)
	return cmd
}

func newRestoreGetCommand(f *Factory) *cobra.Command {
	var (
		output   string
		selector string
	)
	cmd := &cobra.Command{
		Use:   "get [NAME...]",
		Short: "List restores",
		RunE: runE(f, func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(output, formatTable, formatJSON, formatYAML); err != nil {
				return err
			}
			if len(args) > 0 && selector != "" {
				return fmt.Errorf("--selector cannot be combined with restore names")
			}
			c, err := f.Client()
			if err != nil {
				return err
			}
			restores, err := getRestores(cmd.Context(), c, f.Namespace, args, selector)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if output != formatTable {
				// Same shapes as `backup get`: one name prints the object,
				// anything else a list.
				if len(args) == 1 {
					return printEncoded(out, output, &restores.Items[0])
				}
				return printEncoded(out, output, restores)
			}
			if len(restores.Items) == 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "No restores found in namespace %q.\n", f.Namespace)
				return nil
			}
			return f.printRestoreTable(out, restores.Items)
		}),
	}
	cmd.Flags().StringVarP(&output, "output", "o", formatTable, "output format: table, json or yaml")
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "only list restores whose labels match this selector")
	return cmd
}

// getRestores reads the named restores in the order given, or lists them
// all (filtered by selector) sorted by name.
func getRestores(ctx context.Context, c client.Client, namespace string, names []string, selector string) (*v1.RestoreList, error) {
	list := &v1.RestoreList{}
	if len(names) > 0 {
		for _, name := range names {
			rs, err := getRestore(ctx, c, namespace, name)
			if err != nil {
				return nil, err
			}
			list.Items = append(list.Items, *rs)
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
		return nil, fmt.Errorf("listing restores in namespace %q: %w", namespace, err)
	}
	slices.SortFunc(list.Items, func(a, b v1.Restore) int { return strings.Compare(a.Name, b.Name) })
	return list, nil
}

func getRestore(ctx context.Context, c client.Client, namespace, name string) (*v1.Restore, error) {
	callCtx, cancel := callCtx(ctx)
	defer cancel()
	rs := &v1.Restore{}
	err := c.Get(callCtx, client.ObjectKey{Namespace: namespace, Name: name}, rs)
	if apierrors.IsNotFound(err) && !isCRDMissing(err) {
		return nil, restoreNotFound(name, namespace)
	}
	if err != nil {
		return nil, fmt.Errorf("reading restore %q: %w", name, err)
	}
	return rs, nil
}

// printRestoreTable prints Velero's `restore get` columns.
func (f *Factory) printRestoreTable(w io.Writer, restores []v1.Restore) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "NAME\tBACKUP\tSTATUS\tSTARTED\tCOMPLETED\tERRORS\tWARNINGS\tCREATED\tSELECTOR")
	for i := range restores {
		rs := &restores[i]
		var created *metav1.Time
		if !rs.CreationTimestamp.IsZero() {
			created = &rs.CreationTimestamp
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n",
			rs.Name,
			valueOr(rs.Spec.BackupName, none),
			restorePhaseOf(rs),
			f.formatTime(rs.Status.StartTimestamp),
			f.formatTime(rs.Status.CompletionTimestamp),
			rs.Status.Errors,
			rs.Status.Warnings,
			f.formatTime(created),
			metav1.FormatLabelSelector(rs.Spec.LabelSelector),
		)
	}
	return tw.Flush()
}

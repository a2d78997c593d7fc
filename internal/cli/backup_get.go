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
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

func newBackupCommand(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "backup",
		Aliases: []string{"backups"},
		Short:   "Create and inspect backups",
	}
	cmd.AddCommand(
		newBackupCreateCommand(f),
		newBackupGetCommand(f),
		newBackupDescribeCommand(f),
		newBackupLogsCommand(f),
		newBackupDownloadCommand(f),
	)
	return cmd
}

func newBackupGetCommand(f *Factory) *cobra.Command {
	var (
		output   string
		selector string
	)
	cmd := &cobra.Command{
		Use:   "get [NAME...]",
		Short: "List backups",
		RunE: runE(f, func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(output, formatTable, formatJSON, formatYAML); err != nil {
				return err
			}
			if len(args) > 0 && selector != "" {
				return fmt.Errorf("--selector cannot be combined with backup names")
			}
			c, err := f.Client()
			if err != nil {
				return err
			}
			backups, err := getBackups(cmd.Context(), c, f.Namespace, args, selector)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if output != formatTable {
				// One named backup prints as the object itself so that
				// `get NAME -o json | jq .status.phase` works; anything else
				// prints as a list, even with one item, to keep its shape
				// predictable for scripts.
				if len(args) == 1 {
					return printEncoded(out, output, &backups.Items[0])
				}
				return printEncoded(out, output, backups)
			}
			if len(backups.Items) == 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "No backups found in namespace %q.\n", f.Namespace)
				return nil
			}
			return f.printBackupTable(out, backups.Items)
		}),
	}
	cmd.Flags().StringVarP(&output, "output", "o", formatTable, "output format: table, json or yaml")
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "only list backups whose labels match this selector")
	return cmd
}

// getBackups reads the named backups in the order given, or lists them
// all (filtered by selector) sorted by name.
func getBackups(ctx context.Context, c client.Client, namespace string, names []string, selector string) (*v1.BackupList, error) {
	list := &v1.BackupList{}
	if len(names) > 0 {
		for _, name := range names {
			b, err := getBackup(ctx, c, namespace, name)
			if err != nil {
				return nil, err
			}
			list.Items = append(list.Items, *b)
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
		return nil, fmt.Errorf("listing backups in namespace %q: %w", namespace, err)
	}
	slices.SortFunc(list.Items, func(a, b v1.Backup) int { return strings.Compare(a.Name, b.Name) })
	return list, nil
}

// listOptions lists in namespace, filtered by the --selector flag's value.
func listOptions(namespace, selector string) ([]client.ListOption, error) {
	opts := []client.ListOption{client.InNamespace(namespace)}
	if selector != "" {
		sel, err := labels.Parse(selector)
		if err != nil {
			return nil, fmt.Errorf("invalid --selector %q: %w", selector, err)
		}
		opts = append(opts, client.MatchingLabelsSelector{Selector: sel})
	}
	return opts, nil
}

func getBackup(ctx context.Context, c client.Client, namespace, name string) (*v1.Backup, error) {
	callCtx, cancel := callCtx(ctx)
	defer cancel()
	b := &v1.Backup{}
	err := c.Get(callCtx, client.ObjectKey{Namespace: namespace, Name: name}, b)
	if apierrors.IsNotFound(err) && !isCRDMissing(err) {
		return nil, backupNotFound(name, namespace)
	}
	if err != nil {
		return nil, fmt.Errorf("reading backup %q: %w", name, err)
	}
	return b, nil
}

func (f *Factory) printBackupTable(w io.Writer, backups []v1.Backup) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "NAME\tSTATUS\tERRORS\tWARNINGS\tCREATED\tEXPIRES\tSTORAGE LOCATION\tSELECTOR")
	for i := range backups {
		b := &backups[i]
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n",
			b.Name,
			displayPhase(b),
			b.Status.Errors,
			b.Status.Warnings,
			f.formatTime(createdTime(b)),
			f.relativeTime(expiration(b).Time),
			b.Spec.StorageLocation,
			metav1.FormatLabelSelector(b.Spec.LabelSelector),
		)
	}
	return tw.Flush()
}

// displayPhase shows "New" for a backup the server has not picked up yet,
// and "Deleting" as soon as a deletion started, as Velero's table does.
func displayPhase(b *v1.Backup) string {
	if b.DeletionTimestamp != nil {
		return string(v1.BackupPhaseDeleting)
	}
	return string(phaseOf(b))
}

// createdTime is when the backup started, which is what users mean by
// "created" for a backup; before it starts, the object's creation.
func createdTime(b *v1.Backup) *metav1.Time {
	if b.Status.StartTimestamp != nil {
		return b.Status.StartTimestamp
	}
	if b.CreationTimestamp.IsZero() {
		return nil
	}
	return &b.CreationTimestamp
}

// expiration is status.expiration, or before the server set it, when the
// requested TTL would end.
func expiration(b *v1.Backup) (t metav1.Time) {
	if b.Status.Expiration != nil {
		return *b.Status.Expiration
	}
	if b.Spec.TTL.Duration > 0 && !b.CreationTimestamp.IsZero() {
		return metav1.NewTime(b.CreationTimestamp.Add(b.Spec.TTL.Duration))
	}
	return t
}

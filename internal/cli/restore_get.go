package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
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
		newObjectDeleteCommand(f, restoreKind, "Delete restores",
			"Delete removes the Restore objects. The objects a restore created in the cluster stay.\n"+
				"Its log and results stay in object storage under restores/NAME/: Lifeboat removes a restore's\n"+
				"files when its backup is deleted, while the Restore object still exists.",
			"  lifeboat restore delete web-20260301120000 --confirm\n"+
				"  lifeboat restore delete --selector team=shop --confirm\n"+
				"  lifeboat restore delete --all --confirm",
			func(_ context.Context, _ client.Client, out io.Writer, rs *v1.Restore) error {
				fmt.Fprintf(out, "Request to delete restore %q submitted successfully.\n", rs.Name)
				fmt.Fprintf(out, "The Restore object is deleted; its files under restores/%s/ in object storage stay.\n", rs.Name)
				return nil
			}),
		newGetCommand(f, restoreKind),
		newRestoreDescribeCommand(f),
		newRestoreLogsCommand(f),
	)
	return cmd
}

var restoreKind = kindSpec[v1.Restore, *v1.Restore, *v1.RestoreList]{
	word:       "restore",
	newList:    func() *v1.RestoreList { return &v1.RestoreList{} },
	items:      func(l *v1.RestoreList) *[]v1.Restore { return &l.Items },
	printTable: (*Factory).printRestoreTable,
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
		status := string(restorePhaseOf(rs))
		if rs.Spec.DryRun {
			// Its errors are items that would fail: nothing was restored.
			status += " (dry run)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n",
			rs.Name,
			valueOr(rs.Spec.BackupName, none),
			status,
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

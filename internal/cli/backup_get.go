package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
		newGetCommand(f, backupKind),
		newBackupDescribeCommand(f),
		newBackupLogsCommand(f),
		newBackupDownloadCommand(f),
		newBackupDeleteCommand(f),
		newBackupVerifyCommand(f),
		newBackupDiffCommand(f),
	)
	return cmd
}

var backupKind = kindSpec[v1.Backup, *v1.Backup, *v1.BackupList]{
	word:       "backup",
	newList:    func() *v1.BackupList { return &v1.BackupList{} },
	items:      func(l *v1.BackupList) *[]v1.Backup { return &l.Items },
	printTable: (*Factory).printBackupTable,
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

package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

func newDeleteRequestCommand(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "delete-request",
		Aliases: []string{"delete-requests"},
		Short:   "Inspect backup deletion requests (made by `backup delete`, expiry, or deleting a Backup)",
	}
	cmd.AddCommand(
		newGetCommand(f, deleteRequestKind),
		newDescribeCommand(f, deleteRequestKind,
			"Describe prints a deletion request for people to read: its phase and attempts, how far it\n"+
				"got (items per DeleteItemAction, snapshots, restores, keys), every error with the plugin and\n"+
				"item involved, and, once it has ended, its report. -o json|yaml prints the objects instead.",
			func(_ context.Context, _ client.Client, w io.Writer, r *v1.DeleteBackupRequest) error {
				return f.describeDeleteRequest(w, r)
			}, nil),
	)
	return cmd
}

var deleteRequestKind = kindSpec[v1.DeleteBackupRequest, *v1.DeleteBackupRequest, *v1.DeleteBackupRequestList]{
	word:       "delete-request",
	newList:    func() *v1.DeleteBackupRequestList { return &v1.DeleteBackupRequestList{} },
	items:      func(l *v1.DeleteBackupRequestList) *[]v1.DeleteBackupRequest { return &l.Items },
	printTable: (*Factory).printDeleteRequestTable,
}

func (f *Factory) printDeleteRequestTable(w io.Writer, reqs []v1.DeleteBackupRequest) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "NAME\tBACKUP\tSTATUS\tATTEMPTS\tERRORS\tCREATED")
	for i := range reqs {
		r := &reqs[i]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", r.Name, r.Spec.BackupName, requestPhase(r), r.Status.Attempts,
			len(r.Status.Errors), f.formatTime(&r.CreationTimestamp))
	}
	return tw.Flush()
}

func requestPhase(r *v1.DeleteBackupRequest) v1.DeleteBackupRequestPhase {
	if r.Status.Phase == "" {
		return v1.DeleteBackupRequestPhaseNew
	}
	return r.Status.Phase
}

func (f *Factory) describeDeleteRequest(w io.Writer, r *v1.DeleteBackupRequest) error {
	d := newDescriber(w)
	st := &r.Status
	d.objectMeta(r)
	d.blank()
	d.line("Backup:\t%s", r.Spec.BackupName)
	d.line("Phase:\t%s", requestPhase(r))
	if st.HandledBy != "" {
		d.line("Handled by:\t%s (this request arrived while that one was deleting the backup)", st.HandledBy)
	}
	d.line("Attempts:\t%d", st.Attempts)
	d.line("Started:\t%s", f.formatTime(st.StartTimestamp))
	d.line("Completed:\t%s", f.formatTime(st.CompletionTimestamp))
	if st.NextAttemptTime != nil && requestPhase(r) != v1.DeleteBackupRequestPhaseProcessed && requestPhase(r) != v1.DeleteBackupRequestPhaseFailed {
		d.line("Next attempt:\t%s", f.formatTime(st.NextAttemptTime))
	}
	if cp := st.Checkpoint; cp != nil {
		d.blank()
		d.line("Progress:")
		steps := make([]string, len(cp.CompletedSteps))
		for i, s := range cp.CompletedSteps {
			steps[i] = string(s)
		}
		d.line("  Steps done:\t%s", listOr(steps, none))
		for _, a := range cp.Actions {
			d.line("  %s:\t%s done", a.Name, counted(a.Succeeded, "item"))
		}
		d.line("  Snapshots deleted:\t%d", st.SnapshotsDeleted)
		d.line("  Pod volume snapshots forgotten:\t%d", st.PodVolumeSnapshotsForgotten)
		d.line("  Restores deleted:\t%d", st.RestoresDeleted)
		d.line("  Keys removed:\t%d", st.KeysRemoved)
		d.line("  Unfinished uploads removed:\t%d", st.UnfinishedUploadsRemoved)
	}
	describeDeletionErrors(d, st)
	if rep := st.Report; rep != nil {
		d.blank()
		describeDeletionReport(d, rep)
	}
	f.describeConditions(d, st.Conditions)
	return d.tw.Flush()
}

func describeDeletionErrors(d *describer, st *v1.DeleteBackupRequestStatus) {
	if len(st.ErrorDetails) == 0 && len(st.Errors) == 0 {
		return
	}
	d.blank()
	d.line("Errors:")
	if len(st.ErrorDetails) == 0 {
		for _, e := range st.Errors {
			d.line("  - %s", e)
		}
		return
	}
	for _, e := range st.ErrorDetails {
		var where []string
		if e.Step != "" {
			where = append(where, "step "+string(e.Step))
		}
		if e.Plugin != "" {
			where = append(where, "plugin "+e.Plugin)
		}
		if e.Name != "" {
			where = append(where, deletionItem(e))
		}
		d.line("  - %s: %s", strings.Join(where, ", "), e.Message)
	}
}

// deletionItem names the item of a deletion error: "<resource> <ns>/<name>".
func deletionItem(e v1.DeletionError) string {
	item := e.Name
	if e.Namespace != "" {
		item = e.Namespace + "/" + item
	}
	if e.Resource != "" {
		item = e.Resource + " " + item
	}
	return item
}

func describeDeletionReport(d *describer, rep *v1.DeletionReport) {
	d.line("Report:")
	if len(rep.Actions) == 0 {
		d.line("  DeleteItemActions:\t%s", none)
	}
	for _, a := range rep.Actions {
		line := counted(a.Items, "item")
		if a.Failed > 0 {
			line += fmt.Sprintf(", %d failed", a.Failed)
		}
		if a.Skipped > 0 {
			line += fmt.Sprintf(", %d failed and skipped", a.Skipped)
		}
		d.line("  %s:\t%s", a.Name, line)
	}
	if rep.SkippedCount > 0 {
		d.line("  Skipped (their DeleteItemActions failed; what they were to clean up is still there):")
		for _, e := range rep.SkippedItems {
			d.line("    - %s, plugin %s: %s", deletionItem(e), e.Plugin, e.Message)
		}
		if more := rep.SkippedCount - int64(len(rep.SkippedItems)); more > 0 {
			d.line("    ... and %d more (each is in the server's log)", more)
		}
	}
	d.line("  Snapshots deleted:\t%d", rep.SnapshotsDeleted)
	d.line("  Pod volume snapshots forgotten:\t%d", rep.PodVolumeSnapshotsForgotten)
	d.line("  Restores deleted:\t%d", rep.RestoresDeleted)
	d.line("  Keys removed:\t%d", rep.KeysRemoved)
	// Uploads a stopped server never finished are not keys; they are
	// counted apart so the report does not hide that there were some.
	d.line("  Unfinished uploads removed:\t%d", rep.UnfinishedUploadsRemoved)
	for _, w := range rep.Warnings {
		d.line("  Warning:\t%s", w)
	}
	if len(rep.LeftBehind) > 0 {
		d.line("  Left behind:")
		for _, l := range rep.LeftBehind {
			d.line("    - %s", l)
		}
	} else {
		d.line("  Left behind:\t%s", none)
	}
}

// requestsFor lists the deletion requests of a backup, oldest first.
func requestsFor(ctx context.Context, c client.Client, namespace, backup string) ([]v1.DeleteBackupRequest, error) {
	callCtx, cancel := callCtx(ctx)
	defer cancel()
	list := &v1.DeleteBackupRequestList{}
	if err := c.List(callCtx, list, client.InNamespace(namespace), client.MatchingLabels{v1.BackupNameLabel: v1.LabelValue(backup)}); err != nil {
		return nil, fmt.Errorf("listing the deletion requests of backup %q: %w", backup, err)
	}
	items := slices.DeleteFunc(list.Items, func(r v1.DeleteBackupRequest) bool { return r.Spec.BackupName != backup })
	slices.SortFunc(items, func(a, b v1.DeleteBackupRequest) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	return items, nil
}

// describeDeletions adds a backup's deletion requests to its description,
// as Velero's "Deletion Attempts": whoever looks at a backup that would not
// go away sees why.
func (f *Factory) describeDeletions(ctx context.Context, c client.Client, w io.Writer, b *v1.Backup) error {
	reqs, err := requestsFor(ctx, c, b.Namespace, b.Name)
	if err != nil {
		fmt.Fprintf(w, "\nDeletion requests:  <%v>\n", err)
		return nil
	}
	reqs = slices.DeleteFunc(reqs, func(r v1.DeleteBackupRequest) bool { return r.Spec.DryRun })
	if len(reqs) == 0 {
		return nil
	}
	d := newDescriber(w)
	d.blank()
	d.line("Deletion requests:")
	for i := range reqs {
		r := &reqs[i]
		d.line("  %s:\t%s, %d attempts, created %s", r.Name, requestPhase(r), r.Status.Attempts, f.formatTime(&r.CreationTimestamp))
		for _, e := range r.Status.Errors {
			d.line("    - %s", e)
		}
	}
	return d.tw.Flush()
}

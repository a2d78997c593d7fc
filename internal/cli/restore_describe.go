package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/results"
)

func newRestoreDescribeCommand(f *Factory) *cobra.Command {
	var (
		details bool
		output  string
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "describe NAME...",
		Short: "Show the details of restores",
		Long: "Describe prints a restore's spec and status for people to read.\n" +
			"With --details it also prints the restore's warnings and errors and every restored resource,\n" +
			"read from the restore's results and resource list through the server.\n" +
			"-o json|yaml prints the Restore objects instead.",
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
			restores, err := getRestores(cmd.Context(), c, f.Namespace, args, "")
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if output != formatTable {
				if len(restores.Items) == 1 {
					return printEncoded(out, output, &restores.Items[0])
				}
				return printEncoded(out, output, restores)
			}
			for i := range restores.Items {
				rs := &restores.Items[i]
				if i > 0 {
					fmt.Fprintln(out)
				}
				var (
					res  *restoreResults
					list *resourceListResult
				)
				if details {
					d := f.downloader(c, timeout)
					res = fetchRestoreResults(cmd.Context(), d, rs)
					list = fetchResourceList(cmd.Context(), d, v1.DownloadTargetKindRestoreResourceList, rs.Name)
				}
				if err := f.describeRestore(out, rs, res, list); err != nil {
					return err
				}
			}
			return nil
		}),
	}
	cmd.Flags().BoolVar(&details, "details", false, "also print the warnings, errors and restored resources")
	cmd.Flags().StringVarP(&output, "output", "o", "", "print the Restore objects as json or yaml instead of a description")
	cmd.Flags().DurationVar(&timeout, "timeout", defaultDownloadTimeout, "how long to wait for the server to serve the results and resource list (--details)")
	return cmd
}

// restoreResults carries the results file or why it could not be read, so
// that a missing file does not hide the rest of the description.
type restoreResults struct {
	results results.Results
	err     error
	// skipped is set when the status counts no warnings or errors, so there
	// was nothing to download.
	skipped bool
}

func fetchRestoreResults(ctx context.Context, d *downloader, rs *v1.Restore) *restoreResults {
	if rs.Status.Warnings == 0 && rs.Status.Errors == 0 {
		return &restoreResults{skipped: true}
	}
	res := &restoreResults{}
	res.err = readGzipJSON(ctx, d, v1.DownloadTargetKindRestoreResults, rs.Name,
		fmt.Sprintf("results of restore %q", rs.Name), &res.results)
	return res
}

func (f *Factory) describeRestore(w io.Writer, rs *v1.Restore, res *restoreResults, list *resourceListResult) error {
	d := &describer{tw: tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)}
	spec, status := &rs.Spec, &rs.Status

	d.line("Name:\t%s", rs.Name)
	d.line("Namespace:\t%s", rs.Namespace)
	d.line("Labels:\t%s", formatMap(rs.Labels))
	d.line("Annotations:\t%s", formatMap(rs.Annotations))
	d.blank()

	phase := restorePhaseOf(rs)
	switch phase {
	case v1.RestorePhaseFailed, v1.RestorePhasePartiallyFailed:
		d.line("Phase:\t%s (run `lifeboat restore logs %s` for more information)", phase, rs.Name)
	default:
		d.line("Phase:\t%s", phase)
	}
	if status.FailureReason != "" {
		d.line("Failure reason:\t%s", status.FailureReason)
	}
	if p := status.Progress; p != nil {
		if phase == v1.RestorePhaseInProgress {
			d.line("Estimated total items to be restored:\t%d", p.TotalItems)
			d.line("Items restored so far:\t%d", p.ItemsRestored)
		} else {
			d.line("Total items to be restored:\t%d", p.TotalItems)
			d.line("Items restored:\t%d", p.ItemsRestored)
		}
	}
	if len(status.ValidationErrors) > 0 {
		d.blank()
		d.line("Validation errors:")
		for _, e := range status.ValidationErrors {
			d.line("  - %s", e)
		}
	}
	d.blank()
	d.line("Started:\t%s", f.formatTime(status.StartTimestamp))
	d.line("Completed:\t%s", f.formatTime(status.CompletionTimestamp))
	d.blank()
	describeRestoreResults(d, rs, res)
	d.blank()

	d.line("Backup:\t%s", valueOr(spec.BackupName, none))
	if spec.ScheduleName != "" {
		d.line("Schedule:\t%s", spec.ScheduleName)
	}
	d.blank()
	d.line("Namespaces:")
	d.line("  Included:\t%s", listOr(spec.IncludedNamespaces, "all namespaces found in the backup"))
	d.line("  Excluded:\t%s", listOr(spec.ExcludedNamespaces, none))
	d.blank()
	d.line("Resources:")
	d.line("  Included:\t%s", listOr(spec.IncludedResources, "*"))
	d.line("  Excluded:\t%s", listOr(spec.ExcludedResources, none))
	d.line("  Cluster-scoped:\t%s", boolPtrString(spec.IncludeClusterResources, "included", "excluded", "auto"))
	d.blank()
	d.line("Namespace mappings:\t%s", formatMappings(spec.NamespaceMapping))
	d.blank()
	d.line("Label selector:\t%s", selectorString(spec.LabelSelector))
	d.line("Or label selector:\t%s", orSelectorString(spec.OrLabelSelectors))
	d.blank()
	d.line("Restore PVs:\t%s", boolPtrString(spec.RestorePVs, "true", "false", "auto"))
	d.line("Existing resource policy:\t%s", valueOr(string(spec.ExistingResourcePolicy), none))
	d.line("Preserve Service NodePorts:\t%s", boolPtrString(spec.PreserveNodePorts, "true", "false", "auto"))

	if len(status.Conditions) > 0 {
		d.blank()
		d.line("Conditions:")
		d.line("  Type\tStatus\tReason\tLast Transition\tMessage")
		for _, c := range status.Conditions {
			d.line("  %s\t%s\t%s\t%s\t%s", c.Type, c.Status, valueOr(c.Reason, none),
				f.formatTime(&c.LastTransitionTime), valueOr(c.Message, none))
		}
	}
	if list != nil {
		d.blank()
		describeResourceList(d, list)
	}
	return d.tw.Flush()
}

// describeRestoreResults prints the counts, and with --details the
// messages grouped as Velero groups them.
func describeRestoreResults(d *describer, rs *v1.Restore, res *restoreResults) {
	switch {
	case res == nil || res.skipped:
		d.line("Errors:\t%d", rs.Status.Errors)
		d.line("Warnings:\t%d", rs.Status.Warnings)
		return
	case res.err != nil:
		d.line("Errors:\t%d", rs.Status.Errors)
		d.line("Warnings:\t%d", rs.Status.Warnings)
		if errors.Is(res.err, errFileNotFound) {
			d.line("Results:\t<restore results not found>")
		} else {
			d.line("Results:\t<error getting restore results: %v>", res.err)
		}
		return
	}
	describeResult(d, "Errors", rs.Status.Errors, &res.results.Errors)
	d.blank()
	describeResult(d, "Warnings", rs.Status.Warnings, &res.results.Warnings)
}

func describeResult(d *describer, title string, count int, r *results.Result) {
	d.line("%s:\t%d", title, count)
	if r.Count() == 0 {
		return
	}
	messages := func(indent, label string, msgs []string) {
		if len(msgs) == 0 {
			d.line("%s%s:\t%s", indent, label, none)
			return
		}
		d.line("%s%s:", indent, label)
		for _, m := range msgs {
			d.line("%s  - %s", indent, m)
		}
	}
	messages("  ", "Velero", r.Velero)
	messages("  ", "Cluster", r.Cluster)
	if len(r.Namespaces) == 0 {
		d.line("  Namespaces:\t%s", none)
		return
	}
	d.line("  Namespaces:")
	for _, ns := range slices.Sorted(maps.Keys(r.Namespaces)) {
		messages("    ", ns, r.Namespaces[ns])
	}
}

// formatMappings prints namespace mappings in the --namespace-mappings
// syntax, so they can be copied into another restore.
func formatMappings(m map[string]string) string {
	if len(m) == 0 {
		return none
	}
	parts := make([]string, 0, len(m))
	for _, src := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, src+":"+m[src])
	}
	return strings.Join(parts, ",")
}

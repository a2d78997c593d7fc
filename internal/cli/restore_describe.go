package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/results"
)

func newRestoreDescribeCommand(f *Factory) *cobra.Command {
	var (
		details bool
		timeout time.Duration
		tlsOpts *tlsFlags
	)
	// fetchDetails reads what --details adds through the server; nil
	// results without --details.
	fetchDetails := func(ctx context.Context, c client.Client, warn io.Writer, rs *v1.Restore) (*restoreResults, *resourceListResult, *restoreVolumesResult, error) {
		if !details {
			return nil, nil, nil, nil
		}
		d, err := f.storeDownloader(ctx, c, timeout, tlsOpts, locationOfBackup(ctx, c, f.Namespace, rs.Spec.BackupName), warn)
		if err != nil {
			return nil, nil, nil, err
		}
		return fetchRestoreResults(ctx, d, rs), fetchResourceList(ctx, d, v1.DownloadTargetKindRestoreResourceList, rs.Name),
			fetchRestoreVolumes(ctx, d, rs.Name), nil
	}
	cmd := newDescribeCommand(f, restoreKind,
		"Describe prints a restore's spec and status for people to read.\n"+
			"With --details it also prints the restore's warnings and errors, every restored resource, and\n"+
			"the volumes restored from snapshots (CSI or native: the claim or volume, the storage snapshot,\n"+
			"and for CSI the restored VolumeSnapshot, its content, the driver and the size), read from the\n"+
			"restore's results, resource list and volume information through the server.\n"+
			"Pod volumes restored by file-system restore are counted by phase (Velero's \"kopia Restores\"), and\n"+
			"with --details listed per pod.\n"+
			"-o json|yaml prints the same as a RestoreDescription: the restore's metadata, phase, spec and\n"+
			"status (with status.podVolumeRestores, counted as Velero counts pod volume backups), and\n"+
			"results, resourceList, volumes and podVolumeRestores (--details).",
		func(ctx context.Context, c client.Client, w io.Writer, rs *v1.Restore) error {
			res, list, vols, err := fetchDetails(ctx, c, w, rs)
			if err != nil {
				return err
			}
			pvrs, pvrErr := podVolumeRestoresOf(ctx, c, rs)
			if err := f.describeRestore(w, rs, res, list, podVolumeSection{pvrs, pvrErr, details}); err != nil {
				return err
			}
			if vols != nil {
				return describeRestoreVolumes(w, vols)
			}
			return nil
		},
		func(ctx context.Context, c client.Client, rs *v1.Restore) (any, error) {
			res, list, vols, err := fetchDetails(ctx, c, io.Discard, rs)
			if err != nil {
				return nil, err
			}
			pvrs, pvrErr := podVolumeRestoresOf(ctx, c, rs)
			return f.structuredRestore(rs, res, list, vols, podVolumeSection{pvrs, pvrErr, details}), nil
		})
	cmd.Flags().BoolVar(&details, "details", false, "also print the warnings, errors, restored resources and volumes restored from snapshots, and the pod volumes restored by file-system restore per pod")
	cmd.Flags().DurationVar(&timeout, "timeout", defaultDownloadTimeout, "how long to wait for the server to serve the results, resource list and volume information (--details)")
	tlsOpts = bindTLSFlags(cmd.Flags(), f)
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

// podVolumeSection is what the description shows of the restore's
// PodVolumeRestores.
type podVolumeSection struct {
	pvrs    []v1.PodVolumeRestore
	err     error
	details bool
}

func (f *Factory) describeRestore(w io.Writer, rs *v1.Restore, res *restoreResults, list *resourceListResult, pv podVolumeSection) error {
	d := newDescriber(w)
	spec, status := &rs.Spec, &rs.Status

	d.objectMeta(rs)
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
	d.validationErrors(status.ValidationErrors)
	if spec.DryRun {
		d.line("Dry run:\tyes (every create and patch was sent as a server-side dry run; nothing was written)")
		describeRestoreDryRun(d, status.DryRun)
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
	if spec.ResourcePolicy != nil {
		d.line("Resource policies:\t%s %s", spec.ResourcePolicy.Kind, spec.ResourcePolicy.Name)
	}
	d.blank()
	d.line("Restore PVs:\t%s", boolPtrString(spec.RestorePVs, "true", "false", "auto"))
	d.line("Existing resource policy:\t%s", valueOr(string(spec.ExistingResourcePolicy), none))
	d.line("Preserve Service NodePorts:\t%s", boolPtrString(spec.PreserveNodePorts, "true", "false", "auto"))
	// As Velero's describe: the settings given, under a heading shown
	// whenever the spec has an uploaderConfig.
	if c := spec.UploaderConfig; c != nil {
		d.blank()
		d.line("Uploader config:")
		if c.WriteSparseFiles != nil && *c.WriteSparseFiles {
			d.line("  Write Sparse Files:\t%t", true)
		}
		if c.ParallelFilesDownload > 0 {
			d.line("  Parallel Restore:\t%d", c.ParallelFilesDownload)
		}
	}
	describePodVolumeRestores(d, pv.pvrs, pv.err, pv.details)
	d.blank()
	describeRestoreHooks(d, spec.Hooks)
	describeHookStatus(d, status.HookStatus)

	f.describeConditions(d, status.Conditions)
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
func formatMappings(m map[string]string) string { return joinPairs(m, ":") }

// describeRestoreDryRun prints what a dry run found: the counts, then the
// items the status lists (notable ones first).
func describeRestoreDryRun(d *describer, dr *v1.RestoreDryRun) {
	if dr == nil {
		return
	}
	d.blank()
	d.line("Dry run result:")
	d.line("  Would create:\t%d", dr.WouldCreate)
	if dr.Unchecked > 0 {
		d.line("    of which not checked by the API server:\t%d", dr.Unchecked)
	}
	d.line("  Would update:\t%d", dr.WouldUpdate)
	d.line("  Would skip:\t%d", dr.WouldSkip)
	d.line("  Would fail:\t%d", dr.WouldFail)
	if len(dr.Items) == 0 {
		return
	}
	d.line("  Items:")
	for _, it := range dr.Items {
		item := it.Resource + " " + it.Name
		if it.Namespace != "" {
			item = it.Resource + " " + it.Namespace + "/" + it.Name
		}
		if it.Message == "" {
			d.line("    %s\t%s", it.Outcome, item)
		} else {
			d.line("    %s\t%s: %s", it.Outcome, item, it.Message)
		}
	}
	if dr.Truncated {
		d.line("    (%d of %d items listed; `lifeboat restore describe --details` lists every one)", len(dr.Items),
			dr.WouldCreate+dr.WouldUpdate+dr.WouldSkip+dr.WouldFail)
	}
}

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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

func newBackupDescribeCommand(f *Factory) *cobra.Command {
	var (
		details bool
		timeout time.Duration
		tlsOpts *tlsFlags
	)
	// fetchDetails reads what --details adds through the server; nil
	// results without --details.
	fetchDetails := func(ctx context.Context, c client.Client, warn io.Writer, b *v1.Backup) (*resourceListResult, *volumeInfoResult, error) {
		if !details {
			return nil, nil, nil
		}
		d, err := f.storeDownloader(ctx, c, timeout, tlsOpts, b.Spec.StorageLocation, warn)
		if err != nil {
			return nil, nil, err
		}
		return fetchResourceList(ctx, d, v1.DownloadTargetKindBackupResourceList, b.Name), fetchVolumeInfo(ctx, d, b.Name), nil
	}
	cmd := newDescribeCommand(f, backupKind,
		"Describe prints a backup's spec and status for people to read.\n"+
			"With --details it also lists every backed-up resource, read from the backup's resource list\n"+
			"through the server, and every volume with the action taken (snapshot, fs-backup, skip, custom),\n"+
			"the volume policy rule or fallback that chose it, and the outcome.\n"+
			"Its pod volume backups (file-system backup by the node agent) are counted by phase; with\n"+
			"--details each pod's volumes are listed by phase with their size and the time taken.\n"+
			"-o json|yaml prints the same as a BackupDescription: the backup's metadata, phase, spec and\n"+
			"status (with Velero's status.backupVolumes.podVolumeBackups), resourceList, volumes and\n"+
			"podVolumeBackups (--details) and deleteBackupRequests.",
		func(ctx context.Context, c client.Client, w io.Writer, b *v1.Backup) error {
			list, vols, err := fetchDetails(ctx, c, w, b)
			if err != nil {
				return err
			}
			if err := f.describeBackup(w, b, list); err != nil {
				return err
			}
			if vols != nil {
				if err := describeVolumes(w, vols); err != nil {
					return err
				}
			}
			if err := describePodVolumeBackups(ctx, c, w, b, details); err != nil {
				return err
			}
			return f.describeDeletions(ctx, c, w, b)
		},
		func(ctx context.Context, c client.Client, b *v1.Backup) (any, error) {
			list, vols, err := fetchDetails(ctx, c, io.Discard, b)
			if err != nil {
				return nil, err
			}
			return f.structuredBackup(ctx, c, b, list, vols, details)
		})
	cmd.Flags().BoolVar(&details, "details", false, "also list the backed-up resources and the volume decisions")
	cmd.Flags().DurationVar(&timeout, "timeout", defaultDownloadTimeout, "how long to wait for the server to serve the resource list (--details)")
	tlsOpts = bindTLSFlags(cmd.Flags(), f)
	return cmd
}

// resourceListResult carries either the list or why it could not be read:
// a missing list is normal for a running or failed backup and must not hide
// the rest of the description.
type resourceListResult struct {
	items map[string][]string
	err   error
	// owner is "backup" or "restore", for the messages.
	owner string
}

// fetchResourceList reads the resource list of a backup or restore (kind
// is BackupResourceList or RestoreResourceList): a gzipped JSON map from
// resource type ("v1/ConfigMap", "apps/v1/Deployment") to "namespace/name"
// entries (a restore's carry their outcome, as in "shop/web(created)").
func fetchResourceList(ctx context.Context, d *downloader, kind v1.DownloadTargetKind, name string) *resourceListResult {
	var items map[string][]string
	what := fmt.Sprintf("resource list of %s %q", targetOwner(kind), name)
	err := readGzipJSON(ctx, d, kind, name, what, &items)
	return &resourceListResult{items: items, err: err, owner: targetOwner(kind)}
}

// describer writes "Key:<tab>value" lines; tabwriter aligns each block of
// consecutive lines, and blank lines start a new block.
type describer struct {
	tw *tabwriter.Writer
}

func (d *describer) line(format string, args ...any) {
	fmt.Fprintf(d.tw, format+"\n", args...)
}

func (d *describer) blank() { fmt.Fprintln(d.tw) }

func newDescriber(w io.Writer) *describer {
	return &describer{tw: tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)}
}

// objectMeta opens every description, as kubectl describe does.
func (d *describer) objectMeta(obj metav1.Object) {
	d.line("Name:\t%s", obj.GetName())
	d.line("Namespace:\t%s", obj.GetNamespace())
	d.line("Labels:\t%s", formatMap(obj.GetLabels()))
	d.line("Annotations:\t%s", formatMap(obj.GetAnnotations()))
}

func (d *describer) validationErrors(errs []string) {
	if len(errs) == 0 {
		return
	}
	d.blank()
	d.line("Validation errors:")
	for _, e := range errs {
		d.line("  - %s", e)
	}
}

func (f *Factory) describeConditions(d *describer, conditions []metav1.Condition) {
	if len(conditions) == 0 {
		return
	}
	d.blank()
	d.line("Conditions:")
	d.line("  Type\tStatus\tReason\tLast Transition\tMessage")
	for _, c := range conditions {
		d.line("  %s\t%s\t%s\t%s\t%s", c.Type, c.Status, valueOr(c.Reason, none),
			f.formatTime(&c.LastTransitionTime), valueOr(c.Message, none))
	}
}

func (f *Factory) describeBackup(w io.Writer, b *v1.Backup, list *resourceListResult) error {
	d := newDescriber(w)
	spec, status := &b.Spec, &b.Status

	d.objectMeta(b)
	d.blank()

	phase := displayPhase(b)
	switch v1.BackupPhase(phase) {
	case v1.BackupPhaseFailed, v1.BackupPhasePartiallyFailed:
		d.line("Phase:\t%s (run `lifeboat backup logs %s` for more information)", phase, b.Name)
	default:
		d.line("Phase:\t%s", phase)
	}
	if status.FailureReason != "" {
		d.line("Failure reason:\t%s", status.FailureReason)
	}
	d.validationErrors(status.ValidationErrors)
	d.blank()
	d.line("Errors:\t%d", status.Errors)
	d.line("Warnings:\t%d", status.Warnings)
	d.blank()

	d.line("Namespaces:")
	d.line("  Included:\t%s", listOr(spec.IncludedNamespaces, "*"))
	d.line("  Excluded:\t%s", listOr(spec.ExcludedNamespaces, none))
	d.blank()
	describeResourceFilters(d, "", spec)
	d.blank()
	d.line("Label selector:\t%s", selectorString(spec.LabelSelector))
	d.line("Or label selector:\t%s", orSelectorString(spec.OrLabelSelectors))
	d.blank()
	d.line("Storage Location:\t%s", valueOr(spec.StorageLocation, "<default>"))
	d.line("Velero-Native Snapshot PVs:\t%s", boolPtrString(spec.SnapshotVolumes, "true", "false", "auto"))
	d.line("TTL:\t%s", ttlString(spec.TTL.Duration))
	if spec.ResourcePolicy != nil {
		d.line("Resource policies:\t%s %s", spec.ResourcePolicy.Kind, spec.ResourcePolicy.Name)
	}
	describeUploaderConfigForBackup(d, "", spec)
	d.blank()
	describeBackupHooks(d, "", spec.Hooks)
	d.blank()

	d.line("Backup Format Version:\t%s", valueOr(status.FormatVersion, "<n/a>"))
	d.line("Started:\t%s", f.formatTime(status.StartTimestamp))
	d.line("Completed:\t%s", f.formatTime(status.CompletionTimestamp))
	d.line("Expiration:\t%s", f.formatTime(status.Expiration))
	if v := b.Annotations[v1.VerificationAnnotation]; v != "" {
		d.line("Verification:\t%s", v)
	}
	if p := status.Progress; p != nil {
		d.blank()
		if phase == string(v1.BackupPhaseInProgress) {
			d.line("Estimated total items to be backed up:\t%d", p.TotalItems)
			d.line("Items backed up so far:\t%d", p.ItemsBackedUp)
		} else {
			d.line("Total items to be backed up:\t%d", p.TotalItems)
			d.line("Items backed up:\t%d", p.ItemsBackedUp)
		}
	}
	describeHookStatus(d, status.HookStatus)
	f.describeConditions(d, status.Conditions)
	if list != nil {
		d.blank()
		describeResourceList(d, list)
	}
	return d.tw.Flush()
}

func describeResourceList(d *describer, list *resourceListResult) {
	switch {
	case errors.Is(list.err, errFileNotFound):
		// Missing for runs that have not finished or failed before upload.
		d.line("Resource List:\t<%s resource list not found>", list.owner)
		return
	case list.err != nil:
		d.line("Resource List:\t<error getting %s resource list: %v>", list.owner, list.err)
		return
	case len(list.items) == 0:
		d.line("Resource List:\t%s", none)
		return
	}
	d.line("Resource List:")
	for _, kind := range slices.Sorted(maps.Keys(list.items)) {
		d.line("  %s:", kind)
		for _, item := range list.items[kind] {
			d.line("    - %s", item)
		}
	}
}

// describeResourceFilters is shared with a schedule's backup template,
// which nests it under indent.
func describeResourceFilters(d *describer, indent string, spec *v1.BackupSpec) {
	d.line("%sResources:", indent)
	if usesScopedResourceFilters(spec) {
		d.line("%s  Included cluster-scoped:\t%s", indent, listOr(spec.IncludedClusterScopedResources, none))
		d.line("%s  Excluded cluster-scoped:\t%s", indent, listOr(spec.ExcludedClusterScopedResources, none))
		d.line("%s  Included namespace-scoped:\t%s", indent, listOr(spec.IncludedNamespaceScopedResources, "*"))
		d.line("%s  Excluded namespace-scoped:\t%s", indent, listOr(spec.ExcludedNamespaceScopedResources, none))
	} else {
		d.line("%s  Included:\t%s", indent, listOr(spec.IncludedResources, "*"))
		d.line("%s  Excluded:\t%s", indent, listOr(spec.ExcludedResources, none))
		d.line("%s  Cluster-scoped:\t%s", indent, boolPtrString(spec.IncludeClusterResources, "included", "excluded", "auto"))
	}
}

// usesScopedResourceFilters reports whether the spec uses the newer
// cluster-/namespace-scoped filters, which replace the older ones.
func usesScopedResourceFilters(spec *v1.BackupSpec) bool {
	return len(spec.IncludedClusterScopedResources)+len(spec.ExcludedClusterScopedResources)+
		len(spec.IncludedNamespaceScopedResources)+len(spec.ExcludedNamespaceScopedResources) > 0
}

func formatMap(m map[string]string) string { return joinPairs(m, "=") }

// joinPairs prints m sorted by key, so output does not change from run to
// run.
func joinPairs(m map[string]string, sep string) string {
	if len(m) == 0 {
		return none
	}
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+sep+m[k])
	}
	return strings.Join(parts, ",")
}

func listOr(items []string, empty string) string {
	if len(items) == 0 {
		return empty
	}
	return strings.Join(items, ", ")
}

func valueOr(s, empty string) string {
	if s == "" {
		return empty
	}
	return s
}

func boolPtrString(b *bool, yes, no, unset string) string {
	switch {
	case b == nil:
		return unset
	case *b:
		return yes
	default:
		return no
	}
}

func selectorString(s *metav1.LabelSelector) string {
	if s == nil {
		return none
	}
	return metav1.FormatLabelSelector(s)
}

func orSelectorString(sels []*metav1.LabelSelector) string {
	if len(sels) == 0 {
		return none
	}
	parts := make([]string, 0, len(sels))
	for _, s := range sels {
		parts = append(parts, metav1.FormatLabelSelector(s))
	}
	return strings.Join(parts, " or ")
}

func ttlString(d time.Duration) string {
	if d == 0 {
		return "<server default>"
	}
	return d.String()
}

package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

type restoreCreateOptions struct {
	fromBackup              string
	fromSchedule            string
	includeNamespaces       []string
	excludeNamespaces       []string
	includeResources        []string
	excludeResources        []string
	includeClusterResources optionalBool
	namespaceMappings       []string
	selector                string
	orSelector              string
	restoreVolumes          optionalBool
	preserveNodePorts       optionalBool
	existingResourcePolicy  string
	labels                  map[string]string
	itemOperationTimeout    time.Duration
	annotations             map[string]string
	allowPartiallyFailed    optionalBool
	resourcePolicy          string
	resourceModifier        string
	statusInclude           []string
	statusExclude           []string
	writeSparseFiles        optionalBool
	parallelFilesDownload   int
	wait                    bool
	dryRun                  bool
	output                  string
}

func newRestoreCreateCommand(f *Factory) *cobra.Command {
	o := &restoreCreateOptions{}
	cmd := &cobra.Command{
		Use:   "create [NAME] --from-backup BACKUP | --from-schedule SCHEDULE",
		Short: "Restore a backup into the cluster",
		Long: "Create a Restore for the server to carry out. NAME defaults to the backup's (or schedule's)\n" +
			"name followed by the time, e.g. web-20260301120000.\n\n" +
			"--dry-run creates a Restore with spec.dryRun: the server runs the whole restore (filters,\n" +
			"mappings, restore item actions, order, existing resource policy) and sends every create and\n" +
			"patch as a server-side dry run, so the API server checks each item (schema, admission, quota,\n" +
			"conflicts) and stores nothing. It waits and prints what each item would come to: create,\n" +
			"update, skip (with why) or fail (with the API server's error), and exits non-zero when an item\n" +
			"would fail. Items in a namespace the restore would create cannot be checked (the API server\n" +
			"checks nothing in a namespace that does not exist); they are listed as not checked.",
		Example: `  # Restore a backup and wait for the result
  lifeboat restore create --from-backup web --wait

  # Restore namespace shop of backup web as shop-copy, next to the original
  lifeboat restore create web-copy --from-backup web --include-namespaces shop --namespace-mappings shop:shop-copy

  # Restore the newest completed backup of schedule nightly, updating objects that exist
  lifeboat restore create --from-schedule nightly --existing-resource-policy update

  # See what restoring backup web into namespace shop-copy would do, writing nothing
  lifeboat restore create --from-backup web --namespace-mappings shop:shop-copy --dry-run

  # Show the Restore object without creating it
  lifeboat restore create --from-backup web -o yaml`,
		Args: cobra.MaximumNArgs(1),
		RunE: runE(f, func(cmd *cobra.Command, args []string) error {
			if o.output != "" {
				if err := checkFormat(o.output, formatYAML, formatJSON); err != nil {
					return err
				}
			}
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			rs, err := o.buildRestore(name, f)
			if err != nil {
				return err
			}
			// -o prints instead of creating, as `backup create -o` does, so
			// it needs no cluster.
			if o.output != "" {
				return printEncoded(cmd.OutOrStdout(), o.output, rs)
			}
			return o.run(cmd.Context(), f, cmd.OutOrStdout(), rs)
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&o.fromBackup, "from-backup", "", "backup to restore")
	fl.StringVar(&o.fromSchedule, "from-schedule", "", "schedule whose newest Completed backup to restore")
	fl.StringSliceVar(&o.includeNamespaces, "include-namespaces", nil, "namespaces of the backup to restore, comma-separated (default: all)")
	fl.StringSliceVar(&o.excludeNamespaces, "exclude-namespaces", nil, "namespaces to leave out, comma-separated")
	fl.StringSliceVar(&o.includeResources, "include-resources", nil, "resources to restore, comma-separated, e.g. deployments,configmaps (default: all)")
	fl.StringSliceVar(&o.excludeResources, "exclude-resources", nil, "resources to leave out, comma-separated")
	fl.Var(&o.includeClusterResources, "include-cluster-resources", "restore cluster-scoped resources (unset: only when all namespaces are restored)")
	fl.Lookup("include-cluster-resources").NoOptDefVal = "true"
	fl.StringSliceVar(&o.namespaceMappings, "namespace-mappings", nil, "restore namespaces under other names, as source:target,source:target")
	fl.StringVarP(&o.selector, "selector", "l", "", "only restore resources matching this label selector")
	fl.StringVar(&o.orSelector, "or-selector", "", `restore resources matching any of these selectors, e.g. "app=a or tier=db"`)
	fl.Var(&o.restoreVolumes, "restore-volumes", "restore persistent volumes from their snapshots (unset: the server decides)")
	fl.Lookup("restore-volumes").NoOptDefVal = "true"
	fl.Var(&o.preserveNodePorts, "preserve-nodeports", "keep the node ports of restored services (unset: the server decides)")
	fl.Lookup("preserve-nodeports").NoOptDefVal = "true"
	fl.StringVar(&o.existingResourcePolicy, "existing-resource-policy", "", "what to do with objects that already exist: none (keep them, warn when they differ) or update (patch them)")
	fl.StringToStringVar(&o.labels, "labels", nil, "labels for the restore, as key=value,key=value")
	fl.DurationVar(&o.itemOperationTimeout, "item-operation-timeout", 0, "how long to wait for plugins' asynchronous operations (default: the server's, 4h)")
	fl.StringToStringVar(&o.annotations, "annotations", nil, "annotations for the restore, as key=value,key=value")
	fl.Var(&o.allowPartiallyFailed, "allow-partially-failed", "with --from-schedule: restore the newest Completed or PartiallyFailed backup of the schedule (without it: the newest Completed)")
	fl.Lookup("allow-partially-failed").NoOptDefVal = "true"
	fl.StringVar(&o.resourcePolicy, "resource-policies-configmap", "", "ConfigMap holding the restore's resource policy: Velero's fine-grained filters (namespacedFilterPolicies, clusterScopedFilterPolicy) and nothing else")
	fl.StringVar(&o.resourceModifier, "resource-modifier-configmap", "", "ConfigMap holding resource modifier rules for the restore")
	fl.StringSliceVar(&o.statusInclude, "status-include-resources", nil, "resources whose status is restored too, as resource.group")
	fl.StringSliceVar(&o.statusExclude, "status-exclude-resources", nil, "resources whose status is not restored, as resource.group")
	fl.Var(&o.writeSparseFiles, "write-sparse-files", "write sparse files when restoring volumes from file-system backups")
	fl.Lookup("write-sparse-files").NoOptDefVal = "true"
	fl.IntVar(&o.parallelFilesDownload, "parallel-files-download", 0, "files the node agent restores at once from file-system backups (default: as many as the node has CPUs)")
	fl.BoolVarP(&o.wait, "wait", "w", false, "wait for the restore to finish, showing progress")
	fl.BoolVar(&o.dryRun, "dry-run", false, "run the whole restore with every create and patch sent as a server-side dry run, write nothing, and print what each item would come to (waits for the result)")
	fl.StringVarP(&o.output, "output", "o", "", "print the restore as yaml or json instead of creating it")
	return cmd
}

// buildRestore turns the flags into the Restore to create. It needs no
// cluster, so the mapping from flags to spec can be tested on its own.
func (o *restoreCreateOptions) buildRestore(name string, f *Factory) (*v1.Restore, error) {
	switch {
	case o.fromBackup == "" && o.fromSchedule == "":
		return nil, errors.New("say what to restore with --from-backup BACKUP or --from-schedule SCHEDULE")
	case o.fromBackup != "" && o.fromSchedule != "":
		return nil, errors.New("--from-backup and --from-schedule cannot be used together")
	}
	if o.selector != "" && o.orSelector != "" {
		return nil, errors.New("--selector and --or-selector cannot be used together")
	}
	policy := v1.PolicyType(o.existingResourcePolicy)
	switch policy {
	case "", v1.PolicyTypeNone, v1.PolicyTypeUpdate:
	default:
		return nil, fmt.Errorf("invalid --existing-resource-policy %q: must be %s or %s", o.existingResourcePolicy, v1.PolicyTypeNone, v1.PolicyTypeUpdate)
	}
	mapping, err := parseNamespaceMappings("namespace-mappings", o.namespaceMappings)
	if err != nil {
		return nil, err
	}
	if name == "" {
		// Velero's default name: the source and the second it was asked for.
		infix := "-"
		if o.dryRun {
			infix = "-dry-run-"
		}
		name = cmp.Or(o.fromBackup, o.fromSchedule) + infix + f.now().In(f.location()).Format("20060102150405")
	}
	rs := &v1.Restore{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.Namespace},
		Spec: v1.RestoreSpec{
			BackupName:              o.fromBackup,
			ScheduleName:            o.fromSchedule,
			IncludedNamespaces:      o.includeNamespaces,
			ExcludedNamespaces:      o.excludeNamespaces,
			IncludedResources:       o.includeResources,
			ExcludedResources:       o.excludeResources,
			IncludeClusterResources: o.includeClusterResources.value,
			NamespaceMapping:        mapping,
			RestorePVs:              o.restoreVolumes.value,
			PreserveNodePorts:       o.preserveNodePorts.value,
			ExistingResourcePolicy:  policy,
			ItemOperationTimeout:    metav1.Duration{Duration: o.itemOperationTimeout},
		},
	}
	if o.itemOperationTimeout < 0 {
		return nil, errors.New("invalid --item-operation-timeout: must not be negative")
	}
	if o.parallelFilesDownload < 0 {
		return nil, errors.New("--parallel-files-download must not be negative: give a number of files, or leave it out for as many as the node has CPUs")
	}
	if len(o.annotations) > 0 {
		rs.Annotations = maps.Clone(o.annotations)
	}
	// The same objects Velero's CLI writes for these flags.
	if o.resourcePolicy != "" {
		rs.Spec.ResourcePolicy = &corev1.TypedLocalObjectReference{Kind: "configmap", Name: o.resourcePolicy}
	}
	if o.resourceModifier != "" {
		rs.Spec.ResourceModifier = &corev1.TypedLocalObjectReference{APIGroup: ptr.To(""), Kind: "configmap", Name: o.resourceModifier}
	}
	if len(o.statusInclude) > 0 {
		rs.Spec.RestoreStatus = &v1.RestoreStatusSpec{IncludedResources: o.statusInclude, ExcludedResources: o.statusExclude}
	}
	if o.writeSparseFiles.value != nil || o.parallelFilesDownload > 0 {
		rs.Spec.UploaderConfig = &v1.UploaderConfigForRestore{WriteSparseFiles: o.writeSparseFiles.value, ParallelFilesDownload: o.parallelFilesDownload}
	}
	if o.selector != "" {
		if rs.Spec.LabelSelector, err = parseSelector("selector", o.selector); err != nil {
			return nil, err
		}
	}
	if o.orSelector != "" {
		if rs.Spec.OrLabelSelectors, err = parseOrSelector("or-selector", o.orSelector); err != nil {
			return nil, err
		}
	}
	if len(o.labels) > 0 {
		rs.Labels = maps.Clone(o.labels)
	}
	rs.Spec.DryRun = o.dryRun
	return rs, nil
}

// parseNamespaceMappings parses "source:target" entries. Both sides must be
// namespace names, a source may map to one target only (the server would
// have to guess which one was meant) and a target may receive one source
// only (the server refuses to merge namespaces).
func parseNamespaceMappings(flag string, entries []string) (map[string]string, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	mapping := make(map[string]string, len(entries))
	sources := make(map[string]string, len(entries))
	for _, entry := range entries {
		src, dst, ok := strings.Cut(strings.TrimSpace(entry), ":")
		if !ok || src == "" || dst == "" || strings.Contains(dst, ":") {
			return nil, fmt.Errorf("invalid --%s entry %q: want source:target, e.g. shop:shop-copy", flag, entry)
		}
		for _, ns := range []string{src, dst} {
			if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
				return nil, fmt.Errorf("invalid --%s entry %q: %q is not a valid namespace name: %s", flag, entry, ns, strings.Join(errs, "; "))
			}
		}
		if prev, dup := mapping[src]; dup && prev != dst {
			return nil, fmt.Errorf("invalid --%s: namespace %q is mapped to both %q and %q", flag, src, prev, dst)
		}
		if prev, dup := sources[dst]; dup && prev != src {
			return nil, fmt.Errorf("invalid --%s: namespaces %q and %q are both mapped to %q; map each to its own namespace", flag, prev, src, dst)
		}
		mapping[src] = dst
		sources[dst] = src
	}
	return mapping, nil
}

func (o *restoreCreateOptions) run(ctx context.Context, f *Factory, out io.Writer, rs *v1.Restore) error {
	c, err := f.Client()
	if err != nil {
		return err
	}
	if o.allowPartiallyFailed.value != nil && *o.allowPartiallyFailed.value && rs.Spec.ScheduleName != "" {
		// As Velero's CLI does: the server takes only Completed backups of a
		// schedule, so the choice is made here and the backup named.
		if err := pickScheduleBackup(ctx, c, rs); err != nil {
			return err
		}
	}
	if err := checkRestoreSource(ctx, c, rs); err != nil {
		return err
	}
	if rs.Spec.DryRun {
		if err := checkDryRunKept(ctx, c, rs); err != nil {
			return err
		}
	}
	callCtx, cancel := callCtx(ctx)
	err = c.Create(callCtx, rs)
	cancel()
	if apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("restore %q already exists in namespace %q; pick another name", rs.Name, rs.Namespace)
	}
	if err != nil {
		return fmt.Errorf("creating restore %q: %w", rs.Name, err)
	}
	fmt.Fprintf(out, "Restore request %q submitted successfully.\n", rs.Name)
	if !o.wait && !rs.Spec.DryRun {
		fmt.Fprintf(out, "Run `lifeboat restore describe %s` or `lifeboat restore logs %s` for more details.\n", rs.Name, rs.Name)
		return nil
	}
	final, err := waitUntilDone(ctx, f, c, out, "restore", client.ObjectKeyFromObject(rs),
		func() *v1.Restore { return &v1.Restore{} },
		func(r *v1.Restore) (string, string, bool) {
			phase := restorePhaseOf(r)
			return string(phase), restoreProgressLine(r), restoreDone(phase)
		})
	if err != nil {
		return err
	}
	if final.Spec.DryRun {
		return reportDryRun(out, final)
	}
	return reportRestoreOutcome(out, final)
}

// checkDryRunKept asks the API server, with a dry-run create of the
// Restore itself, whether the installed Restore CRD keeps spec.dryRun.
// Velero's CRD has no such field and prunes it: the server would then
// restore for real what was asked as a dry run.
func checkDryRunKept(ctx context.Context, c client.Client, rs *v1.Restore) error {
	probe := rs.DeepCopy()
	callCtx, cancel := callCtx(ctx)
	defer cancel()
	if err := c.Create(callCtx, probe, client.DryRunAll); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("restore %q already exists in namespace %q; pick another name", rs.Name, rs.Namespace)
		}
		return fmt.Errorf("checking that the cluster's Restore CRD takes a dry run: %w", err)
	}
	if !probe.Spec.DryRun {
		return errors.New("the Restore CRD installed in this cluster drops spec.dryRun (it is Velero's, not Lifeboat's), " +
			"so the restore would run for real; nothing was created. Run `lifeboat install --crds-only` to install Lifeboat's CRDs")
	}
	return nil
}

// reportDryRun prints a dry run's result and fails when an item would.
func reportDryRun(out io.Writer, rs *v1.Restore) error {
	switch restorePhaseOf(rs) {
	case v1.RestorePhaseFailed, v1.RestorePhaseFailedValidation:
		return reportRestoreOutcome(out, rs)
	}
	d := newDescriber(out)
	d.line("Restore %s (dry run, nothing was written):", rs.Name)
	describeRestoreDryRun(d, rs.Status.DryRun)
	if err := d.tw.Flush(); err != nil {
		return err
	}
	dr := rs.Status.DryRun
	if dr == nil {
		return fmt.Errorf("dry run %q ended without a result (see `lifeboat restore logs %s`)", rs.Name, rs.Name)
	}
	if dr.WouldFail > 0 {
		return fmt.Errorf("dry run %q: items that would fail to restore: %d (see above, and `lifeboat restore describe %s --details`)", rs.Name, dr.WouldFail, rs.Name)
	}
	return nil
}

// pickScheduleBackup points rs at the newest (by start time) Completed or
// PartiallyFailed backup of its schedule; with none, rs is left for the
// server to judge.
func pickScheduleBackup(ctx context.Context, c client.Client, rs *v1.Restore) error {
	list := &v1.BackupList{}
	callCtx, cancel := callCtx(ctx)
	defer cancel()
	if err := c.List(callCtx, list, client.InNamespace(rs.Namespace), client.MatchingLabels{v1.ScheduleNameLabel: v1.LabelValue(rs.Spec.ScheduleName)}); err != nil {
		return fmt.Errorf("listing the backups of schedule %q: %w", rs.Spec.ScheduleName, err)
	}
	var best *v1.Backup
	for i := range list.Items {
		b := &list.Items[i]
		if b.Status.Phase != v1.BackupPhaseCompleted && b.Status.Phase != v1.BackupPhasePartiallyFailed {
			continue
		}
		if best == nil || startOf(b).After(startOf(best)) {
			best = b
		}
	}
	if best != nil {
		rs.Spec.BackupName, rs.Spec.ScheduleName = best.Name, ""
	}
	return nil
}

func startOf(b *v1.Backup) time.Time {
	if b.Status.StartTimestamp == nil {
		return time.Time{}
	}
	return b.Status.StartTimestamp.Time
}

// checkRestoreSource fails early, with the fix, on what the server would
// otherwise only report as a FailedValidation restore: a misspelt backup,
// a backup that cannot be restored yet, a schedule with nothing to restore.
func checkRestoreSource(ctx context.Context, c client.Client, rs *v1.Restore) error {
	if name := rs.Spec.BackupName; name != "" {
		b, err := backupKind.get(ctx, c, rs.Namespace, name)
		var nf *notFoundError
		if errors.As(err, &nf) {
			return fmt.Errorf("%w; `lifeboat backup get` lists the backups there", err)
		}
		if err != nil {
			return err
		}
		return checkRestorable(b)
	}
	schedule := rs.Spec.ScheduleName
	// A name too long for a label value was shortened on its backups in a
	// way only the server reproduces; leave the check to the server.
	if len(validation.IsValidLabelValue(schedule)) > 0 {
		return nil
	}
	list := &v1.BackupList{}
	callCtx, cancel := callCtx(ctx)
	defer cancel()
	if err := c.List(callCtx, list, client.InNamespace(rs.Namespace), client.MatchingLabels{v1.ScheduleNameLabel: v1.LabelValue(schedule)}); err != nil {
		return fmt.Errorf("listing the backups of schedule %q: %w", schedule, err)
	}
	for _, b := range list.Items {
		if b.Status.Phase == v1.BackupPhaseCompleted && b.DeletionTimestamp == nil {
			return nil
		}
	}
	return fmt.Errorf("schedule %q has no Completed backup in namespace %q (none labelled %s=%s); `lifeboat backup get` lists the backups there",
		schedule, rs.Namespace, v1.ScheduleNameLabel, v1.LabelValue(schedule))
}

// checkRestorable applies the server's rule: only a backup that ran to the
// end holds everything its restore needs.
func checkRestorable(b *v1.Backup) error {
	phase := displayPhase(b)
	switch v1.BackupPhase(phase) {
	case v1.BackupPhaseCompleted, v1.BackupPhasePartiallyFailed:
		return nil
	case v1.BackupPhaseNew, v1.BackupPhaseInProgress, v1.BackupPhaseFinalizing, v1.BackupPhaseFinalizingPartiallyFailed,
		v1.BackupPhaseWaitingForPluginOperations, v1.BackupPhaseWaitingForPluginOperationsPartiallyFailed:
		return fmt.Errorf("backup %q is still running (phase %s); wait for it with `lifeboat backup describe %s`, then restore it",
			b.Name, phase, b.Name)
	default:
		return fmt.Errorf("backup %q is in phase %s; only Completed or PartiallyFailed backups can be restored (see `lifeboat backup describe %s`)",
			b.Name, phase, b.Name)
	}
}

func restorePhaseOf(rs *v1.Restore) v1.RestorePhase {
	if rs.Status.Phase == "" {
		return v1.RestorePhaseNew
	}
	return rs.Status.Phase
}

// restoreDone reports whether the server is finished with a restore.
func restoreDone(phase v1.RestorePhase) bool {
	switch phase {
	case v1.RestorePhaseCompleted, v1.RestorePhasePartiallyFailed, v1.RestorePhaseFailed, v1.RestorePhaseFailedValidation:
		return true
	}
	return false
}

func restoreProgressLine(rs *v1.Restore) string {
	line := "Restore " + rs.Name + ": " + string(restorePhaseOf(rs))
	if p := rs.Status.Progress; p != nil {
		line += fmt.Sprintf(", items restored %d/%d", p.ItemsRestored, p.TotalItems)
	}
	return line
}

// reportRestoreOutcome prints how the restore ended and returns an error
// for anything but a clean completion, so scripts can rely on the exit
// code; each error says where to look next.
func reportRestoreOutcome(out io.Writer, rs *v1.Restore) error {
	items := 0
	if rs.Status.Progress != nil {
		items = rs.Status.Progress.ItemsRestored
	}
	n := rs.Name
	switch phase := restorePhaseOf(rs); phase {
	case v1.RestorePhaseCompleted:
		fmt.Fprintf(out, "Restore %s completed: %d items restored, %d warnings, %d errors.\n", n, items, rs.Status.Warnings, rs.Status.Errors)
		if rs.Status.Warnings > 0 {
			fmt.Fprintf(out, "Run `lifeboat restore describe %s --details` to see the warnings.\n", n)
		}
		return nil
	case v1.RestorePhaseFailedValidation:
		return fmt.Errorf("restore %q failed validation:\n  %s\n(see `lifeboat restore describe %s`)",
			n, strings.Join(rs.Status.ValidationErrors, "\n  "), n)
	case v1.RestorePhaseFailed:
		reason := rs.Status.FailureReason
		if reason == "" {
			reason = "no reason recorded"
		}
		return fmt.Errorf("restore %q failed: %s (see `lifeboat restore logs %s` and `lifeboat restore describe %s`)", n, reason, n, n)
	case v1.RestorePhasePartiallyFailed:
		return fmt.Errorf("restore %q partially failed: %d errors, %d warnings, %d items restored (see `lifeboat restore describe %s --details` and `lifeboat restore logs %s`)",
			n, rs.Status.Errors, rs.Status.Warnings, items, n, n)
	default:
		return fmt.Errorf("restore %q ended in phase %s", n, phase)
	}
}

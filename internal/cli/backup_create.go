package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// backupSpecFlags are the flags that shape a backup's spec. `backup create`
// and `schedule create` share them, so a schedule's template means exactly
// what the same flags mean for a single backup.
type backupSpecFlags struct {
	includeNamespaces       []string
	excludeNamespaces       []string
	includeResources        []string
	excludeResources        []string
	includeClusterResources optionalBool
	selector                string
	orSelector              string
	ttl                     time.Duration
	storageLocation         string
	snapshotVolumes         optionalBool
	defaultVolumesToFS      optionalBool
	snapshotLocations       []string
	resourcePolicy          string
	labels                  map[string]string
	// Velero's newer filters, which name the scope of each resource.
	includeClusterScoped   []string
	excludeClusterScoped   []string
	includeNamespaceScoped []string
	excludeNamespaceScoped []string
	csiSnapshotTimeout     time.Duration
	itemOperationTimeout   time.Duration
	// Velero's flags for fields the server refuses with the reason
	// (FailedValidation), kept so that a Velero command line means the
	// same request and is refused for what it asks, not for its spelling.
	annotations         map[string]string
	orderedResources    string
	snapshotMoveData    optionalBool
	dataMover           string
	parallelFilesUpload int
}

type createOptions struct {
	backupSpecFlags
	fromSchedule string
	wait         bool
	output       string
}

func newBackupCreateCommand(f *Factory) *cobra.Command {
	o := &createOptions{}
	cmd := &cobra.Command{
		Use:   "create NAME | --from-schedule SCHEDULE [NAME]",
		Short: "Create a backup",
		Long: "Create a Backup for the server to carry out. With --from-schedule the backup is made from the\n" +
			"schedule's template, labels and owner, as the schedule itself would make it, and NAME defaults to\n" +
			"SCHEDULE-YYYYMMDDhhmmss; the other filter flags are then ignored, as in Velero.",
		Example: `  # Back up two namespaces and wait for the result
  lifeboat backup create web --include-namespaces shop,blog --wait

  # Back up everything labelled app=db, kept for a week
  lifeboat backup create db --selector app=db --ttl 168h

  # Back up now what schedule nightly backs up
  lifeboat backup create --from-schedule nightly --wait

  # Show the Backup object without creating it
  lifeboat backup create web --include-namespaces shop -o yaml`,
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
			var (
				backup *v1.Backup
				err    error
			)
			if cmd.Flags().Changed("from-schedule") {
				backup, err = o.backupFromSchedule(cmd.Context(), f, name)
			} else if name == "" {
				err = errors.New("name the backup: `lifeboat backup create NAME`, or make it from a schedule with --from-schedule SCHEDULE")
			} else {
				backup, err = o.buildBackup(name, f.Namespace, cmd.Flags().Changed("ttl"))
			}
			if err != nil {
				return err
			}
			// -o prints instead of creating, as Velero's create commands do.
			if o.output != "" {
				return printEncoded(cmd.OutOrStdout(), o.output, backup)
			}
			return o.run(cmd.Context(), f, cmd.OutOrStdout(), backup)
		}),
	}
	fl := cmd.Flags()
	o.bind(fl, "the backup")
	fl.StringVar(&o.fromSchedule, "from-schedule", "", "make the backup from this schedule's template (the filter flags are then ignored); NAME is optional")
	fl.BoolVarP(&o.wait, "wait", "w", false, "wait for the backup to finish, showing progress")
	fl.StringVarP(&o.output, "output", "o", "", "print the backup as yaml or json instead of creating it")
	return cmd
}

// bind registers the flags on fl; target ("the backup", "each backup")
// says in the help what they apply to.
func (o *backupSpecFlags) bind(fl *pflag.FlagSet, target string) {
	fl.StringSliceVar(&o.includeNamespaces, "include-namespaces", nil, "namespaces to back up, comma-separated (default: all)")
	fl.StringSliceVar(&o.excludeNamespaces, "exclude-namespaces", nil, "namespaces to leave out, comma-separated")
	fl.StringSliceVar(&o.includeResources, "include-resources", nil, "resources to back up, comma-separated, e.g. deployments,configmaps (default: all)")
	fl.StringSliceVar(&o.excludeResources, "exclude-resources", nil, "resources to leave out, comma-separated")
	fl.Var(&o.includeClusterResources, "include-cluster-resources", "back up cluster-scoped resources (unset: only when all namespaces are backed up)")
	fl.Lookup("include-cluster-resources").NoOptDefVal = "true"
	fl.StringVarP(&o.selector, "selector", "l", "", "only back up resources matching this label selector")
	fl.StringVar(&o.orSelector, "or-selector", "", `back up resources matching any of these selectors, e.g. "app=a or tier=db"`)
	fl.DurationVar(&o.ttl, "ttl", 0, "how long to keep "+target+" (default: the server's default, 720h)")
	fl.StringVar(&o.storageLocation, "storage-location", "", "backup storage location to write to (default: the default location)")
	fl.Var(&o.snapshotVolumes, "snapshot-volumes", "take native snapshots of persistent volumes (unset: the server decides)")
	fl.Lookup("snapshot-volumes").NoOptDefVal = "true"
	fl.StringSliceVar(&o.snapshotLocations, "volume-snapshot-locations", nil, "VolumeSnapshotLocations to take native snapshots in, comma-separated, at most one per provider (default: the only location of each provider)")
	fl.StringVar(&o.resourcePolicy, "resource-policies-configmap", "", "ConfigMap (in the server's namespace) holding the resource policy: each volume's action, include/exclude and fine-grained filters")
	fl.Var(&o.defaultVolumesToFS, "default-volumes-to-fs-backup", "choose fs-backup for every pod volume not opted out: the node agent copies its files (needs `lifeboat install --use-node-agent`, see docs/fs-backup.md)")
	fl.Lookup("default-volumes-to-fs-backup").NoOptDefVal = "true"
	fl.StringToStringVar(&o.labels, "labels", nil, "labels for "+target+", as key=value,key=value")
	scoped := " (cannot be combined with --include-resources, --exclude-resources or --include-cluster-resources)"
	fl.StringSliceVar(&o.includeClusterScoped, "include-cluster-scoped-resources", nil,
		"cluster-scoped resources to back up, as resource.group, e.g. storageclasses.storage.k8s.io; '*' for all"+scoped)
	fl.StringSliceVar(&o.excludeClusterScoped, "exclude-cluster-scoped-resources", nil,
		"cluster-scoped resources to leave out, as resource.group; '*' for all"+scoped)
	fl.StringSliceVar(&o.includeNamespaceScoped, "include-namespace-scoped-resources", nil,
		"namespaced resources to back up, as resource.group, e.g. deployments.apps; '*' for all"+scoped)
	fl.StringSliceVar(&o.excludeNamespaceScoped, "exclude-namespace-scoped-resources", nil,
		"namespaced resources to leave out, as resource.group; '*' for all"+scoped)
	fl.DurationVar(&o.csiSnapshotTimeout, "csi-snapshot-timeout", 0, "how long to wait for each CSI VolumeSnapshot to become ready (default: the server's, 10m)")
	fl.DurationVar(&o.itemOperationTimeout, "item-operation-timeout", 0, "how long to wait for plugins' asynchronous operations (default: the server's, 4h)")
	fl.StringToStringVar(&o.annotations, "annotations", nil, "annotations for "+target+", as key=value,key=value")
	fl.StringVar(&o.orderedResources, "ordered-resources", "",
		"order of named objects per resource, e.g. 'pods=ns1/pod1,ns1/pod2;persistentvolumeclaims=ns1/pvc4' (refused by the server: not implemented)")
	fl.Var(&o.snapshotMoveData, "snapshot-move-data", "move snapshot data to the storage location (refused by the server: Lifeboat has no data mover)")
	fl.Lookup("snapshot-move-data").NoOptDefVal = "true"
	fl.StringVar(&o.dataMover, "data-mover", "", "data mover for --snapshot-move-data (refused by the server: Lifeboat has no data mover)")
	fl.IntVar(&o.parallelFilesUpload, "parallel-files-upload", 0, "files the node agent reads at once when it backs up pod volumes (default: as many as the node has CPUs)")
}

// parseOrderedResources reads Velero's --ordered-resources syntax:
// RESOURCE=ns/name,ns/name;RESOURCE=name.
func parseOrderedResources(s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	out := map[string]string{}
	for entry := range strings.SplitSeq(s, ";") {
		kind, order, ok := strings.Cut(entry, "=")
		if !ok || strings.Contains(order, "=") || strings.TrimSpace(kind) == "" {
			return nil, fmt.Errorf("invalid --ordered-resources entry %q: want RESOURCE=ns/name,ns/name, entries separated by ';'", entry)
		}
		out[strings.TrimSpace(kind)] = strings.TrimSpace(order)
	}
	return out, nil
}

// spec turns the flags into a BackupSpec; ttlSet tells an explicit
// --ttl 0 from no --ttl. It is pure so the mapping can be tested without a
// cluster.
func (o *backupSpecFlags) spec(ttlSet bool) (v1.BackupSpec, error) {
	if ttlSet && o.ttl < 0 {
		return v1.BackupSpec{}, fmt.Errorf("invalid --ttl %s: must not be negative", o.ttl)
	}
	if o.selector != "" && o.orSelector != "" {
		return v1.BackupSpec{}, errors.New("--selector and --or-selector cannot be used together")
	}
	oldFilters := len(o.includeResources) > 0 || len(o.excludeResources) > 0 || o.includeClusterResources.value != nil
	newFilters := len(o.includeClusterScoped) > 0 || len(o.excludeClusterScoped) > 0 || len(o.includeNamespaceScoped) > 0 || len(o.excludeNamespaceScoped) > 0
	if oldFilters && newFilters {
		return v1.BackupSpec{}, errors.New("--include-resources, --exclude-resources and --include-cluster-resources cannot be combined with " +
			"--include/exclude-cluster-scoped-resources and --include/exclude-namespace-scoped-resources: use one kind of filter or the other")
	}
	if o.csiSnapshotTimeout < 0 || o.itemOperationTimeout < 0 {
		return v1.BackupSpec{}, errors.New("--csi-snapshot-timeout and --item-operation-timeout must not be negative")
	}
	if o.parallelFilesUpload < 0 {
		return v1.BackupSpec{}, errors.New("--parallel-files-upload must not be negative: give a number of files, or leave it out for as many as the node has CPUs")
	}
	ordered, err := parseOrderedResources(o.orderedResources)
	if err != nil {
		return v1.BackupSpec{}, err
	}
	spec := v1.BackupSpec{
		IncludedClusterScopedResources:   o.includeClusterScoped,
		ExcludedClusterScopedResources:   o.excludeClusterScoped,
		IncludedNamespaceScopedResources: o.includeNamespaceScoped,
		ExcludedNamespaceScopedResources: o.excludeNamespaceScoped,
		CSISnapshotTimeout:               metav1.Duration{Duration: o.csiSnapshotTimeout},
		ItemOperationTimeout:             metav1.Duration{Duration: o.itemOperationTimeout},
		OrderedResources:                 ordered,
		SnapshotMoveData:                 o.snapshotMoveData.value,
		DataMover:                        o.dataMover,
		IncludedNamespaces:               o.includeNamespaces,
		ExcludedNamespaces:               o.excludeNamespaces,
		IncludedResources:                o.includeResources,
		ExcludedResources:                o.excludeResources,
		IncludeClusterResources:          o.includeClusterResources.value,
		SnapshotVolumes:                  o.snapshotVolumes.value,
		DefaultVolumesToFsBackup:         o.defaultVolumesToFS.value,
		VolumeSnapshotLocations:          o.snapshotLocations,
		StorageLocation:                  o.storageLocation,
	}
	if o.parallelFilesUpload > 0 {
		spec.UploaderConfig = &v1.UploaderConfigForBackup{ParallelFilesUpload: o.parallelFilesUpload}
	}
	if o.resourcePolicy != "" {
		spec.ResourcePolicy = &corev1.TypedLocalObjectReference{Kind: "configmap", Name: o.resourcePolicy}
	}
	if ttlSet {
		spec.TTL = metav1.Duration{Duration: o.ttl}
	}
	if o.selector != "" {
		sel, err := parseSelector("selector", o.selector)
		if err != nil {
			return v1.BackupSpec{}, err
		}
		spec.LabelSelector = sel
	}
	if o.orSelector != "" {
		sels, err := parseOrSelector("or-selector", o.orSelector)
		if err != nil {
			return v1.BackupSpec{}, err
		}
		spec.OrLabelSelectors = sels
	}
	return spec, nil
}

// objectLabels are the --labels, or nil when none were given.
func (o *backupSpecFlags) objectLabels() map[string]string {
	if len(o.labels) == 0 {
		return nil
	}
	return maps.Clone(o.labels)
}

// buildBackup turns the flags into the Backup to create.
func (o *createOptions) buildBackup(name, namespace string, ttlSet bool) (*v1.Backup, error) {
	spec, err := o.spec(ttlSet)
	if err != nil {
		return nil, err
	}
	b := &v1.Backup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: o.objectLabels(), Annotations: nilIfEmpty(o.annotations)},
		Spec:       spec,
	}
	if o.storageLocation != "" {
		// Velero's tools select backups by location through this label.
		if b.Labels == nil {
			b.Labels = map[string]string{}
		}
		b.Labels[v1.StorageLocationLabel] = v1.LabelValue(o.storageLocation)
	}
	return b, nil
}

// backupFromSchedule makes the Backup the schedule would make: its
// template, the template's labels (or else the schedule's), the schedule's
// name label and annotations, and the schedule as owner when it owns its
// backups. --labels are added on top.
func (o *createOptions) backupFromSchedule(ctx context.Context, f *Factory, name string) (*v1.Backup, error) {
	if strings.TrimSpace(o.fromSchedule) == "" {
		return nil, errors.New("--from-schedule needs a schedule name")
	}
	c, err := f.Client()
	if err != nil {
		return nil, err
	}
	s, err := scheduleKind.get(ctx, c, f.Namespace, strings.TrimSpace(o.fromSchedule))
	if err != nil {
		return nil, err
	}
	if name == "" {
		name = s.Name + "-" + f.now().UTC().Format("20060102150405")
	}
	labels := maps.Clone(s.Spec.Template.Metadata.Labels)
	if labels == nil {
		labels = maps.Clone(s.Labels)
	}
	if labels == nil {
		labels = map[string]string{}
	}
	labels[v1.ScheduleNameLabel] = v1.LabelValue(s.Name)
	maps.Copy(labels, o.labels)
	annotations := maps.Clone(s.Annotations)
	if len(o.annotations) > 0 {
		if annotations == nil {
			annotations = map[string]string{}
		}
		maps.Copy(annotations, o.annotations)
	}
	if s.Annotations[v1.VerifyBackupsAnnotation] == "true" {
		// As the schedule's own backups are verified once they end.
		annotations[v1.VerifyRequestAnnotation] = "schedule"
	}
	b := &v1.Backup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.Namespace, Labels: labels, Annotations: annotations},
		Spec:       *s.Spec.Template.DeepCopy(),
	}
	if s.Spec.UseOwnerReferencesInBackup != nil && *s.Spec.UseOwnerReferencesInBackup {
		b.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: v1.SchemeGroupVersion.String(), Kind: "Schedule", Name: s.Name, UID: s.UID, Controller: ptr.To(true),
		}}
	}
	if loc := b.Spec.StorageLocation; loc != "" {
		b.Labels[v1.StorageLocationLabel] = v1.LabelValue(loc)
	}
	return b, nil
}

func (o *createOptions) run(ctx context.Context, f *Factory, out io.Writer, backup *v1.Backup) error {
	if o.fromSchedule != "" {
		fmt.Fprintf(out, "Creating backup from schedule %s, all other filters are ignored.\n", o.fromSchedule)
	}
	c, err := f.Client()
	if err != nil {
		return err
	}
	if backup.Spec.StorageLocation != "" {
		if err := checkLocation(ctx, c, backup.Namespace, backup.Spec.StorageLocation); err != nil {
			return err
		}
	}
	callCtx, cancel := callCtx(ctx)
	err = c.Create(callCtx, backup)
	cancel()
	if apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("backup %q already exists in namespace %q; pick another name", backup.Name, backup.Namespace)
	}
	if err != nil {
		return fmt.Errorf("creating backup %q: %w", backup.Name, err)
	}
	fmt.Fprintf(out, "Backup request %q submitted successfully.\n", backup.Name)
	if !o.wait {
		fmt.Fprintf(out, "Run `lifeboat backup describe %s` or `lifeboat backup logs %s` for more details.\n", backup.Name, backup.Name)
		return nil
	}
	return waitForBackup(ctx, f, c, out, backup.Namespace, backup.Name)
}

// checkLocation fails early on a misspelt --storage-location, listing the
// locations that do exist; otherwise the mistake only shows as a
// FailedValidation backup later.
func checkLocation(ctx context.Context, c client.Client, namespace, name string) error {
	callCtx, cancel := callCtx(ctx)
	defer cancel()
	err := c.Get(callCtx, client.ObjectKey{Namespace: namespace, Name: name}, &v1.BackupStorageLocation{})
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) || isCRDMissing(err) {
		return fmt.Errorf("reading backup storage location %q: %w", name, err)
	}
	list := &v1.BackupStorageLocationList{}
	if err := c.List(callCtx, list, client.InNamespace(namespace)); err != nil {
		return fmt.Errorf("backup storage location %q not found in namespace %q (listing the others failed: %w)", name, namespace, err)
	}
	names := make([]string, 0, len(list.Items))
	for _, l := range list.Items {
		names = append(names, l.Name)
	}
	slices.Sort(names)
	if len(names) == 0 {
		return fmt.Errorf("backup storage location %q not found in namespace %q, which has none; create one with `lifeboat install --provider ...` or `--use-filesystem DIR`", name, namespace)
	}
	return fmt.Errorf("backup storage location %q not found in namespace %q; existing locations: %s", name, namespace, strings.Join(names, ", "))
}

// waitForBackup polls until the backup reaches a final phase and reports
// how it ended.
func waitForBackup(ctx context.Context, f *Factory, c client.Client, out io.Writer, namespace, name string) error {
	backup, err := waitUntilDone(ctx, f, c, out, "backup", client.ObjectKey{Namespace: namespace, Name: name},
		func() *v1.Backup { return &v1.Backup{} },
		func(b *v1.Backup) (string, string, bool) {
			phase := phaseOf(b)
			return string(phase), progressLine(b), phase.IsTerminal() || phase == v1.BackupPhaseDeleting
		})
	if err != nil {
		return err
	}
	return reportOutcome(out, backup)
}

// waitUntilDone polls a backup or restore (kind names it in messages) until
// state says it is done, and returns the last object read. On a terminal it
// keeps one progress line up to date; otherwise (CI logs, pipes) it prints
// a line per phase change so logs stay readable.
func waitUntilDone[T client.Object](ctx context.Context, f *Factory, c client.Client, out io.Writer, kind string,
	key client.ObjectKey, newObj func() T, state func(T) (phase, line string, done bool)) (T, error) {
	tty := f.isTerminal(out)
	title := strings.ToUpper(kind[:1]) + kind[1:]
	var lastPhase, lastLine string
	if !tty {
		fmt.Fprintf(out, "Waiting for the %s to finish...\n", kind)
	}
	for {
		// A fresh object per read: decoding into the previous one could keep
		// fields the server has since cleared.
		cur := newObj()
		callCtx, cancel := callCtx(ctx)
		err := c.Get(callCtx, key, cur)
		cancel()
		if apierrors.IsNotFound(err) && !isCRDMissing(err) {
			return cur, fmt.Errorf("%s %q was deleted while waiting for it", kind, key.Name)
		}
		if err != nil {
			return cur, fmt.Errorf("reading %s %q: %w", kind, key.Name, err)
		}
		phase, line, done := state(cur)
		if tty {
			if line != lastLine {
				// \r and erase-line rewrite the line in place.
				fmt.Fprintf(out, "\r\033[K%s", line)
				lastLine = line
			}
		} else if phase != lastPhase {
			fmt.Fprintf(out, "%s %s: %s\n", title, key.Name, phase)
		}
		lastPhase = phase
		if done {
			if tty {
				fmt.Fprintln(out)
			}
			return cur, nil
		}
		if err := sleep(ctx, f.pollInterval()); err != nil {
			if tty {
				fmt.Fprintln(out)
			}
			return cur, fmt.Errorf("stopped waiting for %s %q, which goes on in the server; follow it with `lifeboat %s describe %s`: %w",
				kind, key.Name, kind, key.Name, err)
		}
	}
}

func phaseOf(b *v1.Backup) v1.BackupPhase {
	if b.Status.Phase == "" {
		return v1.BackupPhaseNew
	}
	return b.Status.Phase
}

func progressLine(b *v1.Backup) string {
	line := "Backup " + b.Name + ": " + string(phaseOf(b))
	if p := b.Status.Progress; p != nil {
		line += fmt.Sprintf(", items %d/%d", p.ItemsBackedUp, p.TotalItems)
	}
	return line
}

// reportOutcome prints the final state and returns an error for anything
// but a clean completion, so scripts can rely on the exit code.
func reportOutcome(out io.Writer, b *v1.Backup) error {
	phase := phaseOf(b)
	items := 0
	if b.Status.Progress != nil {
		items = b.Status.Progress.ItemsBackedUp
	}
	switch phase {
	case v1.BackupPhaseCompleted:
		fmt.Fprintf(out, "Backup %s completed: %d items, %d warnings, %d errors.\n", b.Name, items, b.Status.Warnings, b.Status.Errors)
		return nil
	case v1.BackupPhaseFailedValidation:
		return fmt.Errorf("backup %q failed validation:\n  %s", b.Name, strings.Join(b.Status.ValidationErrors, "\n  "))
	case v1.BackupPhaseFailed:
		reason := b.Status.FailureReason
		if reason == "" {
			reason = "no reason recorded"
		}
		return fmt.Errorf("backup %q failed: %s (see `lifeboat backup logs %s`)", b.Name, reason, b.Name)
	case v1.BackupPhasePartiallyFailed:
		return fmt.Errorf("backup %q partially failed: %d errors, %d warnings, %d items backed up (see `lifeboat backup logs %s`)",
			b.Name, b.Status.Errors, b.Status.Warnings, items, b.Name)
	default:
		return fmt.Errorf("backup %q ended in phase %s", b.Name, phase)
	}
}

// isTerminal reports whether w is an interactive terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

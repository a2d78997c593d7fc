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
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

var backupLocationKind = kindSpec[v1.BackupStorageLocation, *v1.BackupStorageLocation, *v1.BackupStorageLocationList]{
	word:       "backup storage location",
	newList:    func() *v1.BackupStorageLocationList { return &v1.BackupStorageLocationList{} },
	items:      func(l *v1.BackupStorageLocationList) *[]v1.BackupStorageLocation { return &l.Items },
	printTable: (*Factory).printBackupLocationTable,
	getFlags: func(fl *pflag.FlagSet) func([]v1.BackupStorageLocation) []v1.BackupStorageLocation {
		onlyDefault := fl.Bool("default", false, "list only the default backup storage location")
		return func(items []v1.BackupStorageLocation) []v1.BackupStorageLocation {
			if !*onlyDefault {
				return items
			}
			return slices.DeleteFunc(items, func(l v1.BackupStorageLocation) bool { return !l.Spec.Default })
		}
	},
}

var snapshotLocationKind = kindSpec[v1.VolumeSnapshotLocation, *v1.VolumeSnapshotLocation, *v1.VolumeSnapshotLocationList]{
	word:       "volume snapshot location",
	newList:    func() *v1.VolumeSnapshotLocationList { return &v1.VolumeSnapshotLocationList{} },
	items:      func(l *v1.VolumeSnapshotLocationList) *[]v1.VolumeSnapshotLocation { return &l.Items },
	printTable: (*Factory).printSnapshotLocationTable,
}

// Velero's columns, in Velero's order.
func (f *Factory) printBackupLocationTable(w io.Writer, locs []v1.BackupStorageLocation) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "NAME\tPROVIDER\tBUCKET/PREFIX\tPHASE\tLAST VALIDATED\tACCESS MODE\tDEFAULT")
	for i := range locs {
		l := &locs[i]
		where := ""
		if st := l.Spec.ObjectStorage; st != nil {
			where = st.Bucket
			if st.Prefix != "" {
				where += "/" + st.Prefix
			}
		}
		def := ""
		if l.Spec.Default {
			def = "true"
		}
		validated := "Unknown"
		if l.Status.LastValidationTime != nil {
			validated = f.formatTime(l.Status.LastValidationTime)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", l.Name, l.Spec.Provider, where,
			valueOr(string(l.Status.Phase), "Unknown"), validated,
			valueOr(string(l.Spec.AccessMode), string(v1.BackupStorageLocationAccessModeReadWrite)), def)
	}
	return tw.Flush()
}

func (f *Factory) printSnapshotLocationTable(w io.Writer, locs []v1.VolumeSnapshotLocation) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "NAME\tPROVIDER")
	for i := range locs {
		fmt.Fprintf(tw, "%s\t%s\n", locs[i].Name, locs[i].Spec.Provider)
	}
	return tw.Flush()
}

func newBackupLocationCommand(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "backup-location",
		Short: "Work with backup storage locations",
	}
	cmd.AddCommand(
		newBackupLocationCreateCommand(f),
		newGetCommand(f, backupLocationKind),
		newBackupLocationSetCommand(f),
		newObjectDeleteCommand(f, backupLocationKind, "Delete backup storage locations",
			"Delete removes the BackupStorageLocation objects and, as Velero does, the Backup (and Velero's\n"+
				"BackupRepository) objects of each location, those labelled velero.io/storage-location=NAME.\n"+
				"Only the objects go: the backups' files stay in the bucket, and creating the location again\n"+
				"brings the backups back.",
			"  lifeboat backup-location delete old-bucket --confirm\n"+
				"  lifeboat backup-location delete --selector team=shop --confirm",
			deleteBackupsOfLocation),
	)
	return cmd
}

// deleteBackupsOfLocation removes the Backup objects of a deleted location
// and nothing else: Lifeboat's finalizer would otherwise start a deletion
// of their data, which Velero does not do and which cannot reach a
// location that no longer exists.
func deleteBackupsOfLocation(ctx context.Context, c client.Client, out io.Writer, l *v1.BackupStorageLocation) error {
	fmt.Fprintf(out, "Backup storage location %q deleted successfully.\n", l.Name)
	list := &v1.BackupList{}
	listCtx, cancel := callCtx(ctx)
	err := c.List(listCtx, list, client.InNamespace(l.Namespace), client.MatchingLabels{v1.StorageLocationLabel: v1.LabelValue(l.Name)})
	cancel()
	if err != nil {
		return fmt.Errorf("finding the backups of deleted backup storage location %q: %w", l.Name, err)
	}
	var errs []error
	for i := range list.Items {
		b := &list.Items[i]
		if b.Spec.StorageLocation != "" && b.Spec.StorageLocation != l.Name {
			continue
		}
		if err := removeBackupObject(ctx, c, b); err != nil {
			errs = append(errs, fmt.Errorf("deleting backup %q of deleted backup storage location %q: %w", b.Name, l.Name, err))
			continue
		}
		fmt.Fprintf(out, "Backup associated with deleted BSL(s) %q deleted successfully.\n", b.Name)
	}
	// Velero's file-system backup repositories of the location go too, as
	// Velero deletes them; Lifeboat never creates any.
	repos := &v1.BackupRepositoryList{}
	listCtx, cancel = callCtx(ctx)
	err = c.List(listCtx, repos, client.InNamespace(l.Namespace), client.MatchingLabels{v1.StorageLocationLabel: v1.LabelValue(l.Name)})
	cancel()
	if err != nil && !isCRDMissing(err) {
		errs = append(errs, fmt.Errorf("finding the backup repositories of deleted backup storage location %q: %w", l.Name, err))
	}
	for i := range repos.Items {
		r := &repos.Items[i]
		delCtx, cancel := callCtx(ctx)
		err := c.Delete(delCtx, r)
		cancel()
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting backup repository %q of deleted backup storage location %q: %w", r.Name, l.Name, err))
			continue
		}
		fmt.Fprintf(out, "Backup repository associated with deleted BSL(s) %q deleted successfully.\n", r.Name)
	}
	return errors.Join(errs...)
}

// removeBackupObject deletes a Backup object without deleting its data.
func removeBackupObject(ctx context.Context, c client.Client, b *v1.Backup) error {
	callCtx, cancel := callCtx(ctx)
	defer cancel()
	if controllerutil.ContainsFinalizer(b, v1.BackupFinalizer) {
		orig := b.DeepCopy()
		controllerutil.RemoveFinalizer(b, v1.BackupFinalizer)
		if err := c.Patch(callCtx, b, client.MergeFrom(orig)); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("removing finalizer %s: %w", v1.BackupFinalizer, err)
		}
	}
	if err := c.Delete(callCtx, b); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

type backupLocationCreateOptions struct {
	provider            string
	bucket              string
	prefix              string
	config              map[string]string
	credential          map[string]string
	labels              map[string]string
	isDefault           bool
	accessMode          string
	backupSyncPeriod    time.Duration
	validationFrequency time.Duration
	caCertFile          string
	output              string
}

func newBackupLocationCreateCommand(f *Factory) *cobra.Command {
	o := &backupLocationCreateOptions{}
	cmd := &cobra.Command{
		Use:   "create NAME --provider PROVIDER --bucket BUCKET",
		Short: "Create a backup storage location",
		Example: `  lifeboat backup-location create secondary --provider aws --bucket backups-2 \
    --config region=eu-west-1,s3Url=https://s3.example:9000 --credential cloud-credentials=cloud

  # Show the object without creating it
  lifeboat backup-location create secondary --provider aws --bucket backups-2 -o yaml`,
		Args: cobra.ExactArgs(1),
		RunE: runE(f, func(cmd *cobra.Command, args []string) error {
			if o.output != "" {
				if err := checkFormat(o.output, formatYAML, formatJSON); err != nil {
					return err
				}
			}
			fl := cmd.Flags()
			loc, err := o.build(args[0], f.Namespace, fl.Changed("backup-sync-period"), fl.Changed("validation-frequency"))
			if err != nil {
				return err
			}
			if o.output != "" {
				return printEncoded(cmd.OutOrStdout(), o.output, loc)
			}
			c, err := f.Client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if loc.Spec.Default {
				// One default at a time, as in Velero: the user unsets the
				// old one first (`backup-location set OLD --default=false`).
				defaults, err := defaultLocations(ctx, c, f.Namespace)
				if err != nil {
					return err
				}
				if len(defaults) > 0 {
					return fmt.Errorf("backup storage location %q is already the default; unset it first with `lifeboat backup-location set %s --default=false`, or leave out --default", defaults[0], defaults[0])
				}
			}
			callCtx, cancel := callCtx(ctx)
			err = c.Create(callCtx, loc)
			cancel()
			if apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("backup storage location %q already exists in namespace %q; change it with `lifeboat backup-location set`", loc.Name, loc.Namespace)
			}
			if err != nil {
				return fmt.Errorf("creating backup storage location %q: %w", loc.Name, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Backup storage location %q configured successfully.\n", loc.Name)
			return nil
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&o.provider, "provider", "", "object store plugin, e.g. aws, velero.io/aws, lifeboat.io/filesystem (required)")
	fl.StringVar(&o.bucket, "bucket", "", "bucket to store backups in (required)")
	fl.StringVar(&o.prefix, "prefix", "", "path inside the bucket under which everything is stored")
	fl.StringToStringVar(&o.config, "config", nil, "provider settings, as key=value,key=value (e.g. region=eu-west-1)")
	fl.StringToStringVar(&o.credential, "credential", nil, "credentials of this location, as SECRET=KEY: the key of a Secret in the namespace (one pair)")
	fl.StringToStringVar(&o.labels, "labels", nil, "labels for the location, as key=value,key=value")
	fl.BoolVar(&o.isDefault, "default", false, "make this the default location (refused while another one is)")
	fl.StringVar(&o.accessMode, "access-mode", string(v1.BackupStorageLocationAccessModeReadWrite), "ReadWrite, or ReadOnly to restore from it and never write to it")
	fl.DurationVar(&o.backupSyncPeriod, "backup-sync-period", 0, "how often to create Backup objects for the backups found in the bucket; 0s turns it off (default: the server's)")
	fl.DurationVar(&o.validationFrequency, "validation-frequency", 0, "how often to check that the bucket can be reached; 0s turns it off (default: the server's)")
	fl.StringVar(&o.caCertFile, "cacert", "", "file with the CA certificates to verify the object store's TLS certificate with")
	fl.StringVarP(&o.output, "output", "o", "", "print the location as yaml or json instead of creating it")
	return cmd
}

// build turns the flags into the location to create; it reads only the
// --cacert file.
func (o *backupLocationCreateOptions) build(name, namespace string, syncSet, validationSet bool) (*v1.BackupStorageLocation, error) {
	if o.provider == "" {
		return nil, errors.New("--provider is required, e.g. --provider aws")
	}
	if o.bucket == "" {
		return nil, errors.New("--bucket is required")
	}
	mode := v1.BackupStorageLocationAccessMode(o.accessMode)
	if mode != v1.BackupStorageLocationAccessModeReadWrite && mode != v1.BackupStorageLocationAccessModeReadOnly {
		return nil, fmt.Errorf("invalid --access-mode %q: must be ReadWrite or ReadOnly", o.accessMode)
	}
	if syncSet && o.backupSyncPeriod < 0 {
		return nil, errors.New("invalid --backup-sync-period: must not be negative")
	}
	if validationSet && o.validationFrequency < 0 {
		return nil, errors.New("invalid --validation-frequency: must not be negative")
	}
	cred, err := secretKey("credential", o.credential)
	if err != nil {
		return nil, err
	}
	caCert, err := readCACert(o.caCertFile)
	if err != nil {
		return nil, err
	}
	loc := &v1.BackupStorageLocation{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: nilIfEmpty(o.labels)},
		Spec: v1.BackupStorageLocationSpec{
			Provider:    o.provider,
			Config:      nilIfEmpty(o.config),
			Credential:  cred,
			StorageType: v1.StorageType{ObjectStorage: &v1.ObjectStorageLocation{Bucket: o.bucket, Prefix: o.prefix, CACert: caCert}},
			Default:     o.isDefault,
			AccessMode:  mode,
		},
	}
	if syncSet {
		loc.Spec.BackupSyncPeriod = &metav1.Duration{Duration: o.backupSyncPeriod}
	}
	if validationSet {
		loc.Spec.ValidationFrequency = &metav1.Duration{Duration: o.validationFrequency}
	}
	return loc, nil
}

func newBackupLocationSetCommand(f *Factory) *cobra.Command {
	var (
		isDefault  optionalBool
		credential map[string]string
		caCertFile string
	)
	cmd := &cobra.Command{
		Use:   "set NAME",
		Short: "Change the default flag, credential or CA certificates of a backup storage location",
		Example: `  lifeboat backup-location set secondary --default
  lifeboat backup-location set default --default=false
  lifeboat backup-location set secondary --credential cloud-credentials=cloud --cacert ca.pem`,
		Args: cobra.ExactArgs(1),
		RunE: runE(f, func(cmd *cobra.Command, args []string) error {
			name := args[0]
			cred, err := secretKey("credential", credential)
			if err != nil {
				return err
			}
			caCert, err := readCACert(caCertFile)
			if err != nil {
				return err
			}
			c, err := f.Client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			loc, err := backupLocationKind.get(ctx, c, f.Namespace, name)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if d := isDefault.value; d != nil && *d && !loc.Spec.Default {
				defaults, err := defaultLocations(ctx, c, f.Namespace)
				if err != nil {
					return err
				}
				if len(defaults) > 0 {
					return fmt.Errorf("backup storage location %q is already the default; unset it first with `lifeboat backup-location set %s --default=false`", defaults[0], defaults[0])
				}
			}
			orig := loc.DeepCopy()
			if d := isDefault.value; d != nil {
				loc.Spec.Default = *d
			}
			if cred != nil {
				loc.Spec.Credential = cred
			}
			// Unlike Velero's, which clears the CA certificates whenever
			// --cacert is left out, set changes only what it is told to.
			if caCertFile != "" {
				if loc.Spec.ObjectStorage == nil {
					loc.Spec.ObjectStorage = &v1.ObjectStorageLocation{}
				}
				loc.Spec.ObjectStorage.CACert = caCert
			}
			callCtx, cancel := callCtx(ctx)
			err = c.Patch(callCtx, loc, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
			cancel()
			if err != nil {
				return fmt.Errorf("updating backup storage location %q: %w", name, err)
			}
			fmt.Fprintf(out, "Backup storage location %q configured successfully.\n", name)
			return nil
		}),
	}
	fl := cmd.Flags()
	fl.Var(&isDefault, "default", "make this the default location (--default=false: no longer the default)")
	fl.Lookup("default").NoOptDefVal = "true"
	fl.StringToStringVar(&credential, "credential", nil, "credentials of this location, as SECRET=KEY: the key of a Secret in the namespace (one pair)")
	fl.StringVar(&caCertFile, "cacert", "", "file with the CA certificates to verify the object store's TLS certificate with")
	return cmd
}

// defaultLocations names the locations marked default.
func defaultLocations(ctx context.Context, c client.Client, namespace string) ([]string, error) {
	list, err := backupLocationKind.list(ctx, c, namespace, nil, "")
	if err != nil {
		return nil, err
	}
	var names []string
	for _, l := range list.Items {
		if l.Spec.Default {
			names = append(names, l.Name)
		}
	}
	return names, nil
}

func newSnapshotLocationCommand(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "snapshot-location",
		Short: "Work with volume snapshot locations",
	}
	cmd.AddCommand(
		newSnapshotLocationCreateCommand(f),
		newGetCommand(f, snapshotLocationKind),
		newSnapshotLocationSetCommand(f),
	)
	return cmd
}

func newSnapshotLocationCreateCommand(f *Factory) *cobra.Command {
	var (
		provider   string
		config     map[string]string
		credential map[string]string
		labels     map[string]string
		output     string
	)
	cmd := &cobra.Command{
		Use:     "create NAME --provider PROVIDER",
		Short:   "Create a volume snapshot location",
		Example: `  lifeboat snapshot-location create ebs-eu --provider aws --config region=eu-west-1`,
		Args:    cobra.ExactArgs(1),
		RunE: runE(f, func(cmd *cobra.Command, args []string) error {
			if output != "" {
				if err := checkFormat(output, formatYAML, formatJSON); err != nil {
					return err
				}
			}
			if provider == "" {
				return errors.New("--provider is required, e.g. --provider aws")
			}
			cred, err := secretKey("credential", credential)
			if err != nil {
				return err
			}
			loc := &v1.VolumeSnapshotLocation{
				ObjectMeta: metav1.ObjectMeta{Name: args[0], Namespace: f.Namespace, Labels: nilIfEmpty(labels)},
				Spec:       v1.VolumeSnapshotLocationSpec{Provider: provider, Config: nilIfEmpty(config), Credential: cred},
			}
			if output != "" {
				return printEncoded(cmd.OutOrStdout(), output, loc)
			}
			c, err := f.Client()
			if err != nil {
				return err
			}
			callCtx, cancel := callCtx(cmd.Context())
			err = c.Create(callCtx, loc)
			cancel()
			if apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("volume snapshot location %q already exists in namespace %q", loc.Name, loc.Namespace)
			}
			if err != nil {
				return fmt.Errorf("creating volume snapshot location %q: %w", loc.Name, err)
			}
			// Velero's wording, word for word.
			fmt.Fprintf(cmd.OutOrStdout(), "Snapshot volume location %q configured successfully.\n", loc.Name)
			return nil
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&provider, "provider", "", "volume snapshotter plugin, e.g. aws, velero.io/aws (required)")
	fl.StringToStringVar(&config, "config", nil, "provider settings, as key=value,key=value")
	fl.StringToStringVar(&credential, "credential", nil, "credentials of this location, as SECRET=KEY: the key of a Secret in the namespace (one pair)")
	fl.StringToStringVar(&labels, "labels", nil, "labels for the location, as key=value,key=value")
	fl.StringVarP(&output, "output", "o", "", "print the location as yaml or json instead of creating it")
	return cmd
}

func newSnapshotLocationSetCommand(f *Factory) *cobra.Command {
	var credential map[string]string
	cmd := &cobra.Command{
		Use:   "set NAME --credential SECRET=KEY",
		Short: "Change the credential of a volume snapshot location",
		Args:  cobra.ExactArgs(1),
		RunE: runE(f, func(cmd *cobra.Command, args []string) error {
			cred, err := secretKey("credential", credential)
			if err != nil {
				return err
			}
			c, err := f.Client()
			if err != nil {
				return err
			}
			loc, err := snapshotLocationKind.get(cmd.Context(), c, f.Namespace, args[0])
			if err != nil {
				return err
			}
			if cred != nil {
				orig := loc.DeepCopy()
				loc.Spec.Credential = cred
				callCtx, cancel := callCtx(cmd.Context())
				err = c.Patch(callCtx, loc, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
				cancel()
				if err != nil {
					return fmt.Errorf("updating volume snapshot location %q: %w", loc.Name, err)
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Volume snapshot location %q configured successfully.\n", loc.Name)
			return nil
		}),
	}
	cmd.Flags().StringToStringVar(&credential, "credential", nil, "credentials of this location, as SECRET=KEY: the key of a Secret in the namespace (one pair)")
	return cmd
}

// secretKey turns a --credential SECRET=KEY into a selector; nil when the
// flag was not given.
func secretKey(flag string, m map[string]string) (*corev1.SecretKeySelector, error) {
	switch len(m) {
	case 0:
		return nil, nil
	case 1:
		for name, key := range m {
			if name == "" || key == "" {
				return nil, fmt.Errorf("invalid --%s: want SECRET=KEY, the name of a Secret and a key in it", flag)
			}
			return &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key}, nil
		}
	}
	keys := slices.Sorted(maps.Keys(m))
	return nil, fmt.Errorf("--%s takes one SECRET=KEY pair, got %d (%s)", flag, len(m), strings.Join(keys, ", "))
}

// readCACert reads a --cacert file; "" reads nothing.
func readCACert(path string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading --cacert: %w", err)
	}
	return data, nil
}

func nilIfEmpty(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return maps.Clone(m)
}

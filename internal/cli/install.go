package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/config/crd"
	"github.com/lifeboat-io/lifeboat/internal/storage/filesystem"
)

const (
	// fieldManager owns every field install applies, so re-running install
	// updates them and drops the ones a newer install no longer sets.
	fieldManager = "lifeboat"

	// Velero's names, so a Velero server or CLI pointed at the same
	// namespace finds the same location and credentials.
	defaultLocationName = "default"
	credentialsSecret   = "cloud-credentials"
	credentialsKey      = "cloud"

	filesystemBucket = "backups"
)

type installOptions struct {
	provider      string
	bucket        string
	prefix        string
	config        map[string]string
	secretFile    string
	noSecret      bool
	useFilesystem string
	dryRun        bool
	output        string
	timeout       time.Duration
}

func newInstallCommand(f *Factory) *cobra.Command {
	o := &installOptions{}
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Install the velero.io CRDs, the namespace and a backup storage location",
		Long: "Install applies the velero.io/v1 CRDs, the server's namespace (-n, default velero) and,\n" +
			"when --provider or --use-filesystem is given, a default BackupStorageLocation.\n" +
			"It uses server-side apply, so running it again updates what it installed.",
		Example: `  # Store backups in a local directory (single machine, tests, demos)
  lifeboat install --use-filesystem /var/lib/lifeboat

  # Store backups in an S3-compatible bucket
  lifeboat install --provider aws --bucket backups --secret-file ./credentials \
      --backup-location-config region=minio,s3ForcePathStyle=true,s3Url=http://minio:9000

  # Print what would be applied
  lifeboat install --use-filesystem /tmp/lb --dry-run -o yaml`,
		Args: cobra.NoArgs,
		RunE: runE(f, func(cmd *cobra.Command, _ []string) error {
			// -o alone means "show me", as it does for Velero's install.
			if cmd.Flags().Changed("output") {
				o.dryRun = true
			}
			if o.output == "" {
				o.output = formatYAML
			}
			if err := checkFormat(o.output, formatYAML, formatJSON); err != nil {
				return err
			}
			objs, err := o.objects(f.Namespace)
			if err != nil {
				return err
			}
			if o.dryRun {
				return printManifests(cmd.OutOrStdout(), o.output, objs)
			}
			return o.apply(cmd.Context(), f, cmd.OutOrStdout(), objs)
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&o.provider, "provider", "", `object store provider of the default backup storage location (e.g. "aws")`)
	fl.StringVar(&o.bucket, "bucket", "", "bucket the backups are stored in")
	fl.StringVar(&o.prefix, "prefix", "", "path inside the bucket to store backups under")
	fl.StringToStringVar(&o.config, "backup-location-config", nil, "provider configuration of the backup storage location, as key=value,key=value")
	fl.StringVar(&o.secretFile, "secret-file", "", "file with the store's credentials, stored in Secret cloud-credentials (key cloud)")
	fl.BoolVar(&o.noSecret, "no-secret", false, "install no credentials secret (the store needs none, or they come from elsewhere)")
	fl.StringVar(&o.useFilesystem, "use-filesystem", "", "store backups in this local directory (provider "+filesystem.ProviderName+", bucket "+filesystemBucket+")")
	fl.BoolVar(&o.dryRun, "dry-run", false, "print the objects instead of applying them")
	fl.StringVarP(&o.output, "output", "o", "", "format of --dry-run output: yaml or json (implies --dry-run)")
	fl.DurationVar(&o.timeout, "timeout", 2*time.Minute, "how long to wait for the CRDs to be established")
	return cmd
}

// validate checks flag combinations before anything is read or applied.
func (o *installOptions) validate() error {
	if o.useFilesystem != "" {
		if o.provider != "" {
			return errors.New("--use-filesystem and --provider cannot be used together")
		}
		if o.secretFile != "" {
			return errors.New("--use-filesystem stores no credentials; drop --secret-file")
		}
		if _, ok := o.config[filesystem.PathKey]; ok {
			return fmt.Errorf("--use-filesystem sets the %q config key; drop it from --backup-location-config", filesystem.PathKey)
		}
		return nil
	}
	if o.provider == "" {
		if o.bucket != "" || o.prefix != "" || len(o.config) > 0 || o.secretFile != "" {
			return errors.New("--bucket, --prefix, --backup-location-config and --secret-file need --provider (or --use-filesystem)")
		}
		return nil
	}
	if o.bucket == "" {
		return errors.New("--bucket is required with --provider")
	}
	if o.secretFile != "" && o.noSecret {
		return errors.New("--secret-file and --no-secret cannot be used together")
	}
	// Velero asks for an explicit choice too: a forgotten secret file is
	// otherwise only noticed when the location turns Unavailable.
	if o.secretFile == "" && !o.noSecret {
		return errors.New("--provider needs --secret-file FILE, or --no-secret when the store needs no credentials")
	}
	return nil
}

// objects builds everything install applies, in apply order: the CRDs
// first, since the rest may be velero.io kinds.
func (o *installOptions) objects(namespace string) ([]client.Object, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	crds, err := crd.All()
	if err != nil {
		return nil, fmt.Errorf("loading the embedded CRDs: %w", err)
	}
	objs := make([]client.Object, 0, len(crds)+3)
	for _, c := range crds {
		objs = append(objs, c)
	}
	objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})

	provider, bucket, config := o.provider, o.bucket, maps.Clone(o.config)
	if o.useFilesystem != "" {
		// The server resolves the path on its own machine, so a relative
		// path would mean whatever its working directory is.
		dir, err := filepath.Abs(o.useFilesystem)
		if err != nil {
			return nil, fmt.Errorf("resolving --use-filesystem %s: %w", o.useFilesystem, err)
		}
		provider = filesystem.ProviderName
		if bucket == "" {
			bucket = filesystemBucket
		}
		if config == nil {
			config = map[string]string{}
		}
		config[filesystem.PathKey] = dir
	}
	if provider == "" {
		return objs, nil
	}

	bsl := &v1.BackupStorageLocation{
		ObjectMeta: metav1.ObjectMeta{Name: defaultLocationName, Namespace: namespace},
		Spec: v1.BackupStorageLocationSpec{
			Provider: provider,
			Config:   config,
			StorageType: v1.StorageType{ObjectStorage: &v1.ObjectStorageLocation{
				Bucket: bucket,
				Prefix: o.prefix,
			}},
			Default: true,
		},
	}
	if o.secretFile != "" {
		data, err := os.ReadFile(o.secretFile)
		if err != nil {
			return nil, fmt.Errorf("reading --secret-file: %w", err)
		}
		objs = append(objs, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: credentialsSecret, Namespace: namespace},
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{credentialsKey: data},
		})
		bsl.Spec.Credential = &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: credentialsSecret},
			Key:                  credentialsKey,
		}
	}
	return append(objs, bsl), nil
}

// applyConfiguration turns a typed object into what install sends and
// prints: type set, and no status or creationTimestamp, which a typed
// object always carries (as zero values) but an apply must not claim.
func applyConfiguration(obj client.Object) (*unstructured.Unstructured, error) {
	if err := setTypeMeta(obj); err != nil {
		return nil, err
	}
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encoding %T %s: %w", obj, obj.GetName(), err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		return nil, fmt.Errorf("decoding %T %s: %w", obj, obj.GetName(), err)
	}
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return u, nil
}

// printManifests writes a multi-document YAML stream, or a JSON List.
func printManifests(w io.Writer, format string, objs []client.Object) error {
	items := make([]any, 0, len(objs))
	for _, obj := range objs {
		u, err := applyConfiguration(obj)
		if err != nil {
			return err
		}
		items = append(items, u.Object)
	}
	if format == formatJSON {
		return encode(w, formatJSON, map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	}
	for _, item := range items {
		if _, err := io.WriteString(w, "---\n"); err != nil {
			return err
		}
		if err := encode(w, formatYAML, item); err != nil {
			return err
		}
	}
	return nil
}

func (o *installOptions) apply(ctx context.Context, f *Factory, out io.Writer, objs []client.Object) error {
	c, err := f.Client()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(o.timeout)

	var crds []string
	for _, obj := range objs {
		if _, ok := obj.(*apiextensionsv1.CustomResourceDefinition); !ok {
			continue
		}
		if err := applyOne(ctx, c, out, obj); err != nil {
			return err
		}
		crds = append(crds, obj.GetName())
	}
	// Applying a velero.io object before its CRD is established fails with
	// "no matches for kind", so wait for all of them first.
	if err := waitEstablished(ctx, c, crds, deadline, f.pollInterval()); err != nil {
		return err
	}

	if o.useFilesystem != "" {
		// The filesystem store refuses a missing root or bucket directory
		// (a typo must not scatter backups), so create the ones the user
		// asked for here.
		dir, err := filepath.Abs(o.useFilesystem)
		if err != nil {
			return fmt.Errorf("resolving --use-filesystem %s: %w", o.useFilesystem, err)
		}
		if err := os.MkdirAll(filepath.Join(dir, filesystemBucket), 0o700); err != nil {
			return fmt.Errorf("creating the --use-filesystem directory: %w", err)
		}
	}

	for _, obj := range objs {
		if _, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok {
			continue
		}
		if err := applyUntil(ctx, c, out, obj, deadline, f.pollInterval()); err != nil {
			return err
		}
	}
	_, err = fmt.Fprintf(out, "\nLifeboat is installed in namespace %q. Start the server with `lifeboat server -n %s`.\n", f.Namespace, f.Namespace)
	return err
}

func applyOne(ctx context.Context, c client.Client, out io.Writer, obj client.Object) error {
	u, err := applyConfiguration(obj)
	if err != nil {
		return err
	}
	callCtx, cancel := callCtx(ctx)
	defer cancel()
	if err := c.Apply(callCtx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying %s %s: %w", u.GetKind(), objectRef(u), err)
	}
	_, err = fmt.Fprintf(out, "%s/%s: applied\n", u.GetKind(), objectRef(u))
	return err
}

// applyUntil retries while the API server's discovery has not caught up
// with a just-established CRD, which takes a moment after Established.
func applyUntil(ctx context.Context, c client.Client, out io.Writer, obj client.Object, deadline time.Time, poll time.Duration) error {
	for {
		err := applyOne(ctx, c, out, obj)
		if err == nil || !meta.IsNoMatchError(err) || time.Now().After(deadline) {
			return err
		}
		if err := sleep(ctx, poll); err != nil {
			return err
		}
	}
}

func objectRef(u *unstructured.Unstructured) string {
	if u.GetNamespace() == "" {
		return u.GetName()
	}
	return u.GetNamespace() + "/" + u.GetName()
}

func waitEstablished(ctx context.Context, c client.Client, names []string, deadline time.Time, poll time.Duration) error {
	pending := names
	for {
		var still []string
		for _, name := range pending {
			ok, err := crdEstablished(ctx, c, name)
			if err != nil {
				return err
			}
			if !ok {
				still = append(still, name)
			}
		}
		if len(still) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("CRDs not established before --timeout: %v", still)
		}
		pending = still
		if err := sleep(ctx, poll); err != nil {
			return fmt.Errorf("waiting for CRDs to be established: %w", err)
		}
	}
}

func crdEstablished(ctx context.Context, c client.Client, name string) (bool, error) {
	callCtx, cancel := callCtx(ctx)
	defer cancel()
	obj := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(callCtx, client.ObjectKey{Name: name}, obj); err != nil {
		return false, fmt.Errorf("reading CRD %s: %w", name, err)
	}
	for _, cond := range obj.Status.Conditions {
		if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
			return true, nil
		}
	}
	return false, nil
}

// sleep waits for d unless ctx ends first.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

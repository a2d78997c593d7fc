package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lifeboat-io/lifeboat/internal/buildinfo"
	"github.com/lifeboat-io/lifeboat/internal/install"
)

// fieldManager owns every field install applies, so re-running install
// updates them and drops the ones a newer install no longer sets.
const fieldManager = "lifeboat"

type installOptions struct {
	provider       string
	bucket         string
	prefix         string
	config         map[string]string
	secretFile     string
	noSecret       bool
	useFilesystem  string
	useSnapshots   bool
	snapshotConfig map[string]string

	image          string
	pullPolicy     string
	plugins        []string
	cpuRequest     string
	memRequest     string
	cpuLimit       string
	memLimit       string
	podAnnotations map[string]string
	podLabels      map[string]string
	saAnnotations  map[string]string
	serverArgs     []string
	// fsBackupTimeout is Velero's --pod-volume-operation-timeout: the
	// server's --fs-backup-timeout when set.
	fsBackupTimeout time.Duration
	restoreRBAC     bool
	crdsOnly        bool
	noServer        bool

	useNodeAgent      bool
	kubeletRootDir    string
	nodeAgentCPUReq   string
	nodeAgentMemReq   string
	nodeAgentCPULimit string
	nodeAgentMemLimit string

	dryRun  bool
	output  string
	wait    bool
	timeout time.Duration
}

// defaultImage is the server image of this CLI's own version.
func defaultImage() string { return install.DefaultImageRepo + ":" + buildinfo.Version }

func newInstallCommand(f *Factory) *cobra.Command {
	defaults := install.DefaultResources()
	o := &installOptions{
		cpuRequest: defaults.Requests.Cpu().String(), memRequest: defaults.Requests.Memory().String(),
		cpuLimit: defaults.Limits.Cpu().String(), memLimit: defaults.Limits.Memory().String(),
		// Velero's node agent defaults: no requests or limits.
		nodeAgentCPUReq: "0", nodeAgentMemReq: "0", nodeAgentCPULimit: "0", nodeAgentMemLimit: "0",
	}
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Install the Lifeboat server: CRDs, namespace, RBAC, a storage location and the server's Deployment",
		Long: "Install puts a Lifeboat server in the cluster, as `velero install` does for Velero: the velero.io/v1\n" +
			"CRDs, the server's namespace (-n, default velero), the service account velero with least-privilege\n" +
			"RBAC (no cluster-admin; see docs/install.md for every rule and why), the credentials Secret\n" +
			"cloud-credentials (--secret-file), a default BackupStorageLocation (--provider or --use-filesystem),\n" +
			"optionally a default VolumeSnapshotLocation, and the server as Deployment velero, with one init\n" +
			"container per --plugins image.\n\n" +
			"It uses server-side apply: running it again with other flags upgrades in place. Install replaces a\n" +
			"Deployment named velero in the namespace, such as Velero's own: one server acts on a namespace.\n\n" +
			"--no-server installs the CRDs, namespace, Secret and locations only, for a server run as a process\n" +
			"(`lifeboat server`); --crds-only installs the CRDs alone.",
		Example: `  # A server storing backups in an S3-compatible bucket, with a plugin
  lifeboat install --provider aws --bucket backups --secret-file ./credentials \
      --backup-location-config region=minio,s3ForcePathStyle=true,s3Url=http://minio.minio:9000 \
      --plugins velero/velero-plugin-for-aws:v1.12.0 --wait

  # A single-node or test cluster: backups in a directory of the node
  lifeboat install --use-filesystem /var/lib/lifeboat --wait

  # Upgrade: the same command with a newer image
  lifeboat install --provider aws --bucket backups --secret-file ./credentials --image ghcr.io/lifeboat-io/lifeboat:v1.3.0

  # A server run as a process on this machine (no Deployment)
  lifeboat install --use-filesystem /tmp/lifeboat --no-server && lifeboat server

  # Print what would be applied, touching no cluster
  lifeboat install --use-filesystem /var/lib/lifeboat --dry-run -o yaml`,
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
			opts, err := o.installOptions(f.Namespace)
			if err != nil {
				return err
			}
			if o.dryRun {
				if o.wait {
					return errors.New("--wait and --dry-run cannot be used together: a dry run starts no server")
				}
				return printInstall(cmd.OutOrStdout(), o.output, opts)
			}
			return o.apply(cmd.Context(), f, cmd.OutOrStdout(), opts)
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&o.provider, "provider", "", `object store provider of the default backup storage location (e.g. "aws")`)
	fl.StringVar(&o.bucket, "bucket", "", "bucket the backups are stored in")
	fl.StringVar(&o.prefix, "prefix", "", "path inside the bucket to store backups under")
	fl.StringToStringVar(&o.config, "backup-location-config", nil, "provider configuration of the backup storage location, as key=value,key=value")
	fl.StringVar(&o.secretFile, "secret-file", "", "file with the store's credentials, stored in Secret cloud-credentials (key cloud) and mounted at /credentials/cloud (AWS_SHARED_CREDENTIALS_FILE)")
	fl.BoolVar(&o.noSecret, "no-secret", false, "install no credentials secret (the store needs none, or they come from elsewhere, e.g. --sa-annotations for a cloud identity)")
	fl.StringVar(&o.useFilesystem, "use-filesystem", "", "store backups in this directory (provider "+install.FilesystemProvider+", bucket "+install.FilesystemBucket+
		"); the server's pod mounts it from its node (hostPath), so this is for single-node and test clusters: DIR/"+install.FilesystemBucket+
		" must exist on the node, writable by uid 65532 (install creates it when it runs on the node)")
	fl.BoolVar(&o.useSnapshots, "use-volume-snapshots", false, "also create a default VolumeSnapshotLocation with --provider (its VolumeSnapshotter must come from a plugin)")
	fl.StringToStringVar(&o.snapshotConfig, "snapshot-location-config", nil, "provider configuration of the volume snapshot location, as key=value,key=value (implies --use-volume-snapshots)")

	fl.StringVar(&o.image, "image", defaultImage(), "server image")
	fl.StringVar(&o.pullPolicy, "image-pull-policy", "", "pull policy of the server and plugin images: Always, IfNotPresent or Never (default: Always for an untagged or :latest image, else IfNotPresent)")
	fl.StringSliceVar(&o.plugins, "plugins", nil, "plugin images, comma-separated; each runs as an init container that copies its binaries to /target (the server's plugin directory), as Velero's plugin images do")
	fl.StringVar(&o.cpuRequest, "velero-pod-cpu-request", o.cpuRequest, "CPU request of the server container (Velero's flag name and default)")
	fl.StringVar(&o.memRequest, "velero-pod-mem-request", o.memRequest, "memory request of the server container")
	fl.StringVar(&o.cpuLimit, "velero-pod-cpu-limit", o.cpuLimit, "CPU limit of the server container (0 for none)")
	fl.StringVar(&o.memLimit, "velero-pod-mem-limit", o.memLimit, "memory limit of the server container (0 for none)")
	fl.StringToStringVar(&o.podAnnotations, "pod-annotations", nil, "annotations added to the server's pod, as key=value,key=value")
	fl.StringToStringVar(&o.podLabels, "pod-labels", nil, "labels added to the server's pod, as key=value,key=value")
	fl.StringToStringVar(&o.saAnnotations, "sa-annotations", nil, "annotations of the service account velero, e.g. a cloud identity (eks.amazonaws.com/role-arn=...)")
	fl.DurationVar(&o.fsBackupTimeout, "pod-volume-operation-timeout", 0, "how long a backup waits for its pod volume backups: the server's --fs-backup-timeout (unset: the server's default, 4h)")
	fl.StringArrayVar(&o.serverArgs, "server-arg", nil, "extra argument of `lifeboat server` in the pod, repeatable, e.g. --server-arg=--backup-finalizer")
	fl.BoolVar(&o.restoreRBAC, "restore-rbac", true, "grant the server bind and escalate on roles and clusterroles, without which restores of RBAC objects that grant more than the server holds are refused (see docs/install.md)")
	fl.BoolVar(&o.useNodeAgent, "use-node-agent", false, "also run the node agent (DaemonSet node-agent, `lifeboat node-agent` on every node) for file-system backup of pod volumes (see docs/fs-backup.md)")
	fl.StringVar(&o.kubeletRootDir, "kubelet-root-dir", install.DefaultKubeletRootDir, "the kubelet's root directory on the nodes; its pods/ directory is mounted into the node agent")
	fl.StringVar(&o.nodeAgentCPUReq, "node-agent-pod-cpu-request", o.nodeAgentCPUReq, "CPU request of the node agent container (0 for none, Velero's default)")
	fl.StringVar(&o.nodeAgentMemReq, "node-agent-pod-mem-request", o.nodeAgentMemReq, "memory request of the node agent container (0 for none)")
	fl.StringVar(&o.nodeAgentCPULimit, "node-agent-pod-cpu-limit", o.nodeAgentCPULimit, "CPU limit of the node agent container (0 for none)")
	fl.StringVar(&o.nodeAgentMemLimit, "node-agent-pod-mem-limit", o.nodeAgentMemLimit, "memory limit of the node agent container (0 for none)")
	fl.BoolVar(&o.crdsOnly, "crds-only", false, "install only the velero.io CRDs")
	fl.BoolVar(&o.noServer, "no-server", false, "install no service account, RBAC or Deployment: the server runs elsewhere as a process (`lifeboat server`)")

	fl.BoolVar(&o.dryRun, "dry-run", false, "print the objects instead of applying them (no cluster is contacted)")
	fl.StringVarP(&o.output, "output", "o", "", "format of --dry-run output: yaml or json (implies --dry-run)")
	fl.BoolVar(&o.wait, "wait", false, "wait until the server's Deployment is available")
	fl.DurationVar(&o.timeout, "timeout", 2*time.Minute, "how long to wait for the CRDs to be established and, with --wait, for the server to be available")
	return cmd
}

// validate checks flag combinations before anything is read or applied.
func (o *installOptions) validate() error {
	if o.crdsOnly && o.noServer {
		return errors.New("--crds-only and --no-server cannot be used together: --crds-only installs the CRDs alone")
	}
	if o.crdsOnly && (o.provider != "" || o.useFilesystem != "" || o.secretFile != "" || len(o.plugins) > 0) {
		return errors.New("--crds-only installs the CRDs alone: drop --provider, --use-filesystem, --secret-file and --plugins")
	}
	if o.fsBackupTimeout < 0 {
		return fmt.Errorf("--pod-volume-operation-timeout %s: must not be negative", o.fsBackupTimeout)
	}
	if (o.noServer || o.crdsOnly) && o.useNodeAgent {
		return errors.New("--use-node-agent needs the server's Deployment: the node agent runs in the cluster next to it; drop --no-server or --crds-only")
	}
	if o.noServer && len(o.plugins) > 0 {
		return errors.New("--plugins needs the server's Deployment: drop --no-server, or give the plugins to `lifeboat server --plugin-dir`")
	}
	if len(o.snapshotConfig) > 0 {
		o.useSnapshots = true
	}
	if o.useSnapshots && o.provider == "" {
		return errors.New("--use-volume-snapshots and --snapshot-location-config need --provider (the snapshot location's provider)")
	}
	switch corev1.PullPolicy(o.pullPolicy) {
	case "", corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		return fmt.Errorf("invalid --image-pull-policy %q: use Always, IfNotPresent or Never", o.pullPolicy)
	}
	if o.useFilesystem != "" {
		if o.provider != "" {
			return errors.New("--use-filesystem and --provider cannot be used together")
		}
		if o.secretFile != "" {
			return errors.New("--use-filesystem stores no credentials; drop --secret-file")
		}
		if _, ok := o.config[install.FilesystemPathKey]; ok {
			return fmt.Errorf("--use-filesystem sets the %q config key; drop it from --backup-location-config", install.FilesystemPathKey)
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

// installOptions turns the flags into the install package's options.
func (o *installOptions) installOptions(namespace string) (install.Options, error) {
	if err := o.validate(); err != nil {
		return install.Options{}, err
	}
	opts := install.Options{
		Namespace:                 namespace,
		Image:                     o.image,
		ImagePullPolicy:           corev1.PullPolicy(o.pullPolicy),
		Plugins:                   o.plugins,
		ServerArgs:                o.serverArguments(),
		PodAnnotations:            o.podAnnotations,
		PodLabels:                 o.podLabels,
		ServiceAccountAnnotations: o.saAnnotations,
		RestoreRBAC:               o.restoreRBAC,
		NodeAgent:                 o.useNodeAgent,
		KubeletRootDir:            o.kubeletRootDir,
	}
	switch {
	case o.crdsOnly:
		opts.Scope = install.ScopeCRDsOnly
	case o.noServer:
		opts.Scope = install.ScopeNoServer
	}
	if opts.Image == "" {
		return opts, errors.New("--image is empty: give the server image, e.g. " + defaultImage())
	}
	var err error
	if opts.Resources, err = o.resources(); err != nil {
		return opts, err
	}
	if opts.NodeAgentResources, err = parseResources("node-agent-pod", o.nodeAgentCPUReq, o.nodeAgentMemReq, o.nodeAgentCPULimit, o.nodeAgentMemLimit); err != nil {
		return opts, err
	}
	if o.useFilesystem != "" {
		// The server resolves the path on its node, so a relative path
		// would mean whatever its working directory is.
		if opts.FilesystemDir, err = filepath.Abs(o.useFilesystem); err != nil {
			return opts, fmt.Errorf("resolving --use-filesystem %s: %w", o.useFilesystem, err)
		}
	}
	if o.provider != "" {
		opts.Location = &install.Location{Provider: o.provider, Bucket: o.bucket, Prefix: o.prefix, Config: o.config}
	}
	if o.useSnapshots {
		opts.SnapshotLocation = &install.SnapshotLocation{Provider: o.provider, Config: o.snapshotConfig}
	}
	if o.secretFile != "" {
		if opts.Credentials, err = os.ReadFile(o.secretFile); err != nil {
			return opts, fmt.Errorf("reading --secret-file: %w", err)
		}
	}
	if _, err := install.Objects(opts); err != nil {
		return opts, fmt.Errorf("--plugins, -n or --use-filesystem: %w", err)
	}
	return opts, nil
}

func (o *installOptions) resources() (corev1.ResourceRequirements, error) {
	return parseResources("velero-pod", o.cpuRequest, o.memRequest, o.cpuLimit, o.memLimit)
}

// parseResources reads the four --<prefix>-{cpu,mem}-{request,limit} flags.
func parseResources(prefix, cpuRequest, memRequest, cpuLimit, memLimit string) (corev1.ResourceRequirements, error) {
	r := corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
	for _, q := range []struct {
		flag, value string
		into        corev1.ResourceList
		name        corev1.ResourceName
	}{
		{"--" + prefix + "-cpu-request", cpuRequest, r.Requests, corev1.ResourceCPU},
		{"--" + prefix + "-mem-request", memRequest, r.Requests, corev1.ResourceMemory},
		{"--" + prefix + "-cpu-limit", cpuLimit, r.Limits, corev1.ResourceCPU},
		{"--" + prefix + "-mem-limit", memLimit, r.Limits, corev1.ResourceMemory},
	} {
		v, err := resource.ParseQuantity(q.value)
		if err != nil {
			return r, fmt.Errorf("invalid %s %q: want a quantity such as 500m or 512Mi", q.flag, q.value)
		}
		if !v.IsZero() { // 0 means none, as in Velero
			q.into[q.name] = v
		}
	}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, hasReq := r.Requests[name]
		limit, hasLimit := r.Limits[name]
		if hasReq && hasLimit && req.Cmp(limit) > 0 {
			return r, fmt.Errorf("the %s request %s is above its limit %s: raise --%s-%s-limit or lower the request", name, req.String(), limit.String(), prefix, map[corev1.ResourceName]string{corev1.ResourceCPU: "cpu", corev1.ResourceMemory: "mem"}[name])
		}
	}
	if len(r.Requests) == 0 {
		r.Requests = nil
	}
	if len(r.Limits) == 0 {
		r.Limits = nil
	}
	return r, nil
}

// printInstall writes what install would apply, as a YAML stream or a JSON List.
func printInstall(w io.Writer, format string, opts install.Options) error {
	objs, err := install.Objects(opts)
	if err != nil {
		return err
	}
	manifests, err := install.Manifests(objs)
	if err != nil {
		return err
	}
	if format == formatJSON {
		return install.WriteJSON(w, manifests)
	}
	return install.WriteYAML(w, manifests)
}

func (o *installOptions) apply(ctx context.Context, f *Factory, out io.Writer, opts install.Options) error {
	c, err := f.Client()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(o.timeout)
	if opts.Scope != install.ScopeCRDsOnly {
		if opts.NamespaceCreated, err = namespaceIsInstalls(ctx, c, opts.Namespace); err != nil {
			return err
		}
	}
	objs, err := install.Objects(opts)
	if err != nil {
		return err
	}
	manifests, err := install.Manifests(objs)
	if err != nil {
		return err
	}

	var crds []string
	for _, u := range manifests {
		if u.GetKind() != "CustomResourceDefinition" {
			continue
		}
		if err := waitCRDGone(ctx, c, out, u.GetName(), deadline, f.pollInterval()); err != nil {
			return err
		}
		if err := applyOne(ctx, c, out, u); err != nil {
			return err
		}
		crds = append(crds, u.GetName())
	}
	// Applying a velero.io object before its CRD is established fails with
	// "no matches for kind", so wait for all of them first.
	if err := waitEstablished(ctx, c, crds, deadline, f.pollInterval()); err != nil {
		return err
	}
	if opts.FilesystemDir != "" {
		if err := prepareFilesystem(out, opts); err != nil {
			return err
		}
	}
	for _, u := range manifests {
		if u.GetKind() == "CustomResourceDefinition" {
			continue
		}
		if err := applyUntil(ctx, c, out, u, deadline, f.pollInterval()); err != nil {
			return err
		}
	}

	ns := opts.Namespace
	switch opts.Scope {
	case install.ScopeCRDsOnly:
		_, err = fmt.Fprintln(out, "\nThe velero.io CRDs are installed.")
		return err
	case install.ScopeNoServer:
		_, err = fmt.Fprintf(out, "\nLifeboat is installed in namespace %q without a server. Start one with `lifeboat server -n %s`.\n", ns, ns)
		return err
	}
	if !o.wait {
		_, err = fmt.Fprintf(out, "\nLifeboat is installed in namespace %q; its server is Deployment %s/%s.\n"+
			"Follow its start with `kubectl -n %s rollout status deployment/%s` (or install --wait) and `kubectl -n %s logs deployment/%s`.\n",
			ns, ns, install.ServerName, ns, install.ServerName, ns, install.ServerName)
		return err
	}
	fmt.Fprintf(out, "\nWaiting up to %s for Deployment %s/%s to be available...\n", time.Until(deadline).Round(time.Second), ns, install.ServerName)
	if err := waitAvailable(ctx, c, ns, deadline, f.pollInterval()); err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "Deployment %s/%s is available: the Lifeboat server runs in namespace %q.\n", ns, install.ServerName, ns)
	return err
}

// namespaceIsInstalls says whether the namespace is, or will be, one that
// install created: absent now, or labelled so by an earlier install (the
// label must then be applied again, or the apply would remove it).
func namespaceIsInstalls(ctx context.Context, c client.Client, name string) (bool, error) {
	cctx, cancel := callCtx(ctx)
	defer cancel()
	ns := &corev1.Namespace{}
	err := c.Get(cctx, client.ObjectKey{Name: name}, ns)
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("reading namespace %s: %w", name, err)
	}
	return ns.Labels[install.CreatedNamespaceKey] == "true", nil
}

// prepareFilesystem creates DIR/backups where install runs. The filesystem
// store refuses a missing root or bucket directory (a typo must not
// scatter backups). For a server run as a process that is this machine;
// for the Deployment it is the node, which is this machine only on a
// single-node cluster run here, so a failure is then a warning.
func prepareFilesystem(out io.Writer, opts install.Options) error {
	bucket := filepath.Join(opts.FilesystemDir, install.FilesystemBucket)
	err := os.MkdirAll(bucket, 0o700)
	if err == nil && opts.Scope == install.ScopeServer && os.Geteuid() == 0 {
		// The pod runs as uid 65532, not as the root who made the directory.
		for _, dir := range []string{opts.FilesystemDir, bucket} {
			if err = os.Chown(dir, install.ServerUID, install.ServerUID); err != nil {
				break
			}
		}
	}
	if err == nil {
		return nil
	}
	if opts.Scope != install.ScopeServer {
		return fmt.Errorf("creating the --use-filesystem directory: %w", err)
	}
	_, werr := fmt.Fprintf(out, "warning: could not create %s here (%v); on the node the server runs on, run: mkdir -p %s && chown -R %d:%d %s\n",
		bucket, err, bucket, install.ServerUID, install.ServerUID, opts.FilesystemDir)
	return werr
}

func applyOne(ctx context.Context, c client.Client, out io.Writer, u *unstructured.Unstructured) error {
	callCtx, cancel := callCtx(ctx)
	defer cancel()
	if err := c.Apply(callCtx, client.ApplyConfigurationFromUnstructured(u.DeepCopy()), client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying %s %s: %w%s", u.GetKind(), objectRef(u), err, applyHint(u, err))
	}
	_, err := fmt.Fprintf(out, "%s/%s: applied\n", u.GetKind(), objectRef(u))
	return err
}

// applyHint says what to do about the refusals an install meets in practice.
func applyHint(u *unstructured.Unstructured, err error) string {
	switch {
	case apierrors.IsForbidden(err):
		return "\n(install needs to create CRDs, ClusterRoles and their bindings: run it as a cluster administrator)"
	case apierrors.IsInvalid(err) && u.GetKind() == "Deployment" && strings.Contains(err.Error(), "selector"):
		return fmt.Sprintf("\n(a Deployment %s made by another tool, such as Velero's Helm chart, selects its pods differently and a selector cannot change: "+
			"delete it with `kubectl -n %s delete deployment %s` and run install again)", objectRef(u), u.GetNamespace(), u.GetName())
	}
	return ""
}

// applyUntil retries while the API server's discovery has not caught up
// with a just-established CRD, which takes a moment after Established.
func applyUntil(ctx context.Context, c client.Client, out io.Writer, u *unstructured.Unstructured, deadline time.Time, poll time.Duration) error {
	for {
		err := applyOne(ctx, c, out, u)
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

// waitCRDGone waits while a CRD is being deleted (an uninstall a moment
// ago): applied to now, it would vanish with its objects a moment later.
func waitCRDGone(ctx context.Context, c client.Client, out io.Writer, name string, deadline time.Time, poll time.Duration) error {
	said := false
	for {
		obj := &apiextensionsv1.CustomResourceDefinition{}
		cctx, cancel := callCtx(ctx)
		err := c.Get(cctx, client.ObjectKey{Name: name}, obj)
		cancel()
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return fmt.Errorf("reading CRD %s: %w", name, err)
		case obj.DeletionTimestamp == nil:
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("CRD %s is still being deleted after --timeout (its objects are being removed); run install again once it is gone", name)
		}
		if !said {
			fmt.Fprintf(out, "CustomResourceDefinition/%s: being deleted; waiting for it to go\n", name)
			said = true
		}
		if err := sleep(ctx, poll); err != nil {
			return err
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

// waitAvailable waits until the server's Deployment runs its current
// template and is available, and says why not when the deadline passes.
func waitAvailable(ctx context.Context, c client.Client, namespace string, deadline time.Time, poll time.Duration) error {
	var why string
	for {
		d := &appsv1.Deployment{}
		cctx, cancel := callCtx(ctx)
		err := c.Get(cctx, client.ObjectKey{Namespace: namespace, Name: install.ServerName}, d)
		cancel()
		if err != nil {
			return fmt.Errorf("reading Deployment %s/%s: %w", namespace, install.ServerName, err)
		}
		var ready bool
		if ready, why = deploymentAvailable(d); ready {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the server's Deployment %s/%s is not available within --timeout (%s): see `kubectl -n %s describe deployment %s` "+
				"and `kubectl -n %s logs deployment/%s`, or wait longer with --timeout",
				namespace, install.ServerName, why, namespace, install.ServerName, namespace, install.ServerName)
		}
		if err := sleep(ctx, poll); err != nil {
			return fmt.Errorf("waiting for Deployment %s/%s: %w", namespace, install.ServerName, err)
		}
	}
}

// deploymentAvailable is kubectl rollout status' test: the controller saw
// the newest spec, every replica runs it and is available.
func deploymentAvailable(d *appsv1.Deployment) (bool, string) {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	st := d.Status
	switch {
	case st.ObservedGeneration < d.Generation:
		return false, "the Deployment controller has not seen the newest spec yet"
	case st.UpdatedReplicas < want:
		return false, fmt.Sprintf("%d of %d pods run the newest spec", st.UpdatedReplicas, want)
	case st.Replicas > st.UpdatedReplicas:
		return false, fmt.Sprintf("%d old pods are still terminating", st.Replicas-st.UpdatedReplicas)
	case st.AvailableReplicas < want:
		msg := fmt.Sprintf("%d of %d pods available", st.AvailableReplicas, want)
		if i := slices.IndexFunc(st.Conditions, func(c appsv1.DeploymentCondition) bool {
			return c.Type == appsv1.DeploymentProgressing && c.Message != ""
		}); i >= 0 {
			msg += ": " + st.Conditions[i].Message
		}
		return false, msg
	}
	return true, ""
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

// serverArguments are the --server-arg values, after the server flags
// install sets itself (Velero's way: only those given).
func (o *installOptions) serverArguments() []string {
	if o.fsBackupTimeout <= 0 {
		return o.serverArgs
	}
	return append([]string{"--fs-backup-timeout=" + o.fsBackupTimeout.String()}, o.serverArgs...)
}

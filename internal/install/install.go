// Package install turns install options into the objects that put a
// Lifeboat server in a cluster: CRDs, namespace, service account, RBAC,
// credentials, locations and the server's Deployment, in the order they
// are applied. It builds plain values and talks to no cluster: `lifeboat
// install` applies them, `--dry-run` prints them, the Helm chart is held
// to the same output, and the tests compare them with golden files.
//
// Names follow Velero's where Velero has them (Deployment and service
// account "velero", labels component=velero and deploy=velero, metrics
// port 8085), so monitors and habits built around a Velero install keep
// working. RBAC is Lifeboat's own: least privilege instead of Velero's
// cluster-admin binding.
package install

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/config/crd"
	"github.com/lifeboat-io/lifeboat/internal/storage/filesystem"
)

// Velero's names, kept so that a Velero server or CLI pointed at the same
// namespace finds the same objects, and dashboards keep matching.
const (
	ServerName          = "velero" // Deployment, its container, and the service account
	LocationName        = "default"
	CredentialsSecret   = "cloud-credentials"
	CredentialsKey      = "cloud"
	FilesystemProvider  = filesystem.ProviderName
	FilesystemBucket    = "backups"
	FilesystemPathKey   = filesystem.PathKey
	DefaultImageRepo    = "ghcr.io/lifeboat-io/lifeboat"
	MetricsPort         = 8085
	MetricsPortName     = "http-monitoring"
	HealthPort          = 8086
	HealthPortName      = "http-health"
	ServerUID           = 65532 // distroless "nonroot"
	NamespaceRoleName   = "lifeboat-server"
	CreatedNamespaceKey = "lifeboat.io/created-by-install"
)

// Paths inside the server's container.
const (
	PluginDir        = "/plugins"
	pluginTarget     = "/target" // where a plugin image's entry point copies its binaries (Velero's convention)
	scratchDir       = "/scratch"
	workDir          = scratchDir + "/work"
	runtimeDir       = "/run/lifeboat"
	credentialsDir   = runtimeDir + "/credentials"
	secretMountPath  = "/credentials"
	secretFileInPod  = secretMountPath + "/" + CredentialsKey
	volPlugins       = "plugins"
	volScratch       = "scratch"
	volRuntime       = "plugin-credentials"
	volCloudSecret   = "cloud-credentials"
	volFilesystem    = "backup-store"
	namespaceEnvName = "VELERO_NAMESPACE"
)

// Scope says how much install puts in the cluster.
type Scope int

const (
	// Everything: CRDs, namespace, service account, RBAC, credentials,
	// locations and the server's Deployment.
	ScopeServer Scope = iota
	// NoServer leaves out the service account, RBAC and Deployment, for a
	// server run as a process (tests, the demo, `lifeboat server` on a
	// laptop) with the user's own credentials.
	ScopeNoServer
	// CRDsOnly applies the CRDs and nothing else.
	ScopeCRDsOnly
)

// Location is the default BackupStorageLocation.
type Location struct {
	Provider string
	Bucket   string
	Prefix   string
	Config   map[string]string
}

// SnapshotLocation is the default VolumeSnapshotLocation.
type SnapshotLocation struct {
	Provider string
	Config   map[string]string
}

// Options are everything install can be told.
type Options struct {
	Namespace string
	Scope     Scope
	// NamespaceCreated labels the namespace as install's own, so that
	// uninstall may remove it; set when install found no namespace.
	NamespaceCreated bool

	// Image of the server; ImagePullPolicy empty means Always for an
	// untagged or :latest image, IfNotPresent otherwise.
	Image           string
	ImagePullPolicy corev1.PullPolicy
	// Plugins are plugin images, each run as an init container that
	// copies its binaries into the plugin directory.
	Plugins   []string
	Resources corev1.ResourceRequirements
	// ServerArgs are appended to the server's command line.
	ServerArgs                []string
	PodAnnotations            map[string]string
	PodLabels                 map[string]string
	ServiceAccountAnnotations map[string]string
	// RestoreRBAC grants bind and escalate on roles (see ClusterGrants).
	RestoreRBAC bool

	// Location, when set, becomes the default BackupStorageLocation.
	Location *Location
	// FilesystemDir, when set, stores backups in this directory of the
	// node (provider lifeboat.io/filesystem), mounted into the server at
	// the same path; it replaces Location.
	FilesystemDir string
	// SnapshotLocation, when set, becomes the default VolumeSnapshotLocation.
	SnapshotLocation *SnapshotLocation
	// Credentials, when not nil, go into Secret cloud-credentials (key
	// cloud), which the locations name and the server mounts.
	Credentials []byte

	// NodeAgent adds the node agent: DaemonSet node-agent running
	// `lifeboat node-agent` on every node, its service account and RBAC
	// (Velero's --use-node-agent).
	NodeAgent bool
	// KubeletRootDir is the kubelet's root directory on the nodes; its
	// pods/ is mounted into the node agent. Empty is /var/lib/kubelet.
	KubeletRootDir string
	// NodeAgentResources are the node agent container's; Velero's default
	// is none (unbounded).
	NodeAgentResources corev1.ResourceRequirements
}

// DefaultResources are Velero's defaults for its server.
func DefaultResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000m"), corev1.ResourceMemory: resource.MustParse("512Mi")},
	}
}

// ClusterRoleName names the server's ClusterRole and its binding; the
// namespace is part of it so that two installs do not collide.
func ClusterRoleName(namespace string) string { return "lifeboat-server-" + namespace }

// AggregatedClusterRoleName names the ClusterRole that collects every
// ClusterRole labelled AggregateLabel, and its binding.
func AggregatedClusterRoleName(namespace string) string {
	return ClusterRoleName(namespace) + "-aggregated"
}

// Labels are on every object install creates; uninstall removes only what
// carries them.
func Labels() map[string]string {
	return map[string]string{
		"component":                    "velero",
		"app.kubernetes.io/name":       "lifeboat",
		"app.kubernetes.io/managed-by": "lifeboat",
	}
}

// ManagedBy tells whether install made obj (the label a user's own or
// Velero's objects of the same name lack).
func ManagedBy(obj metav1.Object) bool {
	return obj.GetLabels()["app.kubernetes.io/managed-by"] == "lifeboat"
}

// ServerSelector selects the server's pods, as Velero's does; a
// Deployment's selector cannot change, so keeping Velero's lets install
// replace a Deployment `velero install` made.
func ServerSelector() map[string]string { return map[string]string{"deploy": ServerName} }

// Objects returns what install applies, in order: CRDs first (the rest may
// be velero.io kinds), the Deployment last (the server starts with
// everything it reads in place).
func Objects(o Options) ([]client.Object, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	crds, err := crd.All()
	if err != nil {
		return nil, fmt.Errorf("loading the embedded CRDs: %w", err)
	}
	var objs []client.Object
	for _, c := range crds {
		objs = append(objs, c)
	}
	if o.Scope == ScopeCRDsOnly {
		return objs, nil
	}
	objs = append(objs, o.namespace())
	if o.Scope == ScopeServer {
		objs = append(objs, o.serviceAccount())
		objs = append(objs, o.rbac()...)
		if o.NodeAgent {
			objs = append(objs, o.nodeAgentServiceAccount())
			objs = append(objs, o.nodeAgentRBAC()...)
		}
	}
	if o.Credentials != nil {
		objs = append(objs, o.secret())
	}
	if bsl := o.backupLocation(); bsl != nil {
		objs = append(objs, bsl)
	}
	if o.SnapshotLocation != nil {
		objs = append(objs, o.snapshotLocation())
	}
	if o.Scope == ScopeServer {
		d, err := o.deployment()
		if err != nil {
			return nil, err
		}
		objs = append(objs, d)
		if o.NodeAgent {
			objs = append(objs, o.nodeAgentDaemonSet())
		}
	}
	return objs, nil
}

func (o Options) validate() error {
	if errs := validation.IsDNS1123Label(o.Namespace); len(errs) > 0 {
		return fmt.Errorf("namespace %q: %s", o.Namespace, strings.Join(errs, "; "))
	}
	if o.Scope == ScopeServer && o.Image == "" {
		return errors.New("no server image")
	}
	if o.NodeAgent && o.Scope != ScopeServer {
		return errors.New("the node agent runs in the cluster next to the server: it cannot be installed without the server's Deployment")
	}
	if o.KubeletRootDir != "" && !filepath.IsAbs(o.KubeletRootDir) {
		return fmt.Errorf("kubelet root directory %q: must be an absolute path on the nodes", o.KubeletRootDir)
	}
	if o.FilesystemDir != "" {
		if o.Location != nil {
			return errors.New("a filesystem directory and a storage location cannot both be given")
		}
		if !filepath.IsAbs(o.FilesystemDir) {
			return fmt.Errorf("filesystem directory %q: must be an absolute path (it is a path on the node)", o.FilesystemDir)
		}
	}
	return nil
}

func meta(name, namespace string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: Labels()}
}

func (o Options) namespace() *corev1.Namespace {
	ns := &corev1.Namespace{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: meta(o.Namespace, ""),
	}
	if o.NamespaceCreated {
		ns.Labels[CreatedNamespaceKey] = "true"
	}
	return ns
}

func (o Options) serviceAccount() *corev1.ServiceAccount {
	sa := &corev1.ServiceAccount{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: meta(ServerName, o.Namespace),
	}
	if len(o.ServiceAccountAnnotations) > 0 {
		sa.Annotations = maps.Clone(o.ServiceAccountAnnotations)
	}
	return sa
}

func (o Options) rbac() []client.Object {
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: ServerName, Namespace: o.Namespace}}
	crType := metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"}
	crbType := metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"}
	name, aggregated := ClusterRoleName(o.Namespace), AggregatedClusterRoleName(o.Namespace)
	return []client.Object{
		&rbacv1.ClusterRole{TypeMeta: crType, ObjectMeta: meta(name, ""), Rules: rules(ClusterGrants(o.RestoreRBAC))},
		// Its rules are filled in by the API server's aggregation
		// controller from the labelled ClusterRoles; install sets none.
		&rbacv1.ClusterRole{
			TypeMeta: crType, ObjectMeta: meta(aggregated, ""),
			AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{
				{MatchLabels: map[string]string{AggregateLabel: "true"}},
			}},
		},
		&rbacv1.ClusterRoleBinding{
			TypeMeta: crbType, ObjectMeta: meta(name, ""), Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		},
		&rbacv1.ClusterRoleBinding{
			TypeMeta: crbType, ObjectMeta: meta(aggregated, ""), Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: aggregated},
		},
		&rbacv1.Role{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
			ObjectMeta: meta(NamespaceRoleName, o.Namespace), Rules: rules(NamespaceGrants()),
		},
		&rbacv1.RoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
			ObjectMeta: meta(NamespaceRoleName, o.Namespace), Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: NamespaceRoleName},
		},
	}
}

func (o Options) secret() *corev1.Secret {
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: meta(CredentialsSecret, o.Namespace),
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{CredentialsKey: o.Credentials},
	}
}

func (o Options) backupLocation() *v1.BackupStorageLocation {
	loc := o.Location
	if o.FilesystemDir != "" {
		loc = &Location{Provider: FilesystemProvider, Bucket: FilesystemBucket, Config: map[string]string{FilesystemPathKey: o.FilesystemDir}}
	}
	if loc == nil {
		return nil
	}
	bsl := &v1.BackupStorageLocation{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1.SchemeGroupVersion.String(), Kind: "BackupStorageLocation"},
		ObjectMeta: meta(LocationName, o.Namespace),
		Spec: v1.BackupStorageLocationSpec{
			Provider: loc.Provider,
			Config:   maps.Clone(loc.Config),
			StorageType: v1.StorageType{ObjectStorage: &v1.ObjectStorageLocation{
				Bucket: loc.Bucket,
				Prefix: loc.Prefix,
			}},
			Default: true,
		},
	}
	if o.Credentials != nil {
		bsl.Spec.Credential = &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: CredentialsSecret},
			Key:                  CredentialsKey,
		}
	}
	return bsl
}

func (o Options) snapshotLocation() *v1.VolumeSnapshotLocation {
	vsl := &v1.VolumeSnapshotLocation{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1.SchemeGroupVersion.String(), Kind: "VolumeSnapshotLocation"},
		ObjectMeta: meta(LocationName, o.Namespace),
		Spec: v1.VolumeSnapshotLocationSpec{
			Provider: o.SnapshotLocation.Provider,
			Config:   maps.Clone(o.SnapshotLocation.Config),
		},
	}
	if o.Credentials != nil {
		vsl.Spec.Credential = &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: CredentialsSecret},
			Key:                  CredentialsKey,
		}
	}
	return vsl
}

// PullPolicy is Velero's rule: an image without a tag, or tagged latest,
// moves, so it is pulled every time; any other tag or a digest is pulled
// once per node.
func PullPolicy(image string) corev1.PullPolicy {
	if strings.Contains(image, "@") {
		return corev1.PullIfNotPresent
	}
	repo := image[strings.LastIndex(image, "/")+1:]
	i := strings.LastIndex(repo, ":")
	if i < 0 || repo[i+1:] == "latest" {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}

// PluginContainerName names a plugin's init container after its image, as
// Velero does: the repository path without the registry host, tag or
// digest, with '/', '_' and '.' turned into '-', so that `plugin remove`
// finds it by either name.
func PluginContainerName(image string) string {
	name := image
	if at := strings.LastIndex(name, "@"); at > 0 {
		name = name[:at]
	} else if c := strings.LastIndex(name, ":"); c > strings.LastIndex(name, "/") {
		name = name[:c]
	}
	// The first path element is a registry host when more paths follow
	// it (docker.io/velero/x, not velero/x), or when the image starts
	// with a slash.
	if i := strings.Index(name, "/"); i == 0 || (i > 0 && strings.Count(name[i:], "/") > 1) {
		name = name[i+1:]
	}
	// Velero turns '/', '_' and '.' into '-'; anything else a container
	// name cannot hold (a registry port's ':') goes the same way.
	name = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, strings.ToLower(name))
	if len(name) > validation.DNS1123LabelMaxLength {
		// Long names stay unique by a digest of the whole.
		sum := sha256.Sum256([]byte(name))
		name = strings.TrimRight(name[:validation.DNS1123LabelMaxLength-7], "-") + "-" + hex.EncodeToString(sum[:])[:6]
	}
	return name
}

// PluginContainer is the init container of one plugin image.
func PluginContainer(image string, policy corev1.PullPolicy) corev1.Container {
	return corev1.Container{
		Name:            PluginContainerName(image),
		Image:           image,
		ImagePullPolicy: policy,
		VolumeMounts:    []corev1.VolumeMount{{Name: volPlugins, MountPath: pluginTarget}},
		SecurityContext: containerSecurity(),
	}
}

func containerSecurity() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr(false),
		ReadOnlyRootFilesystem:   ptr(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

func ptr[T any](v T) *T { return &v }

func (o Options) deployment() (*appsv1.Deployment, error) {
	policy := o.ImagePullPolicy
	if policy == "" {
		policy = PullPolicy(o.Image)
	}
	podLabels := Labels()
	maps.Copy(podLabels, ServerSelector())
	maps.Copy(podLabels, o.PodLabels)
	// Velero's annotations, which Prometheus' pod discovery reads.
	annotations := map[string]string{
		"prometheus.io/scrape": "true",
		"prometheus.io/port":   fmt.Sprint(MetricsPort),
		"prometheus.io/path":   "/metrics",
	}
	maps.Copy(annotations, o.PodAnnotations)

	args := []string{
		"server",
		// Expanded by the kubelet from the env below: the pod serves the
		// namespace it runs in.
		"--namespace=$(" + namespaceEnvName + ")",
		"--plugin-dir=" + PluginDir,
		"--work-dir=" + workDir,
		"--credentials-dir=" + credentialsDir,
		// The restore-wait init container of file-system restores runs
		// `lifeboat restore-helper` from the server's own image.
		"--restore-helper-image=" + o.Image,
	}
	args = append(args, o.ServerArgs...)

	env := []corev1.EnvVar{
		// Velero's name: plugins (pkg/plugin/config.ServerNamespace and
		// Velero's SDK) read it to find their ConfigMaps.
		{Name: namespaceEnvName, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
		{Name: "VELERO_SCRATCH_DIR", Value: scratchDir},
		// The root filesystem is read-only: temporary files of the server
		// and of plugin processes go to the scratch volume.
		{Name: "TMPDIR", Value: scratchDir},
		{Name: "HOME", Value: scratchDir},
	}
	mounts := []corev1.VolumeMount{
		{Name: volPlugins, MountPath: PluginDir},
		{Name: volScratch, MountPath: scratchDir},
		{Name: volRuntime, MountPath: runtimeDir},
	}
	volumes := []corev1.Volume{
		{Name: volPlugins, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: volScratch, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		// The credential files the server hands to plugins: in memory,
		// never on the node's disk.
		{Name: volRuntime, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
	}
	if o.Credentials != nil {
		mounts = append(mounts, corev1.VolumeMount{Name: volCloudSecret, MountPath: secretMountPath, ReadOnly: true})
		volumes = append(volumes, corev1.Volume{Name: volCloudSecret, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName:  CredentialsSecret,
			DefaultMode: ptr(int32(0o440)), // group-readable: fsGroup is the server's group
		}}})
		// Velero's variables: plugins that take the cloud SDKs' default
		// credentials find the secret's file through them.
		for _, name := range []string{"GOOGLE_APPLICATION_CREDENTIALS", "AWS_SHARED_CREDENTIALS_FILE", "AZURE_CREDENTIALS_FILE", "ALIBABA_CLOUD_CREDENTIALS_FILE"} {
			env = append(env, corev1.EnvVar{Name: name, Value: secretFileInPod})
		}
	}
	if o.FilesystemDir != "" {
		// The filesystem store writes on the node the pod runs on: one
		// node, or a test cluster. The location's path is the node's path.
		mounts = append(mounts, corev1.VolumeMount{Name: volFilesystem, MountPath: o.FilesystemDir})
		volumes = append(volumes, corev1.Volume{Name: volFilesystem, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
			Path: o.FilesystemDir, Type: ptr(corev1.HostPathDirectoryOrCreate),
		}}})
	}

	var inits []corev1.Container
	seen := map[string]string{}
	for _, image := range o.Plugins {
		c := PluginContainer(image, policy)
		if other, dup := seen[c.Name]; dup {
			return nil, fmt.Errorf("plugin images %s and %s would both be init container %q: give each plugin once", other, image, c.Name)
		}
		seen[c.Name] = image
		inits = append(inits, c)
	}

	probe := func(path string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: path, Port: intstr.FromString(HealthPortName),
		}}}
	}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: ServerName, Namespace: o.Namespace, Labels: withSelector(Labels())},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: ServerSelector()},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: annotations},
				Spec: corev1.PodSpec{
					ServiceAccountName: ServerName,
					NodeSelector:       map[string]string{"kubernetes.io/os": "linux"},
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr(true),
						RunAsUser:      ptr(int64(ServerUID)),
						RunAsGroup:     ptr(int64(ServerUID)),
						FSGroup:        ptr(int64(ServerUID)),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					InitContainers: inits,
					Containers: []corev1.Container{{
						Name:            ServerName,
						Image:           o.Image,
						ImagePullPolicy: policy,
						Command:         []string{"/lifeboat"},
						Args:            args,
						Ports: []corev1.ContainerPort{
							{Name: MetricsPortName, ContainerPort: MetricsPort, Protocol: corev1.ProtocolTCP},
							{Name: HealthPortName, ContainerPort: HealthPort, Protocol: corev1.ProtocolTCP},
						},
						Env:             env,
						Resources:       o.Resources,
						VolumeMounts:    mounts,
						LivenessProbe:   probe("/healthz"),
						ReadinessProbe:  probe("/readyz"),
						SecurityContext: containerSecurity(),
					}},
					Volumes: volumes,
				},
			},
		},
	}, nil
}

func withSelector(labels map[string]string) map[string]string {
	maps.Copy(labels, ServerSelector())
	return labels
}

// ServerIdentity is the server's service account and every RBAC object
// install makes for it: what a server outside the cluster needs to run
// with exactly the permissions it would have inside (see
// ServiceAccountConfig).
func ServerIdentity(namespace string, restoreRBAC bool) []client.Object {
	o := Options{Namespace: namespace, RestoreRBAC: restoreRBAC}
	return append([]client.Object{o.serviceAccount()}, o.rbac()...)
}

// ServiceAccountConfig is cfg acting as the server's service account in
// namespace (impersonation; cfg's user must be allowed to impersonate):
// a server run with it outside the cluster is refused whatever install
// does not grant, as it would be inside.
func ServiceAccountConfig(cfg *rest.Config, namespace string) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{
		// How the API server names a service account's user and groups.
		UserName: "system:serviceaccount:" + namespace + ":" + ServerName,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	return c
}

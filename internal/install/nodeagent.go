package install

import (
	"fmt"
	"maps"
	"path/filepath"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lifeboat-io/lifeboat/internal/hostpods"
)

// The node agent's names: the DaemonSet, its container and selector are
// Velero's; its service account and roles are its own, so that it holds
// only what it needs (Velero's node agent runs as the server's account).
const (
	NodeAgentName          = "node-agent" // DaemonSet, container, service account
	NodeAgentRoleName      = "lifeboat-node-agent"
	DefaultKubeletRootDir  = "/var/lib/kubelet"
	volHostPods            = "host-pods"
	nodeAgentNodeNameEnv   = "NODE_NAME"
	nodeAgentRoleClusterNS = "lifeboat-node-agent-"
)

// NodeAgentClusterRoleName names the node agent's ClusterRole and binding.
func NodeAgentClusterRoleName(namespace string) string { return nodeAgentRoleClusterNS + namespace }

// NodeAgentSelector selects the node agent's pods, as Velero's DaemonSet
// does.
func NodeAgentSelector() map[string]string { return map[string]string{"name": NodeAgentName} }

// NodeAgentClusterGrants are the node agent's rules over the whole cluster.
func NodeAgentClusterGrants() []Grant {
	return []Grant{
		{
			Rule: rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}},
			Why: "node agent: get, list and watch on pods: it watches the pods of its own node (RBAC cannot limit a rule to a node; " +
				"the agent's cache asks only for spec.nodeName of its node) to find the pod of a PodVolumeBackup and its UID, " +
				"and to see a restored pod's restore-wait init container start",
		},
		{
			Rule: rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims", "persistentvolumes"}, Verbs: []string{"get"}},
			Why:  "node agent: get on persistentvolumeclaims and persistentvolumes: the directory of a claim's volume is named after its PersistentVolume, under mount for a CSI one, and a hostPath PersistentVolume is refused",
		},
		{
			Rule: rbacv1.PolicyRule{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"csidrivers"}, Verbs: []string{"list"}},
			Why:  "node agent: list on csidrivers: an in-tree PersistentVolume migrated to CSI is mounted as a CSI volume when its driver is registered",
		},
	}
}

// NodeAgentNamespaceGrants are the node agent's rules in the server's
// namespace.
func NodeAgentNamespaceGrants() []Grant {
	return []Grant{
		{
			Rule: rbacv1.PolicyRule{APIGroups: []string{"velero.io"}, Resources: []string{"podvolumebackups", "podvolumerestores"},
				Verbs: []string{"get", "list", "watch", "update", "patch"}},
			Why: "node agent: get, list, watch, update and patch on podvolumebackups and podvolumerestores in the server's namespace: " +
				"it carries out those of its node and records their phase, progress, snapshot and outcome (it never creates or deletes one)",
		},
		{
			Rule: rbacv1.PolicyRule{APIGroups: []string{"velero.io"}, Resources: []string{"backupstoragelocations", "backuprepositories"},
				Verbs: []string{"get", "list", "watch"}},
			Why: "node agent: get, list and watch on backupstoragelocations and backuprepositories in the server's namespace: " +
				"a volume's data goes to the repository of the PodVolumeBackup's storage location",
		},
		{
			Rule: rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}},
			Why: "node agent: get on secrets in the server's namespace: the storage location's credentials and the repository password " +
				"(Secret velero-repo-credentials, as in Velero)",
		},
	}
}

func (o Options) nodeAgentServiceAccount() *corev1.ServiceAccount {
	return &corev1.ServiceAccount{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: meta(NodeAgentName, o.Namespace),
	}
}

func (o Options) nodeAgentRBAC() []client.Object {
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: NodeAgentName, Namespace: o.Namespace}}
	name := NodeAgentClusterRoleName(o.Namespace)
	return []client.Object{
		&rbacv1.ClusterRole{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
			ObjectMeta: meta(name, ""), Rules: rules(NodeAgentClusterGrants()),
		},
		&rbacv1.ClusterRoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
			ObjectMeta: meta(name, ""), Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		},
		&rbacv1.Role{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
			ObjectMeta: meta(NodeAgentRoleName, o.Namespace), Rules: rules(NodeAgentNamespaceGrants()),
		},
		&rbacv1.RoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
			ObjectMeta: meta(NodeAgentRoleName, o.Namespace), Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: NodeAgentRoleName},
		},
	}
}

// nodeAgentSecurity is the node agent container's: root (pod level), to
// read and restore files of any owner and mode, with only the capabilities
// that takes. Not privileged: reading and writing files in mounted volumes
// needs no device access (Velero's privileged mode is for block volumes,
// which Lifeboat does not move).
func nodeAgentSecurity() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		Privileged:               ptr(false),
		AllowPrivilegeEscalation: ptr(false),
		ReadOnlyRootFilesystem:   ptr(true),
		Capabilities: &corev1.Capabilities{
			Drop: []corev1.Capability{"ALL"},
			// DAC_OVERRIDE: read any file and write into any directory;
			// CHOWN and FOWNER: give restored files their owners, modes
			// and times; FSETID: keep setuid/setgid bits while doing so.
			Add: []corev1.Capability{"CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID"},
		},
	}
}

func (o Options) nodeAgentDaemonSet() *appsv1.DaemonSet {
	policy := o.ImagePullPolicy
	if policy == "" {
		policy = PullPolicy(o.Image)
	}
	kubeletRoot := o.KubeletRootDir
	if kubeletRoot == "" {
		kubeletRoot = DefaultKubeletRootDir
	}
	podLabels := Labels()
	maps.Copy(podLabels, NodeAgentSelector())
	podLabels["role"] = NodeAgentName
	maps.Copy(podLabels, o.PodLabels)
	annotations := map[string]string{
		"prometheus.io/scrape": "true",
		"prometheus.io/port":   fmt.Sprint(MetricsPort),
		"prometheus.io/path":   "/metrics",
	}
	maps.Copy(annotations, o.PodAnnotations)
	env := []corev1.EnvVar{
		{Name: nodeAgentNodeNameEnv, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
		{Name: namespaceEnvName, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
		{Name: "VELERO_SCRATCH_DIR", Value: scratchDir},
		{Name: "TMPDIR", Value: scratchDir},
		{Name: "HOME", Value: scratchDir},
	}
	propagation := corev1.MountPropagationHostToContainer
	mounts := []corev1.VolumeMount{
		// HostToContainer: volumes the kubelet mounts after the agent
		// started (a pod scheduled later, a CSI volume) appear in it.
		{Name: volHostPods, MountPath: hostpods.MountPath, MountPropagation: &propagation},
		{Name: volScratch, MountPath: scratchDir},
	}
	volumes := []corev1.Volume{
		{Name: volHostPods, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: filepath.Join(kubeletRoot, "pods")}}},
		{Name: volScratch, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	if o.Credentials != nil {
		mounts = append(mounts, corev1.VolumeMount{Name: volCloudSecret, MountPath: secretMountPath, ReadOnly: true})
		volumes = append(volumes, corev1.Volume{Name: volCloudSecret, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: CredentialsSecret, DefaultMode: ptr(int32(0o440)),
		}}})
		for _, name := range []string{"GOOGLE_APPLICATION_CREDENTIALS", "AWS_SHARED_CREDENTIALS_FILE", "AZURE_CREDENTIALS_FILE", "ALIBABA_CLOUD_CREDENTIALS_FILE"} {
			env = append(env, corev1.EnvVar{Name: name, Value: secretFileInPod})
		}
	}
	if o.FilesystemDir != "" {
		// The repositories of a filesystem location are in its directory
		// on the node, as the server's backups are.
		mounts = append(mounts, corev1.VolumeMount{Name: volFilesystem, MountPath: o.FilesystemDir})
		volumes = append(volumes, corev1.Volume{Name: volFilesystem, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
			Path: o.FilesystemDir, Type: ptr(corev1.HostPathDirectoryOrCreate),
		}}})
	}
	probe := func(path string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: path, Port: intstr.FromString(HealthPortName),
		}}}
	}
	labels := Labels()
	maps.Copy(labels, NodeAgentSelector())
	return &appsv1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Name: NodeAgentName, Namespace: o.Namespace, Labels: labels},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: NodeAgentSelector()},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: annotations},
				Spec: corev1.PodSpec{
					ServiceAccountName: NodeAgentName,
					NodeSelector:       map[string]string{"kubernetes.io/os": "linux"},
					SecurityContext: &corev1.PodSecurityContext{
						RunAsUser:      ptr(int64(0)),
						RunAsGroup:     ptr(int64(0)),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name:            NodeAgentName,
						Image:           o.Image,
						ImagePullPolicy: policy,
						Command:         []string{"/lifeboat"},
						Args:            []string{"node-agent", "--namespace=$(" + namespaceEnvName + ")"},
						Ports: []corev1.ContainerPort{
							{Name: MetricsPortName, ContainerPort: MetricsPort, Protocol: corev1.ProtocolTCP},
							{Name: HealthPortName, ContainerPort: HealthPort, Protocol: corev1.ProtocolTCP},
						},
						Env:             env,
						Resources:       o.NodeAgentResources,
						VolumeMounts:    mounts,
						LivenessProbe:   probe("/healthz"),
						ReadinessProbe:  probe("/readyz"),
						SecurityContext: nodeAgentSecurity(),
					}},
					Volumes: volumes,
				},
			},
		},
	}
}

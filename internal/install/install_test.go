package install

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lifeboat-io/lifeboat/config/crd"
)

var update = flag.Bool("update", false, "rewrite the golden files from what the code does now")

const testImage = "ghcr.io/lifeboat-io/lifeboat:v1.2.3"

// goldenCases are the option sets whose output is kept in testdata. They
// stand for the three ways install is used: a node directory, a bucket
// with credentials and plugins, and a customised server.
var goldenCases = []struct {
	name string
	opts Options
}{
	{"filesystem", Options{
		Namespace: "velero", NamespaceCreated: true, Image: testImage, Resources: DefaultResources(), RestoreRBAC: true,
		FilesystemDir: "/var/lib/lifeboat",
	}},
	{"s3-secret-plugins", Options{
		Namespace: "velero", Image: testImage, Resources: DefaultResources(), RestoreRBAC: true,
		Plugins: []string{"velero/velero-plugin-for-aws:v1.12.0", "registry.example.com:5000/team/snap_shot.er@sha256:0123"},
		Location: &Location{Provider: "aws", Bucket: "backups", Prefix: "cluster-a", Config: map[string]string{
			"region": "minio", "s3ForcePathStyle": "true", "s3Url": "http://minio.minio:9000",
		}},
		SnapshotLocation:          &SnapshotLocation{Provider: "aws", Config: map[string]string{"region": "eu-west-1"}},
		Credentials:               []byte("[default]\naws_access_key_id=AK\naws_secret_access_key=SK\n"),
		ServiceAccountAnnotations: map[string]string{"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/lifeboat"},
	}},
	{"custom", Options{
		Namespace: "backup-system", Image: "registry.example.com/lifeboat", ImagePullPolicy: corev1.PullNever,
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")},
		},
		ServerArgs:     []string{"--backup-finalizer", "--log-format=json"},
		PodLabels:      map[string]string{"team": "platform"},
		PodAnnotations: map[string]string{"prometheus.io/scrape": "false", "example.com/owner": "platform"},
		RestoreRBAC:    false,
	}},
	{"node-agent", Options{
		Namespace: "velero", Image: testImage, Resources: DefaultResources(), RestoreRBAC: true,
		FilesystemDir: "/var/lib/lifeboat", NodeAgent: true, KubeletRootDir: "/var/lib/k0s/kubelet",
		Credentials: []byte("[default]\naws_access_key_id=AK\n"),
		NodeAgentResources: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
		},
	}},
	{"no-server", Options{
		Namespace: "velero", Scope: ScopeNoServer, FilesystemDir: "/tmp/lifeboat",
	}},
}

func TestObjectsGolden(t *testing.T) {
	crds, err := crd.All()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := Objects(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			// The CRDs come first, exactly as generated; the golden file
			// holds the rest (the CRDs would bury it).
			for i, c := range crds {
				got, ok := objs[i].(*apiextensionsv1.CustomResourceDefinition)
				if !ok || got.Name != c.Name {
					t.Fatalf("object %d is %T %s, want CRD %s", i, objs[i], objs[i].GetName(), c.Name)
				}
			}
			rest, err := Manifests(objs[len(crds):])
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := WriteYAML(&buf, rest); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", tc.name+".golden")
			if *update {
				if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./internal/install -update to create it)", err)
			}
			if buf.String() != string(want) {
				t.Errorf("objects differ from %s (go test ./internal/install -update rewrites it; review the diff):\n%s", golden, buf.String())
			}
		})
	}
}

func kinds(objs []client.Object) []string {
	var out []string
	for _, o := range objs {
		if _, ok := o.(*apiextensionsv1.CustomResourceDefinition); ok {
			continue
		}
		out = append(out, o.GetObjectKind().GroupVersionKind().Kind+"/"+o.GetName())
	}
	return out
}

func TestObjectsOrderAndScope(t *testing.T) {
	base := Options{Namespace: "ns1", Image: testImage, FilesystemDir: "/data", Credentials: nil}
	for _, tc := range []struct {
		scope Scope
		want  []string
	}{
		{ScopeServer, []string{
			"Namespace/ns1", "ServiceAccount/velero",
			"ClusterRole/lifeboat-server-ns1", "ClusterRole/lifeboat-server-ns1-aggregated",
			"ClusterRoleBinding/lifeboat-server-ns1", "ClusterRoleBinding/lifeboat-server-ns1-aggregated",
			"Role/lifeboat-server", "RoleBinding/lifeboat-server",
			"BackupStorageLocation/default", "Deployment/velero",
		}},
		{ScopeNoServer, []string{"Namespace/ns1", "BackupStorageLocation/default"}},
		{ScopeCRDsOnly, nil},
	} {
		o := base
		o.Scope = tc.scope
		objs, err := Objects(o)
		if err != nil {
			t.Fatal(err)
		}
		if got := kinds(objs); !slices.Equal(got, tc.want) {
			t.Errorf("scope %d:\n got %v\nwant %v", tc.scope, got, tc.want)
		}
		for _, obj := range objs {
			if _, ok := obj.(*apiextensionsv1.CustomResourceDefinition); !ok && !ManagedBy(obj) {
				t.Errorf("%T %s lacks the managed-by label uninstall relies on", obj, obj.GetName())
			}
		}
	}
}

func TestNodeAgentObjects(t *testing.T) {
	objs, err := Objects(Options{Namespace: "ns1", Image: testImage, NodeAgent: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"Namespace/ns1", "ServiceAccount/velero",
		"ClusterRole/lifeboat-server-ns1", "ClusterRole/lifeboat-server-ns1-aggregated",
		"ClusterRoleBinding/lifeboat-server-ns1", "ClusterRoleBinding/lifeboat-server-ns1-aggregated",
		"Role/lifeboat-server", "RoleBinding/lifeboat-server",
		"ServiceAccount/node-agent", "ClusterRole/lifeboat-node-agent-ns1", "ClusterRoleBinding/lifeboat-node-agent-ns1",
		"Role/lifeboat-node-agent", "RoleBinding/lifeboat-node-agent",
		"Deployment/velero", "DaemonSet/node-agent",
	}
	if got := kinds(objs); !slices.Equal(got, want) {
		t.Fatalf("\n got %v\nwant %v", got, want)
	}
	ds := objs[len(objs)-1].(*appsv1.DaemonSet)
	spec := ds.Spec.Template.Spec
	c := spec.Containers[0]
	if spec.Volumes[0].HostPath == nil || spec.Volumes[0].HostPath.Path != "/var/lib/kubelet/pods" ||
		c.VolumeMounts[0].MountPath != "/host_pods" || *c.VolumeMounts[0].MountPropagation != corev1.MountPropagationHostToContainer {
		t.Errorf("kubelet pod directory: volume %+v mount %+v; want /var/lib/kubelet/pods at /host_pods, HostToContainer", spec.Volumes[0], c.VolumeMounts[0])
	}
	if *c.SecurityContext.Privileged || *spec.SecurityContext.RunAsUser != 0 {
		t.Errorf("want root, unprivileged; got %+v / %+v", spec.SecurityContext, c.SecurityContext)
	}
	if c.Env[0].Name != "NODE_NAME" || c.Env[0].ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
		t.Errorf("NODE_NAME: %+v", c.Env[0])
	}
	if spec.ServiceAccountName != NodeAgentName || c.Args[0] != "node-agent" {
		t.Errorf("service account %s args %v", spec.ServiceAccountName, c.Args)
	}
	if _, err := Objects(Options{Namespace: "ns1", Scope: ScopeNoServer, NodeAgent: true}); err == nil {
		t.Error("a node agent without the server was accepted")
	}
}

func TestObjectsRefuseBadOptions(t *testing.T) {
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{Namespace: "Bad_NS", Image: testImage}, `namespace "Bad_NS"`},
		{Options{Namespace: "velero"}, "no server image"},
		{Options{Namespace: "velero", Image: testImage, FilesystemDir: "relative/dir"}, "absolute path"},
		{Options{Namespace: "velero", Image: testImage, FilesystemDir: "/d", Location: &Location{Provider: "aws"}}, "cannot both"},
		{Options{Namespace: "velero", Image: testImage, Plugins: []string{"a/plugin:1", "b.io/a/plugin:2"}}, `both be init container "a-plugin"`},
	} {
		if _, err := Objects(tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Objects(%+v) = %v, want an error containing %q", tc.opts, err, tc.want)
		}
	}
}

func TestPluginContainerNameFollowsVelero(t *testing.T) {
	for image, want := range map[string]string{
		"velero/velero-plugin-for-aws:v1.12.0":                    "velero-velero-plugin-for-aws",
		"docker.io/velero/velero-plugin-for-gcp:v1.0.0":           "velero-velero-plugin-for-gcp",
		"registry.example.com:5000/team/snap_shot.er@sha256:0123": "team-snap-shot-er",
		"plugin":                                 "plugin",
		"localhost:5000/plugin:1":                "localhost-5000-plugin", // one slash: no registry dropped, as in Velero; the port's colon becomes -
		"/abs/path/plugin:1":                     "abs-path-plugin",
		"example.com/" + strings.Repeat("x", 80): "",
	} {
		got := PluginContainerName(image)
		if want == "" {
			if len(got) > 63 || len(got) < 60 || strings.Contains(got, "--") {
				t.Errorf("PluginContainerName(long) = %q (%d chars), want 63", got, len(got))
			}
			continue
		}
		if got != want {
			t.Errorf("PluginContainerName(%q) = %q, want %q", image, got, want)
		}
	}
}

func TestPullPolicy(t *testing.T) {
	for image, want := range map[string]corev1.PullPolicy{
		"ghcr.io/lifeboat-io/lifeboat:v1":     corev1.PullIfNotPresent,
		"ghcr.io/lifeboat-io/lifeboat:latest": corev1.PullAlways,
		"ghcr.io/lifeboat-io/lifeboat":        corev1.PullAlways,
		"localhost:5000/lifeboat":             corev1.PullAlways, // the colon is the registry's port
		"localhost:5000/lifeboat@sha256:abcd": corev1.PullIfNotPresent,
	} {
		if got := PullPolicy(image); got != want {
			t.Errorf("PullPolicy(%q) = %s, want %s", image, got, want)
		}
	}
}

// TestEveryGrantIsDocumented holds the code and docs/install.md together:
// each rule's reason appears there word for word.
func TestEveryGrantIsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(doc)), " ")
	grants := append(ClusterGrants(true), NamespaceGrants()...)
	grants = append(grants, NodeAgentClusterGrants()...)
	for _, g := range append(grants, NodeAgentNamespaceGrants()...) {
		if g.Why == "" {
			t.Errorf("rule %+v has no reason", g.Rule)
			continue
		}
		if !strings.Contains(text, g.Why) {
			t.Errorf("docs/install.md does not give the reason of rule %+v:\n%s", g.Rule, g.Why)
		}
	}
}

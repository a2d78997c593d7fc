package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/config/crd"
)

// parseStream decodes a multi-document YAML stream.
func parseStream(t *testing.T, s string) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(s), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatalf("decoding the YAML stream: %v\n%s", err, s)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

func refs(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetKind()+"/"+objectRef(o))
	}
	return out
}

func crdRefs(t *testing.T) []string {
	t.Helper()
	crds, err := crd.All()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range crds {
		out = append(out, "CustomResourceDefinition/"+c.Name)
	}
	return out
}

func TestInstallDryRunFilesystem(t *testing.T) {
	dir := t.TempDir()
	// No client: a dry run must not touch a cluster.
	f := newTestFactory(nil)
	f.NewClient = func() (client.Client, error) { return nil, errors.New("dry run used the client") }
	out, _, err := run(t, f, "install", "--use-filesystem", dir, "--dry-run", "-o", "yaml", "-n", "backup-system", "--no-server")
	if err != nil {
		t.Fatal(err)
	}
	objs := parseStream(t, out)
	want := append(crdRefs(t), "Namespace/backup-system", "BackupStorageLocation/backup-system/default")
	if got := refs(objs); !slices.Equal(got, want) {
		t.Fatalf("objects:\n got %v\nwant %v", got, want)
	}
	for _, name := range []string{"backups.velero.io", "backupstoragelocations.velero.io", "downloadrequests.velero.io"} {
		if !slices.Contains(want, "CustomResourceDefinition/"+name) {
			t.Errorf("CRD %s is not installed", name)
		}
	}

	bsl := objs[len(objs)-1]
	if bsl.GetAPIVersion() != "velero.io/v1" {
		t.Errorf("BSL apiVersion = %q", bsl.GetAPIVersion())
	}
	spec := bsl.Object["spec"].(map[string]any)
	wantSpec := map[string]any{
		"provider":      "lifeboat.io/filesystem",
		"config":        map[string]any{"path": dir},
		"objectStorage": map[string]any{"bucket": "backups"},
		"default":       true,
	}
	if gotJSON, wantJSON := mustJSON(t, spec), mustJSON(t, wantSpec); gotJSON != wantJSON {
		t.Errorf("BSL spec:\n got %s\nwant %s", gotJSON, wantJSON)
	}
	for _, o := range objs {
		if _, ok := o.Object["status"]; ok {
			t.Errorf("%s carries a status in the manifest", o.GetName())
		}
		if _, ok, _ := unstructured.NestedFieldNoCopy(o.Object, "metadata", "creationTimestamp"); ok {
			t.Errorf("%s carries a creationTimestamp in the manifest", o.GetName())
		}
	}
	if _, err := os.Stat(dir + "/backups"); err == nil {
		t.Error("a dry run created directories")
	}
}

func TestInstallDryRunProviderWithSecret(t *testing.T) {
	secretFile := filepath.Join(t.TempDir(), "credentials")
	creds := "[default]\naws_access_key_id=AK\naws_secret_access_key=SK\n"
	if err := os.WriteFile(secretFile, []byte(creds), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, err := run(t, newTestFactory(nil), "install", "--provider", "aws", "--bucket", "bk", "--prefix", "cluster-a",
		"--backup-location-config", "region=minio,s3ForcePathStyle=true", "--secret-file", secretFile, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Kind  string                   `json:"kind"`
		Items []map[string]interface{} `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("-o json is not a JSON List: %v", err)
	}
	var objs []*unstructured.Unstructured
	for _, item := range list.Items {
		objs = append(objs, &unstructured.Unstructured{Object: item})
	}
	want := append(crdRefs(t), "Namespace/velero")
	want = append(want, serverRefs("velero")...)
	want = append(want, "Secret/velero/cloud-credentials", "BackupStorageLocation/velero/default", "Deployment/velero/velero")
	if got := refs(objs); list.Kind != "List" || !slices.Equal(got, want) {
		t.Fatalf("kind %s, objects:\n got %v\nwant %v", list.Kind, got, want)
	}

	secret := &corev1.Secret{}
	if err := runtimeFromUnstructured(objs[len(objs)-3], secret); err != nil {
		t.Fatal(err)
	}
	if string(secret.Data["cloud"]) != creds {
		t.Errorf("secret key cloud = %q, want the file's content", secret.Data["cloud"])
	}
	bsl := &v1.BackupStorageLocation{}
	if err := runtimeFromUnstructured(objs[len(objs)-2], bsl); err != nil {
		t.Fatal(err)
	}
	if bsl.Spec.Credential == nil || bsl.Spec.Credential.Name != "cloud-credentials" || bsl.Spec.Credential.Key != "cloud" {
		t.Errorf("credential = %+v, want cloud-credentials/cloud", bsl.Spec.Credential)
	}
	if bsl.Spec.Provider != "aws" || bsl.Spec.ObjectStorage.Bucket != "bk" || bsl.Spec.ObjectStorage.Prefix != "cluster-a" ||
		bsl.Spec.Config["region"] != "minio" || bsl.Spec.Config["s3ForcePathStyle"] != "true" || !bsl.Spec.Default {
		t.Errorf("unexpected BSL spec %+v", bsl.Spec)
	}
}

func TestInstallDryRunWithoutLocation(t *testing.T) {
	out, _, err := run(t, newTestFactory(nil), "install", "--dry-run")
	if err != nil {
		t.Fatal(err)
	}
	want := append(crdRefs(t), "Namespace/velero")
	want = append(want, serverRefs("velero")...)
	want = append(want, "Deployment/velero/velero")
	if got := refs(parseStream(t, out)); !slices.Equal(got, want) {
		t.Errorf("objects:\n got %v\nwant %v", got, want)
	}
}

// serverRefs are the service account and RBAC objects of a server in ns.
func serverRefs(ns string) []string {
	return []string{
		"ServiceAccount/" + ns + "/velero",
		"ClusterRole/lifeboat-server-" + ns, "ClusterRole/lifeboat-server-" + ns + "-aggregated",
		"ClusterRoleBinding/lifeboat-server-" + ns, "ClusterRoleBinding/lifeboat-server-" + ns + "-aggregated",
		"Role/" + ns + "/lifeboat-server", "RoleBinding/" + ns + "/lifeboat-server",
	}
}

func TestInstallCRDsOnly(t *testing.T) {
	out, _, err := run(t, newTestFactory(nil), "install", "--crds-only", "--dry-run")
	if err != nil {
		t.Fatal(err)
	}
	if got := refs(parseStream(t, out)); !slices.Equal(got, crdRefs(t)) {
		t.Errorf("objects:\n got %v\nwant %v", got, crdRefs(t))
	}
}

// TestInstallDeploymentFromFlags checks that each server flag reaches the
// Deployment (the golden files of internal/install cover the rest).
func TestInstallDeploymentFromFlags(t *testing.T) {
	out, _, err := run(t, newTestFactory(nil), "install", "-n", "bk", "--dry-run", "--use-filesystem", "/srv/backups",
		"--image", "example.com/lb:v9", "--image-pull-policy", "Always", "--plugins", "velero/velero-plugin-for-aws:v1.12.0,example.com/x/y:1",
		"--velero-pod-cpu-request", "250m", "--velero-pod-mem-limit", "0", "--server-arg=--backup-finalizer", "--restore-rbac=false",
		"--pod-volume-operation-timeout", "90m")
	if err != nil {
		t.Fatal(err)
	}
	objs := parseStream(t, out)
	dep := &appsv1.Deployment{}
	if err := runtimeFromUnstructured(objs[len(objs)-1], dep); err != nil {
		t.Fatal(err)
	}
	spec := dep.Spec.Template.Spec
	c := spec.Containers[0]
	if c.Image != "example.com/lb:v9" || c.ImagePullPolicy != corev1.PullAlways {
		t.Errorf("image %s %s", c.Image, c.ImagePullPolicy)
	}
	if got := c.Resources.Requests.Cpu().String(); got != "250m" {
		t.Errorf("cpu request %s, want 250m", got)
	}
	if _, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
		t.Errorf("memory limit 0 should set none: %v", c.Resources.Limits)
	}
	if !slices.Contains(c.Args, "--backup-finalizer") || !slices.Contains(c.Args, "--namespace=$(VELERO_NAMESPACE)") ||
		!slices.Contains(c.Args, "--fs-backup-timeout=1h30m0s") {
		t.Errorf("args %v", c.Args)
	}
	var inits []string
	for _, ic := range spec.InitContainers {
		inits = append(inits, ic.Name+"="+ic.Image+"@"+ic.VolumeMounts[0].MountPath)
	}
	if want := []string{"velero-velero-plugin-for-aws=velero/velero-plugin-for-aws:v1.12.0@/target", "x-y=example.com/x/y:1@/target"}; !slices.Equal(inits, want) {
		t.Errorf("init containers %v, want %v", inits, want)
	}
	var hostPath string
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			hostPath = v.HostPath.Path
		}
	}
	if hostPath != "/srv/backups" {
		t.Errorf("hostPath %q, want /srv/backups", hostPath)
	}
	for _, o := range objs {
		if o.GetKind() == "ClusterRole" && strings.Contains(mustJSON(t, o.Object), "escalate") {
			t.Errorf("--restore-rbac=false still grants escalate")
		}
	}
}

func TestInstallRejectsBadFlagCombinations(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--provider", "aws", "--no-secret"}, "--bucket is required"},
		{[]string{"--provider", "aws", "--bucket", "b"}, "--secret-file"},
		{[]string{"--provider", "aws", "--bucket", "b", "--secret-file", "x", "--no-secret"}, "cannot be used together"},
		{[]string{"--use-filesystem", "/tmp/x", "--provider", "aws"}, "cannot be used together"},
		{[]string{"--use-filesystem", "/tmp/x", "--backup-location-config", "path=/y"}, `"path"`},
		{[]string{"--bucket", "b"}, "need --provider"},
		{[]string{"--provider", "aws", "--bucket", "b", "--secret-file", "/does/not/exist"}, "--secret-file"},
		{[]string{"--dry-run", "-o", "table"}, "--output"},
		{[]string{"--crds-only", "--no-server"}, "cannot be used together"},
		{[]string{"--no-server", "--plugins", "a/b:1"}, "--plugins needs"},
		{[]string{"--use-volume-snapshots"}, "need --provider"},
		{[]string{"--image-pull-policy", "Sometimes"}, "--image-pull-policy"},
		{[]string{"--velero-pod-cpu-request", "lots"}, "--velero-pod-cpu-request"},
		{[]string{"--velero-pod-mem-request", "1Gi"}, "--velero-pod-mem-limit"},
		{[]string{"--image", ""}, "--image"},
		{[]string{"--plugins", "a/p:1,b.io/a/p:2"}, "--plugins"},
		{[]string{"--wait"}, "--wait and --dry-run"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, _, err := run(t, newTestFactory(nil), append([]string{"install", "--dry-run"}, tt.args...)...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// establishCRDs makes every CRD read back as Established, which a real API
// server reports shortly after the CRD is created.
func establishCRDs() interceptor.Funcs {
	return interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := c.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			if crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok {
				crd.Status.Conditions = append(crd.Status.Conditions, apiextensionsv1.CustomResourceDefinitionCondition{
					Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue,
				})
			}
			return nil
		},
	}
}

func TestInstallAppliesAndIsIdempotent(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	c := newFakeBuilder(t).WithInterceptorFuncs(establishCRDs()).Build()
	f := newTestFactory(c)
	for i := range 2 {
		out, _, err := run(t, f, "install", "--use-filesystem", dir)
		if err != nil {
			t.Fatalf("install run %d: %v\n%s", i+1, err, out)
		}
		if !strings.Contains(out, "BackupStorageLocation/velero/default: applied") {
			t.Errorf("install run %d did not report the location:\n%s", i+1, out)
		}
	}
	ctx := context.Background()
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := c.List(ctx, crds); err != nil {
		t.Fatal(err)
	}
	if len(crds.Items) != len(crdRefs(t)) {
		t.Errorf("%d CRDs applied, want %d", len(crds.Items), len(crdRefs(t)))
	}
	if err := c.Get(ctx, client.ObjectKey{Name: "velero"}, &corev1.Namespace{}); err != nil {
		t.Errorf("namespace: %v", err)
	}
	bsl := &v1.BackupStorageLocation{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "velero", Name: "default"}, bsl); err != nil {
		t.Fatalf("location: %v", err)
	}
	if bsl.Spec.Config["path"] != dir || !bsl.Spec.Default {
		t.Errorf("location spec = %+v", bsl.Spec)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Errorf("install did not create the --use-filesystem directory: %v", err)
	}
}

func TestInstallTimesOutWaitingForCRDs(t *testing.T) {
	c := newFakeBuilder(t).Build() // CRDs never become Established
	_, _, err := run(t, newTestFactory(c), "install", "--timeout", "20ms")
	if err == nil || !strings.Contains(err.Error(), "not established") {
		t.Errorf("error = %v, want a timeout naming the CRDs", err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func runtimeFromUnstructured(u *unstructured.Unstructured, into any) error {
	data, err := u.MarshalJSON()
	if err != nil {
		return err
	}
	return json.Unmarshal(data, into)
}

func TestInstallLabelsOnlyANamespaceItCreated(t *testing.T) {
	existing := &corev1.Namespace{}
	existing.Name = "mine"
	c := newFakeBuilder(t, existing).WithInterceptorFuncs(establishCRDs()).Build()
	f := newTestFactory(c)
	ctx := context.Background()
	for _, ns := range []string{"mine", "fresh"} {
		for i := range 2 { // a second run must keep what the first decided
			if out, _, err := run(t, f, "install", "-n", ns); err != nil {
				t.Fatalf("install -n %s (run %d): %v\n%s", ns, i+1, err, out)
			}
		}
	}
	for ns, want := range map[string]bool{"mine": false, "fresh": true} {
		got := &corev1.Namespace{}
		if err := c.Get(ctx, client.ObjectKey{Name: ns}, got); err != nil {
			t.Fatal(err)
		}
		if labelled := got.Labels["lifeboat.io/created-by-install"] == "true"; labelled != want {
			t.Errorf("namespace %s labelled as created by install: %v, want %v", ns, labelled, want)
		}
	}
}

func TestInstallWaitsForTheServer(t *testing.T) {
	polls := 0
	funcs := establishCRDs()
	crdGet := funcs.Get
	funcs.Get = func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if err := crdGet(ctx, c, key, obj, opts...); err != nil {
			return err
		}
		if d, ok := obj.(*appsv1.Deployment); ok {
			polls++
			d.Status.ObservedGeneration = d.Generation
			if polls >= 3 { // the third look finds the pod available
				d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.AvailableReplicas = 1, 1, 1
			}
		}
		return nil
	}
	c := newFakeBuilder(t).WithInterceptorFuncs(funcs).Build()
	out, _, err := run(t, newTestFactory(c), "install", "--wait")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if polls < 3 || !strings.Contains(out, "Deployment velero/velero is available") {
		t.Errorf("after %d polls:\n%s", polls, out)
	}

	c = newFakeBuilder(t).WithInterceptorFuncs(establishCRDs()).Build()
	_, _, err = run(t, newTestFactory(c), "install", "--wait", "--timeout", "50ms")
	if err == nil || !strings.Contains(err.Error(), "not available within --timeout") || !strings.Contains(err.Error(), "kubectl -n velero logs deployment/velero") {
		t.Errorf("error = %v, want a timeout that says where to look", err)
	}
}

func TestInstallWaitsForACRDBeingDeleted(t *testing.T) {
	crds, err := crd.All()
	if err != nil {
		t.Fatal(err)
	}
	going := crds[0].DeepCopy()
	now := metav1.Now()
	going.DeletionTimestamp, going.Finalizers = &now, []string{"customresourcecleanup.apiextensions.k8s.io"}
	c := newFakeBuilder(t, going).WithInterceptorFuncs(establishCRDs()).Build()
	out, _, err := run(t, newTestFactory(c), "install", "--timeout", "1s")
	if err == nil || !strings.Contains(err.Error(), going.Name+" is still being deleted") || !strings.Contains(out, "being deleted; waiting") {
		t.Errorf("error = %v, want install to wait for %s to go and then give up\n%s", err, going.Name, out)
	}
}

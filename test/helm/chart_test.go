// Package helm holds charts/lifeboat to `lifeboat install`: for equivalent
// values and flags, the chart renders the same objects, object by object,
// as `lifeboat install --dry-run -o yaml`. It is a module of its own
// (GOWORK=off) so that Helm's dependencies stay out of Lifeboat's.
package helm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"
)

var (
	root      = filepath.Join("..", "..")
	chartPath = filepath.Join(root, "charts", "lifeboat")
	lifeboat  string // the CLI, built once
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "lifeboat-helm-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	lifeboat = filepath.Join(dir, "lifeboat")
	// `go run ./cmd/lifeboat`, built once rather than per case.
	build := exec.Command("go", "build", "-o", lifeboat, "./cmd/lifeboat")
	build.Dir = root
	build.Env = append(os.Environ(), "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building lifeboat: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const credentials = "[default]\naws_access_key_id=AK\naws_secret_access_key=SK\n"

// cases are value sets and the install flags that mean the same.
var cases = []struct {
	name      string
	namespace string
	values    map[string]any
	args      []string
}{
	{
		name: "filesystem", namespace: "velero",
		values: map[string]any{
			"image":      map[string]any{"repository": "ghcr.io/lifeboat-io/lifeboat", "tag": "v1.2.3"},
			"filesystem": map[string]any{"dir": "/var/lib/lifeboat"},
		},
		args: []string{"--image", "ghcr.io/lifeboat-io/lifeboat:v1.2.3", "--use-filesystem", "/var/lib/lifeboat"},
	},
	{
		name: "s3-secret-plugins", namespace: "velero",
		values: map[string]any{
			"image":       map[string]any{"repository": "ghcr.io/lifeboat-io/lifeboat", "tag": "v1.2.3"},
			"credentials": map[string]any{"secretContents": credentials},
			"backupStorageLocation": map[string]any{"provider": "aws", "bucket": "backups", "prefix": "cluster-a",
				"config": map[string]any{"region": "minio", "s3ForcePathStyle": "true", "s3Url": "http://minio.minio:9000"}},
			"volumeSnapshotLocation": map[string]any{"provider": "aws", "config": map[string]any{"region": "eu-west-1"}},
			"plugins":                []any{"velero/velero-plugin-for-aws:v1.12.0", "registry.example.com:5000/team/snap_shot.er@sha256:0123"},
			"serviceAccount":         map[string]any{"annotations": map[string]any{"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/lifeboat"}},
		},
		args: []string{"--image", "ghcr.io/lifeboat-io/lifeboat:v1.2.3", "--provider", "aws", "--bucket", "backups", "--prefix", "cluster-a",
			"--backup-location-config", "region=minio,s3ForcePathStyle=true,s3Url=http://minio.minio:9000", "--secret-file", "CREDENTIALS",
			"--snapshot-location-config", "region=eu-west-1",
			"--plugins", "velero/velero-plugin-for-aws:v1.12.0,registry.example.com:5000/team/snap_shot.er@sha256:0123",
			"--sa-annotations", "eks.amazonaws.com/role-arn=arn:aws:iam::1:role/lifeboat"},
	},
	{
		name: "custom", namespace: "backup-system",
		values: map[string]any{
			"image": map[string]any{"repository": "registry.example.com/lifeboat", "tag": "latest", "pullPolicy": "Never"},
			// null removes a default, as in any Helm chart.
			"resources":      map[string]any{"requests": map[string]any{"cpu": "1", "memory": "1Gi"}, "limits": map[string]any{"cpu": nil, "memory": "2Gi"}},
			"serverArgs":     []any{"--backup-finalizer", "--log-format=json"},
			"podLabels":      map[string]any{"team": "platform"},
			"podAnnotations": map[string]any{"prometheus.io/scrape": "false", "example.com/owner": "platform"},
			"restoreRBAC":    false,
		},
		args: []string{"--image", "registry.example.com/lifeboat:latest", "--image-pull-policy", "Never",
			"--velero-pod-cpu-request", "1", "--velero-pod-mem-request", "1Gi", "--velero-pod-cpu-limit", "0", "--velero-pod-mem-limit", "2Gi",
			"--server-arg=--backup-finalizer", "--server-arg=--log-format=json", "--pod-labels", "team=platform",
			"--pod-annotations", "prometheus.io/scrape=false,example.com/owner=platform", "--restore-rbac=false"},
	},
	{
		name: "node-agent", namespace: "velero",
		values: map[string]any{
			"image":           map[string]any{"repository": "ghcr.io/lifeboat-io/lifeboat", "tag": "v1.2.3"},
			"filesystem":      map[string]any{"dir": "/var/lib/lifeboat"},
			"deployNodeAgent": true,
			"nodeAgent": map[string]any{"podVolumePath": "/var/lib/k0s/kubelet/pods",
				"resources": map[string]any{"limits": map[string]any{"memory": "1Gi"}}},
			"podLabels": map[string]any{"team": "platform"},
		},
		args: []string{"--image", "ghcr.io/lifeboat-io/lifeboat:v1.2.3", "--use-filesystem", "/var/lib/lifeboat",
			"--use-node-agent", "--kubelet-root-dir", "/var/lib/k0s/kubelet", "--node-agent-pod-mem-limit", "1Gi", "--pod-labels", "team=platform"},
	},
}

type object = map[string]any

func key(o object) string {
	md, _ := o["metadata"].(map[string]any)
	return fmt.Sprintf("%s %v/%v", o["kind"], md["namespace"], md["name"])
}

// decodeStream splits a YAML stream into objects, skipping empty documents.
func decodeStream(t *testing.T, what, s string) []object {
	t.Helper()
	var out []object
	for _, doc := range strings.Split("\n"+s, "\n---") {
		var o object
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("%s: decoding %q: %v", what, doc, err)
		}
		if len(o) > 0 {
			out = append(out, normalize(o).(object))
		}
	}
	return out
}

// normalize writes quantities the one way Kubernetes stores them (1000m
// and 1 are the same CPU), so that spelling does not count as a difference.
func normalize(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if k == "requests" || k == "limits" {
				if m, ok := x.(map[string]any); ok {
					for name, q := range m {
						if s, ok := q.(string); ok {
							if parsed, err := resource.ParseQuantity(s); err == nil {
								m[name] = parsed.String()
							}
						}
					}
				}
			}
			v[k] = normalize(x)
		}
	case []any:
		for i := range v {
			v[i] = normalize(v[i])
		}
	}
	return v
}

func render(t *testing.T, ch *chart.Chart, namespace string, values map[string]any) []object {
	t.Helper()
	vals, err := chartutil.ToRenderValues(ch, values, chartutil.ReleaseOptions{Name: "lifeboat", Namespace: namespace, IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	files, err := engine.Render(ch, vals)
	if err != nil {
		t.Fatalf("rendering the chart: %v", err)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	var out []object
	for _, name := range names {
		if strings.HasSuffix(name, ".yaml") {
			out = append(out, decodeStream(t, name, files[name])...)
		}
	}
	return out
}

func install(t *testing.T, namespace string, args []string) []object {
	t.Helper()
	secret := filepath.Join(t.TempDir(), "credentials")
	if err := os.WriteFile(secret, []byte(credentials), 0o600); err != nil {
		t.Fatal(err)
	}
	full := []string{"install", "--dry-run", "-o", "yaml", "-n", namespace}
	for _, a := range args {
		full = append(full, strings.ReplaceAll(a, "CREDENTIALS", secret))
	}
	cmd := exec.Command(lifeboat, full...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("lifeboat %s: %v\n%s", strings.Join(full, " "), err, stderr.String())
	}
	return decodeStream(t, "install output", string(out))
}

func TestChartRendersWhatInstallApplies(t *testing.T) {
	ch, err := loader.Load(chartPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			chartObjs := map[string]object{}
			for _, o := range render(t, ch, tc.namespace, tc.values) {
				chartObjs[key(o)] = o
			}
			// The CRDs come from the chart's crds/ directory, which Helm
			// applies itself.
			for _, c := range ch.CRDObjects() {
				for _, o := range decodeStream(t, c.Filename, string(c.File.Data)) {
					chartObjs[key(o)] = o
				}
			}
			installed := install(t, tc.namespace, tc.args)
			seen := map[string]bool{}
			for _, want := range installed {
				k := key(want)
				// Helm does not make the release's namespace; install does.
				if want["kind"] == "Namespace" {
					continue
				}
				seen[k] = true
				got, ok := chartObjs[k]
				if !ok {
					t.Errorf("the chart lacks %s", k)
					continue
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s differs:\nchart:   %s\ninstall: %s", k, mustJSON(got), mustJSON(want))
				}
			}
			for k := range chartObjs {
				if !seen[k] {
					t.Errorf("the chart renders %s, which install does not make", k)
				}
			}
		})
	}
}

func mustJSON(v any) string {
	data, _ := json.Marshal(v)
	return string(data)
}

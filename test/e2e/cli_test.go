package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/archive"
	"github.com/lifeboat-io/lifeboat/internal/buildinfo"
	"github.com/lifeboat-io/lifeboat/internal/cli"
	"github.com/lifeboat-io/lifeboat/internal/testutil/clitest"
	"github.com/lifeboat-io/lifeboat/internal/testutil/testenv"
)

func TestCLIBackupWorkflow(t *testing.T) {
	storeDir := filepath.Join(t.TempDir(), "store")
	ns := env.NewNamespace(t, "cli")
	sampleApp(t, ns)

	out := mustLifeboat(t, "install", "--use-filesystem", storeDir, "--no-server")
	if !strings.Contains(out, "BackupStorageLocation") {
		t.Errorf("install output does not mention the location:\n%s", out)
	}
	// The server runs in this process (testenv): no Deployment. Installing
	// again is harmless.
	mustLifeboat(t, "install", "--use-filesystem", storeDir, "--no-server")
	env.WaitLocationPhase(t, "default", "Available", 30*time.Second)

	name := env.Name("cli")
	out = mustLifeboat(t, "backup", "create", name, "--include-namespaces", ns, "--wait")
	if !strings.Contains(out, "Completed") {
		t.Errorf("backup create --wait output lacks Completed:\n%s", out)
	}

	out = mustLifeboat(t, "backup", "get", name)
	if !strings.Contains(out, name) || !strings.Contains(out, "Completed") || !strings.Contains(out, "default") {
		t.Errorf("backup get:\n%s", out)
	}

	out = mustLifeboat(t, "backup", "describe", name, "--details")
	for _, want := range []string{"Phase:", "Completed", "v1/ConfigMap", ns + "/settings", "apps/v1/Deployment", ns + "/web"} {
		if !strings.Contains(out, want) {
			t.Errorf("backup describe --details lacks %q:\n%s", want, out)
		}
	}

	out = mustLifeboat(t, "backup", "logs", name)
	if !strings.Contains(out, "backup finished") || !strings.Contains(out, "phase=Completed") {
		t.Errorf("backup logs:\n%s", out)
	}

	file := filepath.Join(t.TempDir(), "data.tar.gz")
	mustLifeboat(t, "backup", "download", name, "-o", file)
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := archive.NewReader(f, archive.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for {
		e, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if e.Path == "resources/secrets/namespaces/"+ns+"/token.json" {
			found = true
		}
	}
	if !found {
		t.Errorf("downloaded archive lacks the secret")
	}
	if _, err := lifeboat(t, "backup", "download", name, "-o", file); err == nil {
		t.Errorf("download overwrote %s without --force", file)
	}
}

func TestCLIErrorsNameTheProblem(t *testing.T) {
	out, err := lifeboat(t, "backup", "create", env.Name("x"), "--storage-location", "nowhere")
	if err == nil || !strings.Contains(err.Error()+out, `"nowhere"`) {
		t.Errorf("unknown location: err %v, out %s", err, out)
	}

	out, err = lifeboat(t, "backup", "describe", "no-such-backup")
	if err == nil || !strings.Contains(err.Error()+out, "no-such-backup") {
		t.Errorf("unknown backup: err %v, out %s", err, out)
	}

	// A kubeconfig pointing at nothing: the error says which server and how to fix it.
	bogus := filepath.Join(t.TempDir(), "kubeconfig")
	kc := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\nusers:\n- name: u\n  user:\n    token: x\ncurrent-context: c\n"
	if err := os.WriteFile(bogus, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := cli.NewRootCommand()
	var buf bytes.Buffer
	cmd.SetOut(&buf)
	cmd.SetErr(&buf)
	cmd.SetArgs([]string{"--kubeconfig", bogus, "backup", "get"})
	err = cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") || !strings.Contains(err.Error(), "kubeconfig") {
		t.Errorf("unreachable cluster: %v", err)
	}
}

// lifeboat runs the CLI as a user would, against the test cluster.
func lifeboat(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return clitest.Run(env.Kubeconfig, nil, append([]string{"-n", env.Namespace}, args...)...)
}

func mustLifeboat(t *testing.T, args ...string) string {
	t.Helper()
	return clitest.Must(t, env.Kubeconfig, append([]string{"-n", env.Namespace}, args...)...)
}

// TestCLIVeleroConventions drives the commands and flags a Velero user
// types, against the real API server and server: Velero's command names,
// flags and messages, and errors (not help text) for what does not exist.
func TestCLIVeleroConventions(t *testing.T) {
	ctx := testenv.Ctx(t)
	// An unknown subcommand is an error that names it, with a failing exit.
	out, err := lifeboat(t, "schedule", "nosuchverb", "x")
	if err == nil || !strings.Contains(err.Error(), `"nosuchverb"`) {
		t.Errorf("unknown subcommand: err %v, out %q", err, out)
	}

	// --kubecontext picks the context, as in Velero.
	kc, err := clientcmd.LoadFromFile(env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	mustLifeboat(t, "--kubecontext", kc.CurrentContext, "backup-location", "get")
	if _, err := lifeboat(t, "--kubecontext", "no-such-context", "backup-location", "get"); err == nil || !strings.Contains(err.Error(), "no-such-context") {
		t.Errorf("--kubecontext no-such-context: %v", err)
	}

	// version asks the server.
	out = mustLifeboat(t, "version")
	if !strings.Contains(out, "Client:\n\tVersion: "+buildinfo.Version) || !strings.Contains(out, "Server:\n\tVersion: "+buildinfo.ServerVersion(buildinfo.Version)+"\n") ||
		strings.Contains(out, "different builds") {
		t.Errorf("version:\n%s", out)
	}

	// backup-location create over a fresh S3 bucket, with Velero's flags.
	loc := env.Name("cli-loc")
	bucket := env.S3.NewBucket(t)
	env.Create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: loc + "-creds"},
		Data: map[string][]byte{"cloud": env.S3.CredentialsFile()}})
	var config []string
	for k, v := range env.S3.BSLConfig() {
		config = append(config, k+"="+v)
	}
	out = mustLifeboat(t, "backup-location", "create", loc, "--provider", "aws", "--bucket", bucket, "--prefix", "lifeboat",
		"--config", strings.Join(config, ","), "--credential", loc+"-creds=cloud", "--validation-frequency", "10s")
	if !strings.Contains(out, fmt.Sprintf("Backup storage location %q configured successfully.", loc)) {
		t.Errorf("backup-location create:\n%s", out)
	}
	env.WaitLocationPhase(t, loc, v1.BackupStorageLocationPhaseAvailable, 60*time.Second)
	out = mustLifeboat(t, "backup-location", "get", loc)
	if !strings.Contains(out, "BUCKET/PREFIX") || !strings.Contains(out, bucket+"/lifeboat") || !strings.Contains(out, "Available") {
		t.Errorf("backup-location get:\n%s", out)
	}
	mustLifeboat(t, "backup-location", "set", loc, "--credential", loc+"-creds=cloud")

	// A schedule, and a backup made from it now with --from-schedule.
	ns := env.NewNamespace(t, "cliconv")
	sampleApp(t, ns)
	sched := env.Name("cli-sched")
	mustLifeboat(t, "schedule", "create", sched, "--schedule", "@every 1000h", "--skip-immediately",
		"--include-namespaces", ns, "--storage-location", loc, "--exclude-namespace-scoped-resources", "secrets",
		"--item-operation-timeout", "1h")
	name := env.Name("cli-fromsched")
	out = mustLifeboat(t, "backup", "create", name, "--from-schedule", sched, "--wait")
	if !strings.Contains(out, "Creating backup from schedule") || !strings.Contains(out, "Completed") {
		t.Errorf("backup create --from-schedule:\n%s", out)
	}
	b := &v1.Backup{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: name}, b); err != nil {
		t.Fatal(err)
	}
	if b.Labels[v1.ScheduleNameLabel] != sched || b.Spec.StorageLocation != loc || b.Spec.ItemOperationTimeout.Duration != time.Hour {
		t.Errorf("backup from schedule: labels %v, spec %+v", b.Labels, b.Spec)
	}

	// describe -o json: the structured description, details read through the server.
	out = mustLifeboat(t, "backup", "describe", name, "--details", "-o", "json")
	var desc struct {
		Kind         string              `json:"kind"`
		Phase        string              `json:"phase"`
		ResourceList map[string][]string `json:"resourceList"`
	}
	if err := json.Unmarshal([]byte(out), &desc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if desc.Kind != "BackupDescription" || desc.Phase != "Completed" || !slices.Contains(desc.ResourceList["v1/ConfigMap"], ns+"/settings") ||
		len(desc.ResourceList["v1/Secret"]) != 0 {
		t.Errorf("describe -o json:\n%s", out)
	}

	// restore delete and schedule delete, Velero's way.
	rs := env.Name("cli-rs")
	mustLifeboat(t, "restore", "create", rs, "--from-backup", name, "--namespace-mappings", ns+":"+ns+"-copy", "--wait")
	out = mustLifeboat(t, "restore", "delete", rs, "--confirm")
	if !strings.Contains(out, fmt.Sprintf("Request to delete restore %q submitted successfully.", rs)) {
		t.Errorf("restore delete:\n%s", out)
	}
	out = mustLifeboat(t, "schedule", "delete", sched, "--confirm")
	if out != "Schedule deleted: "+sched+"\n" {
		t.Errorf("schedule delete: %q", out)
	}
	for _, obj := range []client.Object{&v1.Restore{}, &v1.Schedule{}} {
		key := client.ObjectKey{Namespace: env.Namespace, Name: rs}
		if _, ok := obj.(*v1.Schedule); ok {
			key.Name = sched
		}
		if err := env.Client.Get(ctx, key, obj); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s still there: %v", obj, key.Name, err)
		}
	}

	// snapshot-location create/get/set.
	vsl := env.Name("cli-vsl")
	out = mustLifeboat(t, "snapshot-location", "create", vsl, "--provider", "aws", "--config", "region=eu-west-1")
	if !strings.Contains(out, fmt.Sprintf("Snapshot volume location %q configured successfully.", vsl)) {
		t.Errorf("snapshot-location create:\n%s", out)
	}
	mustLifeboat(t, "snapshot-location", "set", vsl, "--credential", loc+"-creds=cloud")
	if out = mustLifeboat(t, "snapshot-location", "get", vsl); !strings.Contains(out, vsl) || !strings.Contains(out, "aws") {
		t.Errorf("snapshot-location get:\n%s", out)
	}

	// backup-location delete takes the location's Backup objects with it,
	// but not their data.
	out = mustLifeboat(t, "backup-location", "delete", loc, "--confirm")
	if !strings.Contains(out, fmt.Sprintf("Backup storage location %q deleted successfully.", loc)) || !strings.Contains(out, name) {
		t.Errorf("backup-location delete:\n%s", out)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: name}, &v1.Backup{}); !apierrors.IsNotFound(err) {
		t.Errorf("backup %s still there after its location was deleted: %v", name, err)
	}
	store := openStore(t, &v1.BackupStorageLocation{Spec: v1.BackupStorageLocationSpec{Provider: "aws", Config: env.S3.BSLConfig(),
		StorageType: v1.StorageType{ObjectStorage: &v1.ObjectStorageLocation{Bucket: bucket, Prefix: "lifeboat"}}}})
	if keys, err := store.ObjectStore().ListObjects(ctx, store.Bucket(), store.BackupDir(name)); err != nil || len(keys) == 0 {
		t.Errorf("the backup's files were deleted with its location: %v %v", keys, err)
	}
}

package e2e

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lifeboat-io/lifeboat/internal/archive"
	"github.com/lifeboat-io/lifeboat/internal/cli"
	"github.com/lifeboat-io/lifeboat/internal/testutil/clitest"
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

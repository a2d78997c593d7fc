package cli

import (
	"context"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/lifeboat-io/lifeboat/internal/server"
)

func TestServerWorkDirFlag(t *testing.T) {
	var got server.Options
	runServer = func(_ context.Context, _ *rest.Config, opts server.Options) error {
		got = opts
		return nil
	}
	t.Cleanup(func() { runServer = server.Run })
	kubeconfig := writeKubeconfig(t, "https://127.0.0.1:1")
	if err := runReal(t, "server", "--kubeconfig", kubeconfig, "--work-dir", "/var/lib/lifeboat/work"); err != nil {
		t.Fatal(err)
	}
	if got.WorkDir != "/var/lib/lifeboat/work" {
		t.Errorf("--work-dir gave WorkDir %q", got.WorkDir)
	}
}

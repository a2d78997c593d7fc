// Package install tests `lifeboat install` and `lifeboat uninstall` on a
// real API server with RBAC enforced: what install grants the server's
// service account is checked by impersonating it, and uninstall must leave
// the cluster and the backup store as they were.
package install

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lifeboat-io/lifeboat/internal/cli"
	"github.com/lifeboat-io/lifeboat/internal/cluster"
	"github.com/lifeboat-io/lifeboat/internal/localcluster"
)

var (
	cfg        *rest.Config
	kubeconfig string
	admin      client.Client
)

func TestMain(m *testing.M) {
	// No CRDs: install brings them, uninstall takes them away.
	c, err := localcluster.Start(localcluster.Options{RBAC: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := func() int {
		dir, err := os.MkdirTemp("", "lifeboat-install-test-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		kubeconfig = filepath.Join(dir, "kubeconfig")
		if err := c.WriteKubeconfig(kubeconfig); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		cfg = c.Config
		acc, err := cluster.New(cfg)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		admin = acc.Client
		return m.Run()
	}()
	if err := c.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}

// lifeboat runs the CLI as the cluster's admin, with no terminal.
func lifeboat(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := cli.NewRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetIn(strings.NewReader(""))
	cmd.SetArgs(append([]string{"--kubeconfig", kubeconfig}, args...))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	err := cmd.ExecuteContext(ctx)
	return out.String(), err
}

func mustLifeboat(t *testing.T, args ...string) string {
	t.Helper()
	out, err := lifeboat(t, args...)
	if err != nil {
		t.Fatalf("lifeboat %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

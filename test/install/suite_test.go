// Package install tests `lifeboat install` and `lifeboat uninstall` on a
// real API server with RBAC enforced: what install grants the server's
// service account is checked by impersonating it, and uninstall must leave
// the cluster and the backup store as they were.
package install

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lifeboat-io/lifeboat/internal/cluster"
	"github.com/lifeboat-io/lifeboat/internal/localcluster"
	"github.com/lifeboat-io/lifeboat/internal/testutil/clitest"
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

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// lifeboat runs the CLI as the cluster's admin, with no terminal.
func lifeboat(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return clitest.Run(kubeconfig, nil, args...)
}

func mustLifeboat(t *testing.T, args ...string) string {
	t.Helper()
	return clitest.Must(t, kubeconfig, args...)
}

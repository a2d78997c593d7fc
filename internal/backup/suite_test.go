package backup

import (
	"fmt"
	"os"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/lifeboat-io/lifeboat/internal/cluster"
	"github.com/lifeboat-io/lifeboat/internal/localcluster"
)

// cfg points at the package's one local API server.
var cfg *rest.Config

func TestMain(m *testing.M) {
	c, err := localcluster.Start(localcluster.Options{InstallCRDs: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cfg = c.Config
	code := m.Run()
	if err := c.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	stopCSICluster()
	os.Exit(code)
}

// newAccess builds the clients an engine takes, as the server does.
func newAccess(t testing.TB) *cluster.Access {
	t.Helper()
	acc, err := cluster.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return acc
}

package backup

import (
	"fmt"
	"os"
	"testing"

	"k8s.io/client-go/rest"

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

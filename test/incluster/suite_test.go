// Package incluster runs Lifeboat where users run it: on a real node,
// `lifeboat install` deploys the server from the locally built image with
// a plugin image as an init container, and a backup, a restore and a
// deletion go through that server, acting as its service account.
package incluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/lifeboat-io/lifeboat/internal/cluster"
	"github.com/lifeboat-io/lifeboat/internal/localnode"
	"github.com/lifeboat-io/lifeboat/internal/testutil/clitest"
)

var (
	node   *localnode.Node
	admin  client.Client
	images = map[string]string{} // archive name without .tar -> image reference
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctrllog.SetLogger(logr.Discard())
	dir := os.Getenv(localnode.TestImagesEnv)
	if dir == "" {
		fmt.Fprintf(os.Stderr, "%s is not set: the directory of the image archives `make image` writes\n", localnode.TestImagesEnv)
		return 1
	}
	var tarballs []string
	for _, name := range []string{"pause", "lifeboat", "lifeboat-plugin-cleanup", "lifeboat-test-shell"} {
		tar := filepath.Join(dir, name+".tar")
		ref, err := localnode.ImageName(tar)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		images[name] = ref
		tarballs = append(tarballs, tar)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var err error
	// With the CSI stack: the CSI test restores a pod's data from a
	// snapshot.
	node, err = localnode.Start(ctx, localnode.Options{SandboxImage: images["pause"], Images: tarballs, CSI: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the node:", err)
		return 1
	}
	defer func() {
		if err := node.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the node:", err)
		}
	}()
	scheme, err := cluster.NewScheme()
	if err == nil {
		err = apiextensionsv1.AddToScheme(scheme)
	}
	if err == nil {
		admin, err = client.New(node.Config, client.Options{Scheme: scheme})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return c
}

// lifeboat runs the CLI as the cluster's admin.
func lifeboat(t *testing.T, args ...string) string {
	t.Helper()
	return clitest.Must(t, node.Kubeconfig, args...)
}

// Command localcluster runs a local cluster in the foreground until
// interrupted and writes an admin kubeconfig: by default the API server
// only (kube-apiserver and etcd, with Lifeboat's CRDs installed), or with
// --node a real single-node cluster whose pods run (kubelet, containerd,
// ...; needs root), with the image archives of --images imported. --csi
// adds the CSI test stack (internal/testutil/csistack): StorageClass and
// VolumeSnapshotClass lifeboat-csi, the snapshot controller, the sidecars
// and the test driver, whose volumes pods mount on the real node.
// `make cluster` runs it with --node --csi; hack/demo.sh and bench/ run it
// too.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/lifeboat-io/lifeboat/internal/localcluster"
	"github.com/lifeboat-io/lifeboat/internal/localnode"
	"github.com/lifeboat-io/lifeboat/internal/testutil/csistack"
)

func main() {
	// A flag set of our own: controller-runtime registers a global --kubeconfig.
	fs := flag.NewFlagSet("localcluster", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", ".lifeboat/kubeconfig", "where to write the admin kubeconfig")
	node := fs.Bool("node", false, "run a real node too (kubelet, containerd, kube-proxy, controller manager, scheduler); needs root, $LIFEBOAT_NODE_BINS and --images")
	images := fs.String("images", os.Getenv(localnode.TestImagesEnv), "with --node: directory of image archives (make image) to import; it must hold pause.tar")
	withCSI := fs.Bool("csi", false, "run the CSI test stack too (storage and snapshot class lifeboat-csi); needs $LIFEBOAT_CSI_BINS (hack/csi-bins.sh) and, without --node, $LIFEBOAT_NODE_BINS")
	_ = fs.Parse(os.Args[1:])
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if *node {
		err = runNode(ctx, *kubeconfig, *images, *withCSI)
	} else {
		err = runAPIServer(ctx, *kubeconfig, *withCSI)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "localcluster:", err)
		os.Exit(1)
	}
}

func runAPIServer(ctx context.Context, kubeconfig string, withCSI bool) error {
	c, err := localcluster.Start(localcluster.Options{InstallCRDs: true})
	if err != nil {
		return err
	}
	defer func() { _ = c.Stop() }()
	if err := c.WriteKubeconfig(kubeconfig); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	if withCSI {
		stack, err := csistack.Start(ctx, csistack.Options{Kubeconfig: kubeconfig, Log: os.Stdout})
		if err != nil {
			return err
		}
		defer stack.Stop()
		fmt.Printf("CSI stack: storage class %s, snapshot class %s, driver state in %s\n", csistack.StorageClass, csistack.SnapshotClass, stack.StateDir)
	}
	fmt.Printf("local cluster serving at %s\nkubeconfig: %s\nready\n", c.Config.Host, kubeconfig)
	<-ctx.Done()
	fmt.Println("stopping local cluster")
	return nil
}

func runNode(ctx context.Context, kubeconfig, imagesDir string, withCSI bool) error {
	if imagesDir == "" {
		return errors.New("--node needs --images DIR (make image writes bin/images)")
	}
	tarballs, err := filepath.Glob(filepath.Join(imagesDir, "*.tar"))
	if err != nil {
		return err
	}
	pause, err := localnode.ImageName(filepath.Join(imagesDir, "pause.tar"))
	if err != nil {
		return fmt.Errorf("the sandbox image: %w (make image writes it)", err)
	}
	n, err := localnode.Start(ctx, localnode.Options{SandboxImage: pause, Images: tarballs, Log: os.Stdout, CSI: withCSI})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("stopping the node and removing what it made")
		if err := n.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "localcluster:", err)
		}
	}()
	// The node's kubeconfig points at certificate files in the node's
	// directory, which exist as long as the node runs.
	data, err := os.ReadFile(n.Kubeconfig)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(kubeconfig), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(kubeconfig, data, 0o600); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	if n.CSI != nil {
		fmt.Printf("CSI stack: storage class %s, snapshot class %s, driver state in %s\n", csistack.StorageClass, csistack.SnapshotClass, n.CSI.StateDir)
	}
	fmt.Printf("local node %s serving at %s\nkubeconfig: %s\nlogs: %s\nready\n", n.Name, n.Config.Host, kubeconfig, n.LogDir())
	<-ctx.Done()
	return nil
}

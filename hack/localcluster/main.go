// Command localcluster runs the local kube-apiserver (with etcd) in the
// foreground until interrupted, with Lifeboat's CRDs installed, and writes an
// admin kubeconfig. `make cluster` runs it; hack/demo.sh and bench/ do too.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/lifeboat-io/lifeboat/internal/localcluster"
)

func main() {
	// A flag set of our own: controller-runtime registers a global --kubeconfig.
	fs := flag.NewFlagSet("localcluster", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", ".lifeboat/kubeconfig", "where to write the admin kubeconfig")
	_ = fs.Parse(os.Args[1:])
	if err := run(*kubeconfig); err != nil {
		fmt.Fprintln(os.Stderr, "localcluster:", err)
		os.Exit(1)
	}
}

func run(kubeconfig string) error {
	c, err := localcluster.Start(localcluster.Options{InstallCRDs: true})
	if err != nil {
		return err
	}
	defer func() { _ = c.Stop() }()
	if err := c.WriteKubeconfig(kubeconfig); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	fmt.Printf("local cluster serving at %s\nkubeconfig: %s\nready\n", c.Config.Host, kubeconfig)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	fmt.Println("stopping local cluster")
	return nil
}

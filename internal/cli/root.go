// Package cli implements the lifeboat command: the server verb and the
// client verbs that talk to a cluster through the velero.io/v1 API.
package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// Execute runs the command line of the lifeboat binary. Errors are printed
// here so main only has to pick the exit code.
func Execute() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd := NewRootCommand()
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "Error: %v\n", err)
		return err
	}
	return nil
}

// NewRootCommand returns the lifeboat command tree with real clients. The
// end-to-end tests run it with SetArgs and --kubeconfig.
func NewRootCommand() *cobra.Command {
	return newRootCommand(NewFactory())
}

func newRootCommand(f *Factory) *cobra.Command {
	root := &cobra.Command{
		Use:   "lifeboat",
		Short: "Back up and restore Kubernetes clusters (Velero-compatible)",
		Long: "Lifeboat backs up Kubernetes resources to object storage and restores them.\n" +
			"It speaks Velero's velero.io/v1 API and storage formats.",
		// A failed backup or an unreachable cluster is not a usage mistake;
		// printing the usage text would bury the real message.
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	flags := root.PersistentFlags()
	flags.StringVar(&f.Kubeconfig, "kubeconfig", f.Kubeconfig, "path to the kubeconfig file (default: KUBECONFIG, then ~/.kube/config)")
	flags.StringVar(&f.Context, "context", f.Context, "kubeconfig context to use (default: the current context)")
	if f.Namespace == "" {
		f.Namespace = v1.DefaultNamespace
	}
	flags.StringVarP(&f.Namespace, "namespace", "n", f.Namespace, "namespace the Lifeboat server and its objects live in")

	root.AddCommand(
		newVersionCommand(),
		newInstallCommand(f),
		newUninstallCommand(f),
		newServerCommand(f),
		newBackupCommand(f),
		newRestoreCommand(f),
		newDeleteRequestCommand(f),
		newScheduleCommand(f),
		newPluginCommand(f),
		newPolicyCommand(f),
	)
	return root
}

// runE adapts a command body so that cluster-wide failures (no API server,
// no CRDs) read the same from every verb.
func runE(f *Factory, fn func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		return f.explain(fn(cmd, args))
	}
}

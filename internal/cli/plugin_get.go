package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

func newPluginCommand(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plugin",
		Short: "Work with the server's plugins",
	}
	cmd.AddCommand(newPluginGetCommand(f), newPluginAddCommand(f), newPluginRemoveCommand(f))
	return cmd
}

func newPluginGetCommand(f *Factory) *cobra.Command {
	var (
		output  string
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "get",
		Short: "List the plugins the running server has, with kind, name and binary",
		Long: "List the plugins of the running server. The server answers a ServerStatusRequest\n" +
			"(as `velero plugin get` does), so the list is what the server really loaded.",
		Args: cobra.NoArgs,
		RunE: runE(f, func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(output, formatTable, formatJSON, formatYAML); err != nil {
				return err
			}
			c, err := f.Client()
			if err != nil {
				return err
			}
			ssr, err := askServerStatus(cmd.Context(), f, c, timeout)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if output != formatTable {
				return encode(out, output, ssr.Status.Plugins)
			}
			tw := newTable(out)
			fmt.Fprintln(tw, "KIND\tNAME\tBINARY")
			for _, p := range ssr.Status.Plugins {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", p.Kind, p.Name, p.Binary)
			}
			return tw.Flush()
		}),
	}
	cmd.Flags().StringVarP(&output, "output", "o", formatTable, "output format: table, json or yaml")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "how long to wait for the server to answer")
	return cmd
}

// askServerStatus creates a ServerStatusRequest and waits for the server's
// answer; the server deletes answered requests itself.
func askServerStatus(ctx context.Context, f *Factory, c client.Client, timeout time.Duration) (*v1.ServerStatusRequest, error) {
	ssr := &v1.ServerStatusRequest{ObjectMeta: metav1.ObjectMeta{Namespace: f.Namespace, GenerateName: "lifeboat-cli-"}}
	cctx, cancel := callCtx(ctx)
	err := c.Create(cctx, ssr)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("asking the server for its status: %w", err)
	}
	err = wait.PollUntilContextTimeout(ctx, f.pollInterval(), timeout, true, func(ctx context.Context) (bool, error) {
		cctx, cancel := callCtx(ctx)
		defer cancel()
		if err := c.Get(cctx, client.ObjectKeyFromObject(ssr), ssr); err != nil {
			return false, err
		}
		return ssr.Status.Phase == v1.ServerStatusRequestPhaseProcessed, nil
	})
	if err != nil {
		return nil, fmt.Errorf("no answer from a Lifeboat server in namespace %q within %s (is `lifeboat server -n %s` running?): %w", f.Namespace, timeout, f.Namespace, err)
	}
	return ssr, nil
}

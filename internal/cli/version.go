package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/lifeboat-io/lifeboat/internal/buildinfo"
)

func newVersionCommand(f *Factory) *cobra.Command {
	var (
		clientOnly bool
		timeout    time.Duration
	)
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version of this client and of the server",
		Long: "Print the version of this binary and, unless --client-only, the version of the server\n" +
			"running for the namespace, which answers a ServerStatusRequest (as `velero version` does).",
		Args: cobra.NoArgs,
		RunE: runE(f, func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			fmt.Fprintln(out, "Client:")
			fmt.Fprintf(out, "\tVersion: %s\n", buildinfo.Version)
			fmt.Fprintf(out, "\tGit commit: %s\n", valueOr(buildinfo.GitCommit, "<unknown>"))
			if clientOnly {
				return nil
			}
			c, err := f.Client()
			if err != nil {
				return err
			}
			ssr, err := askServerStatus(cmd.Context(), f, c, timeout)
			if err != nil {
				// Velero prints this line and exits 0; the exit code here
				// tells a script the server's version is unknown.
				fmt.Fprintf(out, "<error getting server version: %v>\n", err)
				return err
			}
			fmt.Fprintln(out, "Server:")
			fmt.Fprintf(out, "\tVersion: %s\n", valueOr(ssr.Status.ServerVersion, "<unknown>"))
			// The server reports Velero's version with its own as build
			// metadata (buildinfo.ServerVersion), so Velero's CLI accepts it.
			if ssr.Status.ServerVersion != buildinfo.ServerVersion(buildinfo.Version) {
				fmt.Fprintln(out, "# Note: the client and the server are different builds.")
			}
			return nil
		}),
	}
	cmd.Flags().BoolVar(&clientOnly, "client-only", false, "print only the client's version; do not ask the server")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Second, "how long to wait for the server to report its version")
	return cmd
}

package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/lifeboat-io/lifeboat/internal/buildinfo"
)

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of this binary",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), buildinfo.Version)
			return err
		},
	}
}

package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

func newRestoreLogsCommand(f *Factory) *cobra.Command {
	var timeout time.Duration
	var tlsOpts *tlsFlags
	cmd := &cobra.Command{
		Use:   "logs NAME",
		Short: "Print the log of a restore",
		Args:  cobra.ExactArgs(1),
		RunE: runE(f, func(cmd *cobra.Command, args []string) error {
			name := args[0]
			c, err := f.Client()
			if err != nil {
				return err
			}
			// Checked first so a typo reads "restore not found" instead of a
			// download request that is never answered.
			rs, err := restoreKind.get(cmd.Context(), c, f.Namespace, name)
			if err != nil {
				return err
			}
			// A restore refused by validation never ran, so it has no log;
			// the reasons are on the object itself.
			if rs.Status.Phase == v1.RestorePhaseFailedValidation {
				return fmt.Errorf("restore %q failed validation and has no log; `lifeboat restore describe %s` shows why", name, name)
			}
			d, err := f.storeDownloader(cmd.Context(), c, timeout, tlsOpts,
				locationOfBackup(cmd.Context(), c, f.Namespace, rs.Spec.BackupName), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			err = copyGzipped(cmd.Context(), d, v1.DownloadTargetKindRestoreLog, name,
				fmt.Sprintf("log of restore %q", name), cmd.OutOrStdout())
			if errors.Is(err, errFileNotFound) {
				return fmt.Errorf("restore %q has no log yet; logs are uploaded when a restore finishes: %w", name, err)
			}
			return err
		}),
	}
	cmd.Flags().DurationVar(&timeout, "timeout", defaultDownloadTimeout, "how long to wait for the server to serve the log")
	tlsOpts = bindTLSFlags(cmd.Flags(), f)
	return cmd
}

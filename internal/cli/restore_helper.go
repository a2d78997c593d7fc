package cli

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/lifeboat-io/lifeboat/internal/restorehelper"
)

// newRestoreHelperCommand is what the restore-wait init container of a
// file-system restored pod runs; hidden, as nobody types it.
func newRestoreHelperCommand() *cobra.Command {
	root := "/restores"
	return &cobra.Command{
		Use:    "restore-helper RESTORE_UID",
		Short:  "Wait until the node agent has restored this pod's volumes (the restore-wait init container)",
		Long:   "Wait until every directory under /restores holds .velero/RESTORE_UID, the done marker the node agent writes once\nit has restored that volume, then try to remove the .velero directories and exit 0 (Velero's velero-restore-helper).",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return restorehelper.Wait(cmd.Context(), root, args[0], time.Second, cmd.OutOrStdout())
		},
	}
}

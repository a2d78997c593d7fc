package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

// newBackupVerifyCommand builds `backup verify`: the server reads the
// backup back from its storage location and checks every file and
// tarball entry against the digests the backup wrote.
func newBackupVerifyCommand(f *Factory) *cobra.Command {
	var (
		wait       bool
		timeout    time.Duration
		dryRun     bool
		nsMappings []string
	)
	cmd := &cobra.Command{
		Use:   "verify NAME",
		Short: "Check a stored backup against the digests it wrote: changed, missing or added files and items (docs/integrity.md)",
		Long: `Asks the server to read the backup back from its storage location and check
every file, and every entry of its tarball, against the digests the backup
recorded when it was written. The outcome is kept on the Backup: the
Verified condition and the lifeboat.io/verification annotation (shown by
` + "`backup describe`" + `). With --wait (the default) the command waits for it and
fails when the backup differs from what was written or has no digests.

Backups written by Velero, or by a Lifeboat before digests, have no digests
and cannot be verified.

--restore-dry-run adds a restore dry run (docs/restore-dry-run.md) once the
files check out: into the backup's own namespaces, or with
--namespace-mappings into others. It is a Restore of its own, named
NAME-verify-<hash>, which ` + "`restore describe`" + ` shows; an item that would fail
to restore makes the outcome RestoreWouldFail. Schedules: annotate the
schedule lifeboat.io/verify-dry-run=true (or =src:dst,...) beside
lifeboat.io/verify-backups=true.`,
		Args: cobra.ExactArgs(1),
		Example: `  lifeboat backup verify nightly-20261207010000
  lifeboat backup verify nightly-20261207010000 --wait=false
  lifeboat backup verify nightly-20261207010000 --restore-dry-run --namespace-mappings shop:shop-check`,
		RunE: runE(f, func(cmd *cobra.Command, args []string) error {
			c, err := f.Client()
			if err != nil {
				return err
			}
			if len(nsMappings) > 0 && !dryRun {
				return errors.New("--namespace-mappings goes with --restore-dry-run: it says where the dry run restores to")
			}
			mapping, err := parseNamespaceMappings("namespace-mappings", nsMappings)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			b, err := backupKind.get(ctx, c, f.Namespace, args[0])
			if err != nil {
				return err
			}
			token := time.Now().UTC().Format(time.RFC3339Nano)
			// The dry-run annotation is set, or removed, with every request:
			// what this request asks for, not what an earlier one did.
			var dryRunValue any
			if dryRun {
				dryRunValue = "true"
				if len(mapping) > 0 {
					pairs := make([]string, 0, len(mapping))
					for _, src := range slices.Sorted(maps.Keys(mapping)) {
						pairs = append(pairs, src+":"+mapping[src])
					}
					dryRunValue = strings.Join(pairs, ",")
				}
			}
			patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{
				v1.VerifyRequestAnnotation: token, v1.VerifyDryRunAnnotation: dryRunValue,
			}}})
			if err != nil {
				return err
			}
			cctx, cancel := callCtx(ctx)
			err = c.Patch(cctx, b, client.RawPatch(types.MergePatchType, patch))
			cancel()
			if err != nil {
				return fmt.Errorf("asking the server to verify backup %q: %w", b.Name, err)
			}
			out := cmd.OutOrStdout()
			if !wait {
				fmt.Fprintf(out, "Verification of backup %s requested; `lifeboat backup describe %s` shows its outcome.\n", b.Name, b.Name)
				return nil
			}
			return waitForVerification(ctx, f, c, out, b.Name, token, timeout)
		}),
	}
	cmd.Flags().BoolVarP(&wait, "wait", "w", true, "wait for the outcome")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Minute, "how long --wait waits; the server reads the whole backup back")
	cmd.Flags().BoolVar(&dryRun, "restore-dry-run", false, "also run a restore dry run of the backup once its files check out")
	cmd.Flags().StringSliceVar(&nsMappings, "namespace-mappings", nil, "with --restore-dry-run: restore namespaces under other names, as source:target,source:target")
	return cmd
}

// waitForVerification polls the backup until the server answered token,
// prints the outcome, and fails unless the backup was verified.
func waitForVerification(ctx context.Context, f *Factory, c client.Client, out io.Writer, name, token string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	b, err := waitUntilDone(ctx, f, c, out, "backup", client.ObjectKey{Namespace: f.Namespace, Name: name},
		func() *v1.Backup { return &v1.Backup{} },
		func(b *v1.Backup) (string, string, bool) {
			done := b.Annotations[v1.VerifiedRequestAnnotation] == token
			phase := "verifying"
			if _, dry := b.Annotations[v1.VerifyIntegrityAnnotation]; dry {
				phase = "restore dry run"
			}
			if !b.Status.Phase.IsTerminal() {
				phase = "waiting for the backup to end (" + string(phaseOf(b)) + ")"
			}
			if done {
				phase = "verified"
			}
			return phase, "Backup " + name + ": " + phase, done
		})
	if err != nil {
		return err
	}
	outcome := b.Annotations[v1.VerificationAnnotation]
	fmt.Fprintln(out, outcome)
	// "<time> <reason>: <summary>"
	if _, rest, _ := strings.Cut(outcome, " "); !strings.HasPrefix(rest, v1.VerificationVerified+":") {
		return fmt.Errorf("backup %q was not verified", name)
	}
	return nil
}

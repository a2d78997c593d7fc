// Package cli implements the lifeboat command: the server verb and the
// client verbs that talk to a cluster through the velero.io/v1 API.
package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
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
	flags.StringVar(&f.Kubeconfig, "kubeconfig", f.Kubeconfig, "path to the kubeconfig file (default: KUBECONFIG, then ~/.kube/config, then the in-cluster configuration)")
	flags.StringVar(&f.Context, "kubecontext", f.Context, "kubeconfig context to use (default: the current context)")
	// kubectl's name for the same flag, kept for those who type it.
	flags.StringVar(&f.Context, "context", f.Context, "same as --kubecontext")
	if f.Namespace == "" {
		f.Namespace = v1.DefaultNamespace
	}
	flags.StringVarP(&f.Namespace, "namespace", "n", f.Namespace,
		"namespace the Lifeboat server and its objects live in; VELERO_NAMESPACE, or the namespace in Velero's client config ~/.config/velero/config.json, changes the default")

	root.AddCommand(
		newVersionCommand(f),
		newInstallCommand(f),
		newUninstallCommand(f),
		newServerCommand(f),
		newNodeAgentCommand(f),
		newRestoreHelperCommand(),
		newBackupCommand(f),
		newRestoreCommand(f),
		newDeleteRequestCommand(f),
		newScheduleCommand(f),
		newBackupLocationCommand(f),
		newSnapshotLocationCommand(f),
		newPluginCommand(f),
		newPolicyCommand(f),
	)
	root.AddCommand(verbFirstCommands(f)...)
	// Cobra adds its completion command when the command line runs; added
	// now, it gets the same treatment as the others.
	root.InitDefaultCompletionCmd()
	walk(root, refuseUnknownSubcommands)
	return root
}

// verbFirstCommands are Velero's other spelling of the same commands,
// verb first: `get backups`, `create backup NAME`, `delete schedule NAME`,
// `describe restores`. Each is the noun-first command itself, built anew
// (a cobra command has one parent) and renamed after its noun.
func verbFirstCommands(f *Factory) []*cobra.Command {
	nouns := map[string]func(*Factory) *cobra.Command{
		"backup": newBackupCommand, "restore": newRestoreCommand, "schedule": newScheduleCommand,
		"backup-location": newBackupLocationCommand, "snapshot-location": newSnapshotLocationCommand, "plugin": newPluginCommand,
	}
	var out []*cobra.Command
	for _, form := range []struct {
		verb, short string
		nouns       []string
	}{
		{"get", "List backups, restores, schedules, locations or plugins (same as NOUN get)",
			[]string{"backup", "restore", "schedule", "backup-location", "snapshot-location", "plugin"}},
		{"create", "Create a backup, restore, schedule or location (same as NOUN create)",
			[]string{"backup", "restore", "schedule", "backup-location", "snapshot-location"}},
		{"delete", "Delete backups, restores, schedules or backup locations (same as NOUN delete)",
			[]string{"backup", "restore", "schedule", "backup-location"}},
		{"describe", "Describe backups, restores or schedules (same as NOUN describe)",
			[]string{"backup", "restore", "schedule"}},
	} {
		group := &cobra.Command{Use: form.verb, Short: form.short}
		for _, noun := range form.nouns {
			parent := nouns[noun](f)
			var sub *cobra.Command
			for _, c := range parent.Commands() {
				if c.Name() == form.verb {
					sub = c
				}
			}
			parent.RemoveCommand(sub)
			// Velero lists with the plural (get backups) and acts on
			// the singular (create backup NAME); both spellings work.
			name, alias := noun, noun+"s"
			if form.verb == "get" || form.verb == "describe" {
				name, alias = alias, name
			}
			_, rest, _ := strings.Cut(sub.Use, " ")
			sub.Use = strings.TrimSpace(name + " " + rest)
			sub.Aliases = []string{alias}
			group.AddCommand(sub)
		}
		out = append(out, group)
	}
	return out
}

// refuseUnknownSubcommands makes a command group fail on a word that is
// none of its subcommands. Cobra's default is to print the group's help
// and exit 0, so a typo such as `lifeboat schedule delet x` looked like
// success to a script. The group alone still prints its help.
func refuseUnknownSubcommands(cmd *cobra.Command) {
	if !cmd.HasSubCommands() || cmd.Runnable() {
		return
	}
	cmd.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += fmt.Sprintf("; did you mean %q?", s[0])
		}
		return fmt.Errorf("%s (run `%s --help` for the list)", msg, cmd.CommandPath())
	}
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
}

// walk calls fn on cmd and every command below it.
func walk(cmd *cobra.Command, fn func(*cobra.Command)) {
	fn(cmd)
	for _, c := range cmd.Commands() {
		walk(c, fn)
	}
}

// runE adapts a command body so that cluster-wide failures (no API server,
// no CRDs) read the same from every verb.
func runE(f *Factory, fn func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		return f.explain(fn(cmd, args))
	}
}

package cli

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/lifeboat-io/lifeboat/pkg/policy"
)

// newPolicyCommand groups the resource-policy verbs. validate works offline;
// the Factory is for verbs that read the cluster.
func newPolicyCommand(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Work with resource policies (volume policies, include/exclude and fine-grained filters)",
	}
	cmd.AddCommand(newPolicyValidateCommand(), newPolicyExplainCommand(f))
	return cmd
}

func newPolicyValidateCommand() *cobra.Command {
	var forRestore bool
	cmd := &cobra.Command{
		Use:   "validate FILE",
		Short: "Check a resource policy file and print every problem in it",
		Long: "Check a resource policy without a cluster. FILE holds the policy YAML (the value\n" +
			"of the ConfigMap's data key) or a whole ConfigMap manifest (kind: ConfigMap); \"-\"\n" +
			"reads standard input. Every problem is printed, one per line, with the messages a\n" +
			"backup using the policy would fail validation with. What Velero accepts is valid;\n" +
			"where that is most likely a mistake (a volume type or phase that never matches, a\n" +
			"condition with no value) a warning line names the field and the fix, and the\n" +
			"backups using the policy carry the same warnings.\n\n" +
			"Backups apply every section: volumePolicies, includeExcludePolicy, and the\n" +
			"fine-grained filters namespacedFilterPolicies and clusterScopedFilterPolicy\n" +
			"(docs/policies.md). A restore's policy (spec.resourcePolicy, restore create\n" +
			"--resource-policies-configmap) may hold only the fine-grained filters, as in\n" +
			"Velero: --restore checks the policy as a restore reads it.",
		Example: "  lifeboat policy validate volume-policy.yaml\n" +
			"  kubectl get configmap -n velero my-policy -o yaml | lifeboat policy validate -\n" +
			"  lifeboat policy validate --restore restore-filters.yaml",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			data, err := readPolicyFile(cmd, name)
			if err != nil {
				return err
			}
			p, err := policy.ParseFile(data)
			var invalid *policy.ValidationError
			if errors.As(err, &invalid) {
				out := cmd.OutOrStdout()
				for _, msg := range invalid.Messages() {
					fmt.Fprintln(out, msg)
				}
				return fmt.Errorf("%s: invalid (%s)", name, plural(len(invalid.Problems), "problem", "problems"))
			}
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			out := cmd.OutOrStdout()
			if forRestore {
				if problems := p.RestoreProblems(); len(problems) > 0 {
					for _, m := range problems {
						fmt.Fprintln(out, m)
					}
					return fmt.Errorf("%s: invalid for a restore (%s)", name, plural(len(problems), "problem", "problems"))
				}
			}
			for _, w := range p.WarningMessages() {
				fmt.Fprintln(out, "warning: "+w)
			}
			summary := plural(len(p.VolumePolicies), "volume policy", "volume policies")
			if n := len(p.NamespacedFilterPolicies); n > 0 {
				summary += ", " + plural(n, "namespaced filter policy", "namespaced filter policies")
			}
			if p.ClusterScopedFilterPolicy != nil {
				summary += ", a cluster-scoped filter policy"
			}
			if len(p.Warnings) > 0 {
				summary += ", " + plural(len(p.Warnings), "warning", "warnings")
			}
			_, err = fmt.Fprintf(out, "%s: valid (%s)\n", name, summary)
			return err
		},
	}
	cmd.Flags().BoolVar(&forRestore, "restore", false, "check the policy as a restore reads it: only namespacedFilterPolicies and clusterScopedFilterPolicy are allowed (Velero's rule)")
	return cmd
}

// readPolicyFile reads at most policy.MaxFileBytes, so a wrong file name
// (a disk image, /dev/zero) fails at once instead of filling memory.
func readPolicyFile(cmd *cobra.Command, name string) ([]byte, error) {
	var r io.Reader = cmd.InOrStdin()
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, policy.MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if len(data) > policy.MaxFileBytes {
		return nil, fmt.Errorf("%s: larger than %d MiB; a resource policy (or its ConfigMap manifest) is smaller, since a ConfigMap holds at most %d MiB",
			name, policy.MaxFileBytes>>20, policy.MaxBytes>>20)
	}
	return data, nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

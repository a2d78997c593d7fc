package cli

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/lifeboat-io/lifeboat/pkg/policy"
)

// newPolicyCommand groups the resource-policy verbs. validate works offline;
// the Factory is for verbs that read the cluster.
func newPolicyCommand(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Work with resource policies (volume policies and include/exclude filters)",
	}
	cmd.AddCommand(newPolicyValidateCommand(), newPolicyExplainCommand(f))
	return cmd
}

func newPolicyValidateCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "validate FILE",
		Short: "Check a resource policy file and print every problem in it",
		Long: "Check a resource policy without a cluster. FILE holds the policy YAML (the value\n" +
			"of the ConfigMap's data key) or a whole ConfigMap manifest (kind: ConfigMap); \"-\"\n" +
			"reads standard input. Every problem is printed, one per line, with the messages a\n" +
			"backup using the policy would fail validation with.",
		Example: "  lifeboat policy validate volume-policy.yaml\n" +
			"  kubectl get configmap -n velero my-policy -o yaml | lifeboat policy validate -",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			data, err := readPolicyFile(cmd, name)
			if err != nil {
				return err
			}
			p, err := parsePolicyFile(data)
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
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s: valid (%s)\n", name,
				plural(len(p.VolumePolicies), "volume policy", "volume policies"))
			return err
		},
	}
}

func readPolicyFile(cmd *cobra.Command, name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(cmd.InOrStdin())
	}
	return os.ReadFile(name)
}

// parsePolicyFile accepts what users have at hand: the policy itself, or
// the ConfigMap manifest they apply (or got from kubectl get -o yaml).
func parsePolicyFile(data []byte) (*policy.Policies, error) {
	var head struct {
		Kind string `json:"kind"`
	}
	// A file that is not YAML at all is reported by policy.Parse, with the
	// same message a backup would show.
	if yaml.Unmarshal(data, &head) != nil || head.Kind != "ConfigMap" {
		return policy.Parse(data)
	}
	cm := &corev1.ConfigMap{}
	if err := yaml.Unmarshal(data, cm); err != nil {
		return nil, fmt.Errorf("not a valid ConfigMap manifest: %w", err)
	}
	return policy.FromConfigMap(cm)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

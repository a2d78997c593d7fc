package cli

import (
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/spf13/cobra"

	"github.com/lifeboat-io/lifeboat/internal/nodeagent"
)

// nodeAgentDataPath builds the node agent's data path: the kopia one
// (nodeagent_datapath.go). Tests of the command swap runNodeAgent, not this.
var nodeAgentDataPath nodeagent.DataPathFactory

// runNodeAgent is nodeagent.Run; tests swap it to see the options the
// flags built.
var runNodeAgent = nodeagent.Run

func newNodeAgentCommand(f *Factory) *cobra.Command {
	opts := nodeagent.DefaultOptions()
	opts.NodeName = os.Getenv("NODE_NAME")
	var cpuProfile string
	cmd := &cobra.Command{
		Use:   "node-agent",
		Short: "Run the node agent: file-system backup and restore of the pod volumes of this node",
		Long: "Run the node agent, one per node (the DaemonSet node-agent that `lifeboat install --use-node-agent` creates).\n" +
			"It carries out the PodVolumeBackups and PodVolumeRestores in the namespace given by -n (default velero)\n" +
			"for the pods of its node (NODE_NAME, or --node-name), reading and writing their volumes in the\n" +
			"kubelet's pod directory, mounted at --host-pods-dir.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.Validate(); err != nil {
				return err
			}
			opts.Namespace = f.Namespace
			cfg, err := f.RESTConfig()
			if err != nil {
				return err
			}
			if cpuProfile != "" {
				stop, err := startCPUProfile(cpuProfile)
				if err != nil {
					return err
				}
				defer stop()
			}
			if err := runNodeAgent(cmd.Context(), cfg, opts, nodeAgentDataPath); err != nil {
				return f.explain(fmt.Errorf("node agent: %w", err))
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.NodeName, "node-name", opts.NodeName, "node whose pods this agent serves (default $NODE_NAME, which the DaemonSet sets from spec.nodeName)")
	fl.StringVar(&opts.HostPodsDir, "host-pods-dir", opts.HostPodsDir, "where the kubelet's pod directory (<kubelet root>/pods on the node) is mounted")
	fl.StringVar(&opts.MetricsAddress, "metrics-address", opts.MetricsAddress, `address to serve Prometheus metrics on ("0" disables)`)
	fl.StringVar(&opts.HealthAddress, "health-address", opts.HealthAddress, `address to serve /healthz and /readyz on ("0" disables)`)
	fl.IntVar(&opts.Concurrency, "concurrency", opts.Concurrency, "transfers (backups and restores of pod volumes) run at once on this node")
	fl.Float32Var(&opts.ClientQPS, "client-qps", opts.ClientQPS, "queries per second the node agent may send to the API server; -1 sets no client-side limit")
	fl.IntVar(&opts.ClientBurst, "client-burst", opts.ClientBurst, "burst of queries above --client-qps")
	fl.StringVar(&opts.LogLevel, "log-level", opts.LogLevel, "log level: debug, info, warn or error")
	fl.StringVar(&opts.LogFormat, "log-format", opts.LogFormat, "log format: text or json")
	// For the file-system backup benchmark (bench/README.md): where the
	// node agent's CPU goes, over its whole life, for go tool pprof.
	fl.StringVar(&cpuProfile, "cpu-profile", "", "write a CPU profile of the process to this file when it stops")
	_ = fl.MarkHidden("cpu-profile")
	fl.StringVar(&opts.ProfilingAddress, "profiling-address", "", "serve net/http/pprof on this address (go tool pprof http://ADDRESS/debug/pprof/heap)")
	_ = fl.MarkHidden("profiling-address")
	// For the in-cluster test that kills the node agent mid-upload: kopia's
	// checkpoints, every 45 minutes otherwise, come within the test's time.
	fl.DurationVar(&opts.CheckpointInterval, "checkpoint-interval", 0, "save a kopia checkpoint snapshot of a running backup this often (0: kopia's 45m, also the most kopia accepts)")
	_ = fl.MarkHidden("checkpoint-interval")
	return cmd
}

// startCPUProfile profiles the process into path until stop is called.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpu-profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpu-profile %s: %w", path, err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

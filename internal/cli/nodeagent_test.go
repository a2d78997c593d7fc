package cli

import (
	"context"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/lifeboat-io/lifeboat/internal/nodeagent"
)

func TestNodeAgentFlags(t *testing.T) {
	var got nodeagent.Options
	var gotDP nodeagent.DataPathFactory
	runNodeAgent = func(_ context.Context, _ *rest.Config, opts nodeagent.Options, dp nodeagent.DataPathFactory) error {
		got, gotDP = opts, dp
		return nil
	}
	t.Cleanup(func() { runNodeAgent = nodeagent.Run })
	t.Setenv("NODE_NAME", "node-a")
	kubeconfig := writeKubeconfig(t, "https://127.0.0.1:1")
	if err := runReal(t, "node-agent", "--kubeconfig", kubeconfig, "-n", "backups", "--concurrency", "3", "--host-pods-dir", "/hp"); err != nil {
		t.Fatal(err)
	}
	if got.NodeName != "node-a" || got.Namespace != "backups" || got.Concurrency != 3 || got.HostPodsDir != "/hp" {
		t.Errorf("options %+v: want node-a from NODE_NAME, namespace backups, concurrency 3, /hp", got)
	}
	if got.MetricsAddress != ":8085" || got.HealthAddress != ":8086" {
		t.Errorf("addresses %s %s: want Velero's metrics port 8085 and the server's health port 8086", got.MetricsAddress, got.HealthAddress)
	}
	if gotDP == nil {
		t.Error("the node agent got no data path: every transfer would fail")
	}
	if got.CheckpointInterval != 0 {
		t.Errorf("checkpoint interval %s by default: want 0, kopia's own", got.CheckpointInterval)
	}
	if err := runReal(t, "node-agent", "--kubeconfig", kubeconfig, "--checkpoint-interval", "2s"); err != nil || got.CheckpointInterval != 2*time.Second {
		t.Errorf("--checkpoint-interval 2s: %v, interval %s", err, got.CheckpointInterval)
	}
	err := runReal(t, "node-agent", "--kubeconfig", kubeconfig, "--checkpoint-interval", "1h")
	if err == nil || !strings.Contains(err.Error(), "--checkpoint-interval") {
		t.Errorf("--checkpoint-interval 1h: %v; want an error naming the flag (kopia refuses more than 45m)", err)
	}
}

// The benchmark's hidden --cpu-profile writes a profile go tool pprof
// reads, once the node agent has returned, and a bad path stops the start.
func TestNodeAgentCPUProfile(t *testing.T) {
	profiling := false
	runNodeAgent = func(context.Context, *rest.Config, nodeagent.Options, nodeagent.DataPathFactory) error {
		// StartCPUProfile refuses a second profile: proof one is running.
		profiling = pprof.StartCPUProfile(&strings.Builder{}) != nil
		return nil
	}
	t.Cleanup(func() { runNodeAgent = nodeagent.Run })
	t.Setenv("NODE_NAME", "node-a")
	kubeconfig := writeKubeconfig(t, "https://127.0.0.1:1")
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	if err := runReal(t, "node-agent", "--kubeconfig", kubeconfig, "--cpu-profile", path); err != nil {
		t.Fatal(err)
	}
	if !profiling {
		t.Error("no CPU profile was running while the node agent ran")
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		t.Errorf("profile %s: %v, %v; want a non-empty file", path, fi, err)
	}
	err := runReal(t, "node-agent", "--kubeconfig", kubeconfig, "--cpu-profile", filepath.Join(path, "no", "such"))
	if err == nil || !strings.Contains(err.Error(), "--cpu-profile") {
		t.Fatalf("error %v: want one naming --cpu-profile", err)
	}
}

func TestNodeAgentNeedsANode(t *testing.T) {
	runNodeAgent = func(context.Context, *rest.Config, nodeagent.Options, nodeagent.DataPathFactory) error {
		t.Fatal("started without a node name")
		return nil
	}
	t.Cleanup(func() { runNodeAgent = nodeagent.Run })
	t.Setenv("NODE_NAME", "")
	kubeconfig := writeKubeconfig(t, "https://127.0.0.1:1")
	err := runReal(t, "node-agent", "--kubeconfig", kubeconfig)
	if err == nil || !strings.Contains(err.Error(), "NODE_NAME") {
		t.Fatalf("error %v: want one naming NODE_NAME", err)
	}
}

func TestInstallNodeAgentFlags(t *testing.T) {
	out, _, err := run(t, newTestFactory(nil), "install", "--dry-run", "--use-filesystem", "/srv/b", "--use-node-agent",
		"--kubelet-root-dir", "/var/lib/k0s/kubelet", "--node-agent-pod-cpu-limit", "2")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kind: DaemonSet", "path: /var/lib/k0s/kubelet/pods", "cpu: \"2\"", "name: node-agent"} {
		if !strings.Contains(out, want) {
			t.Errorf("install --use-node-agent output lacks %q", want)
		}
	}
	for _, args := range [][]string{
		{"--no-server", "--use-node-agent"},
		{"--crds-only", "--use-node-agent"},
		{"--use-node-agent", "--kubelet-root-dir", "relative"},
		{"--use-node-agent", "--node-agent-pod-mem-request", "2Gi", "--node-agent-pod-mem-limit", "1Gi"},
	} {
		if _, _, err := run(t, newTestFactory(nil), append([]string{"install", "--dry-run"}, args...)...); err == nil {
			t.Errorf("install %v: accepted", args)
		}
	}
}

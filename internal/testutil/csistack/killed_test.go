package csistack_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lifeboat-io/lifeboat/internal/localcluster"
	"github.com/lifeboat-io/lifeboat/internal/testutil/csistack"
)

// A test binary killed outright never calls Stop: the stack's processes
// die with it, and the next Start removes the directory it left.
func TestAStackWhoseTestWasKilledLeavesNothing(t *testing.T) {
	if os.Getenv("CSISTACK_HELPER_KUBECONFIG") != "" {
		t.Skip("runs in the helper process only as TestHelperRunsAStackUntilKilled")
	}
	if testing.Short() {
		t.Skip("starts an API server and the CSI stack")
	}
	cluster, err := localcluster.Start(localcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Stop() })
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := cluster.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	child := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperRunsAStackUntilKilled$", "-test.v")
	child.Env = append(os.Environ(), "CSISTACK_HELPER_KUBECONFIG="+kubeconfig)
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	var dir string
	var pids []int
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		if d, ok := strings.CutPrefix(line, "STACK-DIR "); ok {
			dir = d
		}
		if p, ok := strings.CutPrefix(line, "STACK-PIDS "); ok {
			for _, f := range strings.Fields(p) {
				pid, _ := strconv.Atoi(f)
				pids = append(pids, pid)
			}
			break
		}
	}
	if dir == "" || len(pids) == 0 {
		_ = child.Process.Kill()
		t.Fatalf("the helper did not start a stack (%v)", sc.Err())
	}
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()

	deadline := time.Now().Add(30 * time.Second)
	for _, pid := range pids {
		for syscall.Kill(pid, 0) == nil {
			if time.Now().After(deadline) {
				t.Fatalf("process %d of the killed test's stack still runs", pid)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the killed stack's directory should still be there before the next Start: %v", err)
	}
	next, err := csistack.Start(ctx, csistack.Options{Kubeconfig: kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	defer next.Stop()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the next Start left the killed stack's directory %s (%v)", dir, err)
	}
}

// TestHelperRunsAStackUntilKilled is the process the test above kills.
func TestHelperRunsAStackUntilKilled(t *testing.T) {
	kubeconfig := os.Getenv("CSISTACK_HELPER_KUBECONFIG")
	if kubeconfig == "" {
		t.Skip("a helper of TestAStackWhoseTestWasKilledLeavesNothing")
	}
	stack, err := csistack.Start(context.Background(), csistack.Options{Kubeconfig: kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	var pids []string
	for _, p := range stack.PIDs() {
		pids = append(pids, strconv.Itoa(p))
	}
	fmt.Println("STACK-DIR " + filepath.Dir(stack.StateDir))
	fmt.Println("STACK-PIDS " + strings.Join(pids, " "))
	time.Sleep(time.Hour)
}

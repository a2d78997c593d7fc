// Package csisanity runs the CSI community's conformance suite (csi-test's
// sanity package, v5) against Lifeboat's test driver (test/csidriver): every
// call the driver advertises, with the spec's idempotency and error codes.
// A module of its own: the suite brings Ginkgo and Gomega, which the main
// module does not need. The Node tests bind-mount, so it needs root.
package csisanity

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
)

func TestDriverPassesCSISanity(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the driver's Node service bind-mounts: run as root (make test does)")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "csidriver")
	build := exec.Command("go", "build", "-o", bin, "./test/csidriver")
	build.Dir = filepath.Join("..", "..")
	build.Env = append(os.Environ(), "GOWORK=off", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building test/csidriver: %v\n%s", err, out)
	}
	sock := filepath.Join(dir, "csi.sock")
	driver := exec.Command(bin, "--endpoint", "unix://"+sock, "--state-dir", filepath.Join(dir, "state"), "--node-id", "sanity-node")
	logPath := filepath.Join(dir, "driver.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	driver.Stdout, driver.Stderr = logf, logf
	if err := driver.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = driver.Process.Kill()
		_ = driver.Wait()
		_ = logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("driver log:\n%s", b)
		}
	}()
	for deadline := time.Now().Add(30 * time.Second); ; {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the driver did not create its socket")
		}
		time.Sleep(50 * time.Millisecond)
	}

	cfg := sanity.NewTestConfig()
	cfg.Address = sock
	cfg.TargetPath = filepath.Join(dir, "target")
	cfg.StagingPath = filepath.Join(dir, "staging")
	cfg.TestVolumeAccessType = "mount"
	// Every create and delete twice: the spec's idempotency.
	cfg.IdempotentCount = 2
	sanity.Test(t, cfg)
}

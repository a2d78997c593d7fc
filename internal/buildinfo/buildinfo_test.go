package buildinfo

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	rev := "0123456789abcdef0123456789abcdef01234567"
	for _, tc := range []struct {
		name         string
		info         *debug.BuildInfo
		version, sha string
	}{
		{"no info", nil, "dev", ""},
		{"nothing recorded", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev", ""},
		{"go install of a release", &debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}}, "v1.4.0", ""},
		{"checkout", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "false"}}}, "dev-0123456789ab", rev},
		{"dirty checkout", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "true"}}}, "dev-0123456789ab-dirty", rev + "-dirty"},
		{"pseudo-version", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20260301120000-0123456789ab+dirty"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "true"}}}, "v0.0.0-20260301120000-0123456789ab.dirty", rev + "-dirty"},
	} {
		v, sha := fromBuildInfo(tc.info)
		if v != tc.version || sha != tc.sha {
			t.Errorf("%s: got %q %q, want %q %q", tc.name, v, sha, tc.version, tc.sha)
		}
	}
}

// A plain `go build` of the lifeboat command, without the Makefile's
// ldflags, reports the commit it was built from.
func TestPlainGoBuildHasAVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the lifeboat binary")
	}
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not in a git checkout: %v", err)
	}
	// The go command stamps VCS information only where .git is a
	// directory: not in a `git worktree` checkout, whose .git is a file.
	if fi, err := os.Stat(filepath.Join(strings.TrimSpace(string(root)), ".git")); err != nil || !fi.IsDir() {
		t.Skip("a git worktree: the go command records no VCS information here")
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "lifeboat")
	build := exec.Command("go", "build", "-o", bin, "./cmd/lifeboat")
	build.Dir = strings.TrimSpace(string(root))
	build.Env = append(os.Environ(), "GOFLAGS=-buildvcs=true")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version", "--client-only").CombinedOutput()
	if err != nil {
		t.Fatalf("lifeboat version --client-only: %v\n%s", err, out)
	}
	want := strings.TrimSpace(string(head))
	if !strings.Contains(string(out), want) || strings.Contains(string(out), "Version: dev\n") {
		t.Errorf("version of a plain go build lacks commit %s:\n%s", want, out)
	}
}

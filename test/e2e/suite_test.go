// Package e2e runs Lifeboat end to end: a real kube-apiserver with etcd, the
// real controllers, real filesystem and S3 (versitygw) storage, real plugin
// processes, and the CLI.
package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/lifeboat-io/lifeboat/internal/testutil/testenv"
	"github.com/lifeboat-io/lifeboat/pkg/plugin/api"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	plugins, err := os.MkdirTemp("", "lifeboat-e2e-plugins-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// The plugin the asynchronous-operations test drives, as a real process.
	build := exec.Command("go", "build", "-o", filepath.Join(plugins, "asyncplugin"), "./testdata/asyncplugin")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the test plugin: %v\n%s", err, out)
		os.Exit(1)
	}
	// A short timeout for item actions lets the hung-plugin test finish quickly.
	code := testenv.Run(m, testenv.Options{WithS3: true, PluginDir: plugins,
		PluginTimeouts: map[api.Kind]time.Duration{api.KindBackupItemAction: 3 * time.Second}}, &env)
	_ = os.RemoveAll(plugins)
	removeDeletionPlugins()
	os.Exit(code)
}

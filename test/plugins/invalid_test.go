package plugins

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lifeboat-io/lifeboat/internal/server"
)

// TestServerRefusesAnInvalidPlugin starts a second server against the same
// cluster with a plugin dir holding a file that is executable but not a
// plugin. The server must stop at start-up with an error naming that file,
// rather than run without what the plugin was meant to do. (How a plugin
// that crashes or hangs mid-call is restarted is internal/pluginhost's
// tests' business.)
func TestServerRefusesAnInvalidPlugin(t *testing.T) {
	for _, tc := range []struct{ name, script, want string }{
		{"exits at once", "#!/bin/sh\necho 'cannot start' >&2\nexit 1\n", "starting plugin binary"},
		{"is some other program", "#!/bin/sh\necho hello\n", "hello"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			bad := filepath.Join(dir, "nested", "not-a-plugin")
			if err := os.MkdirAll(filepath.Dir(bad), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(bad, []byte(tc.script), 0o755); err != nil {
				t.Fatal(err)
			}
			opts := server.DefaultOptions()
			opts.Namespace = env.Namespace
			opts.MetricsAddress, opts.HealthAddress = "0", "0"
			opts.LogLevel = "error"
			opts.PluginDir = dir
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cfg, err := env.ServerConfig(opts.Namespace)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			err = server.Run(ctx, cfg, opts)
			if err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("server.Run = %v, want an error naming %s and saying %q", err, bad, tc.want)
			}
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("the server took %s to give up", d)
			}
			t.Logf("server start-up error: %v", err)
		})
	}
}

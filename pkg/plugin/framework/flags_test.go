package framework

import (
	"log/slog"
	"reflect"
	"strings"
	"testing"
)

func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		level    slog.Level
		features []string
		err      string
	}{
		{name: "none", level: slog.LevelInfo},
		{name: "as Velero passes them", args: []string{"--log-level", "debug", "--features", "EnableCSI,EnableAPIGroupVersions"},
			level: slog.LevelDebug, features: []string{"EnableCSI", "EnableAPIGroupVersions"}},
		{name: "with =", args: []string{"--log-level=warning", "--features=a"}, level: slog.LevelWarn, features: []string{"a"}},
		{name: "one dash", args: []string{"-log-level", "error", "-features=b"}, level: slog.LevelError, features: []string{"b"}},
		{name: "the server's own flags are ignored", args: []string{
			"server", "--uploader-type", "kopia", "--default-backup-ttl=72h", "-v", "--log-format", "json",
			"--log-level", "trace", "--plugin-dir=/plugins", "--keep-latest-maintenance-jobs", "3",
		}, level: slog.LevelDebug},
		{name: "features repeat and merge", args: []string{"--features", "a,b", "--features=b,c", "--features", ""},
			level: slog.LevelInfo, features: []string{"a", "b", "c"}},
		{name: "a flag named like ours is not ours", args: []string{"--log-level-file=x", "--featuresx", "y"}, level: slog.LevelInfo},
		{name: "after -- nothing counts", args: []string{"--", "--log-level", "debug"}, level: slog.LevelInfo},
		{name: "bad level keeps info", args: []string{"--log-level", "loud", "--features", "a"},
			level: slog.LevelInfo, features: []string{"a"}, err: `--log-level "loud" is not one of`},
		{name: "missing value", args: []string{"--log-level"}, level: slog.LevelInfo, err: "--log-level needs a value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := parseFlags(tc.args)
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("error = %v, want %q", err, tc.err)
			}
			if f.logLevel != tc.level || !reflect.DeepEqual(f.features, tc.features) {
				t.Errorf("parsed level %v features %q, want %v %q", f.logLevel, f.features, tc.level, tc.features)
			}
		})
	}
}

func TestFeatures(t *testing.T) {
	t.Cleanup(func() { setFeatures(nil) })
	setFeatures([]string{"EnableCSI"})
	if !FeatureEnabled("EnableCSI") || FeatureEnabled("Other") || !reflect.DeepEqual(Features(), []string{"EnableCSI"}) {
		t.Errorf("features = %v", Features())
	}
}

package framework

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
)

// serveFlags are the only flags a plugin understands. Hosts start plugins
// with their own command line (Velero passes the server's flags along), so
// everything else is skipped rather than refused.
type serveFlags struct {
	logLevel slog.Level
	features []string
}

// parseFlags reads --log-level and --features (either "--flag value" or
// "--flag=value", with one or two dashes) and ignores every other argument.
// A bad --log-level value is reported but leaves the level at info: a plugin
// that refused to start over its log level would fail every backup.
func parseFlags(args []string) (serveFlags, error) {
	f := serveFlags{logLevel: slog.LevelInfo}
	var errs []string
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			break
		}
		if !strings.HasPrefix(arg, "-") {
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		if name != "log-level" && name != "features" {
			continue
		}
		if !hasValue {
			if i+1 >= len(args) {
				errs = append(errs, fmt.Sprintf("--%s needs a value", name))
				continue
			}
			i++
			value = args[i]
		}
		switch name {
		case "log-level":
			level, err := parseLevel(value)
			if err != nil {
				errs = append(errs, err.Error())
				continue
			}
			f.logLevel = level
		case "features":
			for _, feature := range strings.Split(value, ",") {
				if feature = strings.TrimSpace(feature); feature != "" && !slices.Contains(f.features, feature) {
					f.features = append(f.features, feature)
				}
			}
		}
	}
	if len(errs) > 0 {
		return f, fmt.Errorf("plugin flags: %s", strings.Join(errs, "; "))
	}
	return f, nil
}

// parseLevel accepts logrus's level names, which is what Velero passes.
func parseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "trace", "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error", "fatal", "panic":
		return slog.LevelError, nil
	}
	return slog.LevelInfo, fmt.Errorf("--log-level %q is not one of trace, debug, info, warning, error, fatal, panic", s)
}

var (
	featuresMu sync.RWMutex
	features   []string
)

func setFeatures(f []string) {
	featuresMu.Lock()
	defer featuresMu.Unlock()
	features = slices.Clone(f)
}

// Features returns the feature flags the host passed with --features.
func Features() []string {
	featuresMu.RLock()
	defer featuresMu.RUnlock()
	return slices.Clone(features)
}

// FeatureEnabled reports whether the host enabled the feature flag name.
func FeatureEnabled(name string) bool {
	featuresMu.RLock()
	defer featuresMu.RUnlock()
	return slices.Contains(features, name)
}

package framework

import (
	"io"
	"log/slog"
)

// hclogTimeFormat is the only timestamp layout go-plugin's host side parses;
// a line with any other layout is logged as unstructured debug text.
const hclogTimeFormat = "2006-01-02T15:04:05.000000Z07:00"

// newLogger logs JSON lines in hclog's shape (@level, @message, @timestamp)
// on w. go-plugin reads a plugin's stderr and re-logs such lines in the host
// at their own level with their attributes; anything else would arrive as
// debug noise.
func newLogger(w io.Writer, level slog.Leveler) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: hclogAttr}))
}

func hclogAttr(groups []string, a slog.Attr) slog.Attr {
	if len(groups) > 0 {
		return a
	}
	switch a.Key {
	case slog.TimeKey:
		if a.Value.Kind() == slog.KindTime {
			return slog.String("@timestamp", a.Value.Time().Format(hclogTimeFormat))
		}
	case slog.LevelKey:
		if level, ok := a.Value.Any().(slog.Level); ok {
			return slog.String("@level", hclogLevel(level))
		}
	case slog.MessageKey:
		return slog.String("@message", a.Value.String())
	}
	return a
}

func hclogLevel(l slog.Level) string {
	switch {
	case l < slog.LevelDebug:
		return "trace"
	case l < slog.LevelInfo:
		return "debug"
	case l < slog.LevelWarn:
		return "info"
	case l < slog.LevelError:
		return "warn"
	}
	return "error"
}

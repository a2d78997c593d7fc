package repository

import (
	"context"
	"log/slog"

	"github.com/kopia/kopia/repo/logging"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// WithKopiaLog sends kopia's own log lines (it logs through the context)
// to log: warnings and errors as such, the rest at debug level, where
// kopia's chatty progress lines belong.
func WithKopiaLog(ctx context.Context, log *slog.Logger) context.Context {
	if log == nil {
		return ctx
	}
	return logging.WithLogger(ctx, func(module string) logging.Logger {
		return zap.New(&slogCore{log: log.With("kopia", module)}).Sugar()
	})
}

// slogCore is a zapcore.Core writing to a slog.Logger.
type slogCore struct {
	log    *slog.Logger
	fields []zapcore.Field
}

func level(l zapcore.Level) slog.Level {
	switch {
	case l >= zapcore.ErrorLevel:
		return slog.LevelError
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	}
	return slog.LevelDebug
}

func (c *slogCore) Enabled(l zapcore.Level) bool {
	return c.log.Enabled(context.Background(), level(l))
}

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	return &slogCore{log: c.log, fields: append(append([]zapcore.Field{}, c.fields...), fields...)}
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range append(append([]zapcore.Field{}, c.fields...), fields...) {
		f.AddTo(enc)
	}
	attrs := make([]any, 0, 2*len(enc.Fields))
	for k, v := range enc.Fields {
		attrs = append(attrs, k, v)
	}
	c.log.Log(context.Background(), level(e.Level), e.Message, attrs...)
	return nil
}

func (c *slogCore) Sync() error { return nil }

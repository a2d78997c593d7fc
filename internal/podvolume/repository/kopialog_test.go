package repository

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/kopia/kopia/repo/logging"
)

func TestKopiaLogGoesToSlog(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx := WithKopiaLog(context.Background(), log)
	logging.Module("maintenance")(ctx).Warnw("compacting", "blobs", 3)
	logging.Module("maintenance")(ctx).Infow("chatty progress")
	logging.Module("content")(ctx).Errorf("failed: %v", "disk full")
	out := buf.String()
	for _, want := range []string{"level=WARN msg=compacting kopia=maintenance blobs=3", "level=ERROR msg=\"failed: disk full\" kopia=content"} {
		if !strings.Contains(out, want) {
			t.Errorf("log %q lacks %q", out, want)
		}
	}
	if strings.Contains(out, "chatty") {
		t.Errorf("kopia's info lines went above debug: %q", out)
	}
}

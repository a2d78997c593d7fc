package framework

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"
	"time"
)

// The plugin's log lines must be what go-plugin's host side parses as
// hclog JSON: otherwise they arrive in the host as unstructured debug text.
func TestLogLinesAreHclogJSON(t *testing.T) {
	var buf bytes.Buffer
	level := new(slog.LevelVar)
	log := newLogger(&buf, level).With("plugin", "example.io/x")
	log.Debug("hidden")
	log.Warn("careful", "item", "default/cm")
	level.Set(slog.LevelDebug)
	log.Debug("shown")

	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	if len(lines) != 2 {
		t.Fatalf("logged %d lines, want 2:\n%s", len(lines), buf.String())
	}
	var first map[string]any
	if err := json.Unmarshal(lines[0], &first); err != nil {
		t.Fatal(err)
	}
	if first["@level"] != "warn" || first["@message"] != "careful" || first["item"] != "default/cm" || first["plugin"] != "example.io/x" {
		t.Errorf("line = %v", first)
	}
	if _, err := time.Parse(hclogTimeFormat, first["@timestamp"].(string)); err != nil {
		t.Errorf("@timestamp: %v", err)
	}
	for _, key := range []string{"level", "msg", "time"} {
		if _, ok := first[key]; ok {
			t.Errorf("line still has slog's %q key: %v", key, first)
		}
	}
	if !bytes.Contains(lines[1], []byte(`"@level":"debug"`)) {
		t.Errorf("second line = %s", lines[1])
	}
}

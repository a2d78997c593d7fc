package main

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestAppendsNumberedLinesAndResumesAfterTheLast(t *testing.T) {
	file := filepath.Join(t.TempDir(), "lines.txt")
	log := slog.New(slog.DiscardHandler)

	writeFor(t, log, file, 3)
	lines := readLines(t, file)
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "1 ") || !strings.HasPrefix(lines[2], "3 ") {
		t.Fatalf("first run wrote %q, want lines 1 to 3", lines)
	}

	// A restarted (or restored) writer continues the count.
	writeFor(t, log, file, 2)
	lines = readLines(t, file)
	if len(lines) != 5 || !strings.HasPrefix(lines[3], "4 ") || !strings.HasPrefix(lines[4], "5 ") {
		t.Fatalf("second run left %q, want lines 1 to 5", lines)
	}

	rec := httptest.NewRecorder()
	serveFile(file).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	body, _ := io.ReadAll(rec.Body)
	if rec.Code != 200 || strings.Count(string(body), "\n") != 5 {
		t.Errorf("GET / = %d %q, want the 5 lines", rec.Code, body)
	}
}

func TestNamesTheMissingVolume(t *testing.T) {
	file := filepath.Join(t.TempDir(), "no-volume", "lines.txt")
	err := run(context.Background(), slog.New(slog.DiscardHandler), file, time.Hour)
	if err == nil || !strings.Contains(err.Error(), "is a volume mounted at") {
		t.Fatalf("err = %v, want one asking for the volume", err)
	}
}

// writeFor runs the writer until it has written n lines (a fast interval),
// then stops it.
func writeFor(t *testing.T, log *slog.Logger, file string, n int) {
	t.Helper()
	before := len(readLines(t, file))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, log, file, 5*time.Millisecond) }()
	deadline := time.Now().Add(10 * time.Second)
	for len(readLines(t, file)) < before+n {
		if time.Now().After(deadline) {
			t.Fatal("the writer did not write its lines in time")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Lines written between the check and the cancel are fine; trim them
	// so the counts above stay exact.
	lines := readLines(t, file)[:before+n]
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readLines(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

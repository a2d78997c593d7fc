package restorehelper

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestWaitEndsWhenEveryVolumeHasItsMarker(t *testing.T) {
	root := t.TempDir()
	for _, v := range []string{"data", "cache"} {
		if err := os.MkdirAll(filepath.Join(root, v), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "stray-file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	mark := func(v, uid string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(root, v, DoneDir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, v, DoneDir, uid), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mark("data", "uid-1")
	mark("cache", "another-restore")

	done := make(chan error, 1)
	var out bytes.Buffer
	go func() { done <- Wait(context.Background(), root, "uid-1", 10*time.Millisecond, &out) }()
	select {
	case err := <-done:
		t.Fatalf("returned (%v) before cache had its marker", err)
	case <-time.After(200 * time.Millisecond):
	}
	mark("cache", "uid-1")
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("still waiting after every marker was written")
	}
	for _, v := range []string{"data", "cache"} {
		if _, err := os.Stat(filepath.Join(root, v, DoneDir)); !os.IsNotExist(err) {
			t.Errorf("%s/%s left behind (%v)", v, DoneDir, err)
		}
	}
}

func TestWaitStopsWithItsContextNamingTheMissingMarker(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := Wait(c, root, "uid-1", 10*time.Millisecond, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), filepath.Join("data", DoneDir, "uid-1")) {
		t.Fatalf("got %v, want an error naming the missing marker", err)
	}
}

func TestWaitRefusesAUIDThatIsNotAFileName(t *testing.T) {
	for _, uid := range []string{"", "..", "a/b"} {
		if err := Wait(context.Background(), t.TempDir(), uid, time.Millisecond, &bytes.Buffer{}); err == nil {
			t.Errorf("uid %q accepted", uid)
		}
	}
}

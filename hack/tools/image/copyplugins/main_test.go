package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCopiesEveryFileKeepingItsMode(t *testing.T) {
	from, to := t.TempDir(), t.TempDir()
	write(t, filepath.Join(from, "plugin-a"), "binary a", 0o755)
	write(t, filepath.Join(from, "plugin-b"), "binary b", 0o750)
	write(t, filepath.Join(from, "notes.txt"), "not a plugin", 0o644)
	// A file from an earlier run of the init container is replaced.
	write(t, filepath.Join(to, "plugin-a"), "old binary", 0o755)

	done, err := copyPlugins(from, to)
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 3 {
		t.Fatalf("copied %d files, want 3: %+v", len(done), done)
	}
	for name, want := range map[string]struct {
		data string
		mode os.FileMode
	}{
		"plugin-a":  {"binary a", 0o755},
		"plugin-b":  {"binary b", 0o750},
		"notes.txt": {"not a plugin", 0o644},
	} {
		p := filepath.Join(to, name)
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want.data {
			t.Errorf("%s holds %q, want %q", name, got, want.data)
		}
		info, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != want.mode {
			t.Errorf("%s has mode %v, want %v", name, info.Mode().Perm(), want.mode)
		}
	}
	entries, err := os.ReadDir(to)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 3 {
		t.Errorf("target holds %d entries, want the 3 copies and no temporary file: %v", len(entries), entries)
	}
}

func TestRefusesAMissingTarget(t *testing.T) {
	from := t.TempDir()
	write(t, filepath.Join(from, "plugin-a"), "binary a", 0o755)
	missing := filepath.Join(t.TempDir(), "target")
	_, err := copyPlugins(from, missing)
	if err == nil || !strings.Contains(err.Error(), missing+" does not exist") {
		t.Fatalf("err = %v, want one saying the target does not exist", err)
	}
	if _, statErr := os.Stat(missing); statErr == nil {
		t.Error("the missing target was created; it must stay missing so a wrong mount is noticed")
	}
}

func TestRefusesAnEmptyImageAndSubdirectories(t *testing.T) {
	empty, to := t.TempDir(), t.TempDir()
	if _, err := copyPlugins(empty, to); err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Errorf("empty plugin dir: err = %v, want one saying it is empty", err)
	}
	nested := t.TempDir()
	if err := os.Mkdir(filepath.Join(nested, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := copyPlugins(nested, to); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("subdirectory: err = %v, want one saying it is not a regular file", err)
	}
}

func write(t *testing.T, path, data string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // WriteFile's mode is filtered by the umask
		t.Fatal(err)
	}
}

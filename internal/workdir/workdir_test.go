package workdir

import (
	"bufio"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// helperEnv makes the test binary a server stand-in: it opens the work
// directory given, writes a spool file into its own directory, prints the
// directory's path and waits to be killed.
const helperEnv = "LIFEBOAT_WORKDIR_HELPER"

func TestMain(m *testing.M) {
	if root := os.Getenv(helperEnv); root != "" {
		d, err := Open(root, slog.New(slog.DiscardHandler))
		if err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(2)
		}
		if err := os.WriteFile(filepath.Join(d.Path(), "restore-spool-1"), make([]byte, 1<<20), 0o600); err != nil {
			os.Exit(3)
		}
		os.Stdout.WriteString(d.Path() + "\n")
		// Killed by the test (or, should the test die, by Pdeathsig); a
		// bare select{} would be a deadlock the runtime ends at once.
		time.Sleep(10 * time.Minute)
		os.Exit(4)
	}
	os.Exit(m.Run())
}

// startHelper runs a process that holds a directory in root; it returns
// the process and that directory.
func startHelper(t *testing.T, root string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+root)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("helper process: %v", err)
	}
	return cmd, strings.TrimSpace(line)
}

func exists(t *testing.T, p string) bool {
	t.Helper()
	_, err := os.Lstat(p)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// A server killed with its spool in the work directory: the next server to
// start removes it. A live one's directory stays, and so does everything
// in the work directory that no server made.
func TestOpenRemovesWhatKilledServersLeftAndNothingElse(t *testing.T) {
	root := filepath.Join(t.TempDir(), "work")
	killed, killedDir := startHelper(t, root)
	_, liveDir := startHelper(t, root)
	fi, err := os.Stat(root)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("work directory created as %v (%v), want mode 0700", fi.Mode(), err)
	}
	if err := killed.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = killed.Wait()

	// Not made by a server: never removed.
	foreign := []string{filepath.Join(root, "notes.txt"), filepath.Join(root, sessionPrefix+"not-ours", "data")}
	for _, p := range foreign {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("keep"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	elsewhere := t.TempDir()
	if err := os.WriteFile(filepath.Join(elsewhere, lockName), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, sessionPrefix+"link")
	if err := os.Symlink(elsewhere, link); err != nil {
		t.Fatal(err)
	}
	// A server killed before it made its lock: its directory is empty.
	empty := filepath.Join(root, sessionPrefix+"empty")
	if err := os.Mkdir(empty, 0o700); err != nil {
		t.Fatal(err)
	}

	d, err := Open(root, quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if exists(t, killedDir) {
		t.Errorf("the killed server's directory %s is still there", killedDir)
	}
	if exists(t, empty) {
		t.Errorf("the empty directory of a server killed before it locked it is still there")
	}
	if !exists(t, filepath.Join(liveDir, "restore-spool-1")) {
		t.Errorf("the live server's spool in %s was removed", liveDir)
	}
	for _, p := range append(foreign, link, filepath.Join(elsewhere, lockName)) {
		if !exists(t, p) {
			t.Errorf("%s, which no server made, was removed", p)
		}
	}
	if filepath.Dir(d.Path()) != root || !strings.HasPrefix(filepath.Base(d.Path()), sessionPrefix) {
		t.Errorf("own directory %s, want %s* in %s", d.Path(), sessionPrefix, root)
	}
	if fi, err := os.Stat(d.Path()); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("own directory mode %v (%v), want 0700", fi.Mode(), err)
	}

	// Another server starting now leaves this one's directory alone, and
	// this one's goes when it closes.
	other, err := Open(root, quiet())
	if err != nil {
		t.Fatal(err)
	}
	if !exists(t, d.Path()) {
		t.Error("a second server removed the first one's directory")
	}
	if err := other.Close(); err != nil || exists(t, other.Path()) {
		t.Errorf("Close: %v; directory still there: %v", err, exists(t, other.Path()))
	}
}

func TestOpenRefusesARootItShouldNotUse(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(t.TempDir(), link); err != nil {
		t.Fatal(err)
	}
	// A directory of another user's: made so when running as root (as
	// CI does), and "/" otherwise.
	foreign := "/"
	if os.Getuid() == 0 {
		foreign = filepath.Join(dir, "foreign")
		if err := os.Mkdir(foreign, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(foreign, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ root, want string }{
		{file, "is not a directory"},
		{link, "is a symbolic link"},
		{foreign, "not to the server's uid"},
	} {
		d, err := Open(tc.root, quiet())
		if err == nil {
			d.Close()
			t.Errorf("Open(%s) succeeded", tc.root)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.root) {
			t.Errorf("Open(%s) error %q, want it to name the directory and say %q", tc.root, err, tc.want)
		}
	}
}

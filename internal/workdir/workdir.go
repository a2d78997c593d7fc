// Package workdir is the server's scratch space on local disk: restore
// spools and run logs. A restore spools every item it accepts (up to the
// archive's unpacked-size limit), so what a killed server leaves there can
// be large. Each server process works in a directory of its own under the
// work directory, locked for as long as the process lives; a server that
// starts removes the directories no live process holds, and touches
// nothing else in the work directory.
package workdir

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

const (
	// sessionPrefix names a server process's own directory.
	sessionPrefix = "lifeboat-server-"
	// lockName is the file in it that the process holds locked. The lock
	// (flock) goes when the process does, however it ends, so a directory
	// whose lock can be taken belongs to no live server.
	lockName = "lock"
)

// DefaultRoot is the work directory when none is configured: one per user
// under the system temp dir, since the check that the directory belongs
// to the server's user would refuse a shared one.
func DefaultRoot() string {
	return filepath.Join(os.TempDir(), "lifeboat-"+strconv.Itoa(os.Getuid()))
}

// Dir is a server process's own directory in the work directory.
type Dir struct {
	path string
	lock *os.File
}

// Open prepares root (DefaultRoot when empty), creating it with mode 0700
// if it is missing; removes what servers that are gone left in it; and
// creates this process's own directory. Several servers may share root.
func Open(root string, log *slog.Logger) (*Dir, error) {
	if root == "" {
		root = DefaultRoot()
	}
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("work directory %s: %w", root, err)
	}
	if err := prepareRoot(root); err != nil {
		return nil, err
	}
	// Sweeping and creating happen under root's own lock, so that a
	// server starting at the same moment never takes this one's new
	// directory, not locked yet, for a dead server's.
	rootLock, err := os.Open(root)
	if err != nil {
		return nil, fmt.Errorf("work directory %s: %w", root, err)
	}
	defer rootLock.Close()
	if err := syscall.Flock(int(rootLock.Fd()), syscall.LOCK_EX); err != nil {
		return nil, fmt.Errorf("work directory %s: locking it: %w", root, err)
	}
	dirs, bytes, sweepErr := sweep(root)
	if dirs > 0 {
		log.Info("removed what stopped servers left in the work directory", "workDir", root, "directories", dirs, "bytes", bytes)
	}
	if sweepErr != nil {
		// Not fatal: what stays is found again at the next start.
		log.Warn("some of what stopped servers left in the work directory could not be removed", "workDir", root, "error", sweepErr)
	}
	path, err := os.MkdirTemp(root, sessionPrefix)
	if err != nil {
		return nil, fmt.Errorf("work directory %s: %w", root, err)
	}
	lock, err := os.OpenFile(filepath.Join(path, lockName), os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err == nil {
		if err = syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			lock.Close()
		}
	}
	if err != nil {
		_ = os.RemoveAll(path)
		return nil, fmt.Errorf("work directory %s: locking %s: %w", root, path, err)
	}
	return &Dir{path: path, lock: lock}, nil
}

// prepareRoot creates root if missing and refuses one that another user
// owns (who could replace what the server writes there) or that is a
// symbolic link (which could point the sweep elsewhere).
func prepareRoot(root string) error {
	fi, err := os.Lstat(root)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(root, 0o700); err != nil {
			return fmt.Errorf("creating work directory %s: %w", root, err)
		}
		fi, err = os.Lstat(root)
	}
	if err != nil {
		return fmt.Errorf("work directory %s: %w", root, err)
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("work directory %s is a symbolic link; give the directory it points to", root)
	case !fi.IsDir():
		return fmt.Errorf("work directory %s is not a directory", root)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("work directory %s belongs to uid %d, not to the server's uid %d; another user could replace what the server keeps there: give a directory of the server's own", root, st.Uid, os.Getuid())
	}
	return nil
}

// sweep removes the process directories under root that no live process
// holds, and returns how many it removed and how many bytes they held.
func sweep(root string) (dirs int, bytes int64, err error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return 0, 0, fmt.Errorf("reading %s: %w", root, err)
	}
	var errs []error
	for _, e := range entries {
		// ReadDir does not follow symbolic links: a link is never a
		// directory here.
		if !e.IsDir() || !strings.HasPrefix(e.Name(), sessionPrefix) {
			continue
		}
		p := filepath.Join(root, e.Name())
		removed, n, err := removeIfAbandoned(p)
		if err != nil {
			errs = append(errs, err)
		}
		if removed {
			dirs++
			bytes += n
		}
	}
	return dirs, bytes, errors.Join(errs...)
}

func removeIfAbandoned(p string) (removed bool, bytes int64, err error) {
	lock, err := os.OpenFile(filepath.Join(p, lockName), os.O_RDWR|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		// A server that died between creating its directory and its lock
		// had put nothing there yet; a directory that is not empty was
		// not made by a server, and stays.
		return os.Remove(p) == nil, 0, nil
	}
	if err != nil {
		return false, 0, fmt.Errorf("%s: %w", p, err)
	}
	defer lock.Close()
	err = syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false, 0, nil
	}
	if err != nil {
		return false, 0, fmt.Errorf("%s: locking: %w", p, err)
	}
	_ = filepath.WalkDir(p, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				bytes += fi.Size()
			}
		}
		return nil
	})
	if err := os.RemoveAll(p); err != nil {
		return false, 0, fmt.Errorf("removing %s: %w", p, err)
	}
	return true, bytes, nil
}

// Path is the process's own directory.
func (d *Dir) Path() string { return d.path }

// Close removes the process's directory with everything in it; call it
// when nothing uses the directory any more.
func (d *Dir) Close() error {
	err := os.RemoveAll(d.path)
	if cerr := d.lock.Close(); err == nil {
		err = cerr
	}
	return err
}

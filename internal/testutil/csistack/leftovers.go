package csistack

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Each stack's directory (sockets, logs, the driver binary) holds a lock
// file locked while the stack lives. A test binary killed outright never
// calls Stop: its processes die with it (parent-death signal), and the
// next Start removes its directory, whose lock nobody holds any more.
const (
	dirPattern = "lifeboat-csi-*"
	lockName   = ".lock"
)

// lockDir creates and locks dir's lock file; the lock lasts as long as the
// returned file is open.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// removeDeadStacks removes the directories of stacks whose process died.
// A directory without a lock file is one being created right now, unless
// it is older than a minute.
func (s *Stack) removeDeadStacks() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPattern))
	for _, dir := range dirs {
		if dir == s.dir {
			continue
		}
		f, err := lockDir(dir)
		if errors.Is(err, syscall.EWOULDBLOCK) {
			continue // alive
		}
		if err != nil {
			info, serr := os.Stat(dir)
			if serr != nil || time.Since(info.ModTime()) < time.Minute {
				continue
			}
		}
		if err := os.RemoveAll(dir); err == nil {
			s.logf("removed %s, left by a stack whose process died", dir)
		}
		if f != nil {
			_ = f.Close()
		}
	}
}

// Package credentials keeps the files through which the server hands a
// location's credentials to its plugin. The plugin protocol (Velero's)
// passes credentials as a path, config key credentialsFile, so the secret's
// bytes must sit on the server's disk while a plugin may read them. This is
// the only place that writes such files, for storage and snapshot
// locations alike.
//
// The directory is the server's own: mode 0700, owned by the server's user,
// never reached through a symbolic link, and holding nothing but the
// store's files. A file is written to a unique temporary name and renamed
// into place, so a plugin never reads half a file and two writers never
// collide; a symbolic link is never followed, at the directory or at a
// file's name. Files go when their location goes, when the server starts
// (what a previous server left) and when it stops.
package credentials

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// ConfigKey is the plugin config key whose value is the path of the
// location's credentials file (Velero's name, for ObjectStore and
// VolumeSnapshotter plugins alike).
const ConfigKey = "credentialsFile"

// Kind tells storage and snapshot locations apart: they are different
// objects that may share a name.
type Kind string

const (
	StorageLocation  Kind = "bsl" // a BackupStorageLocation
	SnapshotLocation Kind = "vsl" // a VolumeSnapshotLocation
)

// Location names the location a credentials file belongs to.
type Location struct {
	Kind      Kind
	Namespace string
	Name      string
}

func (l Location) String() string {
	kind := map[Kind]string{StorageLocation: "BackupStorageLocation", SnapshotLocation: "VolumeSnapshotLocation"}[l.Kind]
	return fmt.Sprintf("%s %s/%s", kind, l.Namespace, l.Name)
}

// Secret names the key of a Secret (in the location's namespace) whose
// bytes are the credentials.
type Secret struct {
	Name, Key string
}

// Names of the store's entries. Everything else in the directory is left
// alone (and reported at start); these are removed at start and stop.
const (
	filePrefix = "cred-"
	tempPrefix = ".cred-tmp-"
)

// Store is a credentials directory. Its methods are safe for concurrent
// use, also by several Stores (of several processes) on one directory,
// though only one server should own a directory: each removes the files
// it finds at start.
type Store struct {
	dir string
	// mu guards root against Close: a call still running when the server
	// stops gets an error, not a closed directory.
	mu   sync.RWMutex
	root *os.Root
	// temporary says the store made dir for this process alone and
	// removes it on Close.
	temporary bool
	log       *slog.Logger
}

// Open opens the credentials directory dir, creating it (mode 0700) when
// missing, and removes the credentials files a previous server left there.
// An existing directory must be owned by the server's user; a wrong mode is
// corrected to 0700. A symbolic link, at dir or in place of it, is refused.
//
// An empty dir means a new private directory under the system temp dir,
// made for this process (os.MkdirTemp: a fresh name, mode 0700), so that no
// other user can prepare a path there for the server to write through; it
// is removed by Close.
func Open(dir string, log *slog.Logger) (*Store, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Store{log: log}
	if dir == "" {
		d, err := os.MkdirTemp("", "lifeboat-credentials-")
		if err != nil {
			return nil, fmt.Errorf("creating a private credentials directory: %w", err)
		}
		dir, s.temporary = d, true
	} else {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return nil, fmt.Errorf("credentials directory %s: %w", dir, err)
		}
		dir = abs
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return nil, fmt.Errorf("credentials directory %s: creating its parent: %w", dir, err)
		}
		// Mkdir never follows a link at its last element: a link there
		// is an "exists" error and is refused below.
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("credentials directory %s: %w", dir, err)
		}
	}
	s.dir = dir
	if err := s.openRoot(); err != nil {
		if s.temporary {
			_ = os.RemoveAll(dir)
		}
		return nil, err
	}
	if err := s.removeAll(true); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// openRoot opens s.dir without following a link, checks its owner and mode
// on the open directory (so a swap after the check cannot matter), and
// keeps it as the root every file operation goes through.
func (s *Store) openRoot() error {
	f, err := os.OpenFile(s.dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		if fi, lerr := os.Lstat(s.dir); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("credentials directory %s is a symbolic link; the server never writes credentials through one (it could point anywhere): give the real directory's path", s.dir)
		}
		if errors.Is(err, syscall.ENOTDIR) {
			return fmt.Errorf("credentials directory %s exists and is not a directory; remove it or choose another path", s.dir)
		}
		return fmt.Errorf("opening credentials directory %s: %w", s.dir, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("credentials directory %s: %w", s.dir, err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("credentials directory %s is owned by uid %d, not by the server's user (uid %d): another user could read or replace the credentials there; chown it to uid %d or choose another directory", s.dir, st.Uid, os.Geteuid(), os.Geteuid())
	}
	if perm := fi.Mode().Perm(); perm != 0o700 {
		if err := f.Chmod(0o700); err != nil {
			return fmt.Errorf("credentials directory %s has mode %#o and cannot be made 0700: %w", s.dir, perm, err)
		}
		s.log.Warn("credentials directory had a mode other users could use; made it 0700", "dir", s.dir, "mode", fmt.Sprintf("%#o", perm))
	}
	root, err := os.OpenRoot(s.dir)
	if err != nil {
		return fmt.Errorf("opening credentials directory %s: %w", s.dir, err)
	}
	// The root was opened by path: it must be the directory just checked.
	rfi, err := root.Stat(".")
	if err != nil || !os.SameFile(fi, rfi) {
		root.Close()
		return fmt.Errorf("credentials directory %s changed while it was opened; is something else replacing it?", s.dir)
	}
	s.root = root
	return nil
}

var errClosed = errors.New("the credentials store is closed (the server is stopping)")

// Dir is the directory's path.
func (s *Store) Dir() string { return s.dir }

// Write stores the credentials of secret for loc and returns the path of
// the file, for the config key credentialsFile. The same location and
// secret always give the same path, so a plugin initialised with it reads
// the newest bytes after a rewrite.
func (s *Store) Write(loc Location, secret Secret, data []byte) (string, error) {
	name, err := fileName(loc, secret)
	if err != nil {
		return "", err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.root == nil {
		return "", errClosed
	}
	tmp, err := s.writeTemp(data)
	if err != nil {
		return "", fmt.Errorf("%s: writing credentials file: %w", loc, err)
	}
	// Rename replaces a link at name rather than writing through it; a
	// link there is refused all the same, as nothing of the store's makes
	// one and something else must have.
	if fi, err := s.root.Lstat(name); err == nil && !fi.Mode().IsRegular() {
		_ = s.root.Remove(tmp)
		return "", fmt.Errorf("%s: credentials file %s is not a regular file (mode %s); refusing to write credentials there: remove it", loc, filepath.Join(s.dir, name), fi.Mode())
	}
	if err := s.root.Rename(tmp, name); err != nil {
		_ = s.root.Remove(tmp)
		return "", fmt.Errorf("%s: writing credentials file: %w", loc, err)
	}
	return filepath.Join(s.dir, name), nil
}

// writeTemp writes data to a new file of a fresh random name, created
// exclusively (so never through a link), mode 0600, and synced.
func (s *Store) writeTemp(data []byte) (string, error) {
	var (
		tmp string
		f   *os.File
		err error
	)
	for range 100 {
		tmp = tempPrefix + rand.Text()
		f, err = s.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
		if !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	if err != nil {
		return "", err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = s.root.Remove(tmp)
		return "", err
	}
	return tmp, nil
}

// Remove removes loc's credentials files, for every secret it used, except
// the files of keep (a location whose spec.credential changed keeps the
// file of the new one).
func (s *Store) Remove(loc Location, keep ...Secret) error {
	prefix, err := locationPrefix(loc)
	if err != nil {
		return err
	}
	kept := map[string]bool{}
	for _, k := range keep {
		name, err := fileName(loc, k)
		if err != nil {
			return err
		}
		kept[name] = true
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.root == nil {
		return errClosed
	}
	names, err := s.names()
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range names {
		if strings.HasPrefix(name, prefix) && !kept[name] {
			if err := s.root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
				continue
			}
			s.log.Debug("removed credentials file", "location", loc.String(), "file", name)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%s: removing credentials files: %w", loc, err)
	}
	return nil
}

// Close removes every credentials file (the plugins that read them stop
// with the server) and, for a directory Open made, the directory.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.root == nil {
		return nil
	}
	err := s.removeAll(false)
	s.root.Close()
	s.root = nil
	if s.temporary {
		if rerr := os.Remove(s.dir); rerr != nil && err == nil {
			err = fmt.Errorf("removing credentials directory %s: %w", s.dir, rerr)
		}
	}
	return err
}

// removeAll removes the store's entries; at start it also reports the
// entries that are not the store's and are left alone.
func (s *Store) removeAll(start bool) error {
	names, err := s.names()
	if err != nil {
		return err
	}
	var errs []error
	var removed int
	var foreign []string
	for _, name := range names {
		if !strings.HasPrefix(name, filePrefix) && !strings.HasPrefix(name, tempPrefix) {
			foreign = append(foreign, name)
			continue
		}
		// Remove unlinks a name; a link left here is removed, never
		// followed.
		if err := s.root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		removed++
	}
	if start && removed > 0 {
		s.log.Info("removed credentials files a previous server left", "dir", s.dir, "files", removed)
	}
	if start && len(foreign) > 0 {
		s.log.Warn("the credentials directory holds entries that are not the server's; they are left alone", "dir", s.dir, "entries", foreign)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("credentials directory %s: removing old files: %w", s.dir, err)
	}
	return nil
}

func (s *Store) names() ([]string, error) {
	d, err := s.root.Open(".")
	if err != nil {
		return nil, fmt.Errorf("credentials directory %s: %w", s.dir, err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("credentials directory %s: listing: %w", s.dir, err)
	}
	return names, nil
}

// fileName is the file of loc's credentials from secret:
// cred-<kind>-<location digest>-<secret digest>. Names come from users and
// are never put into the path; digests cannot hold a separator, and the
// location's own digest lets Remove find every file of a location.
func fileName(loc Location, secret Secret) (string, error) {
	prefix, err := locationPrefix(loc)
	if err != nil {
		return "", err
	}
	return prefix + digest(loc.Namespace, loc.Name, secret.Name, secret.Key), nil
}

func locationPrefix(loc Location) (string, error) {
	if loc.Kind != StorageLocation && loc.Kind != SnapshotLocation {
		return "", fmt.Errorf("credentials for a location of unknown kind %q", loc.Kind)
	}
	return filePrefix + string(loc.Kind) + "-" + digest(loc.Namespace, loc.Name) + "-", nil
}

// digest hashes fields length-prefixed, so no two lists of fields give
// the same input.
func digest(fields ...string) string {
	h := sha256.New()
	for _, f := range fields {
		_ = binary.Write(h, binary.BigEndian, uint64(len(f)))
		h.Write([]byte(f))
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

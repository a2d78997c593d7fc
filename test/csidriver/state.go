package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// The state directory holds one directory per volume and per snapshot:
//
//	volumes/<id>/meta.json    volumes/<id>/data/    (what pods see)
//	snapshots/<id>/meta.json  snapshots/<id>/data/  (a copy of a volume's data/)
//
// An object is written under a dot-prefixed temporary name and renamed into
// place when complete, so a listing never sees half an object and a driver
// killed mid-copy leaves only a temporary the next create replaces.
const (
	volumesDir   = "volumes"
	snapshotsDir = "snapshots"
	metaFile     = "meta.json"
	dataDir      = "data"
)

// volumeMeta is what the driver remembers of a volume beyond its files.
type volumeMeta struct {
	Name          string `json:"name"`
	CapacityBytes int64  `json:"capacityBytes"`
	// SourceSnapshot or SourceVolume: what the volume was created from.
	SourceSnapshot string `json:"sourceSnapshot,omitempty"`
	SourceVolume   string `json:"sourceVolume,omitempty"`
}

// snapshotMeta is what the driver remembers of a snapshot beyond its files.
type snapshotMeta struct {
	Name         string    `json:"name"`
	SourceVolume string    `json:"sourceVolume"`
	CreatedAt    time.Time `json:"createdAt"`
	SizeBytes    int64     `json:"sizeBytes"`
}

// objectID derives an object's ID from its CSI name: the same name always
// gives the same ID, which makes creates idempotent by name (as the CSI spec
// requires) without an index, and any name a safe directory name.
func objectID(prefix, name string) string {
	sum := sha256.Sum256([]byte(name))
	return prefix + hex.EncodeToString(sum[:10])
}

// validID refuses IDs that are not the driver's own (and paths in disguise).
func validID(prefix, id string) bool {
	if !strings.HasPrefix(id, prefix) || len(id) != len(prefix)+20 {
		return false
	}
	_, err := hex.DecodeString(id[len(prefix):])
	return err == nil
}

type store struct{ root string }

func (s store) dir(kind, id string) string { return filepath.Join(s.root, kind, id) }

func (s store) init() error {
	for _, kind := range []string{volumesDir, snapshotsDir} {
		if err := os.MkdirAll(filepath.Join(s.root, kind), 0o755); err != nil {
			return fmt.Errorf("creating state dir: %w", err)
		}
	}
	return nil
}

// readMeta reads an object's meta.json into v; found is false when the
// object does not exist.
func (s store) readMeta(kind, id string, v any) (found bool, err error) {
	b, err := os.ReadFile(filepath.Join(s.dir(kind, id), metaFile))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("reading %s/%s: %w", kind, id, err)
	}
	return true, nil
}

// create makes the object kind/id with the data copied from copyFrom (a
// data dir; empty for an empty volume) and the meta that meta returns for
// the bytes copied, atomically.
func (s store) create(kind, id string, copyFrom string, meta func(size int64) any) (size int64, err error) {
	tmp := filepath.Join(s.root, kind, "."+id)
	if err := os.RemoveAll(tmp); err != nil {
		return 0, err
	}
	defer os.RemoveAll(tmp)
	if err := os.MkdirAll(filepath.Join(tmp, dataDir), 0o777); err != nil {
		return 0, err
	}
	// Pods of any user write into a volume's data dir.
	if err := os.Chmod(filepath.Join(tmp, dataDir), 0o777); err != nil {
		return 0, err
	}
	if copyFrom != "" {
		if size, err = copyTree(copyFrom, filepath.Join(tmp, dataDir)); err != nil {
			return 0, fmt.Errorf("copying %s: %w", copyFrom, err)
		}
	}
	b, err := json.MarshalIndent(meta(size), "", "  ")
	if err != nil {
		return 0, err
	}
	if err := os.WriteFile(filepath.Join(tmp, metaFile), b, 0o644); err != nil {
		return 0, err
	}
	return size, os.Rename(tmp, s.dir(kind, id))
}

func (s store) remove(kind, id string) error {
	return os.RemoveAll(s.dir(kind, id))
}

// list returns the IDs of the complete objects of a kind, sorted.
func (s store) list(kind string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(s.root, kind))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			ids = append(ids, e.Name())
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// copyTree copies regular files, directories and symlinks from src into
// dst (which exists), keeping modes, and returns the bytes copied.
func copyTree(src, dst string) (int64, error) {
	var total int64
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil || rel == "." {
			return err
		}
		to := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.Mkdir(to, info.Mode().Perm())
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		case d.Type().IsRegular():
			n, err := copyFile(path, to, info.Mode().Perm())
			total += n
			return err
		default:
			return nil // sockets, fifos, devices: not data
		}
	})
	return total, err
}

func copyFile(from, to string, mode fs.FileMode) (int64, error) {
	in, err := os.Open(from)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return n, err
}

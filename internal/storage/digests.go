package storage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"strings"
	"sync"
)

// FileDigest is what a stored file's content hashes to.
type FileDigest struct {
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// DigestRecorder collects the digests of the files a store writes, by key.
// Safe for concurrent use.
type DigestRecorder struct {
	mu    sync.Mutex
	files map[string]FileDigest
}

// NewDigestRecorder returns an empty recorder.
func NewDigestRecorder() *DigestRecorder {
	return &DigestRecorder{files: map[string]FileDigest{}}
}

// Under returns the recorded files whose keys start with dir, by the rest
// of their key (a backup directory's file names).
func (d *DigestRecorder) Under(dir string) map[string]FileDigest {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]FileDigest{}
	for k, v := range d.files {
		if name, ok := strings.CutPrefix(k, dir); ok {
			out[name] = v
		}
	}
	return out
}

func (d *DigestRecorder) record(key string, fd FileDigest) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.files[key] = fd
}

// Recording returns a store that writes where s writes and records the
// digest of every file it writes in rec: the one place every stored file
// passes, so a backup's digests cannot miss a file it wrote.
func (s *BackupStore) Recording(rec *DigestRecorder) *BackupStore {
	c := *s
	c.digests = rec
	return &c
}

// OpenBackupFile streams file of backup name's directory; a missing file
// gives an error wrapping ErrNotFound.
func (s *BackupStore) OpenBackupFile(ctx context.Context, name, file string) (io.ReadCloser, error) {
	if err := checkName("backup", name); err != nil {
		return nil, err
	}
	return s.getBackupFile(ctx, name, file)
}

// ListBackupFiles lists the file names in backup name's directory.
func (s *BackupStore) ListBackupFiles(ctx context.Context, name string) ([]string, error) {
	if err := checkName("backup", name); err != nil {
		return nil, err
	}
	dir := s.BackupDir(name)
	keys, err := s.store.ListObjects(ctx, s.bucket, dir)
	if err != nil {
		return nil, fmt.Errorf("list %s in %s: %w", dir, s.location(), err)
	}
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, strings.TrimPrefix(k, dir))
	}
	return out, nil
}

// hashingReader hashes and counts what is read through it.
type hashingReader struct {
	r io.Reader
	h hash.Hash
	n int64
}

func newHashingReader(r io.Reader) *hashingReader {
	return &hashingReader{r: r, h: sha256.New()}
}

func (h *hashingReader) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	h.h.Write(p[:n])
	h.n += int64(n)
	return n, err
}

func (h *hashingReader) digest() FileDigest {
	return FileDigest{SHA256: hex.EncodeToString(h.h.Sum(nil)), Size: h.n}
}

// digestOf hashes a body that can be read twice (the small files are
// uploaded from memory, with a known length the store may rely on) and
// rewinds it.
func digestOf(body io.ReadSeeker) (FileDigest, error) {
	h := newHashingReader(body)
	if _, err := io.Copy(io.Discard, h); err != nil {
		return FileDigest{}, err
	}
	if _, err := body.Seek(0, io.SeekStart); err != nil {
		return FileDigest{}, err
	}
	return h.digest(), nil
}

// PutBackupFile writes file into backup name's directory: for files of
// Lifeboat's own beside Velero's.
func (s *BackupStore) PutBackupFile(ctx context.Context, name, file string, body io.Reader) error {
	return s.putBackupFile(ctx, name, file, body)
}

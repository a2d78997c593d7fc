// Package integrity records what a backup stored and checks it later: the
// sha256 and size of every file in the backup's directory (the digests
// file, written last) and of every entry of its tarball (the item digests
// file, in archive order, written as the tarball is). Velero ignores both
// files and deletes them with the backup's directory.
//
// What a check can prove: a changed, truncated, missing or added file, and
// which tarball entries changed, went missing or were added. Someone who
// can write to the bucket can also rewrite the digests file to match; the
// sha256 of the digests file as written is therefore also kept on the
// Backup object (v1.DigestsAnnotation), outside the bucket. A backup synced
// from a bucket into another cluster has no such record: its check shows
// corruption, not deliberate tampering.
package integrity

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"strings"

	"github.com/lifeboat-io/lifeboat/internal/storage"
)

// ManifestFile is the digests file of backup name: every other file of the
// backup's directory with its sha256 and size.
func ManifestFile(name string) string { return name + "-lifeboat-digests.json" }

// ItemDigestsFile holds one JSON line per tarball entry, in archive order:
// its path, sha256 and size; gzipped.
func ItemDigestsFile(name string) string { return name + "-lifeboat-item-digests.json.gz" }

// manifestVersion is the digests file format this package writes and reads.
const manifestVersion = 1

// maxManifestBytes bounds what is read of a digests file (from an untrusted
// store): a few hundred bytes per file, and a backup has a dozen files.
const maxManifestBytes = 1 << 20

// Manifest is the digests file.
type Manifest struct {
	Version   int    `json:"version"`
	Algorithm string `json:"algorithm"`
	Backup    string `json:"backup"`
	// Files are the backup directory's other files, by name.
	Files map[string]storage.FileDigest `json:"files"`
	// Entries is the number of tarball entries in the item digests file.
	Entries int64 `json:"entries"`
}

// WriteManifest writes the digests file of backup name listing files (the
// item digests file among them) and returns the sha256 of what it wrote.
func WriteManifest(ctx context.Context, store *storage.BackupStore, name string, files map[string]storage.FileDigest, entries int64) (string, error) {
	m := Manifest{Version: manifestVersion, Algorithm: "sha256", Backup: name, Files: files, Entries: entries}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return "", fmt.Errorf("encoding the digests file: %w", err)
	}
	data = append(data, '\n')
	if err := store.PutBackupFile(ctx, name, ManifestFile(name), bytes.NewReader(data)); err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

// readManifest reads and parses backup name's digests file; raw is what was
// read, for the anchor check.
func readManifest(ctx context.Context, store *storage.BackupStore, name string) (m Manifest, raw []byte, err error) {
	rc, err := store.OpenBackupFile(ctx, name, ManifestFile(name))
	if err != nil {
		return m, nil, err
	}
	defer rc.Close()
	raw, err = io.ReadAll(io.LimitReader(rc, maxManifestBytes+1))
	if err != nil {
		return m, nil, fmt.Errorf("reading %s: %w", ManifestFile(name), err)
	}
	if len(raw) > maxManifestBytes {
		return m, raw, fmt.Errorf("%s is over %d bytes", ManifestFile(name), maxManifestBytes)
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return m, raw, fmt.Errorf("%s is not a digests file: %w", ManifestFile(name), err)
	}
	switch {
	case m.Version != manifestVersion:
		return m, raw, fmt.Errorf("%s has version %d; this Lifeboat reads version %d", ManifestFile(name), m.Version, manifestVersion)
	case m.Algorithm != "sha256":
		return m, raw, fmt.Errorf("%s uses algorithm %q; this Lifeboat reads sha256", ManifestFile(name), m.Algorithm)
	case m.Backup != name:
		return m, raw, fmt.Errorf("%s is the digests file of backup %q", ManifestFile(name), m.Backup)
	}
	for f := range m.Files {
		// Only names in the backup's directory are read: never a key
		// elsewhere in the bucket that a hostile file might point at.
		if f == "" || f == "." || f == ".." || strings.ContainsAny(f, "/\\\x00") {
			return m, raw, fmt.Errorf("%s lists %q, which is not a file name of the backup's directory", ManifestFile(name), f)
		}
	}
	return m, raw, nil
}

// Amend records files rewritten after the backup was written (its item
// operations and velero-backup.json, as asynchronous operations end) in
// backup name's digests file and returns the new digests file's sha256.
// A backup without a digests file stays without: "" and no error.
func Amend(ctx context.Context, store *storage.BackupStore, name string, files map[string]storage.FileDigest) (string, error) {
	m, _, err := readManifest(ctx, store, name)
	if errors.Is(err, storage.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("amending the digests file: %w", err)
	}
	maps.Copy(m.Files, files)
	return WriteManifest(ctx, store, name, m.Files, m.Entries)
}

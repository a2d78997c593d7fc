package repository

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/kopia/kopia/repo/blob"
	"github.com/kopia/kopia/repo/blob/filesystem"
)

// ownedFSType is kopia's filesystem storage for a process running as root
// (the node agent) in a repository directory another user owns (the
// server, uid 65532, which created it). kopia writes its files 0600 and
// its shard directories 0700: as root's, the server could neither read
// what the node agent stored (its deletions and maintenance refresh the
// index first, and failed with "permission denied") nor add or remove
// blobs in those directories. So everything the node agent writes, each
// blob (kopia's own FileUID/FileGID) and each shard directory it creates
// (this wrapper), is handed to the repository's owner: the repository
// stays private to that user, as Velero's filesystem backend keeps it.
//
// The type lives only in the process's connection config (the work
// directory), never in the repository, so Velero and other Lifeboat
// processes are not concerned by it.
const ownedFSType = "lifeboat-owned-filesystem"

func init() {
	blob.AddSupportedStorage(ownedFSType, filesystem.Options{}, newOwnedFS)
}

// ownedFS hands what kopia's filesystem storage writes to opt.FileUID and
// opt.FileGID.
type ownedFS struct {
	blob.Storage
	opt filesystem.Options
}

// shardPather is kopia's sharded storage (the filesystem storage embeds
// it): where a blob's file is.
type shardPather interface {
	GetShardedPathAndFilePath(ctx context.Context, id blob.ID) (shardPath, filePath string, err error)
}

func newOwnedFS(ctx context.Context, opt *filesystem.Options, isCreate bool) (blob.Storage, error) {
	if opt.FileUID == nil || opt.FileGID == nil {
		return nil, fmt.Errorf("%s storage at %s: no owner", ownedFSType, opt.Path)
	}
	st, err := filesystem.New(ctx, opt, isCreate)
	if err != nil {
		return nil, err // kopia's error names the path; the caller adds the location
	}
	if _, ok := st.(shardPather); !ok {
		return nil, fmt.Errorf("%s storage at %s: kopia's filesystem storage does not tell where a blob goes", ownedFSType, opt.Path)
	}
	return &ownedFS{Storage: st, opt: *opt}, nil
}

// ownFilesystemStorage returns the storage of opt's directory for this
// process: kopia's own, unless the process runs as root and the directory
// belongs to another user, whose then is everything written.
func ownFilesystemStorage(ctx context.Context, opt *filesystem.Options, create bool) (blob.Storage, error) {
	if os.Geteuid() == 0 && !create {
		fi, err := os.Stat(opt.Path)
		if err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 {
				uid, gid := int(st.Uid), int(st.Gid)
				owned := *opt
				owned.FileUID, owned.FileGID = &uid, &gid
				return newOwnedFS(ctx, &owned, create)
			}
		}
	}
	return filesystem.New(ctx, opt, create) // kopia's error names the path; the caller adds the location
}

// PutBlob stores the blob, whose file kopia hands to the owner, then hands
// over the shard directories kopia may have created for it, up to the
// repository's directory.
func (s *ownedFS) PutBlob(ctx context.Context, id blob.ID, data blob.Bytes, opts blob.PutOptions) error {
	if err := s.Storage.PutBlob(ctx, id, data, opts); err != nil {
		return err // kopia's, naming the blob, which its callers inspect: nothing to add
	}
	dir, _, err := s.Storage.(shardPather).GetShardedPathAndFilePath(ctx, id)
	if err != nil {
		return fmt.Errorf("blob %s: finding its directory: %w", id, err)
	}
	root := filepath.Clean(s.opt.Path)
	for d := filepath.Clean(dir); d != root && strings.HasPrefix(d, root+string(filepath.Separator)); d = filepath.Dir(d) {
		fi, err := os.Lstat(d)
		if err != nil {
			return fmt.Errorf("blob %s: %w", id, err)
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == *s.opt.FileUID && int(st.Gid) == *s.opt.FileGID {
			// Made by the owner, or handed over already, and so are
			// the directories above it.
			break
		}
		if err := os.Lchown(d, *s.opt.FileUID, *s.opt.FileGID); err != nil {
			return fmt.Errorf("blob %s: handing directory %s to the repository's owner: %w", id, d, err)
		}
	}
	return nil
}

// ConnectionInfo keeps the owner in the connection config, so the
// repository opened from it writes as this storage does.
func (s *ownedFS) ConnectionInfo() blob.ConnectionInfo {
	opt := s.opt
	return blob.ConnectionInfo{Type: ownedFSType, Config: &opt}
}

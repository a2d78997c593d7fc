package storage

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"
)

// BackupMetadataFile is the backup's marker: a backup exists in a store when
// this key exists. It is the only file in a backup's directory that is not
// gzipped.
const BackupMetadataFile = "velero-backup.json"

// File names inside backups/<name>/ and restores/<name>/, as Velero names
// them.

// BackupContentsFile is the tarball of the backed-up items.
func BackupContentsFile(name string) string { return name + ".tar.gz" }

// BackupLogFile is the gzipped backup log.
func BackupLogFile(name string) string { return name + "-logs.gz" }

// BackupResourceListFile maps "<group/version>/<Kind>" to "ns/name" items.
func BackupResourceListFile(name string) string { return name + "-resource-list.json.gz" }

// BackupResultsFile holds the backup's errors and warnings.
func BackupResultsFile(name string) string { return name + "-results.gz" }

// BackupItemOperationsFile holds the async item operations.
func BackupItemOperationsFile(name string) string { return name + "-itemoperations.json.gz" }

// BackupVolumeSnapshotsFile holds the native volume snapshots.
func BackupVolumeSnapshotsFile(name string) string { return name + "-volumesnapshots.json.gz" }

// BackupVolumeInfoFile holds per-volume backup information.
func BackupVolumeInfoFile(name string) string { return name + "-volumeinfo.json.gz" }

// PodVolumeBackupsFile holds the backup's PodVolumeBackups.
func PodVolumeBackupsFile(name string) string { return name + "-podvolumebackups.json.gz" }

// CSIVolumeSnapshotsFile holds the backup's CSI VolumeSnapshots.
func CSIVolumeSnapshotsFile(name string) string { return name + "-csi-volumesnapshots.json.gz" }

// CSIVolumeSnapshotContentsFile holds the backup's CSI VolumeSnapshotContents.
func CSIVolumeSnapshotContentsFile(name string) string {
	return name + "-csi-volumesnapshotcontents.json.gz"
}

// CSIVolumeSnapshotClassesFile holds the backup's CSI VolumeSnapshotClasses.
func CSIVolumeSnapshotClassesFile(name string) string {
	return name + "-csi-volumesnapshotclasses.json.gz"
}

// RestoreLogFile is the gzipped restore log.
func RestoreLogFile(name string) string { return "restore-" + name + "-logs.gz" }

// RestoreResultsFile holds the restore's errors and warnings.
func RestoreResultsFile(name string) string { return "restore-" + name + "-results.gz" }

// RestoreResourceListFile lists the items the restore created.
func RestoreResourceListFile(name string) string {
	return "restore-" + name + "-resource-list.json.gz"
}

// RestoreItemOperationsFile holds the restore's async item operations.
func RestoreItemOperationsFile(name string) string {
	return "restore-" + name + "-itemoperations.json.gz"
}

// RestoreVolumeInfoFile holds per-volume restore information; Velero names
// it without the "restore-" the other restore files have.
func RestoreVolumeInfoFile(name string) string { return name + "-volumeinfo.json.gz" }

// TopLevelDirs are the directories Velero keeps under a store's prefix.
// "restic" is not written by Lifeboat but Velero still accepts it, and a
// bucket that an older Velero used for restic must stay valid.
var TopLevelDirs = []string{"backups", "restores", "kopia", "metadata", "plugins", "restic"}

// BackupStore reads and writes backups in Velero's layout under a bucket and
// prefix of an ObjectStore.
type BackupStore struct {
	store  ObjectStore
	bucket string
	root   string // "" or "<prefix>/"
	// digests, when set, records what every put wrote (Recording).
	digests *DigestRecorder
}

// NewBackupStore returns a BackupStore for bucket and prefix; slashes around
// prefix are ignored, as Velero ignores them.
func NewBackupStore(store ObjectStore, bucket, prefix string) *BackupStore {
	root := strings.Trim(prefix, "/")
	if root != "" {
		root += "/"
	}
	return &BackupStore{store: store, bucket: bucket, root: root}
}

// Bucket returns the bucket the store writes to.
func (s *BackupStore) Bucket() string { return s.bucket }

// ObjectStore returns the underlying object store.
func (s *BackupStore) ObjectStore() ObjectStore { return s.store }

// BackupsDir is "<prefix>/backups/".
func (s *BackupStore) BackupsDir() string { return s.root + "backups/" }

// BackupDir is "<prefix>/backups/<name>/".
func (s *BackupStore) BackupDir(name string) string { return s.BackupsDir() + name + "/" }

// BackupKey is the key of file in backup name's directory.
func (s *BackupStore) BackupKey(name, file string) string { return s.BackupDir(name) + file }

// RestoresDir is "<prefix>/restores/".
func (s *BackupStore) RestoresDir() string { return s.root + "restores/" }

// RestoreDir is "<prefix>/restores/<name>/".
func (s *BackupStore) RestoreDir(name string) string { return s.RestoresDir() + name + "/" }

// RestoreKey is the key of file in restore name's directory.
func (s *BackupStore) RestoreKey(name, file string) string { return s.RestoreDir(name) + file }

func (s *BackupStore) location() string {
	return fmt.Sprintf("bucket %q prefix %q", s.bucket, strings.TrimSuffix(s.root, "/"))
}

// IsValid refuses a prefix holding directories Velero would not write there:
// such a bucket is probably used for something else, and writing backups
// into it (or deleting from it) could harm that data. An empty prefix is
// valid; a missing bucket is not.
func (s *BackupStore) IsValid(ctx context.Context) error {
	dirs, err := s.store.ListCommonPrefixes(ctx, s.bucket, s.root, "/")
	if err != nil {
		return fmt.Errorf("check backup store %s: %w", s.location(), err)
	}
	var invalid []string
	for _, d := range dirs {
		sub := strings.TrimSuffix(strings.TrimPrefix(d, s.root), "/")
		if !slices.Contains(TopLevelDirs, sub) {
			invalid = append(invalid, fmt.Sprintf("%q", sub+"/"))
		}
	}
	if len(invalid) == 0 {
		return nil
	}
	shown := invalid
	more := ""
	if len(shown) > 3 {
		shown, more = shown[:3], fmt.Sprintf(" and %d more", len(invalid)-3)
	}
	return fmt.Errorf("backup store %s holds unexpected top-level directories %s%s (allowed: %s); is the location pointing at a bucket or prefix used for something else?",
		s.location(), strings.Join(shown, ", "), more, strings.Join(TopLevelDirs, ", "))
}

// BackupExists reports whether backup name's velero-backup.json exists.
func (s *BackupStore) BackupExists(ctx context.Context, name string) (bool, error) {
	if err := checkName("backup", name); err != nil {
		return false, err
	}
	ok, err := s.store.ObjectExists(ctx, s.bucket, s.BackupKey(name, BackupMetadataFile))
	if err != nil {
		return false, fmt.Errorf("check backup %q in %s: %w", name, s.location(), err)
	}
	return ok, nil
}

// ListBackups returns, sorted, the backups that have a velero-backup.json.
// A directory without one is an upload in progress or the remains of a
// failed one, not a backup. One listing of backups/ replaces a HEAD per
// backup.
func (s *BackupStore) ListBackups(ctx context.Context) ([]string, error) {
	dir := s.BackupsDir()
	keys, err := s.store.ListObjects(ctx, s.bucket, dir)
	if err != nil {
		return nil, fmt.Errorf("list backups in %s: %w", s.location(), err)
	}
	names := []string{}
	for _, k := range keys {
		name, file, ok := strings.Cut(strings.TrimPrefix(k, dir), "/")
		if ok && file == BackupMetadataFile && name != "" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// PutBackupMetadata writes velero-backup.json (not gzipped).
func (s *BackupStore) PutBackupMetadata(ctx context.Context, name string, backupJSON []byte) error {
	return s.putBackupFile(ctx, name, BackupMetadataFile, bytes.NewReader(backupJSON))
}

// PutBackupContents streams the backup tarball.
func (s *BackupStore) PutBackupContents(ctx context.Context, name string, tarball io.Reader) error {
	return s.putBackupFile(ctx, name, BackupContentsFile(name), tarball)
}

// PutBackupLog streams the backup log, already gzipped by the caller (the
// log is compressed as it is written, so it never needs to fit in memory).
func (s *BackupStore) PutBackupLog(ctx context.Context, name string, gzippedLog io.Reader) error {
	return s.putBackupFile(ctx, name, BackupLogFile(name), gzippedLog)
}

// JSONDocument is a file's content that writes itself as JSON: a resource
// list, which is too large at scale to be built as a value in memory.
type JSONDocument interface {
	WriteJSON(w io.Writer) error
}

// PutResourceList writes the "<group/version>/<Kind>" → ["ns/name", ...]
// map, streamed.
func (s *BackupStore) PutResourceList(ctx context.Context, name string, list JSONDocument) error {
	if err := checkName("backup", name); err != nil {
		return err
	}
	return s.putStreamedGzipJSON(ctx, s.BackupKey(name, BackupResourceListFile(name)), list)
}

// PutBackupResults writes the errors and warnings of the backup.
func (s *BackupStore) PutBackupResults(ctx context.Context, name string, results any) error {
	return s.putBackupGzipJSON(ctx, name, BackupResultsFile(name), results)
}

// PutItemOperations writes the backup's async item operations.
func (s *BackupStore) PutItemOperations(ctx context.Context, name string, ops any) error {
	return s.putBackupGzipJSON(ctx, name, BackupItemOperationsFile(name), ops)
}

// PutVolumeSnapshots writes the native volume snapshots taken.
func (s *BackupStore) PutVolumeSnapshots(ctx context.Context, name string, snapshots any) error {
	return s.putBackupGzipJSON(ctx, name, BackupVolumeSnapshotsFile(name), snapshots)
}

// PutVolumeInfo writes the per-volume backup information.
func (s *BackupStore) PutVolumeInfo(ctx context.Context, name string, info any) error {
	return s.putBackupGzipJSON(ctx, name, BackupVolumeInfoFile(name), info)
}

// PutPodVolumeBackups writes the PodVolumeBackups of the backup.
func (s *BackupStore) PutPodVolumeBackups(ctx context.Context, name string, pvbs any) error {
	return s.putBackupGzipJSON(ctx, name, PodVolumeBackupsFile(name), pvbs)
}

// PutCSIVolumeSnapshots writes the CSI VolumeSnapshots of the backup.
func (s *BackupStore) PutCSIVolumeSnapshots(ctx context.Context, name string, v any) error {
	return s.putBackupGzipJSON(ctx, name, CSIVolumeSnapshotsFile(name), v)
}

// PutCSIVolumeSnapshotContents writes the CSI VolumeSnapshotContents.
func (s *BackupStore) PutCSIVolumeSnapshotContents(ctx context.Context, name string, v any) error {
	return s.putBackupGzipJSON(ctx, name, CSIVolumeSnapshotContentsFile(name), v)
}

// PutCSIVolumeSnapshotClasses writes the CSI VolumeSnapshotClasses.
func (s *BackupStore) PutCSIVolumeSnapshotClasses(ctx context.Context, name string, v any) error {
	return s.putBackupGzipJSON(ctx, name, CSIVolumeSnapshotClassesFile(name), v)
}

// PutRestoreLog streams a restore's log, already gzipped by the caller.
func (s *BackupStore) PutRestoreLog(ctx context.Context, name string, gzippedLog io.Reader) error {
	return s.putRestoreFile(ctx, name, RestoreLogFile(name), gzippedLog)
}

// PutRestoreResults writes a restore's errors and warnings.
func (s *BackupStore) PutRestoreResults(ctx context.Context, name string, results any) error {
	return s.putRestoreGzipJSON(ctx, name, RestoreResultsFile(name), results)
}

// PutRestoreResourceList writes the resources a restore created.
func (s *BackupStore) PutRestoreResourceList(ctx context.Context, name string, list JSONDocument) error {
	if err := checkName("restore", name); err != nil {
		return err
	}
	return s.putStreamedGzipJSON(ctx, s.RestoreKey(name, RestoreResourceListFile(name)), list)
}

// PutRestoreItemOperations writes a restore's async item operations.
func (s *BackupStore) PutRestoreItemOperations(ctx context.Context, name string, ops any) error {
	return s.putRestoreGzipJSON(ctx, name, RestoreItemOperationsFile(name), ops)
}

// PutRestoreVolumeInfo writes a restore's per-volume information.
func (s *BackupStore) PutRestoreVolumeInfo(ctx context.Context, name string, info any) error {
	return s.putRestoreGzipJSON(ctx, name, RestoreVolumeInfoFile(name), info)
}

func (s *BackupStore) putBackupFile(ctx context.Context, name, file string, body io.Reader) error {
	if err := checkName("backup", name); err != nil {
		return err
	}
	return s.put(ctx, s.BackupKey(name, file), body)
}

func (s *BackupStore) putBackupGzipJSON(ctx context.Context, name, file string, v any) error {
	if err := checkName("backup", name); err != nil {
		return err
	}
	return s.PutGzipJSON(ctx, s.BackupKey(name, file), v)
}

func (s *BackupStore) putRestoreFile(ctx context.Context, name, file string, body io.Reader) error {
	if err := checkName("restore", name); err != nil {
		return err
	}
	return s.put(ctx, s.RestoreKey(name, file), body)
}

func (s *BackupStore) putRestoreGzipJSON(ctx context.Context, name, file string, v any) error {
	if err := checkName("restore", name); err != nil {
		return err
	}
	return s.PutGzipJSON(ctx, s.RestoreKey(name, file), v)
}

func (s *BackupStore) put(ctx context.Context, key string, body io.Reader) error {
	if s.digests == nil {
		if err := s.store.PutObject(ctx, s.bucket, key, body); err != nil {
			return fmt.Errorf("write %s in %s: %w", key, s.location(), err)
		}
		return nil
	}
	var digest func() FileDigest
	if rs, ok := body.(io.ReadSeeker); ok {
		fd, err := digestOf(rs)
		if err != nil {
			return fmt.Errorf("write %s in %s: hashing it: %w", key, s.location(), err)
		}
		digest = func() FileDigest { return fd }
	} else {
		h := newHashingReader(body)
		body, digest = h, h.digest
	}
	if err := s.store.PutObject(ctx, s.bucket, key, body); err != nil {
		return fmt.Errorf("write %s in %s: %w", key, s.location(), err)
	}
	s.digests.record(key, digest())
	return nil
}

// PutGzipJSON writes v as gzipped JSON to key (relative to the bucket, not
// the prefix); nil is written as null, as Velero does. The files written
// this way are small, so they are compressed in memory and uploaded with a
// known length.
func (s *BackupStore) PutGzipJSON(ctx context.Context, key string, v any) error {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	if err := json.NewEncoder(gz).Encode(v); err != nil {
		return fmt.Errorf("encode %s: %w", key, err)
	}
	if err := gz.Close(); err != nil {
		return fmt.Errorf("compress %s: %w", key, err)
	}
	return s.put(ctx, key, bytes.NewReader(buf.Bytes()))
}

// putStreamedGzipJSON writes doc gzipped to key as it is encoded, so
// neither the JSON nor its compressed form is ever whole in memory.
func (s *BackupStore) putStreamedGzipJSON(ctx context.Context, key string, doc JSONDocument) error {
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		gz := gzip.NewWriter(pw)
		err := doc.WriteJSON(gz)
		if err != nil {
			err = fmt.Errorf("encode %s: %w", key, err)
		} else if err = gz.Close(); err != nil {
			err = fmt.Errorf("compress %s: %w", key, err)
		}
		pw.CloseWithError(err)
	}()
	err := s.put(ctx, key, pr)
	// Unblocks the encoder if the upload stopped reading early; the
	// caller may free doc once this returns, so the encoder must be done.
	pr.CloseWithError(errors.New("upload ended"))
	<-done
	return err
}

// GetBackupMetadata returns velero-backup.json; a missing backup gives an
// error wrapping ErrNotFound.
func (s *BackupStore) GetBackupMetadata(ctx context.Context, name string) ([]byte, error) {
	rc, err := s.getBackupFile(ctx, name, BackupMetadataFile)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, MaxBackupMetadataSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s in %s: %w", s.BackupKey(name, BackupMetadataFile), s.location(), err)
	}
	if len(b) > MaxBackupMetadataSize {
		return nil, fmt.Errorf("read %s in %s: %w", s.BackupKey(name, BackupMetadataFile), s.location(), ErrMetadataTooLarge)
	}
	return b, nil
}

// MaxBackupMetadataSize bounds what is read of a velero-backup.json: the
// bucket is not trusted, and a real one is a few KiB.
const MaxBackupMetadataSize = 4 << 20

// ErrMetadataTooLarge is a velero-backup.json over MaxBackupMetadataSize.
var ErrMetadataTooLarge = fmt.Errorf("larger than %d bytes, which no backup writes", MaxBackupMetadataSize)

// GetBackupContents streams the backup tarball.
func (s *BackupStore) GetBackupContents(ctx context.Context, name string) (io.ReadCloser, error) {
	return s.getBackupFile(ctx, name, BackupContentsFile(name))
}

// GetBackupLog streams the backup log, still gzipped.
func (s *BackupStore) GetBackupLog(ctx context.Context, name string) (io.ReadCloser, error) {
	return s.getBackupFile(ctx, name, BackupLogFile(name))
}

// GetResourceList reads the backup's resource list.
func (s *BackupStore) GetResourceList(ctx context.Context, name string) (map[string][]string, error) {
	if err := checkName("backup", name); err != nil {
		return nil, err
	}
	var list map[string][]string
	if err := s.GetGzipJSON(ctx, s.BackupKey(name, BackupResourceListFile(name)), &list); err != nil {
		return nil, err
	}
	return list, nil
}

// maxGzipJSONBytes bounds what one gzipped JSON file of a backup or
// restore (volume information, snapshot lists, results, resource lists)
// may unpack to. The largest Lifeboat writes, a resource list of 300,000
// items, is about 15 MiB; the bound keeps a hostile store's gzip bomb from
// filling the server's memory through a file decoded whole.
var maxGzipJSONBytes int64 = 256 << 20

// errGzipJSONTooLarge says a gzipped JSON file unpacked past the bound.
var errGzipJSONTooLarge = errors.New("unpacks to more than the bound for such a file: not what a backup writes (a damaged or hostile store?)")

// boundedReader fails once more than n bytes were read through it.
type boundedReader struct {
	r io.Reader
	n int64
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.n < 0 {
		return 0, errGzipJSONTooLarge
	}
	n, err := b.r.Read(p)
	b.n -= int64(n)
	if b.n < 0 {
		return n, errGzipJSONTooLarge
	}
	return n, err
}

// GetGzipJSON decodes the gzipped JSON at key (relative to the bucket) into
// into, refusing a file that unpacks past maxGzipJSONBytes. A missing key
// gives an error wrapping ErrNotFound.
func (s *BackupStore) GetGzipJSON(ctx context.Context, key string, into any) error {
	rc, err := s.get(ctx, key)
	if err != nil {
		return err
	}
	defer rc.Close()
	gz, err := gzip.NewReader(rc)
	if err != nil {
		return fmt.Errorf("decompress %s in %s: %w", key, s.location(), err)
	}
	defer gz.Close()
	if err := json.NewDecoder(&boundedReader{r: gz, n: maxGzipJSONBytes}).Decode(into); err != nil {
		if errors.Is(err, errGzipJSONTooLarge) {
			return fmt.Errorf("decode %s in %s: it %w (%d MiB)", key, s.location(), err, maxGzipJSONBytes>>20)
		}
		return fmt.Errorf("decode %s in %s: %w", key, s.location(), err)
	}
	return nil
}

func (s *BackupStore) getBackupFile(ctx context.Context, name, file string) (io.ReadCloser, error) {
	if err := checkName("backup", name); err != nil {
		return nil, err
	}
	return s.get(ctx, s.BackupKey(name, file))
}

func (s *BackupStore) get(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, err := s.store.GetObject(ctx, s.bucket, key)
	if err != nil {
		return nil, fmt.Errorf("read %s in %s: %w", key, s.location(), err)
	}
	return rc, nil
}

// DeleteBackup deletes every key under the backup's directory and
// velero-backup.json last. The marker is what makes the backup visible
// (ListBackups, sync to the cluster), so while any other key remains the
// marker stays: an interrupted or failed deletion leaves a backup that can be
// found and deleted again, never data nobody knows about. When some keys
// fail, the error is a *DeleteKeysError naming them and the marker is kept.
func (s *BackupStore) DeleteBackup(ctx context.Context, name string) error {
	if err := checkName("backup", name); err != nil {
		return err
	}
	keys, err := s.store.ListObjects(ctx, s.bucket, s.BackupDir(name))
	if err != nil {
		return fmt.Errorf("delete backup %q: list %s in %s: %w", name, s.BackupDir(name), s.location(), err)
	}
	marker := s.BackupKey(name, BackupMetadataFile)
	hasMarker := slices.Contains(keys, marker)
	keys = slices.DeleteFunc(keys, func(k string) bool { return k == marker })
	if err := s.DeleteKeys(ctx, keys); err != nil {
		return fmt.Errorf("delete backup %q (kept %s so the deletion can be retried): %w", name, BackupMetadataFile, err)
	}
	if hasMarker {
		if err := s.DeleteKeys(ctx, []string{marker}); err != nil {
			return fmt.Errorf("delete backup %q: %w", name, err)
		}
	}
	return nil
}

// DeleteRestore deletes every key under the restore's directory.
func (s *BackupStore) DeleteRestore(ctx context.Context, name string) error {
	if err := checkName("restore", name); err != nil {
		return err
	}
	keys, err := s.store.ListObjects(ctx, s.bucket, s.RestoreDir(name))
	if err != nil {
		return fmt.Errorf("delete restore %q: list %s in %s: %w", name, s.RestoreDir(name), s.location(), err)
	}
	if err := s.DeleteKeys(ctx, keys); err != nil {
		return fmt.Errorf("delete restore %q: %w", name, err)
	}
	return nil
}

// RemoveUnfinishedBackupUploads removes the uploads into backup name's
// directory that were never finished (a server killed mid-backup leaves
// them; they are not keys, so DeleteBackup cannot see them) and returns one
// key per upload removed, also when it fails part way. The backup must not
// be running. A store that cannot find such uploads (one served by a
// plugin) gives an error wrapping errors.ErrUnsupported.
func (s *BackupStore) RemoveUnfinishedBackupUploads(ctx context.Context, name string) ([]string, error) {
	if err := checkName("backup", name); err != nil {
		return nil, err
	}
	return s.removeUnfinishedUploads(ctx, s.BackupDir(name))
}

// RemoveUnfinishedRestoreUploads is RemoveUnfinishedBackupUploads for a
// restore's directory.
func (s *BackupStore) RemoveUnfinishedRestoreUploads(ctx context.Context, name string) ([]string, error) {
	if err := checkName("restore", name); err != nil {
		return nil, err
	}
	return s.removeUnfinishedUploads(ctx, s.RestoreDir(name))
}

func (s *BackupStore) removeUnfinishedUploads(ctx context.Context, dir string) ([]string, error) {
	uu, ok := s.store.(UnfinishedUploads)
	if !ok {
		return nil, fmt.Errorf("finding unfinished uploads under %s in %s: %w", dir, s.location(), errors.ErrUnsupported)
	}
	removed, err := uu.RemoveUnfinishedUploads(ctx, s.bucket, dir)
	if err != nil {
		return removed, fmt.Errorf("removing unfinished uploads under %s in %s: %w", dir, s.location(), err)
	}
	return removed, nil
}

// DeleteKeys deletes keys in order, going on past failures so that one bad
// key does not leave the rest behind. It returns a *DeleteKeysError listing
// every key not deleted, or nil.
func (s *BackupStore) DeleteKeys(ctx context.Context, keys []string) error {
	var failed []KeyError
	for _, k := range keys {
		err := ctx.Err()
		if err == nil {
			err = s.store.DeleteObject(ctx, s.bucket, k)
		}
		if err != nil {
			failed = append(failed, KeyError{Key: k, Err: err})
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return &DeleteKeysError{Bucket: s.bucket, Failed: failed, Total: len(keys)}
}

// KeyError is a key that could not be deleted and why.
type KeyError struct {
	Key string
	Err error
}

// DeleteKeysError lists the keys a deletion left behind, for a caller that
// retries them or reports what is left.
type DeleteKeysError struct {
	Bucket string
	Failed []KeyError
	Total  int
}

func (e *DeleteKeysError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d keys in bucket %q not deleted: ", len(e.Failed), e.Total, e.Bucket)
	const shown = 5
	for i, f := range e.Failed {
		if i == shown {
			fmt.Fprintf(&b, "; and %d more", len(e.Failed)-shown)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: %v", f.Key, f.Err)
	}
	return b.String()
}

// Unwrap lets errors.Is see through to the causes, e.g. context.Canceled.
func (e *DeleteKeysError) Unwrap() []error {
	errs := make([]error, len(e.Failed))
	for i, f := range e.Failed {
		errs[i] = f.Err
	}
	return errs
}

// GetDownloadURL returns a URL a client without credentials can download key
// (relative to the bucket) from, for ttl.
func (s *BackupStore) GetDownloadURL(ctx context.Context, key string, ttl time.Duration) (string, error) {
	u, err := s.store.CreateSignedURL(ctx, s.bucket, key, ttl)
	if err != nil {
		return "", fmt.Errorf("download URL for %s in %s: %w", key, s.location(), err)
	}
	return u, nil
}

// checkName refuses names that would address another directory. Kubernetes
// names never contain these, so this only catches programming errors and
// hand-edited requests.
func checkName(kind, name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("invalid %s name %q", kind, name)
	}
	return nil
}

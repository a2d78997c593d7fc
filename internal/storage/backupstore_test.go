package storage_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/lifeboat-io/lifeboat/internal/resourcelist"
	"github.com/lifeboat-io/lifeboat/internal/storage"
	"github.com/lifeboat-io/lifeboat/internal/storage/filesystem"
)

// newFSStore returns a filesystem ObjectStore with an empty bucket "b".
func newFSStore(t *testing.T) storage.ObjectStore {
	t.Helper()
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "b"), 0o700); err != nil {
		t.Fatal(err)
	}
	s, err := filesystem.New(map[string]string{filesystem.PathKey: root})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func putRaw(t *testing.T, s storage.ObjectStore, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if err := s.PutObject(t.Context(), "b", k, strings.NewReader("x")); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLayoutKeys(t *testing.T) {
	for _, tc := range []struct{ prefix, root string }{
		{"", ""},
		{"p", "p/"},
		{"/p/q/", "p/q/"},
	} {
		bs := storage.NewBackupStore(nil, "b", tc.prefix)
		want := map[string]string{
			bs.BackupsDir():    tc.root + "backups/",
			bs.BackupDir("b1"): tc.root + "backups/b1/",
			bs.BackupKey("b1", storage.BackupMetadataFile):                  tc.root + "backups/b1/velero-backup.json",
			bs.BackupKey("b1", storage.BackupContentsFile("b1")):            tc.root + "backups/b1/b1.tar.gz",
			bs.BackupKey("b1", storage.BackupLogFile("b1")):                 tc.root + "backups/b1/b1-logs.gz",
			bs.BackupKey("b1", storage.BackupResourceListFile("b1")):        tc.root + "backups/b1/b1-resource-list.json.gz",
			bs.BackupKey("b1", storage.BackupResultsFile("b1")):             tc.root + "backups/b1/b1-results.gz",
			bs.BackupKey("b1", storage.BackupItemOperationsFile("b1")):      tc.root + "backups/b1/b1-itemoperations.json.gz",
			bs.BackupKey("b1", storage.BackupVolumeSnapshotsFile("b1")):     tc.root + "backups/b1/b1-volumesnapshots.json.gz",
			bs.BackupKey("b1", storage.BackupVolumeInfoFile("b1")):          tc.root + "backups/b1/b1-volumeinfo.json.gz",
			bs.BackupKey("b1", storage.PodVolumeBackupsFile("b1")):          tc.root + "backups/b1/b1-podvolumebackups.json.gz",
			bs.BackupKey("b1", storage.CSIVolumeSnapshotsFile("b1")):        tc.root + "backups/b1/b1-csi-volumesnapshots.json.gz",
			bs.BackupKey("b1", storage.CSIVolumeSnapshotContentsFile("b1")): tc.root + "backups/b1/b1-csi-volumesnapshotcontents.json.gz",
			bs.BackupKey("b1", storage.CSIVolumeSnapshotClassesFile("b1")):  tc.root + "backups/b1/b1-csi-volumesnapshotclasses.json.gz",
			bs.RestoresDir():    tc.root + "restores/",
			bs.RestoreDir("r1"): tc.root + "restores/r1/",
			bs.RestoreKey("r1", storage.RestoreLogFile("r1")):            tc.root + "restores/r1/restore-r1-logs.gz",
			bs.RestoreKey("r1", storage.RestoreResultsFile("r1")):        tc.root + "restores/r1/restore-r1-results.gz",
			bs.RestoreKey("r1", storage.RestoreResourceListFile("r1")):   tc.root + "restores/r1/restore-r1-resource-list.json.gz",
			bs.RestoreKey("r1", storage.RestoreItemOperationsFile("r1")): tc.root + "restores/r1/restore-r1-itemoperations.json.gz",
			bs.RestoreKey("r1", storage.RestoreVolumeInfoFile("r1")):     tc.root + "restores/r1/r1-volumeinfo.json.gz",
		}
		for got, want := range want {
			if got != want {
				t.Errorf("prefix %q: key %q, want %q", tc.prefix, got, want)
			}
		}
	}
}

func TestIsValid(t *testing.T) {
	for _, tc := range []struct {
		name    string
		prefix  string
		keys    []string
		wantErr string // "" for valid
	}{
		{name: "empty bucket"},
		{name: "velero dirs", keys: []string{
			"backups/b1/velero-backup.json", "restores/r1/x", "kopia/ns/kopia.repository",
			"metadata/revision", "plugins/x", "restic/ns/config",
		}},
		{name: "loose files at the top are ignored", keys: []string{"README", "backups/b1/x"}},
		{name: "foreign dir", keys: []string{"backups/b1/x", "photos/cat.jpg"}, wantErr: `unexpected top-level directories "photos/"`},
		{name: "many foreign dirs", keys: []string{"d1/x", "d2/x", "d3/x", "d4/x"}, wantErr: `"d1/", "d2/", "d3/" and 1 more`},
		{name: "prefix: only under it counts", prefix: "cluster-a", keys: []string{"cluster-a/backups/b1/x", "cluster-b/backups/b1/x", "other/x"}},
		{name: "prefix: foreign dir under it", prefix: "cluster-a", keys: []string{"cluster-a/backups/b1/x", "cluster-a/junk/x"}, wantErr: `bucket "b" prefix "cluster-a" holds unexpected top-level directories "junk/"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newFSStore(t)
			putRaw(t, s, tc.keys...)
			err := storage.NewBackupStore(s, "b", tc.prefix).IsValid(t.Context())
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("IsValid: %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("IsValid error = %v, want it to contain %q", err, tc.wantErr)
			}
		})
	}
	t.Run("missing bucket", func(t *testing.T) {
		if err := storage.NewBackupStore(newFSStore(t), "nope", "").IsValid(t.Context()); err == nil {
			t.Errorf("IsValid on a missing bucket: nil, want an error")
		}
	})
}

func gunzip(t *testing.T, s storage.ObjectStore, key string) string {
	t.Helper()
	rc, err := s.GetObject(t.Context(), "b", key)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	gz, err := gzip.NewReader(rc)
	if err != nil {
		t.Fatalf("%s is not gzipped: %v", key, err)
	}
	b, err := io.ReadAll(gz)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestBackupFilesRoundTrip(t *testing.T) {
	s := newFSStore(t)
	bs := storage.NewBackupStore(s, "b", "pre")
	ctx := t.Context()
	meta := []byte(`{"kind":"Backup","apiVersion":"velero.io/v1"}`)
	list := map[string][]string{"v1/ConfigMap": {"ns/a", "ns/b"}}
	results := map[string]any{"errors": map[string]any{}, "warnings": map[string]any{}}

	if exists, err := bs.BackupExists(ctx, "b1"); err != nil || exists {
		t.Fatalf("BackupExists before writing = %v, %v", exists, err)
	}
	for what, err := range map[string]error{
		"metadata":         bs.PutBackupMetadata(ctx, "b1", meta),
		"contents":         bs.PutBackupContents(ctx, "b1", strings.NewReader("tarball")),
		"log":              bs.PutBackupLog(ctx, "b1", strings.NewReader("gzipped log")),
		"resource list":    bs.PutResourceList(ctx, "b1", resourcelist.FromMap(list)),
		"results":          bs.PutBackupResults(ctx, "b1", results),
		"item operations":  bs.PutItemOperations(ctx, "b1", []any{}),
		"volume snapshots": bs.PutVolumeSnapshots(ctx, "b1", nil),
		"volume info":      bs.PutVolumeInfo(ctx, "b1", []any{}),
		"pvbs":             bs.PutPodVolumeBackups(ctx, "b1", nil),
	} {
		if err != nil {
			t.Fatalf("put %s: %v", what, err)
		}
	}
	if exists, err := bs.BackupExists(ctx, "b1"); err != nil || !exists {
		t.Errorf("BackupExists after writing = %v, %v; want true", exists, err)
	}

	// velero-backup.json is stored as given, not gzipped.
	rc, err := s.GetObject(ctx, "b", "pre/backups/b1/velero-backup.json")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(raw, meta) {
		t.Errorf("stored velero-backup.json = %q, want %q", raw, meta)
	}
	if got, err := bs.GetBackupMetadata(ctx, "b1"); err != nil || !bytes.Equal(got, meta) {
		t.Errorf("GetBackupMetadata = %q, %v", got, err)
	}

	for key, want := range map[string]string{
		"pre/backups/b1/b1-resource-list.json.gz":    `{"v1/ConfigMap":["ns/a","ns/b"]}`,
		"pre/backups/b1/b1-results.gz":               `{"errors":{},"warnings":{}}`,
		"pre/backups/b1/b1-itemoperations.json.gz":   `[]`,
		"pre/backups/b1/b1-volumesnapshots.json.gz":  `null`,
		"pre/backups/b1/b1-volumeinfo.json.gz":       `[]`,
		"pre/backups/b1/b1-podvolumebackups.json.gz": `null`,
	} {
		if got := strings.TrimSpace(gunzip(t, s, key)); got != want {
			t.Errorf("%s holds %s, want %s", key, got, want)
		}
	}

	gotList, err := bs.GetResourceList(ctx, "b1")
	if err != nil || len(gotList) != 1 || !slices.Equal(gotList["v1/ConfigMap"], list["v1/ConfigMap"]) {
		t.Errorf("GetResourceList = %v, %v; want %v", gotList, err, list)
	}
	var gotResults map[string]map[string]any
	if err := bs.GetGzipJSON(ctx, bs.BackupKey("b1", storage.BackupResultsFile("b1")), &gotResults); err != nil || gotResults["errors"] == nil {
		t.Errorf("GetGzipJSON(results) = %v, %v", gotResults, err)
	}
	for name, get := range map[string]func(context.Context, string) (io.ReadCloser, error){
		"tarball":     bs.GetBackupContents,
		"gzipped log": bs.GetBackupLog,
	} {
		rc, err := get(ctx, "b1")
		if err != nil {
			t.Fatalf("get %s: %v", name, err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		if string(b) != name {
			t.Errorf("got %q, want %q", b, name)
		}
	}
}

func TestGetMissingIsNotFound(t *testing.T) {
	bs := storage.NewBackupStore(newFSStore(t), "b", "")
	ctx := t.Context()
	if _, err := bs.GetBackupMetadata(ctx, "nope"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("GetBackupMetadata of a missing backup: %v, want ErrNotFound", err)
	}
	if _, err := bs.GetResourceList(ctx, "nope"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("GetResourceList of a missing backup: %v, want ErrNotFound", err)
	}
	if _, err := bs.GetBackupContents(ctx, "nope"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("GetBackupContents of a missing backup: %v, want ErrNotFound", err)
	}
}

func TestRefusesBadNames(t *testing.T) {
	bs := storage.NewBackupStore(newFSStore(t), "b", "")
	ctx := t.Context()
	for _, name := range []string{"", ".", "..", "a/b", "../escape"} {
		if err := bs.PutBackupMetadata(ctx, name, []byte("{}")); err == nil {
			t.Errorf("PutBackupMetadata(%q) succeeded, want refusal", name)
		}
		if err := bs.DeleteBackup(ctx, name); err == nil {
			t.Errorf("DeleteBackup(%q) succeeded, want refusal", name)
		}
		if err := bs.PutRestoreLog(ctx, name, strings.NewReader("")); err == nil {
			t.Errorf("PutRestoreLog(%q) succeeded, want refusal", name)
		}
	}
}

func TestListBackups(t *testing.T) {
	s := newFSStore(t)
	bs := storage.NewBackupStore(s, "b", "p")
	if got, err := bs.ListBackups(t.Context()); err != nil || len(got) != 0 {
		t.Errorf("ListBackups of an empty store = %q, %v", got, err)
	}
	putRaw(t, s,
		"p/backups/b2/velero-backup.json", "p/backups/b2/b2.tar.gz",
		"p/backups/b1/velero-backup.json",
		"p/backups/b1-old/b1-old.tar.gz", // upload in progress or failed: no marker
		"p/backups/nested/deeper/velero-backup.json",
		"p/backups/velero-backup.json",
		"p/restores/r1/velero-backup.json",
		"backups/outside-prefix/velero-backup.json",
	)
	got, err := bs.ListBackups(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"b1", "b2"}; !slices.Equal(got, want) {
		t.Errorf("ListBackups = %q, want %q", got, want)
	}
}

// recordingStore is an in-memory ObjectStore that records deletions and
// fails those of chosen keys.
type recordingStore struct {
	mu      sync.Mutex
	objects map[string]string
	deleted []string
	failOn  map[string]bool
}

func newRecordingStore(keys ...string) *recordingStore {
	r := &recordingStore{objects: map[string]string{}, failOn: map[string]bool{}}
	for _, k := range keys {
		r.objects[k] = "x"
	}
	return r
}

func (r *recordingStore) PutObject(ctx context.Context, bucket, key string, body io.Reader) error {
	b, err := io.ReadAll(body)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.objects[key] = string(b)
	return err
}

func (r *recordingStore) GetObject(ctx context.Context, bucket, key string) (io.ReadCloser, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.objects[key]
	if !ok {
		return nil, fmt.Errorf("%s: %w", key, storage.ErrNotFound)
	}
	return io.NopCloser(strings.NewReader(v)), nil
}

func (r *recordingStore) ObjectExists(ctx context.Context, bucket, key string) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.objects[key]
	return ok, nil
}

func (r *recordingStore) ListCommonPrefixes(ctx context.Context, bucket, prefix, delimiter string) ([]string, error) {
	return nil, errors.New("not used")
}

func (r *recordingStore) ListObjects(ctx context.Context, bucket, prefix string) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var keys []string
	for k := range r.objects {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys, nil
}

func (r *recordingStore) DeleteObject(ctx context.Context, bucket, key string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failOn[key] {
		return errors.New("access denied")
	}
	r.deleted = append(r.deleted, key)
	delete(r.objects, key)
	return nil
}

func (r *recordingStore) CreateSignedURL(ctx context.Context, bucket, key string, ttl time.Duration) (string, error) {
	return "https://signed.example/" + bucket + "/" + key + "?ttl=" + ttl.String(), nil
}

// The marker sorts before the other files of backup "zz", so a deletion in
// listing order would remove it first.
var zzKeys = []string{
	"backups/zz/velero-backup.json",
	"backups/zz/zz-logs.gz",
	"backups/zz/zz.tar.gz",
	"backups/zz/zz-results.gz",
}

func TestDeleteBackupDeletesMarkerLast(t *testing.T) {
	rec := newRecordingStore(append([]string{"backups/zz1/velero-backup.json", "backups/z/velero-backup.json"}, zzKeys...)...)
	bs := storage.NewBackupStore(rec, "b", "")
	if err := bs.DeleteBackup(t.Context(), "zz"); err != nil {
		t.Fatalf("DeleteBackup: %v", err)
	}
	if len(rec.deleted) != len(zzKeys) {
		t.Fatalf("deleted %q, want the %d keys of zz", rec.deleted, len(zzKeys))
	}
	if last := rec.deleted[len(rec.deleted)-1]; last != "backups/zz/velero-backup.json" {
		t.Errorf("deletion order %q: last = %q, want velero-backup.json", rec.deleted, last)
	}
	if got := slices.Sorted(slices.Values(rec.deleted)); !slices.Equal(got, slices.Sorted(slices.Values(zzKeys))) {
		t.Errorf("deleted %q, want exactly %q (neighbours zz1 and z untouched)", rec.deleted, zzKeys)
	}
	// Deleting again finds nothing and is not an error.
	if err := bs.DeleteBackup(t.Context(), "zz"); err != nil {
		t.Errorf("second DeleteBackup: %v", err)
	}
}

func TestDeleteBackupKeepsMarkerWhenAKeyFails(t *testing.T) {
	rec := newRecordingStore(zzKeys...)
	rec.failOn["backups/zz/zz.tar.gz"] = true
	bs := storage.NewBackupStore(rec, "b", "")
	err := bs.DeleteBackup(t.Context(), "zz")
	var dke *storage.DeleteKeysError
	if !errors.As(err, &dke) {
		t.Fatalf("DeleteBackup error = %v, want a *DeleteKeysError", err)
	}
	if len(dke.Failed) != 1 || dke.Failed[0].Key != "backups/zz/zz.tar.gz" || dke.Total != 3 {
		t.Errorf("failed keys = %+v (of %d), want only backups/zz/zz.tar.gz of 3", dke.Failed, dke.Total)
	}
	if !strings.Contains(err.Error(), "backups/zz/zz.tar.gz: access denied") {
		t.Errorf("error %q does not name the failed key and cause", err)
	}
	if slices.Contains(rec.deleted, "backups/zz/velero-backup.json") {
		t.Errorf("velero-backup.json was deleted although zz.tar.gz remains")
	}
	// The keys that could go went: one failure does not stop the rest.
	for _, k := range []string{"backups/zz/zz-logs.gz", "backups/zz/zz-results.gz"} {
		if !slices.Contains(rec.deleted, k) {
			t.Errorf("%s was not deleted", k)
		}
	}
	if ok, _ := storage.NewBackupStore(rec, "b", "").BackupExists(t.Context(), "zz"); !ok {
		t.Errorf("backup zz no longer exists after a partial deletion; a retry could not find it")
	}
}

func TestDeleteBackupOnFilesystem(t *testing.T) {
	s := newFSStore(t)
	bs := storage.NewBackupStore(s, "b", "p")
	ctx := t.Context()
	for _, name := range []string{"b1", "b10"} {
		if err := bs.PutBackupMetadata(ctx, name, []byte("{}")); err != nil {
			t.Fatal(err)
		}
		if err := bs.PutBackupContents(ctx, name, strings.NewReader("tar")); err != nil {
			t.Fatal(err)
		}
	}
	if err := bs.DeleteBackup(ctx, "b1"); err != nil {
		t.Fatalf("DeleteBackup: %v", err)
	}
	if keys, err := s.ListObjects(ctx, "b", "p/backups/b1/"); err != nil || len(keys) != 0 {
		t.Errorf("keys left under b1: %q, %v", keys, err)
	}
	if got, err := bs.ListBackups(ctx); err != nil || !slices.Equal(got, []string{"b10"}) {
		t.Errorf("ListBackups after deleting b1 = %q, %v; want [b10]", got, err)
	}
	if dirs, err := s.ListCommonPrefixes(ctx, "b", "p/backups/", "/"); err != nil || !slices.Equal(dirs, []string{"p/backups/b10/"}) {
		t.Errorf("backup dirs after deleting b1 = %q, %v; want only b10", dirs, err)
	}
}

func TestDeleteKeysStopsOnCancel(t *testing.T) {
	rec := newRecordingStore(zzKeys...)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := storage.NewBackupStore(rec, "b", "").DeleteKeys(ctx, zzKeys)
	var dke *storage.DeleteKeysError
	if !errors.As(err, &dke) || len(dke.Failed) != len(zzKeys) || !errors.Is(err, context.Canceled) {
		t.Errorf("DeleteKeys with a cancelled context = %v, want every key failed with context.Canceled", err)
	}
	if len(rec.deleted) != 0 {
		t.Errorf("deleted %q after cancellation", rec.deleted)
	}
}

func TestGetDownloadURL(t *testing.T) {
	bs := storage.NewBackupStore(newRecordingStore(), "bk", "p")
	key := bs.BackupKey("b1", storage.BackupLogFile("b1"))
	got, err := bs.GetDownloadURL(t.Context(), key, 10*time.Minute)
	if want := "https://signed.example/bk/p/backups/b1/b1-logs.gz?ttl=10m0s"; err != nil || got != want {
		t.Errorf("GetDownloadURL = %q, %v; want %q", got, err, want)
	}
}

// What a server killed mid-upload leaves in a filesystem store: a
// temporary file beside the object it was writing.
func TestRemoveUnfinishedUploadsOfABackupAndARestore(t *testing.T) {
	root := t.TempDir()
	for _, dir := range []string{"b/p/backups/nightly", "b/p/backups/nightly-2", "b/p/restores/r1"} {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, dir, ".lifeboat-upload-123"), []byte("half"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	fs, err := filesystem.New(map[string]string{filesystem.PathKey: root})
	if err != nil {
		t.Fatal(err)
	}
	st := storage.NewBackupStore(fs, "b", "p")
	got, err := st.RemoveUnfinishedBackupUploads(t.Context(), "nightly")
	if err != nil || !slices.Equal(got, []string{"p/backups/nightly/.lifeboat-upload-123"}) {
		t.Errorf("RemoveUnfinishedBackupUploads(nightly) = %q, %v; want only nightly's", got, err)
	}
	got, err = st.RemoveUnfinishedRestoreUploads(t.Context(), "r1")
	if err != nil || !slices.Equal(got, []string{"p/restores/r1/.lifeboat-upload-123"}) {
		t.Errorf("RemoveUnfinishedRestoreUploads(r1) = %q, %v; want r1's", got, err)
	}
	if _, err := os.Stat(filepath.Join(root, "b/p/backups/nightly-2/.lifeboat-upload-123")); err != nil {
		t.Errorf("nightly-2's upload: %v; another backup's must stay", err)
	}
	if _, err := st.RemoveUnfinishedBackupUploads(t.Context(), "../x"); err == nil {
		t.Error("RemoveUnfinishedBackupUploads(../x) succeeded")
	}

	// A store that cannot find unfinished uploads (a plugin) says so.
	_, err = storage.NewBackupStore(newRecordingStore(), "b", "p").RemoveUnfinishedBackupUploads(t.Context(), "nightly")
	if !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("on a store without the capability: error %v, want one wrapping errors.ErrUnsupported", err)
	}
}

// A gzipped JSON file of a backup comes from the bucket: one that unpacks
// past the bound (a gzip bomb: a few KiB that unpack to far more) is
// refused with an error naming it, before it fills memory; one under it
// decodes.
func TestGetGzipJSONRefusesABomb(t *testing.T) {
	defer storage.SetMaxGzipJSONBytes(1 << 20)()
	s := newFSStore(t)
	bs := storage.NewBackupStore(s, "b", "")
	put := func(key string, body []byte) {
		t.Helper()
		var buf bytes.Buffer
		gz := gzip.NewWriter(&buf)
		if _, err := gz.Write(body); err != nil {
			t.Fatal(err)
		}
		if err := gz.Close(); err != nil {
			t.Fatal(err)
		}
		if err := s.PutObject(t.Context(), "b", key, &buf); err != nil {
			t.Fatal(err)
		}
	}
	// A JSON string of 4 MiB of spaces' worth: valid JSON, far past 1 MiB.
	bomb := append(append([]byte(`["`), bytes.Repeat([]byte("a"), 4<<20)...), `"]`...)
	key := bs.BackupKey("b1", storage.BackupVolumeInfoFile("b1"))
	put(key, bomb)
	var v []string
	err := bs.GetGzipJSON(t.Context(), key, &v)
	if err == nil || !strings.Contains(err.Error(), storage.BackupVolumeInfoFile("b1")) || !strings.Contains(err.Error(), "unpacks to more than") {
		t.Fatalf("a 4 MiB file under a 1 MiB bound: %v", err)
	}
	put(key, []byte(`["small"]`))
	if err := bs.GetGzipJSON(t.Context(), key, &v); err != nil || len(v) != 1 {
		t.Errorf("a small file: %v %v", v, err)
	}
}

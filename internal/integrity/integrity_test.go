package integrity

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lifeboat-io/lifeboat/internal/archive"
	"github.com/lifeboat-io/lifeboat/internal/archive/archivetest"
	"github.com/lifeboat-io/lifeboat/internal/storage"
	"github.com/lifeboat-io/lifeboat/internal/storage/filesystem"
)

const name = "bk"

// stored is a backup written the way the engine writes one: the tarball
// through an archive.Writer recording its entries, the item digests, a
// few small files and velero-backup.json through a recording store, the
// digests file last.
type stored struct {
	store  *storage.BackupStore
	dir    string // the backup's directory on disk
	anchor string
}

func writeBackup(t testing.TB, items int) *stored {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "bucket"), 0o755); err != nil {
		t.Fatal(err)
	}
	fs, err := filesystem.New(map[string]string{"path": root})
	if err != nil {
		t.Fatal(err)
	}
	plain := storage.NewBackupStore(fs, "bucket", "pfx")
	rec := storage.NewDigestRecorder()
	store := plain.Recording(rec)
	ctx := context.Background()

	digests, err := NewItemDigests(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer digests.Close()
	var tarball bytes.Buffer
	aw := archive.NewWriter(&tarball, time.Unix(1700000000, 0), archive.Limits{})
	aw.RecordEntries(digests)
	if err := aw.WriteVersion(); err != nil {
		t.Fatal(err)
	}
	for i := range items {
		ref := archive.ItemRef{GroupResource: "configmaps", Version: "v1", Namespace: "ns", Name: fmt.Sprintf("cm-%03d", i)}
		if err := aw.WriteItem(ref, fmt.Appendf(nil, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-%03d","namespace":"ns"},"data":{"i":"%d"}}`, i, i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := aw.Close(); err != nil {
		t.Fatal(err)
	}
	// A stream, as the engine's upload is.
	if err := store.PutBackupContents(ctx, name, io.MultiReader(&tarball)); err != nil {
		t.Fatal(err)
	}
	if err := digests.Upload(ctx, store, name); err != nil {
		t.Fatal(err)
	}
	if err := store.PutBackupResults(ctx, name, map[string]any{"errors": map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	if err := store.PutBackupMetadata(ctx, name, []byte(`{"kind":"Backup","metadata":{"name":"bk"}}`)); err != nil {
		t.Fatal(err)
	}
	anchor, err := WriteManifest(ctx, store, name, rec.Under(store.BackupDir(name)), digests.Entries())
	if err != nil {
		t.Fatal(err)
	}
	return &stored{store: plain, dir: filepath.Join(root, "bucket", "pfx", "backups", name), anchor: anchor}
}

func (s *stored) check(t *testing.T) Report {
	t.Helper()
	rep, err := Check(context.Background(), s.store, name, s.anchor, archive.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func (s *stored) path(file string) string { return filepath.Join(s.dir, file) }

// rewriteTarball rewrites the stored tarball through edit.
func (s *stored) rewriteTarball(t *testing.T, edit func(e archivetest.Entry) []archivetest.Entry) {
	t.Helper()
	if err := archivetest.Rewrite(s.path(storage.BackupContentsFile(name)), edit); err != nil {
		t.Fatal(err)
	}
}

// tarballChanged is the finding on a rewritten tarball's own digest: its
// size or, the same size, its sha256.
func tarballChanged(s *stored) string {
	m, _, _ := readManifest(context.Background(), s.store, name)
	fi, _ := os.Stat(s.path(storage.BackupContentsFile(name)))
	if want := m.Files[storage.BackupContentsFile(name)].Size; fi != nil && fi.Size() != want {
		return fmt.Sprintf("bk.tar.gz: %d bytes where %d were written (truncated or replaced)", fi.Size(), want)
	}
	return "bk.tar.gz: its sha256 differs from the one written (changed)"
}

func findings(rep Report) []string {
	var out []string
	for _, f := range rep.Findings {
		out = append(out, f.String())
	}
	return out
}

func wantFindings(t *testing.T, rep Report, want ...string) {
	t.Helper()
	got := findings(rep)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("findings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if rep.Verified() {
		t.Fatal("a report with findings says verified")
	}
}

func TestAnUntouchedBackupVerifies(t *testing.T) {
	s := writeBackup(t, 20)
	rep := s.check(t)
	if !rep.Verified() || !rep.Anchored || rep.NoDigests {
		t.Fatalf("report %+v: %s", rep, rep.Summary())
	}
	// The tarball, the item digests, results, velero-backup.json; the
	// version entry and two copies of each item.
	if rep.Files != 4 || rep.Entries != 41 {
		t.Fatalf("checked %d files and %d entries, want 4 and 41", rep.Files, rep.Entries)
	}
	if rep.Tarball.SHA256 == "" {
		t.Fatal("the checked tarball digest is not reported")
	}
}

func TestAChangedItemIsNamed(t *testing.T) {
	s := writeBackup(t, 20)
	s.rewriteTarball(t, func(e archivetest.Entry) []archivetest.Entry {
		if strings.HasSuffix(e.Name, "/cm-007.json") {
			e.Data = bytes.Replace(e.Data, []byte(`"i":"7"`), []byte(`"i":"8"`), 1)
		}
		return []archivetest.Entry{e}
	})
	wantFindings(t, s.check(t),
		tarballChanged(s),
		"bk.tar.gz: resources/configmaps/namespaces/ns/cm-007.json: its content differs from what was written (changed)",
		"bk.tar.gz: resources/configmaps/v1-preferredversion/namespaces/ns/cm-007.json: its content differs from what was written (changed)")
}

func TestARemovedItemIsNamed(t *testing.T) {
	s := writeBackup(t, 20)
	s.rewriteTarball(t, archivetest.Drop("/cm-013.json"))
	wantFindings(t, s.check(t),
		tarballChanged(s),
		"bk.tar.gz: resources/configmaps/namespaces/ns/cm-013.json: missing (removed)",
		"bk.tar.gz: resources/configmaps/v1-preferredversion/namespaces/ns/cm-013.json: missing (removed)")
}

func TestAnAddedItemIsNamed(t *testing.T) {
	s := writeBackup(t, 5)
	s.rewriteTarball(t, func(e archivetest.Entry) []archivetest.Entry {
		out := []archivetest.Entry{e}
		if e.Name == "resources/configmaps/namespaces/ns/cm-002.json" {
			out = append(out, archivetest.Entry{Name: "resources/secrets/namespaces/ns/planted.json", Data: []byte(`{"kind":"Secret"}`)})
		}
		return out
	})
	wantFindings(t, s.check(t),
		tarballChanged(s),
		"bk.tar.gz: resources/secrets/namespaces/ns/planted.json: added (not in the item digests)")
}

func TestARecompressedTarballIsOnlyAChangedFile(t *testing.T) {
	s := writeBackup(t, 5)
	s.rewriteTarball(t, func(e archivetest.Entry) []archivetest.Entry { return []archivetest.Entry{e} })
	wantFindings(t, s.check(t), tarballChanged(s))
}

func TestAFlippedByteIsFound(t *testing.T) {
	s := writeBackup(t, 50)
	p := s.path(storage.BackupContentsFile(name))
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x01
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	got := findings(s.check(t))
	if len(got) < 2 || got[0] != "bk.tar.gz: its sha256 differs from the one written (changed)" ||
		!strings.HasPrefix(got[1], "bk.tar.gz: unreadable after ") || len(got) > 3 {
		t.Fatalf("findings %q", got)
	}
}

func TestATruncatedTarballIsFound(t *testing.T) {
	s := writeBackup(t, 50)
	p := s.path(storage.BackupContentsFile(name))
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
	got := findings(s.check(t))
	if len(got) != 3 || got[0] != fmt.Sprintf("bk.tar.gz: %d bytes where %d were written (truncated or replaced)", fi.Size()/2, fi.Size()) ||
		!strings.HasPrefix(got[1], "bk.tar.gz: unreadable after resources/configmaps/") ||
		!strings.HasSuffix(got[2], "entries the backup wrote after that point could not be read") {
		t.Fatalf("findings %q", got)
	}
}

func TestAReplacedMetadataFileIsFound(t *testing.T) {
	s := writeBackup(t, 3)
	if err := os.WriteFile(s.path(storage.BackupMetadataFile), []byte(`{"kind":"Backup","metadata":{"name":"bk"},"status":{"phase":"Completed"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	wantFindings(t, s.check(t), "velero-backup.json: 73 bytes where 42 were written (truncated or replaced)")
	// The same size, other content.
	if err := os.WriteFile(s.path(storage.BackupMetadataFile), []byte(`{"kind":"Backup","metadata":{"name":"xx"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	wantFindings(t, s.check(t), "velero-backup.json: its sha256 differs from the one written (changed)")
}

func TestMissingAndAddedFilesAreFound(t *testing.T) {
	s := writeBackup(t, 3)
	if err := os.Remove(s.path(storage.BackupResultsFile(name))); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.path("bk-extra.json"), []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	wantFindings(t, s.check(t), "bk-extra.json: not written by the backup (not in its digests file)", "bk-results.gz: missing")
}

func TestARewrittenDigestsFileIsCaughtByTheAnchor(t *testing.T) {
	s := writeBackup(t, 3)
	// Someone who can write the bucket changes velero-backup.json and
	// writes a digests file to match.
	meta := []byte(`{"kind":"Backup","metadata":{"name":"bk","labels":{"x":"y"}}}`)
	if err := os.WriteFile(s.path(storage.BackupMetadataFile), meta, 0o644); err != nil {
		t.Fatal(err)
	}
	rec := storage.NewDigestRecorder()
	if err := s.store.Recording(rec).PutBackupMetadata(context.Background(), name, meta); err != nil {
		t.Fatal(err)
	}
	if _, err := Amend(context.Background(), s.store, name, rec.Under(s.store.BackupDir(name))); err != nil {
		t.Fatal(err)
	}
	wantFindings(t, s.check(t), "bk-lifeboat-digests.json: its sha256 differs from the one the cluster recorded when the backup was written (annotation lifeboat.io/digests-sha256)")
	// Without the cluster's record the rewrite passes: what a synced
	// backup can and cannot prove.
	s.anchor = ""
	if rep := s.check(t); !rep.Verified() || rep.Anchored {
		t.Fatalf("unanchored check of a consistent rewrite: %s", rep.Summary())
	}
}

func TestABackupWithoutDigests(t *testing.T) {
	s := writeBackup(t, 3)
	if err := os.Remove(s.path(ManifestFile(name))); err != nil {
		t.Fatal(err)
	}
	wantFindings(t, s.check(t), "bk-lifeboat-digests.json: missing, though the cluster recorded its digest when the backup was written")
	s.anchor = ""
	rep := s.check(t)
	if !rep.NoDigests || rep.Verified() || !strings.Contains(rep.Summary(), "cannot be verified") {
		t.Fatalf("report %+v: %s", rep, rep.Summary())
	}
}

func TestAHostileDigestsFileIsAFinding(t *testing.T) {
	for _, body := range []string{`not json`, `{"version":2,"algorithm":"sha256","backup":"bk"}`, `{"version":1,"algorithm":"md5","backup":"bk"}`,
		`{"version":1,"algorithm":"sha256","backup":"other"}`, strings.Repeat(" ", maxManifestBytes+1),
		`{"version":1,"algorithm":"sha256","backup":"bk","files":{"../../other/velero-backup.json":{"sha256":"","size":1}}}`} {
		s := writeBackup(t, 1)
		s.anchor = ""
		if err := os.WriteFile(s.path(ManifestFile(name)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		rep := s.check(t)
		if len(rep.Findings) != 1 || rep.Findings[0].File != ManifestFile(name) {
			t.Fatalf("digests file %.40q: findings %v", body, rep.Findings)
		}
	}
}

func TestReadingTellsAChangeBetweenCheckAndRead(t *testing.T) {
	s := writeBackup(t, 3)
	rep := s.check(t)
	p := s.path(storage.BackupContentsFile(name))
	good, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	r := NewReading(bytes.NewReader(good[:10]), "bk.tar.gz", rep.Tarball)
	if _, err := io.ReadAll(r); err != nil {
		t.Fatal(err)
	}
	if err := r.Finish(); !errors.Is(err, ErrChanged) {
		t.Fatalf("Finish = %v", err)
	}
	r = NewReading(bytes.NewReader(good), "bk.tar.gz", rep.Tarball)
	if _, err := io.ReadFull(r, make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	if err := r.Finish(); err != nil {
		t.Fatalf("a partial read of the checked tarball: %v", err)
	}
}

// BenchmarkCheck: Check of a backup of 50,000 items beside its floor, one
// read of the tarball through archive.Reader (what any reader of the
// backup pays).
func BenchmarkCheck(b *testing.B) {
	s := writeBackup(b, 50000)
	b.Run("floor-read-tarball", func(b *testing.B) {
		for b.Loop() {
			f, err := os.Open(s.path(storage.BackupContentsFile(name)))
			if err != nil {
				b.Fatal(err)
			}
			ar, err := archive.NewReader(f, archive.Limits{})
			if err != nil {
				b.Fatal(err)
			}
			for {
				if _, err := ar.Next(); err == io.EOF {
					break
				} else if err != nil {
					b.Fatal(err)
				}
			}
			f.Close()
		}
	})
	b.Run("check", func(b *testing.B) {
		for b.Loop() {
			rep, err := Check(context.Background(), s.store, name, s.anchor, archive.Limits{})
			if err != nil || !rep.Verified() {
				b.Fatalf("%v %s", err, rep.Summary())
			}
		}
	})
}

// CheckAllButTarball leaves the tarball to its one reader: the small
// files are checked, the tarball's recorded digest handed over, and a
// changed tarball is caught by that reading.
func TestCheckAllButTarballDefersTheTarball(t *testing.T) {
	s := writeBackup(t, 20)
	full := s.check(t)
	rep, err := CheckAllButTarball(context.Background(), s.store, name, s.anchor)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Verified() || !rep.TarballDeferred || rep.Tarball != full.Tarball || rep.Files != full.Files {
		t.Fatalf("deferred check %+v, full check %+v", rep, full)
	}
	if !strings.Contains(rep.Summary(), "the tarball's checked as it is read") {
		t.Errorf("summary %q", rep.Summary())
	}
	p := s.path(storage.BackupContentsFile(name))
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	r := NewReading(bytes.NewReader(data), "bk.tar.gz", rep.Tarball)
	if _, err := io.Copy(io.Discard, r); err != nil {
		t.Fatal(err)
	}
	if err := r.Finish(); err != nil {
		t.Errorf("the untouched tarball: %v", err)
	}
	data[len(data)/3] ^= 0x01
	r = NewReading(bytes.NewReader(data), "bk.tar.gz", rep.Tarball)
	if _, err := io.Copy(io.Discard, r); err != nil {
		t.Fatal(err)
	}
	if err := r.Finish(); !errors.Is(err, ErrChanged) {
		t.Errorf("a flipped byte: Finish = %v, want ErrChanged", err)
	}
	// A missing small file is still found without the tarball being read.
	if err := os.Remove(s.path(storage.BackupMetadataFile)); err != nil {
		t.Fatal(err)
	}
	rep, err = CheckAllButTarball(context.Background(), s.store, name, s.anchor)
	if err != nil || rep.Verified() {
		t.Errorf("velero-backup.json removed: %+v %v", rep, err)
	}
}

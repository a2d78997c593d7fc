package integrity

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"slices"
	"strings"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/internal/archive"
	"github.com/lifeboat-io/lifeboat/internal/storage"
)

// Finding is one thing a check found that differs from what the backup
// wrote.
type Finding struct {
	// File is the file of the backup's directory.
	File string `json:"file"`
	// Entry is the tarball entry, for a finding inside the tarball.
	Entry   string `json:"entry,omitempty"`
	Problem string `json:"problem"`
}

func (f Finding) String() string {
	if f.Entry != "" {
		return fmt.Sprintf("%s: %s: %s", f.File, f.Entry, f.Problem)
	}
	return f.File + ": " + f.Problem
}

// maxFindings bounds the findings a report lists; the rest are counted.
const maxFindings = 50

// lookahead is how far ahead in the item digests a check looks for a
// tarball entry that is not the next one expected before it calls the
// entry added: far enough for entries removed here and there, small
// enough to keep memory flat.
const lookahead = 256

// Report is what a check found.
type Report struct {
	Backup string `json:"backup"`
	// NoDigests is true for a backup without a digests file (written by
	// Velero or by a Lifeboat before digests): nothing could be checked.
	NoDigests bool `json:"noDigests,omitempty"`
	// Anchored is true when the digests file itself matched the digest
	// the cluster recorded for it when the backup was written.
	Anchored bool `json:"anchored,omitempty"`
	// Files and Entries count what was checked.
	Files   int   `json:"files"`
	Entries int64 `json:"entries"`
	// Findings are the first differences found; MoreFindings counts the
	// others.
	Findings     []Finding `json:"findings,omitempty"`
	MoreFindings int       `json:"moreFindings,omitempty"`
	// Tarball is the digest the tarball was checked against, for a
	// reader of it after the check to compare what it read with.
	Tarball storage.FileDigest `json:"-"`
	// TarballDeferred: the tarball was not read (CheckAllButTarball); its
	// reader checks it.
	TarballDeferred bool `json:"-"`
}

// Verified says every file and entry matched its digest.
func (r Report) Verified() bool { return !r.NoDigests && len(r.Findings) == 0 }

// Summary is one line for logs, errors and conditions.
func (r Report) Summary() string {
	switch {
	case r.NoDigests:
		return fmt.Sprintf("backup %q has no digests file (%s): written by Velero or by an older Lifeboat, it cannot be verified", r.Backup, ManifestFile(r.Backup))
	case r.Verified() && r.TarballDeferred:
		s := fmt.Sprintf("%d files match their digests, the tarball's checked as it is read", r.Files-1)
		if !r.Anchored {
			s += " (the digests file has no record in this cluster to be checked against)"
		}
		return s
	case r.Verified():
		s := fmt.Sprintf("%d files and %d tarball entries match their digests", r.Files, r.Entries)
		if !r.Anchored {
			s += " (the digests file has no record in this cluster to be checked against)"
		}
		return s
	}
	shown := make([]string, 0, min(len(r.Findings), 5))
	for _, f := range r.Findings[:min(len(r.Findings), 5)] {
		shown = append(shown, f.String())
	}
	n := len(r.Findings) + r.MoreFindings
	more := ""
	if n > len(shown) {
		more = fmt.Sprintf("; and %d more", n-len(shown))
	}
	return fmt.Sprintf("backup %q differs from what was written (%d findings): %s%s", r.Backup, n, strings.Join(shown, "; "), more)
}

func (r *Report) add(f Finding) {
	if len(r.Findings) < maxFindings {
		r.Findings = append(r.Findings, f)
		return
	}
	r.MoreFindings++
}

// Check reads every file of backup name and compares it, and each entry of
// its tarball, with the digests the backup recorded. anchor is the digests
// file's sha256 as the cluster recorded it (v1.DigestsAnnotation), "" when the
// cluster has none. Differences are findings in the report; the error is
// for a store that could not be read.
func Check(ctx context.Context, store *storage.BackupStore, name, anchor string, limits archive.Limits) (Report, error) {
	return check(ctx, store, name, anchor, limits, true)
}

// CheckAllButTarball is Check without the one large read: the tarball is
// only looked for, and its recorded digest is in the report (Tarball) for
// the caller's own reading of it (NewReading), whose Finish fails with
// ErrChanged when it differs; Check then names what differs. A restore
// reads its tarball once this way, not twice.
func CheckAllButTarball(ctx context.Context, store *storage.BackupStore, name, anchor string) (Report, error) {
	return check(ctx, store, name, anchor, archive.Limits{}, false)
}

func check(ctx context.Context, store *storage.BackupStore, name, anchor string, limits archive.Limits, readTarball bool) (Report, error) {
	rep := Report{Backup: name}
	m, raw, err := readManifest(ctx, store, name)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		if anchor != "" {
			rep.add(Finding{File: ManifestFile(name), Problem: "missing, though the cluster recorded its digest when the backup was written"})
			return rep, nil
		}
		rep.NoDigests = true
		return rep, nil
	case raw == nil && err != nil:
		return rep, err
	case err != nil:
		rep.add(Finding{File: ManifestFile(name), Problem: err.Error()})
		return rep, nil
	}
	if anchor != "" {
		sum := sha256.Sum256(raw)
		if hex.EncodeToString(sum[:]) != anchor {
			rep.add(Finding{File: ManifestFile(name), Problem: fmt.Sprintf("its sha256 differs from the one the cluster recorded when the backup was written (annotation %s)", v1.DigestsAnnotation)})
			return rep, nil
		}
		rep.Anchored = true
	}

	present, err := store.ListBackupFiles(ctx, name)
	if err != nil {
		return rep, err
	}
	for _, f := range present {
		if _, listed := m.Files[f]; !listed && f != ManifestFile(name) {
			rep.add(Finding{File: f, Problem: "not written by the backup (not in its digests file)"})
		}
	}
	names := make([]string, 0, len(m.Files))
	for f := range m.Files {
		names = append(names, f)
	}
	// The item digests first: the tarball's entries are checked against
	// them only once they are known to be as written.
	slices.SortFunc(names, func(a, b string) int {
		return strings.Compare(checkOrder(name, a), checkOrder(name, b))
	})
	itemsOK := false
	for _, f := range names {
		want := m.Files[f]
		if !slices.Contains(present, f) {
			rep.add(Finding{File: f, Problem: "missing"})
			continue
		}
		rep.Files++
		if f == storage.BackupContentsFile(name) && !readTarball {
			rep.Tarball, rep.TarballDeferred = want, true
			continue
		}
		var got storage.FileDigest
		// The entries' findings follow the file's own.
		var inside Report
		if f == storage.BackupContentsFile(name) {
			got, err = checkTarball(ctx, store, name, itemsOK, m.Entries, limits, &inside)
			rep.Entries = inside.Entries
		} else {
			got, err = digestFile(ctx, store, name, f)
		}
		if err != nil {
			return rep, err
		}
		ok := compareFile(f, want, got, &rep)
		for _, fd := range inside.Findings {
			rep.add(fd)
		}
		rep.MoreFindings += inside.MoreFindings
		switch f {
		case ItemDigestsFile(name):
			itemsOK = ok
		case storage.BackupContentsFile(name):
			rep.Tarball = want
		}
	}
	return rep, nil
}

// checkOrder sorts the item digests file first and the tarball second.
func checkOrder(name, f string) string {
	switch f {
	case ItemDigestsFile(name):
		return "0"
	case storage.BackupContentsFile(name):
		return "1"
	}
	return "2" + f
}

func compareFile(f string, want, got storage.FileDigest, rep *Report) bool {
	switch {
	case got.Size != want.Size:
		rep.add(Finding{File: f, Problem: fmt.Sprintf("%d bytes where %d were written (truncated or replaced)", got.Size, want.Size)})
	case got.SHA256 != want.SHA256:
		rep.add(Finding{File: f, Problem: "its sha256 differs from the one written (changed)"})
	default:
		return true
	}
	return false
}

// hashing hashes and counts what is read through it.
type hashing struct {
	r io.Reader
	h hash.Hash
	n int64
}

func (h *hashing) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	h.h.Write(p[:n])
	h.n += int64(n)
	return n, err
}

func (h *hashing) digest() storage.FileDigest {
	return storage.FileDigest{SHA256: hex.EncodeToString(h.h.Sum(nil)), Size: h.n}
}

func digestFile(ctx context.Context, store *storage.BackupStore, name, f string) (storage.FileDigest, error) {
	rc, err := store.OpenBackupFile(ctx, name, f)
	if err != nil {
		return storage.FileDigest{}, err
	}
	defer rc.Close()
	h := &hashing{r: rc, h: sha256.New()}
	if _, err := io.Copy(io.Discard, h); err != nil {
		return storage.FileDigest{}, fmt.Errorf("reading %s of backup %q: %w", f, name, err)
	}
	return h.digest(), nil
}

// checkTarball hashes the whole tarball and, when the item digests are
// known good (useItems), compares each entry with them in order.
func checkTarball(ctx context.Context, store *storage.BackupStore, name string, useItems bool, wantEntries int64, limits archive.Limits, rep *Report) (storage.FileDigest, error) {
	file := storage.BackupContentsFile(name)
	rc, err := store.OpenBackupFile(ctx, name, file)
	if err != nil {
		return storage.FileDigest{}, err
	}
	defer rc.Close()
	h := &hashing{r: rc, h: sha256.New()}
	var expected *expectedEntries
	if useItems {
		ic, err := store.OpenBackupFile(ctx, name, ItemDigestsFile(name))
		if err != nil {
			return storage.FileDigest{}, err
		}
		defer ic.Close()
		lines, err := newDigestLines(ic)
		if err != nil {
			rep.add(Finding{File: ItemDigestsFile(name), Problem: err.Error()})
		} else {
			expected = &expectedEntries{lines: lines}
		}
	}
	unreadable := compareEntries(h, limits, file, expected, rep)
	// The whole file counts, whatever the archive reader left unread.
	if _, err := io.Copy(io.Discard, h); err != nil {
		return storage.FileDigest{}, fmt.Errorf("reading %s of backup %q: %w", file, name, err)
	}
	if expected != nil {
		if unreadable {
			// Whatever came after the break is lost to reading, not
			// removed one by one: one finding says how much.
			n := 0
			for _, ok := expected.pop(); ok; _, ok = expected.pop() {
				n++
			}
			if n > 0 {
				rep.add(Finding{File: file, Problem: fmt.Sprintf("%d entries the backup wrote after that point could not be read", n)})
			}
		}
		for e, ok := expected.pop(); ok; e, ok = expected.pop() {
			rep.add(Finding{File: file, Entry: e.Path, Problem: "missing (removed)"})
		}
		if err := expected.lines.err; err != nil {
			rep.add(Finding{File: ItemDigestsFile(name), Problem: err.Error()})
		} else if expected.read != wantEntries {
			rep.add(Finding{File: ItemDigestsFile(name), Problem: fmt.Sprintf("lists %d entries, the digests file says %d", expected.read, wantEntries)})
		}
	}
	return h.digest(), nil
}

// compareEntries reads the tarball's entries and compares them with
// expected (nil: only read them, so the whole file is hashed). It says
// whether reading broke off before the archive's end.
func compareEntries(r io.Reader, limits archive.Limits, file string, expected *expectedEntries, rep *Report) (unreadable bool) {
	ar, err := archive.NewReader(r, limits)
	if err != nil {
		rep.add(Finding{File: file, Problem: fmt.Sprintf("not a readable archive: %v", err)})
		return true
	}
	last := "its start"
	for {
		e, err := ar.Next()
		if errors.Is(err, io.EOF) {
			return false
		}
		if err != nil {
			rep.add(Finding{File: file, Problem: fmt.Sprintf("unreadable after %s: %v", last, err)})
			return true
		}
		last = e.Path
		rep.Entries++
		if expected == nil {
			continue
		}
		sum := sha256.Sum256(e.Data)
		var hexSum [2 * sha256.Size]byte
		hex.Encode(hexSum[:], sum[:])
		want, missing, found := expected.find(e.Path)
		for _, m := range missing {
			rep.add(Finding{File: file, Entry: m.Path, Problem: "missing (removed)"})
		}
		switch {
		case !found:
			rep.add(Finding{File: file, Entry: e.Path, Problem: "added (not in the item digests)"})
		case want.Size != int64(len(e.Data)) || want.SHA256 != string(hexSum[:]):
			rep.add(Finding{File: file, Entry: e.Path, Problem: "its content differs from what was written (changed)"})
		}
	}
}

// expectedEntries is the item digests file with a bounded look ahead.
type expectedEntries struct {
	lines   *digestLines
	pending []entryDigest
	read    int64
	done    bool
}

func (x *expectedEntries) fill(n int) {
	for !x.done && len(x.pending) < n {
		e, ok := x.lines.next()
		if !ok {
			x.done = true
			return
		}
		x.read++
		x.pending = append(x.pending, e)
	}
}

func (x *expectedEntries) pop() (entryDigest, bool) {
	x.fill(1)
	if len(x.pending) == 0 {
		return entryDigest{}, false
	}
	e := x.pending[0]
	x.pending = x.pending[1:]
	return e, true
}

// find looks for path among the next expected entries: found, it returns
// its digest and the entries before it, which the tarball no longer has.
// Not found, nothing is consumed.
func (x *expectedEntries) find(path string) (want entryDigest, missing []entryDigest, found bool) {
	x.fill(1)
	if len(x.pending) > 0 && x.pending[0].Path == path {
		want = x.pending[0]
		x.pending = x.pending[1:]
		return want, nil, true
	}
	x.fill(lookahead)
	for i, e := range x.pending {
		if e.Path == path {
			missing = slices.Clone(x.pending[:i])
			x.pending = x.pending[i+1:]
			return e, missing, true
		}
	}
	return entryDigest{}, nil, false
}

// Reading hashes a file as a caller reads it after Check, so that it can
// tell it read what was checked: a file replaced between the two reads
// would otherwise slip past the check.
type Reading struct {
	h    hashing
	file string
	want storage.FileDigest
}

// NewReading reads r, file's content, expected to match want (an empty
// want checks nothing).
func NewReading(r io.Reader, file string, want storage.FileDigest) *Reading {
	return &Reading{h: hashing{r: r, h: sha256.New()}, file: file, want: want}
}

func (x *Reading) Read(p []byte) (int, error) { return x.h.Read(p) }

// Finish reads what the caller left unread and compares the whole.
func (x *Reading) Finish() error {
	if x.want.SHA256 == "" {
		return nil
	}
	if _, err := io.Copy(io.Discard, &x.h); err != nil {
		return fmt.Errorf("reading the rest of %s: %w", x.file, err)
	}
	if got := x.h.digest(); got != x.want {
		return fmt.Errorf("%s: %w", x.file, ErrChanged)
	}
	return nil
}

// ErrChanged says a file read does not match the digest it was expected
// to have.
var ErrChanged = errors.New("it does not match the digest it was written with")

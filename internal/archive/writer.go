package archive

import (
	"archive/tar"
	"crypto/sha256"
	"fmt"
	"io"
	"time"

	"github.com/klauspost/compress/gzip"
)

// Writer streams a gzip-compressed tarball in Velero's layout. It is not
// safe for concurrent use: callers that collect items concurrently funnel
// them to one goroutine, which also keeps the archive order deterministic.
type Writer struct {
	gz  *gzip.Writer
	tw  *tar.Writer
	hdr tar.Header
	// unpacked counts the tar stream going into gzip and packed the gzip
	// stream coming out: what a Reader counts, so that the Writer can
	// refuse to write what a Reader with the same Limits would refuse.
	unpacked, packed countingWriter
	limits           Limits
	// paths holds both paths of the item being written; reusing it keeps
	// WriteItem to one allocation for the two header names.
	paths []byte
	// err is sticky: after a failed write the tar stream is corrupt, and
	// carrying on would only produce an archive that fails later, elsewhere.
	err error
	// entries, when set, is told the digest of every entry written.
	entries EntryRecorder
}

// EntryRecorder is told each entry's sha256 and size as the entry is
// written, in archive order.
type EntryRecorder interface {
	RecordEntry(path string, sum [sha256.Size]byte, size int64) error
}

// RecordEntries has every entry written from now on reported to rec.
func (w *Writer) RecordEntries(rec EntryRecorder) { w.entries = rec }

// NewWriter returns a Writer that writes to w. Every entry gets modTime,
// truncated to the second as the tar header stores it, so that the same
// items and modTime give byte-identical archives. A write that would take
// the archive past limits fails (ErrTooLarge, naming the item and the
// server flag), and so does every write after it: the backup would be one
// that no restore or deletion with the same limits could read.
func NewWriter(w io.Writer, modTime time.Time, limits Limits) *Writer {
	aw := &Writer{
		limits: limits.WithDefaults(),
		hdr: tar.Header{
			Typeflag: tar.TypeReg,
			Mode:     0o755,
			ModTime:  modTime.Truncate(time.Second),
			Format:   tar.FormatUnknown,
		},
	}
	aw.packed.w = w
	gz, err := gzip.NewWriterLevel(&aw.packed, gzip.DefaultCompression)
	if err != nil {
		// Only an invalid level fails, and the level is a constant.
		panic(fmt.Sprintf("archive: gzip writer: %v", err))
	}
	aw.gz = gz
	aw.unpacked.w = gz
	aw.tw = tar.NewWriter(&aw.unpacked)
	return aw
}

// WriteVersion writes metadata/version ("1.1.0" and a newline, as Velero
// writes it). Velero writes it as the first entry; callers should too.
func (w *Writer) WriteVersion() error {
	data := []byte(versionFileContents)
	if err := w.writeEntry(versionFilePath, data); err != nil {
		return err
	}
	return w.record(data, versionFilePath)
}

// WriteItem stores data, the item's JSON, twice and back to back: once
// unversioned and once under <version>-preferredversion/, as Velero does for
// an item read at its preferred version; restores may read either copy. The
// second copy costs almost nothing compressed because it falls inside the
// compressor's window right after the first.
func (w *Writer) WriteItem(ref ItemRef, data []byte) error {
	if w.err != nil {
		return w.err
	}
	if err := ref.validate(); err != nil {
		return fmt.Errorf("archive: item %s %s/%s: %w", ref.GroupResource, ref.Namespace, ref.Name, err)
	}
	buf := appendItemPath(w.paths[:0], ref, "")
	split := len(buf)
	buf = appendItemPath(buf, ref, ref.Version+preferredSuffix)
	w.paths = buf
	both := string(buf)
	if err := w.writeEntry(both[:split], data); err != nil {
		return err
	}
	if err := w.writeEntry(both[split:], data); err != nil {
		return err
	}
	return w.record(data, both[:split], both[split:])
}

// record reports data's digest under each of paths (an item's two copies
// share one hash).
func (w *Writer) record(data []byte, paths ...string) error {
	if w.entries == nil {
		return nil
	}
	sum := sha256.Sum256(data)
	for _, p := range paths {
		if err := w.entries.RecordEntry(p, sum, int64(len(data))); err != nil {
			w.err = fmt.Errorf("archive: recording the digest of %q: %w", p, err)
			return w.err
		}
	}
	return nil
}

func (w *Writer) writeEntry(name string, data []byte) error {
	if w.err != nil {
		return w.err
	}
	if int64(len(data)) > w.limits.MaxEntryBytes {
		w.err = fmt.Errorf("archive: item %q: %w: %d bytes, over %s", name, ErrTooLarge, len(data), w.limits.entryLimit())
		return w.err
	}
	w.hdr.Name = name
	w.hdr.Size = int64(len(data))
	if err := w.tw.WriteHeader(&w.hdr); err != nil {
		w.err = fmt.Errorf("archive: write header of %q: %w", name, err)
		return w.err
	}
	// In pieces, so that the expansion ratio is checked at about the
	// points a Reader checks it, not only at the ends of entries.
	for rest := data; len(rest) > 0; {
		n := min(len(rest), ratioCheckBytes)
		if _, err := w.tw.Write(rest[:n]); err != nil {
			w.err = fmt.Errorf("archive: write %q: %w", name, err)
			return w.err
		}
		rest = rest[n:]
		if w.unpacked.n > RatioGrace && w.unpacked.n > w.limits.MaxRatio*w.packed.n {
			w.err = fmt.Errorf("archive: item %q: %w: with it the archive unpacks to %s; a restore would refuse it as a likely decompression bomb",
				name, ErrTooLarge, w.limits.ratioLimit())
			return w.err
		}
	}
	// tar.Writer pads the entry to a block when the next header comes,
	// and Close adds two zero blocks: room is kept for both.
	if padding := -int64(len(data)) & (blockBytes - 1); w.unpacked.n+padding+trailerBytes > w.limits.MaxTotalBytes {
		w.err = fmt.Errorf("archive: item %q: %w: with it the archive would pass %s", name, ErrTooLarge, w.limits.totalLimit())
		return w.err
	}
	return nil
}

const (
	// ratioCheckBytes is how much data is written between checks of the
	// expansion ratio; small against RatioGrace, large against an item.
	ratioCheckBytes = 64 << 10
	blockBytes      = 512
	// trailerBytes is the end-of-archive marker tar.Writer.Close writes.
	trailerBytes = 2 * blockBytes
)

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// Close finishes the tar stream and the gzip member. It does not close the
// underlying writer.
func (w *Writer) Close() error {
	if w.err != nil {
		return w.err
	}
	if err := w.tw.Close(); err != nil {
		w.err = fmt.Errorf("archive: close tar stream: %w", err)
		return w.err
	}
	if err := w.gz.Close(); err != nil {
		w.err = fmt.Errorf("archive: close gzip stream: %w", err)
		return w.err
	}
	w.err = errClosed
	return nil
}

var errClosed = fmt.Errorf("archive: writer is closed")

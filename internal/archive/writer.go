package archive

import (
	"archive/tar"
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
	// paths holds both paths of the item being written; reusing it keeps
	// WriteItem to one allocation for the two header names.
	paths []byte
	// err is sticky: after a failed write the tar stream is corrupt, and
	// carrying on would only produce an archive that fails later, elsewhere.
	err error
}

// NewWriter returns a Writer that writes to w. Every entry gets modTime,
// truncated to the second as the tar header stores it, so that the same
// items and modTime give byte-identical archives.
func NewWriter(w io.Writer, modTime time.Time) *Writer {
	gz, err := gzip.NewWriterLevel(w, gzip.DefaultCompression)
	if err != nil {
		// Only an invalid level fails, and the level is a constant.
		panic(fmt.Sprintf("archive: gzip writer: %v", err))
	}
	return &Writer{
		gz: gz,
		tw: tar.NewWriter(gz),
		hdr: tar.Header{
			Typeflag: tar.TypeReg,
			Mode:     0o755,
			ModTime:  modTime.Truncate(time.Second),
			Format:   tar.FormatUnknown,
		},
	}
}

// WriteVersion writes metadata/version ("1.1.0" and a newline, as Velero
// writes it). Velero writes it as the first entry; callers should too.
func (w *Writer) WriteVersion() error {
	return w.writeEntry(versionFilePath, []byte(versionFileContents))
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
	return w.writeEntry(both[split:], data)
}

func (w *Writer) writeEntry(name string, data []byte) error {
	if w.err != nil {
		return w.err
	}
	w.hdr.Name = name
	w.hdr.Size = int64(len(data))
	if err := w.tw.WriteHeader(&w.hdr); err != nil {
		w.err = fmt.Errorf("archive: write header of %q: %w", name, err)
		return w.err
	}
	if _, err := w.tw.Write(data); err != nil {
		w.err = fmt.Errorf("archive: write %q: %w", name, err)
		return w.err
	}
	return nil
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

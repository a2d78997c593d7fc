package archive

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/klauspost/compress/gzip"
)

// Entry is one file of the archive.
type Entry struct {
	// Path is the entry's name in the archive, e.g. "metadata/version".
	Path string
	// Item is the parsed item reference, or nil for anything that is not an
	// item (metadata files, unknown files under resources/).
	Item *ItemRef
	// PreferredVersionCopy is true for the copy under
	// <version>-preferredversion/.
	PreferredVersionCopy bool
	// Data is the entry's content; the caller owns it.
	Data []byte
}

// Reader reads a tarball written by Lifeboat or Velero without trusting it.
type Reader struct {
	gz     *gzip.Reader
	tr     *tar.Reader
	count  *countingReader
	limits Limits
	// data counts the entry bytes handed out, as read from archive/tar
	// rather than as headers claim them. With sparse entries refused it
	// stays below the stream count; it is bounded on its own so that no
	// future expansion inside archive/tar can slip past MaxTotalBytes.
	data int64
	err  error
}

// NewReader reads the gzip header from r and returns a Reader for the
// entries that follow.
func NewReader(r io.Reader, limits Limits) (*Reader, error) {
	compressed := &countingReader{r: r, limit: math.MaxInt64}
	gz, err := gzip.NewReader(compressed)
	if err != nil {
		return nil, fmt.Errorf("archive: open gzip stream: %w", err)
	}
	limits = limits.WithDefaults()
	count := &countingReader{r: gz, limits: limits, limit: limits.MaxTotalBytes, ratio: limits.MaxRatio, compressed: compressed}
	return &Reader{gz: gz, tr: tar.NewReader(count), count: count, limits: limits}, nil
}

// Next returns the next regular file, skipping plain directory entries
// (which other tools write) and pax global headers. It returns io.EOF after
// the last entry. Any error is final: the rest of the archive is not read.
func (r *Reader) Next() (Entry, error) {
	if r.err != nil {
		return Entry{}, r.err
	}
	e, err := r.next()
	if err != nil {
		r.err = err
	}
	return e, err
}

func (r *Reader) next() (Entry, error) {
	for {
		hdr, err := r.tr.Next()
		if err == io.EOF {
			// Reading on to the end of the gzip stream makes it check its
			// CRC and length, which the tar end marker alone does not.
			if _, err := io.Copy(io.Discard, r.count); err != nil {
				return Entry{}, fmt.Errorf("archive: read past the last entry: %w", err)
			}
			return Entry{}, io.EOF
		}
		if err != nil {
			return Entry{}, fmt.Errorf("archive: read entry header after %d bytes: %w", r.count.n, err)
		}
		name := hdr.Name
		if sparse := sparseFormat(hdr); sparse != "" {
			// archive/tar fills a sparse file's holes with zeros as it
			// reads, so a few blocks can claim gigabytes that the stream
			// does not hold. Neither Lifeboat nor Velero writes them.
			return Entry{}, fmt.Errorf("archive: entry %q: %w sparse file (%s); backup archives hold items as plain files", name, ErrUnsupportedType, sparse)
		}
		switch hdr.Typeflag {
		case tar.TypeXGlobalHeader:
			continue
		case tar.TypeDir:
			if _, err := cleanPath(strings.TrimSuffix(name, "/"), true); err != nil {
				return Entry{}, fmt.Errorf("archive: entry %q: %w", name, err)
			}
			continue
		case tar.TypeReg:
		default:
			return Entry{}, fmt.Errorf("archive: entry %q: %w %s", name, ErrUnsupportedType, typeName(hdr.Typeflag))
		}
		p, err := cleanPath(name, false)
		if err != nil {
			return Entry{}, fmt.Errorf("archive: entry %q: %w", name, err)
		}
		if hdr.Size > r.limits.MaxEntryBytes {
			return Entry{}, fmt.Errorf("archive: entry %q: %w: claims %d bytes, over %s", name, ErrTooLarge, hdr.Size, r.limits.entryLimit())
		}
		// Checked against the header before any data is inflated, so a
		// bomb fails at its first oversized entry.
		if hdr.Size > r.count.limit-r.count.n || hdr.Size > r.limits.MaxTotalBytes-r.data {
			return Entry{}, fmt.Errorf("archive: entry %q: %w: its %d bytes would pass %s", name, ErrTooLarge, hdr.Size, r.limits.totalLimit())
		}
		data := make([]byte, hdr.Size)
		n, err := io.ReadFull(r.tr, data)
		r.data += int64(n)
		if err != nil {
			return Entry{}, fmt.Errorf("archive: read entry %q: %w", name, err)
		}
		e := Entry{Path: p, Data: data}
		if ref, preferred, ok := parseItemPath(p); ok {
			e.Item = &ref
			e.PreferredVersionCopy = preferred
		}
		return e, nil
	}
}

// cleanPath accepts only relative, canonical paths inside resources/ or
// metadata/ (a leading "./", as tar tools write, is dropped). Nothing is
// extracted to disk here, but callers may use the paths, so they are held
// to the same standard as if they were.
func cleanPath(name string, dir bool) (string, error) {
	p := strings.TrimPrefix(name, "./")
	if p == "" || p == "." {
		if dir {
			return "", nil
		}
		return "", fmt.Errorf("%w: empty path", ErrUnsafePath)
	}
	if strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("%w: absolute path", ErrUnsafePath)
	}
	if strings.ContainsAny(p, "\\\x00") {
		return "", fmt.Errorf("%w: backslash or NUL in path", ErrUnsafePath)
	}
	for seg := range strings.SplitSeq(p, "/") {
		switch seg {
		case "..":
			return "", fmt.Errorf("%w: %q segment", ErrUnsafePath, "..")
		case "", ".":
			return "", fmt.Errorf("%w: path is not canonical", ErrUnsafePath)
		}
	}
	top, _, nested := strings.Cut(p, "/")
	if top != resourcesDir && top != metadataDir {
		return "", fmt.Errorf("%w: outside %s/ and %s/", ErrUnsafePath, resourcesDir, metadataDir)
	}
	if !nested && !dir {
		return "", fmt.Errorf("%w: file where the %s/ directory belongs", ErrUnsafePath, top)
	}
	return p, nil
}

func typeName(t byte) string {
	switch t {
	case tar.TypeSymlink:
		return "symlink"
	case tar.TypeLink:
		return "hard link"
	case tar.TypeChar:
		return "character device"
	case tar.TypeBlock:
		return "block device"
	case tar.TypeFifo:
		return "fifo"
	}
	return fmt.Sprintf("type %q", t)
}

// sparseFormat names the GNU sparse format hdr uses, or returns "" for a
// plain file. archive/tar keeps the old format's typeflag and the PAX
// formats' GNU.sparse.* records, whichever version wrote them.
func sparseFormat(hdr *tar.Header) string {
	if hdr.Typeflag == tar.TypeGNUSparse {
		return "old GNU format"
	}
	for k := range hdr.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			if major, minor := hdr.PAXRecords["GNU.sparse.major"], hdr.PAXRecords["GNU.sparse.minor"]; major != "" {
				return "GNU PAX format " + major + "." + minor
			}
			return "GNU PAX format 0.x"
		}
	}
	return ""
}

// countingReader counts the uncompressed tar stream and stops it at limit,
// which bounds header blocks and padding as well as file data.
type countingReader struct {
	r      io.Reader
	n      int64
	limit  int64
	limits Limits
	// ratio and compressed, when set, bound n against the compressed bytes.
	ratio      int64
	compressed *countingReader
}

var errStreamTooLarge = errors.New("the archive goes past")

func (c *countingReader) Read(p []byte) (int, error) {
	if c.n >= c.limit {
		// A stream may end exactly at the limit, as one the Writer wrote
		// up to it does: only a byte past the limit is too much.
		var probe [1]byte
		if _, err := io.ReadFull(c.r, probe[:]); err != nil {
			return 0, err
		}
		return 0, fmt.Errorf("%w: %w %s", ErrTooLarge, errStreamTooLarge, c.limits.totalLimit())
	}
	if rem := c.limit - c.n; int64(len(p)) > rem {
		p = p[:rem]
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.ratio > 0 && c.n > RatioGrace && c.n > c.ratio*c.compressed.n {
		return n, fmt.Errorf("%w: %d MiB unpacked from %d KiB is %s; refusing it as a likely decompression bomb",
			ErrTooLarge, c.n>>20, c.compressed.n>>10, c.limits.ratioLimit())
	}
	return n, err
}

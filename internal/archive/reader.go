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

// Defaults for Limits fields left at zero.
const (
	DefaultMaxEntryBytes int64 = 64 << 20
	DefaultMaxTotalBytes int64 = 50 << 30
)

// Limits bound what a Reader accepts, so that a hostile or corrupt archive
// (a gzip bomb, a header claiming a huge file) fails fast instead of
// exhausting memory or disk. Zero means the default.
type Limits struct {
	// MaxEntryBytes bounds one entry's size; an entry is read into memory.
	MaxEntryBytes int64
	// MaxTotalBytes bounds the whole uncompressed tar stream, headers and
	// padding included.
	MaxTotalBytes int64
	// MaxRatio, when positive, bounds how many times larger the unpacked
	// stream may grow than the compressed bytes read so far, once it has
	// passed RatioGrace. Item JSON compresses perhaps 5-40 times; a
	// decompression bomb a thousand. This catches a bomb after a few hundred
	// MiB instead of at MaxTotalBytes.
	MaxRatio int64
}

// RatioGrace is the unpacked size below which MaxRatio is not checked:
// small archives of repetitive items may compress very well.
const RatioGrace int64 = 256 << 20

func (l Limits) withDefaults() Limits {
	if l.MaxEntryBytes <= 0 {
		l.MaxEntryBytes = DefaultMaxEntryBytes
	}
	if l.MaxTotalBytes <= 0 {
		l.MaxTotalBytes = DefaultMaxTotalBytes
	}
	return l
}

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
	err    error
}

// NewReader reads the gzip header from r and returns a Reader for the
// entries that follow.
func NewReader(r io.Reader, limits Limits) (*Reader, error) {
	compressed := &countingReader{r: r, limit: math.MaxInt64}
	gz, err := gzip.NewReader(compressed)
	if err != nil {
		return nil, fmt.Errorf("archive: open gzip stream: %w", err)
	}
	limits = limits.withDefaults()
	count := &countingReader{r: gz, limit: limits.MaxTotalBytes, ratio: limits.MaxRatio, compressed: compressed}
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
			return Entry{}, fmt.Errorf("archive: entry %q: %w: claims %d bytes, limit is %d", name, ErrTooLarge, hdr.Size, r.limits.MaxEntryBytes)
		}
		// Checked against the header before any data is inflated, so a
		// bomb fails at its first oversized entry.
		if hdr.Size > r.count.limit-r.count.n {
			return Entry{}, fmt.Errorf("archive: entry %q: %w: %d bytes would pass the archive limit of %d uncompressed bytes", name, ErrTooLarge, hdr.Size, r.limits.MaxTotalBytes)
		}
		data := make([]byte, hdr.Size)
		if _, err := io.ReadFull(r.tr, data); err != nil {
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
	case tar.TypeGNUSparse:
		return "sparse file"
	}
	return fmt.Sprintf("type %q", t)
}

// countingReader counts the uncompressed tar stream and stops it at limit,
// which bounds header blocks and padding as well as file data.
type countingReader struct {
	r     io.Reader
	n     int64
	limit int64
	// ratio and compressed, when set, bound n against the compressed bytes.
	ratio      int64
	compressed *countingReader
}

var errStreamTooLarge = errors.New("uncompressed archive passes its size limit")

func (c *countingReader) Read(p []byte) (int, error) {
	if c.n >= c.limit {
		return 0, fmt.Errorf("%w: %w of %d bytes", ErrTooLarge, errStreamTooLarge, c.limit)
	}
	if rem := c.limit - c.n; int64(len(p)) > rem {
		p = p[:rem]
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.ratio > 0 && c.n > RatioGrace && c.n > c.ratio*c.compressed.n {
		return n, fmt.Errorf("%w: %d MiB unpacked from %d KiB is more than %d times its compressed size; refusing it as a likely decompression bomb",
			ErrTooLarge, c.n>>20, c.compressed.n>>10, c.ratio)
	}
	return n, err
}

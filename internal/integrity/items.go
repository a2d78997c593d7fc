package integrity

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/klauspost/compress/gzip"

	"github.com/lifeboat-io/lifeboat/internal/storage"
)

// entryDigest is one line of the item digests file.
type entryDigest struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// ItemDigests collects the tarball's entry digests as the archive is
// written (archive.EntryRecorder), compressed into a file on local disk so
// that memory does not grow with the backup; Upload stores it.
type ItemDigests struct {
	f       *os.File
	buf     *bufio.Writer
	gz      *gzip.Writer
	line    []byte
	entries int64
}

// NewItemDigests starts an item digests file in dir ("" is the system's
// temporary directory). Close removes it.
func NewItemDigests(dir string) (*ItemDigests, error) {
	f, err := os.CreateTemp(dir, "item-digests-*.json.gz")
	if err != nil {
		return nil, fmt.Errorf("creating the item digests file: %w", err)
	}
	d := &ItemDigests{f: f, buf: bufio.NewWriterSize(f, 64<<10)}
	d.gz = gzip.NewWriter(d.buf)
	return d, nil
}

// RecordEntry implements archive.EntryRecorder. The line (an entryDigest,
// as encoding/json reads it) is put together in one reused buffer: an
// encoder per entry made garbage enough to lift the server's peak memory
// with the size of the backup.
func (d *ItemDigests) RecordEntry(path string, sum [sha256.Size]byte, size int64) error {
	d.entries++
	line, err := jsontext.AppendQuote(append(d.line[:0], `{"path":`...), path)
	if err != nil {
		return fmt.Errorf("entry %q: %w", path, err)
	}
	line = append(line, `,"sha256":"`...)
	line = hex.AppendEncode(line, sum[:])
	line = append(line, `","size":`...)
	line = strconv.AppendInt(line, size, 10)
	line = append(line, "}\n"...)
	d.line = line
	_, err = d.gz.Write(line)
	return err
}

// Entries is the number of entries recorded.
func (d *ItemDigests) Entries() int64 { return d.entries }

// Upload stores the file as backup name's item digests file.
func (d *ItemDigests) Upload(ctx context.Context, store *storage.BackupStore, name string) error {
	if err := d.gz.Close(); err != nil {
		return fmt.Errorf("compressing the item digests: %w", err)
	}
	if err := d.buf.Flush(); err != nil {
		return fmt.Errorf("writing the item digests: %w", err)
	}
	if _, err := d.f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("reading the item digests back: %w", err)
	}
	return store.PutBackupFile(ctx, name, ItemDigestsFile(name), d.f)
}

// Close removes the local file.
func (d *ItemDigests) Close() error {
	return errors.Join(d.f.Close(), os.Remove(d.f.Name()))
}

// maxDigestLine bounds one line of an item digests file read back: a path
// of a few hundred bytes and a hash.
const maxDigestLine = 8 << 10

// digestLines reads an item digests file line by line.
type digestLines struct {
	sc  *bufio.Scanner
	gz  *gzip.Reader
	err error
}

func newDigestLines(r io.Reader) (*digestLines, error) {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(gz)
	sc.Buffer(make([]byte, 0, 4096), maxDigestLine)
	return &digestLines{sc: sc, gz: gz}, nil
}

// next returns the next line; ok is false at the end or on an error (err).
func (l *digestLines) next() (e entryDigest, ok bool) {
	if l.err != nil || !l.sc.Scan() {
		if l.err == nil {
			l.err = l.sc.Err()
		}
		return e, false
	}
	if err := json.Unmarshal(l.sc.Bytes(), &e); err != nil {
		l.err = fmt.Errorf("a line of the item digests file: %w", err)
		return e, false
	}
	return e, true
}

// Package archivetest builds hostile backup tarballs for tests.
package archivetest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Bomb writes a gzip'd tarball that unpacks to about unpacked bytes (10 GB
// is fine: it costs a few MiB and milliseconds) as a series of entries of
// entryBytes zeros under resources/configmaps/namespaces/bomb/. Each piece is
// its own gzip member, which every gzip reader concatenates, so the zeros
// are compressed once and repeated.
func Bomb(w io.Writer, unpacked, entryBytes int64) error {
	zeros, err := gzipMember(make([]byte, 1<<20))
	if err != nil {
		return err
	}
	if entryBytes%(1<<20) != 0 {
		return fmt.Errorf("entryBytes must be a multiple of 1 MiB")
	}
	for i := int64(0); i*entryBytes < unpacked; i++ {
		var hdr bytes.Buffer
		tw := tar.NewWriter(&hdr)
		if err := tw.WriteHeader(&tar.Header{
			Name: fmt.Sprintf("resources/configmaps/namespaces/bomb/cm-%d.json", i), Mode: 0o644,
			Size: entryBytes, Typeflag: tar.TypeReg, Format: tar.FormatPAX,
		}); err != nil {
			return err
		}
		// tw.Flush is not called: the header alone is wanted, its data
		// follows as separate gzip members.
		member, err := gzipMember(hdr.Bytes())
		if err != nil {
			return err
		}
		if _, err := w.Write(member); err != nil {
			return err
		}
		for range entryBytes >> 20 {
			if _, err := w.Write(zeros); err != nil {
				return err
			}
		}
	}
	// Two zero blocks end a tar stream.
	end, err := gzipMember(make([]byte, 1024))
	if err != nil {
		return err
	}
	_, err = w.Write(end)
	return err
}

func gzipMember(data []byte) ([]byte, error) {
	var b bytes.Buffer
	zw, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(data); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Entry is one file of a hand-made tarball.
type Entry struct {
	Name     string
	Data     []byte
	Typeflag byte
	Linkname string
}

// Tarball writes a gzip'd tarball of entries exactly as given, hostile ones
// included (links, absolute paths, "..").
func Tarball(w io.Writer, entries []Entry) error {
	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		typ := e.Typeflag
		if typ == 0 {
			typ = tar.TypeReg
		}
		hdr := &tar.Header{Name: e.Name, Mode: 0o755, Typeflag: typ, Linkname: e.Linkname}
		if typ == tar.TypeReg {
			hdr.Size = int64(len(e.Data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if typ == tar.TypeReg {
			if _, err := tw.Write(e.Data); err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

// SparseFormat is one of the ways GNU tar marks a sparse file.
type SparseFormat int

const (
	// SparseOldGNU is the old GNU header, typeflag 'S', with the map in
	// the header block.
	SparseOldGNU SparseFormat = iota
	// SparsePAX01 keeps the map in PAX records (GNU.sparse.map).
	SparsePAX01
	// SparsePAX10 keeps the map at the start of the entry's data.
	SparsePAX10
)

func (f SparseFormat) String() string {
	switch f {
	case SparseOldGNU:
		return "old GNU"
	case SparsePAX01:
		return "PAX 0.1"
	case SparsePAX10:
		return "PAX 1.0"
	}
	return fmt.Sprintf("SparseFormat(%d)", int(f))
}

// SparseName is the name of the i-th entry Sparse writes.
func SparseName(i int) string {
	return fmt.Sprintf("resources/configmaps/namespaces/sparse/cm-%d.json", i)
}

// Sparse writes a gzip'd tarball of n sparse entries named SparseName(i),
// each a hole of expanded-1 bytes followed by one byte of data. Readers
// that expand sparse files see n*expanded bytes; the stream itself holds a
// few blocks per entry, so gigabytes fit in about a kilobyte. Go's
// tar.Writer no longer writes sparse files, so the blocks are built by hand.
func Sparse(w io.Writer, format SparseFormat, n int, expanded int64) error {
	var tarball bytes.Buffer
	for i := range n {
		name := SparseName(i)
		switch format {
		case SparseOldGNU:
			blk := ustarBlock(name, 'S', 1)
			// GNU header: magic "ustar  \x00", the first sparse entry
			// (offset 12 bytes, length 12 bytes) at 386, realsize at 483.
			copy(blk[257:], "ustar  \x00")
			putOctal(blk[386:398], expanded-1)
			putOctal(blk[398:410], 1)
			putOctal(blk[483:495], expanded)
			writeBlock(&tarball, blk)
			tarball.Write(padded([]byte("x")))
		case SparsePAX01:
			records := paxRecords(
				"GNU.sparse.map", fmt.Sprintf("%d,1", expanded-1),
				"GNU.sparse.numblocks", "1",
				"GNU.sparse.size", fmt.Sprint(expanded),
			)
			writeBlock(&tarball, ustarBlock("PaxHeaders/"+fmt.Sprint(i), 'x', int64(len(records))))
			tarball.Write(padded(records))
			writeBlock(&tarball, ustarBlock(name, '0', 1))
			tarball.Write(padded([]byte("x")))
		case SparsePAX10:
			records := paxRecords(
				"GNU.sparse.major", "1",
				"GNU.sparse.minor", "0",
				"GNU.sparse.name", name,
				"GNU.sparse.realsize", fmt.Sprint(expanded),
			)
			writeBlock(&tarball, ustarBlock("PaxHeaders/"+fmt.Sprint(i), 'x', int64(len(records))))
			tarball.Write(padded(records))
			sparseMap := padded(fmt.Appendf(nil, "1\n%d\n1\n", expanded-1))
			writeBlock(&tarball, ustarBlock(fmt.Sprintf("GNUSparseFile.0/cm-%d.json", i), '0', int64(len(sparseMap))+1))
			tarball.Write(sparseMap)
			tarball.Write(padded([]byte("x")))
		default:
			return fmt.Errorf("unknown sparse format %d", format)
		}
	}
	tarball.Write(make([]byte, 1024))
	member, err := gzipMember(tarball.Bytes())
	if err != nil {
		return err
	}
	_, err = w.Write(member)
	return err
}

func ustarBlock(name string, typ byte, size int64) *[512]byte {
	var blk [512]byte
	copy(blk[0:100], name)
	putOctal(blk[100:108], 0o644)
	putOctal(blk[108:116], 0)
	putOctal(blk[116:124], 0)
	putOctal(blk[124:136], size)
	putOctal(blk[136:148], 0)
	blk[156] = typ
	copy(blk[257:], "ustar\x0000")
	return &blk
}

// writeBlock sets blk's checksum and appends it.
func writeBlock(b *bytes.Buffer, blk *[512]byte) {
	copy(blk[148:156], "        ")
	var sum int64
	for _, c := range blk {
		sum += int64(c)
	}
	putOctal(blk[148:155], sum)
	blk[155] = ' '
	b.Write(blk[:])
}

func putOctal(field []byte, v int64) {
	s := fmt.Sprintf("%0*o", len(field)-1, v)
	copy(field, s)
	field[len(field)-1] = 0
}

func paxRecords(kv ...string) []byte {
	var out []byte
	for i := 0; i+1 < len(kv); i += 2 {
		body := " " + kv[i] + "=" + kv[i+1] + "\n"
		// The length prefix counts its own digits.
		n := len(body) + 1
		for len(fmt.Sprint(n))+len(body) != n {
			n++
		}
		out = fmt.Appendf(out, "%d%s", n, body)
	}
	return out
}

func padded(data []byte) []byte {
	out := append([]byte(nil), data...)
	if r := len(out) % 512; r != 0 {
		out = append(out, make([]byte, 512-r)...)
	}
	return out
}

// Rewrite rewrites the tarball file at path entry by entry: edit returns
// what goes in an entry's place (itself, changed, nothing, or more
// entries), as someone tampering with a stored backup would.
func Rewrite(path string, edit func(Entry) []Entry) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	var entries []Entry
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return err
		}
		entries = append(entries, edit(Entry{Name: hdr.Name, Data: data, Typeflag: hdr.Typeflag, Linkname: hdr.Linkname})...)
	}
	var out bytes.Buffer
	if err := Tarball(&out, entries); err != nil {
		return err
	}
	return os.WriteFile(path, out.Bytes(), 0o644)
}

// Drop is a Rewrite edit that leaves out the entries whose names end in
// suffix (an item's two copies, for "/<ns>/<name>.json").
func Drop(suffix string) func(Entry) []Entry {
	return func(e Entry) []Entry {
		if strings.HasSuffix(e.Name, suffix) {
			return nil
		}
		return []Entry{e}
	}
}

// Package archivetest builds hostile backup tarballs for tests.
package archivetest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
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

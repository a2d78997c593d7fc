package archive

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/lifeboat-io/lifeboat/internal/archive/archivetest"
)

// FuzzReader feeds the Reader arbitrary bytes, as a bucket writer could.
// Whatever comes in, it must not panic, must hand out no more than its
// limits allow, only paths it would itself accept, item references that
// are the paths they came from, and errors that say where they are.
func FuzzReader(f *testing.F) {
	limits := Limits{MaxEntryBytes: 64 << 10, MaxTotalBytes: 1 << 20}
	f.Add(writeArchive(f, configMap, storageClass, deployment, inClusterNS))
	for _, format := range []archivetest.SparseFormat{archivetest.SparseOldGNU, archivetest.SparsePAX01, archivetest.SparsePAX10} {
		var buf bytes.Buffer
		if err := archivetest.Sparse(&buf, format, 2, 4<<10); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes())
	}
	for _, entries := range [][]archivetest.Entry{
		{{Name: "metadata/version", Data: []byte("1.1.0\n")}, {Name: "resources/pods/v1/namespaces/a/b.json", Data: []byte("{}")}},
		{{Name: "resources/../../etc/passwd", Data: []byte("x")}},
		{{Name: "resources/pods/cluster/a.json", Typeflag: '2', Linkname: "/etc/shadow"}},
		{{Name: "./resources/", Typeflag: '5'}, {Name: "resources/x/cluster/-preferredversion.json", Data: []byte("{}")}},
	} {
		var buf bytes.Buffer
		if err := archivetest.Tarball(&buf, entries); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes())
	}
	f.Add(bomb(f, 2<<20, "resources/a/cluster/1.json"))
	f.Add([]byte("not gzip"))

	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := NewReader(bytes.NewReader(data), limits)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "archive: ") {
				t.Fatalf("error %q does not say it is about the archive", err)
			}
			return
		}
		var total int64
		for {
			e, err := r.Next()
			if err == io.EOF {
				if _, again := r.Next(); again != io.EOF {
					t.Fatalf("Next after the end returned %v", again)
				}
				return
			}
			if err != nil {
				checkReaderError(t, r, err)
				return
			}
			size := int64(len(e.Data))
			total += size
			if size > limits.MaxEntryBytes || total > limits.MaxTotalBytes {
				t.Fatalf("handed out %d bytes in %q, %d in all, past %+v", size, e.Path, total, limits)
			}
			if clean, err := cleanPath(e.Path, false); err != nil || clean != e.Path {
				t.Fatalf("handed out path %q, which cleans to %q, %v", e.Path, clean, err)
			}
			if e.Item != nil {
				dir := e.Item.Version
				if e.PreferredVersionCopy {
					dir += preferredSuffix
				}
				if back := string(appendItemPath(nil, *e.Item, dir)); back != e.Path {
					t.Fatalf("item %+v (preferred %v) is stored at %q, but came from %q", *e.Item, e.PreferredVersionCopy, back, e.Path)
				}
			}
		}
	})
}

func checkReaderError(t *testing.T, r *Reader, err error) {
	t.Helper()
	if !strings.HasPrefix(err.Error(), "archive: ") {
		t.Fatalf("error %q does not say it is about the archive", err)
	}
	if (errors.Is(err, ErrUnsafePath) || errors.Is(err, ErrUnsupportedType)) && !strings.Contains(err.Error(), `entry "`) {
		t.Fatalf("error %q does not name the entry", err)
	}
	if errors.Is(err, ErrTooLarge) && !strings.Contains(err.Error(), "--max-") {
		t.Fatalf("error %q does not name the limit's flag", err)
	}
	if _, again := r.Next(); again != err {
		t.Fatalf("Next after %v returned %v", err, again)
	}
}

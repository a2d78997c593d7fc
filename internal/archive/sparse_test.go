package archive

import (
	"bytes"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/lifeboat-io/lifeboat/internal/archive/archivetest"
)

// A sparse entry's header claims its expanded size while the stream holds
// only the data around the holes, which archive/tar fills with zeros as it
// reads. Twenty 64 MiB entries (each under the entry limit) fit in under a
// kilobyte of .tar.gz and unpack to 1.28 GiB, five times the total limit
// given here: the reader must refuse them before inflating any, whatever
// the format, and without the memory a read would take.
func TestReaderRefusesSparseEntries(t *testing.T) {
	const (
		entries  = 20
		expanded = 64 << 20
	)
	for _, format := range []archivetest.SparseFormat{archivetest.SparseOldGNU, archivetest.SparsePAX01, archivetest.SparsePAX10} {
		t.Run(format.String(), func(t *testing.T) {
			var buf bytes.Buffer
			if err := archivetest.Sparse(&buf, format, entries, expanded); err != nil {
				t.Fatal(err)
			}
			if buf.Len() > 2<<10 {
				t.Fatalf("the attack takes %d bytes; it should fit in 2 KiB", buf.Len())
			}
			compressed := buf.Len()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			r, err := NewReader(&buf, Limits{MaxTotalBytes: 256 << 20})
			if err != nil {
				t.Fatal(err)
			}
			var read, unpacked int64
			for {
				var e Entry
				e, err = r.Next()
				if err != nil {
					break
				}
				read++
				unpacked += int64(len(e.Data))
			}
			elapsed := time.Since(start)
			runtime.ReadMemStats(&after)
			allocated := after.TotalAlloc - before.TotalAlloc
			t.Logf("%d compressed bytes: %d entries, %d MiB unpacked, %d KiB allocated in %v before %v",
				compressed, read, unpacked>>20, allocated>>10, elapsed, err)
			if !errors.Is(err, ErrUnsupportedType) {
				t.Fatalf("got %v after %d entries (%d MiB), want %v", err, read, unpacked>>20, ErrUnsupportedType)
			}
			if want := archivetest.SparseName(0); !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "sparse") {
				t.Errorf("error %q should name entry %q and say it is sparse", err, want)
			}
			if read != 0 {
				t.Errorf("read %d entries before refusing", read)
			}
			// A gzip and a tar reader, not one inflated entry.
			if allocated > 4<<20 {
				t.Errorf("allocated %d KiB to refuse a %d-byte archive", allocated>>10, compressed)
			}
		})
	}
}

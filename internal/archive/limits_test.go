package archive

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// writeWith writes items with limits and returns the archive, or the first
// error, which must stay the answer to every later call.
func writeWith(t *testing.T, limits Limits, items ...item) ([]byte, error) {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf, testTime, limits)
	err := w.WriteVersion()
	for _, it := range items {
		if err != nil {
			break
		}
		err = w.WriteItem(it.ref, []byte(it.data))
	}
	if err == nil {
		err = w.Close()
	}
	if err != nil {
		if again := w.WriteItem(configMap.ref, []byte(configMap.data)); again != err {
			t.Errorf("WriteItem after %v returned %v", err, again)
		}
		if again := w.Close(); again != err {
			t.Errorf("Close after %v returned %v", err, again)
		}
		return nil, err
	}
	return buf.Bytes(), nil
}

func sized(name string, n int) item {
	return item{ItemRef{GroupResource: "configmaps", Version: "v1", Namespace: "big", Name: name}, strings.Repeat("x", n)}
}

// A backup the server could not restore or delete must fail when it is
// written, naming the item and the flag to raise, and the Reader must
// accept exactly what the Writer writes under the same limits: one byte
// under a limit passes both, one byte over fails both.
func TestWriterAndReaderAgreeOnLimits(t *testing.T) {
	const entry = 10 << 10
	t.Run("one item", func(t *testing.T) {
		limits := Limits{MaxEntryBytes: entry}
		data, err := writeWith(t, limits, sized("fits", entry))
		if err != nil {
			t.Fatalf("an item of exactly the limit: %v", err)
		}
		if _, err := readAll(t, data, limits); err != nil {
			t.Fatalf("reading what the Writer wrote: %v", err)
		}
		_, err = writeWith(t, limits, configMap, sized("huge", entry+1))
		wantLimitError(t, err, "resources/configmaps/namespaces/big/huge.json", "--max-item-size=10Ki")
		// Written under larger limits, the Reader refuses it too.
		data, err = writeWith(t, Limits{}, configMap, sized("huge", entry+1))
		if err != nil {
			t.Fatal(err)
		}
		_, err = readAll(t, data, limits)
		wantLimitError(t, err, "resources/configmaps/namespaces/big/huge.json", "--max-item-size=10Ki")
	})
	t.Run("whole archive", func(t *testing.T) {
		items := []item{configMap, sized("a", 3000), sized("b", 3000), storageClass}
		data, err := writeWith(t, Limits{}, items...)
		if err != nil {
			t.Fatal(err)
		}
		exact := unpackedSize(t, data)
		limits := Limits{MaxTotalBytes: exact}
		if _, err := writeWith(t, limits, items...); err != nil {
			t.Fatalf("an archive of exactly the limit (%d bytes): %v", exact, err)
		}
		if _, err := readAll(t, data, limits); err != nil {
			t.Fatalf("reading an archive of exactly the limit (%d bytes): %v", exact, err)
		}
		limits.MaxTotalBytes--
		_, err = writeWith(t, limits, items...)
		// The last item is what takes it over.
		wantLimitError(t, err, "resources/storageclasses.storage.k8s.io/v1-preferredversion/cluster/fast.json", "--max-archive-size=")
		if _, err := readAll(t, data, limits); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "--max-archive-size=") {
			t.Fatalf("reading an archive one byte over the limit: %v", err)
		}
	})
}

// Items that compress a thousand times, as zeros do, look like a bomb to a
// restore past RatioGrace: the backup must fail on them instead.
func TestWriterRefusesWhatAReaderTakesForABomb(t *testing.T) {
	zeros := item{ItemRef{GroupResource: "configmaps", Version: "v1", Namespace: "big", Name: "zeros"}, string(make([]byte, 8<<20))}
	var items []item
	for i := int64(0); i < RatioGrace/(8<<20); i++ {
		it := zeros
		it.ref.Name = "zeros-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		items = append(items, it)
	}
	_, err := writeWith(t, Limits{}, items...)
	wantLimitError(t, err, "/namespaces/big/zeros-", "--max-archive-ratio=200")
	if !strings.Contains(err.Error(), "decompression bomb") {
		t.Errorf("error %q does not say why the ratio matters", err)
	}
}

func wantLimitError(t *testing.T, err error, entry, flag string) {
	t.Helper()
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v, want %v", err, ErrTooLarge)
	}
	if !strings.Contains(err.Error(), entry) || !strings.Contains(err.Error(), flag) {
		t.Errorf("error %q should name %q and %q", err, entry, flag)
	}
}

// unpackedSize is the length of the tar stream inside a .tar.gz.
func unpackedSize(t *testing.T, data []byte) int64 {
	t.Helper()
	r, err := NewReader(bytes.NewReader(data), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, r.count)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

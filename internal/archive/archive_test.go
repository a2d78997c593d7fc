package archive

import (
	"archive/tar"
	"bytes"
	stdgzip "compress/gzip"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lifeboat-io/lifeboat/internal/archive/archivetest"
)

var testTime = time.Date(2025, 3, 4, 5, 6, 7, 890, time.UTC)

type item struct {
	ref  ItemRef
	data string
}

var (
	configMap    = item{ItemRef{GroupResource: "configmaps", Version: "v1", Namespace: "team-a", Name: "settings"}, `{"kind":"ConfigMap"}`}
	storageClass = item{ItemRef{GroupResource: "storageclasses.storage.k8s.io", Version: "v1", Name: "fast"}, `{"kind":"StorageClass"}`}
	deployment   = item{ItemRef{GroupResource: "deployments.apps", Version: "v1", Namespace: "team-a", Name: "web"}, `{"kind":"Deployment"}`}
	// A namespace called "cluster" must not be mistaken for the cluster-scoped directory.
	inClusterNS = item{ItemRef{GroupResource: "secrets", Version: "v1", Namespace: "cluster", Name: "s"}, `{"kind":"Secret"}`}
)

func writeArchive(t testing.TB, items ...item) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf, testTime, Limits{})
	if err := w.WriteVersion(); err != nil {
		t.Fatalf("WriteVersion: %v", err)
	}
	for _, it := range items {
		if err := w.WriteItem(it.ref, []byte(it.data)); err != nil {
			t.Fatalf("WriteItem(%+v): %v", it.ref, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	return buf.Bytes()
}

// rawEntries reads an archive with the standard library only, so the layout
// is checked independently of Reader.
func rawEntries(t *testing.T, archive []byte) []*tar.Header {
	t.Helper()
	gz, err := stdgzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		t.Fatalf("gzip: %v", err)
	}
	tr := tar.NewReader(gz)
	var hdrs []*tar.Header
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return hdrs
		}
		if err != nil {
			t.Fatalf("tar: %v", err)
		}
		hdrs = append(hdrs, h)
	}
}

func TestWriterLayout(t *testing.T) {
	tests := []struct {
		name  string
		items []item
		want  []string
	}{
		{
			name:  "namespaced item",
			items: []item{configMap},
			want: []string{
				"metadata/version",
				"resources/configmaps/namespaces/team-a/settings.json",
				"resources/configmaps/v1-preferredversion/namespaces/team-a/settings.json",
			},
		},
		{
			name:  "cluster-scoped item in a named group",
			items: []item{storageClass},
			want: []string{
				"metadata/version",
				"resources/storageclasses.storage.k8s.io/cluster/fast.json",
				"resources/storageclasses.storage.k8s.io/v1-preferredversion/cluster/fast.json",
			},
		},
		{
			name:  "items keep the order they were written in",
			items: []item{deployment, inClusterNS},
			want: []string{
				"metadata/version",
				"resources/deployments.apps/namespaces/team-a/web.json",
				"resources/deployments.apps/v1-preferredversion/namespaces/team-a/web.json",
				"resources/secrets/namespaces/cluster/s.json",
				"resources/secrets/v1-preferredversion/namespaces/cluster/s.json",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hdrs := rawEntries(t, writeArchive(t, tc.items...))
			var got []string
			for _, h := range hdrs {
				got = append(got, h.Name)
				if h.Typeflag != tar.TypeReg || h.Mode != 0o755 || h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
					t.Errorf("%s: typeflag %q mode %o owner %d/%d (%q/%q), want regular 0755 0/0", h.Name, h.Typeflag, h.Mode, h.Uid, h.Gid, h.Uname, h.Gname)
				}
				if !h.ModTime.Equal(testTime.Truncate(time.Second)) {
					t.Errorf("%s: mod time %v, want %v", h.Name, h.ModTime, testTime.Truncate(time.Second))
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("paths:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestWriterIsDeterministic(t *testing.T) {
	a := writeArchive(t, configMap, storageClass, deployment)
	b := writeArchive(t, configMap, storageClass, deployment)
	if !bytes.Equal(a, b) {
		t.Fatal("two archives of the same items differ")
	}
}

func TestWriteItemRefusesBadRefs(t *testing.T) {
	tests := []struct {
		name string
		ref  ItemRef
	}{
		{"no group resource", ItemRef{Version: "v1", Name: "a"}},
		{"no version", ItemRef{GroupResource: "pods", Name: "a"}},
		{"no name", ItemRef{GroupResource: "pods", Version: "v1"}},
		{"slash in name", ItemRef{GroupResource: "pods", Version: "v1", Name: "a/b"}},
		{"dot-dot namespace", ItemRef{GroupResource: "pods", Version: "v1", Namespace: "..", Name: "a"}},
		{"dot-dot group resource", ItemRef{GroupResource: "..", Version: "v1", Name: "a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := NewWriter(io.Discard, testTime, Limits{})
			if err := w.WriteItem(tc.ref, []byte("{}")); err == nil {
				t.Fatalf("WriteItem(%+v) succeeded", tc.ref)
			}
			// A refused ref writes nothing, so the archive stays usable.
			if err := w.Close(); err != nil {
				t.Fatalf("Close after a refused item: %v", err)
			}
		})
	}
}

func readAll(t *testing.T, archive []byte, limits Limits) ([]Entry, error) {
	t.Helper()
	r, err := NewReader(bytes.NewReader(archive), limits)
	if err != nil {
		return nil, err
	}
	var entries []Entry
	for {
		e, err := r.Next()
		if err == io.EOF {
			return entries, nil
		}
		if err != nil {
			// Errors are final.
			if _, again := r.Next(); again != err {
				t.Errorf("second Next after %v returned %v", err, again)
			}
			return entries, err
		}
		entries = append(entries, e)
	}
}

func TestRoundTrip(t *testing.T) {
	items := []item{configMap, storageClass, deployment, inClusterNS}
	entries, err := readAll(t, writeArchive(t, items...), Limits{})
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	want := []Entry{{Path: "metadata/version", Data: []byte("1.1.0\n")}}
	for _, it := range items {
		unversioned := it.ref
		unversioned.Version = ""
		buf := appendItemPath(nil, it.ref, "")
		want = append(want, Entry{Path: string(buf), Item: &unversioned, Data: []byte(it.data)})
		preferred := it.ref
		buf = appendItemPath(nil, it.ref, it.ref.Version+preferredSuffix)
		want = append(want, Entry{Path: string(buf), Item: &preferred, PreferredVersionCopy: true, Data: []byte(it.data)})
	}
	if !reflect.DeepEqual(entries, want) {
		t.Errorf("entries:\n got %s\nwant %s", describe(entries), describe(want))
	}
}

func describe(entries []Entry) string {
	var b strings.Builder
	for _, e := range entries {
		fmt.Fprintf(&b, "\n  %s item=%+v preferred=%v data=%q", e.Path, e.Item, e.PreferredVersionCopy, e.Data)
	}
	return b.String()
}

type rawEntry struct {
	hdr  tar.Header
	data string
	// short leaves the entry's data unwritten, as in a truncated or forged
	// archive whose header claims more than follows.
	short bool
}

func file(name, data string) rawEntry {
	return rawEntry{hdr: tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(data))}, data: data}
}

func buildArchive(t testing.TB, entries ...rawEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := stdgzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		hdr := e.hdr
		if err := tw.WriteHeader(&hdr); err != nil {
			t.Fatalf("header %q: %v", hdr.Name, err)
		}
		if e.short {
			// The header is already in the stream; end it here.
			if err := gz.Close(); err != nil {
				t.Fatal(err)
			}
			return buf.Bytes()
		}
		if _, err := io.WriteString(tw, e.data); err != nil {
			t.Fatalf("data %q: %v", hdr.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestReaderParsesLayouts(t *testing.T) {
	dir := func(name string) rawEntry {
		return rawEntry{hdr: tar.Header{Name: name, Typeflag: tar.TypeDir, Mode: 0o755}}
	}
	tests := []struct {
		name          string
		entry         rawEntry
		wantPath      string
		wantItem      *ItemRef
		wantPreferred bool
	}{
		{
			name:     "unversioned namespaced item, as old Velero backups hold",
			entry:    file("resources/pods/namespaces/ns-1/pod-1.json", "{}"),
			wantPath: "resources/pods/namespaces/ns-1/pod-1.json",
			wantItem: &ItemRef{GroupResource: "pods", Namespace: "ns-1", Name: "pod-1"},
		},
		{
			name:     "unversioned cluster-scoped item",
			entry:    file("resources/persistentvolumes/cluster/pv-1.json", "{}"),
			wantPath: "resources/persistentvolumes/cluster/pv-1.json",
			wantItem: &ItemRef{GroupResource: "persistentvolumes", Name: "pv-1"},
		},
		{
			name:          "preferred-version cluster-scoped item",
			entry:         file("resources/namespaces/v1-preferredversion/cluster/ns-1.json", "{}"),
			wantPath:      "resources/namespaces/v1-preferredversion/cluster/ns-1.json",
			wantItem:      &ItemRef{GroupResource: "namespaces", Version: "v1", Name: "ns-1"},
			wantPreferred: true,
		},
		{
			name:     "item stored at a version other than the preferred one",
			entry:    file("resources/horizontalpodautoscalers.autoscaling/v2beta2/namespaces/ns-1/hpa.json", "{}"),
			wantPath: "resources/horizontalpodautoscalers.autoscaling/v2beta2/namespaces/ns-1/hpa.json",
			wantItem: &ItemRef{GroupResource: "horizontalpodautoscalers.autoscaling", Version: "v2beta2", Namespace: "ns-1", Name: "hpa"},
		},
		{
			name:     "name with dots and colons",
			entry:    file("resources/clusterroles.rbac.authorization.k8s.io/cluster/system:controller:x.y.json", "{}"),
			wantPath: "resources/clusterroles.rbac.authorization.k8s.io/cluster/system:controller:x.y.json",
			wantItem: &ItemRef{GroupResource: "clusterroles.rbac.authorization.k8s.io", Name: "system:controller:x.y"},
		},
		{
			name:     "leading ./ as tar tools write it",
			entry:    file("./resources/pods/namespaces/ns-1/pod-1.json", "{}"),
			wantPath: "resources/pods/namespaces/ns-1/pod-1.json",
			wantItem: &ItemRef{GroupResource: "pods", Namespace: "ns-1", Name: "pod-1"},
		},
		{
			name:     "metadata file",
			entry:    file("metadata/version", "1.1.0\n"),
			wantPath: "metadata/version",
		},
		{
			name:     "unknown file under resources is not an item",
			entry:    file("resources/pods/README", "hi"),
			wantPath: "resources/pods/README",
		},
		{
			name:     "file without .json is not an item",
			entry:    file("resources/pods/cluster/pod-1.yaml", "{}"),
			wantPath: "resources/pods/cluster/pod-1.yaml",
		},
		{
			name:     "empty version before -preferredversion is not an item",
			entry:    file("resources/pods/-preferredversion/cluster/pod-1.json", "{}"),
			wantPath: "resources/pods/-preferredversion/cluster/pod-1.json",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Directory entries and a pax global header, as other tools
			// write them, are skipped.
			archive := buildArchive(t,
				rawEntry{hdr: tar.Header{Name: "pax_global_header", Typeflag: tar.TypeXGlobalHeader, PAXRecords: map[string]string{"comment": "x"}}},
				dir("./"), dir("resources/"), dir("resources/pods/"),
				tc.entry)
			entries, err := readAll(t, archive, Limits{})
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			if len(entries) != 1 {
				t.Fatalf("got %d entries, want 1:%s", len(entries), describe(entries))
			}
			e := entries[0]
			if e.Path != tc.wantPath || !reflect.DeepEqual(e.Item, tc.wantItem) || e.PreferredVersionCopy != tc.wantPreferred || string(e.Data) != tc.entry.data {
				t.Errorf("got%s\nwant path %s item %+v preferred %v", describe(entries), tc.wantPath, tc.wantItem, tc.wantPreferred)
			}
		})
	}
}

// repeated returns a reader of n bytes cut from a small repeated buffer, so
// bombs are built without holding them in memory.
func repeated(n int64) io.Reader {
	chunk := bytes.Repeat([]byte("0123456789abcdef"), 4096)
	return io.LimitReader(&loop{chunk: chunk}, n)
}

type loop struct {
	chunk []byte
	off   int
}

func (l *loop) Read(p []byte) (int, error) {
	n := copy(p, l.chunk[l.off:])
	l.off = (l.off + n) % len(l.chunk)
	return n, nil
}

// bomb builds an archive whose entries inflate to size bytes each.
func bomb(t testing.TB, size int64, names ...string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz, err := stdgzip.NewWriterLevel(&buf, stdgzip.BestSpeed)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(gz)
	for _, name := range names {
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: size}); err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(tw, repeated(size)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestReaderRefusesHostileArchives(t *testing.T) {
	const item = "resources/pods/namespaces/ns-1/pod-1.json"
	link := func(name string, typ byte, target string) rawEntry {
		return rawEntry{hdr: tar.Header{Name: name, Typeflag: typ, Linkname: target, Mode: 0o777}}
	}
	const mib = 1 << 20
	tests := []struct {
		name      string
		archive   func(t *testing.T) []byte
		limits    Limits
		wantErr   error
		wantEntry string
		// wantRead is how many entries come out before the error.
		wantRead int
	}{
		{
			name:      "path traversal",
			archive:   func(t *testing.T) []byte { return buildArchive(t, file("resources/../../etc/cron.d/x", "x")) },
			wantErr:   ErrUnsafePath,
			wantEntry: "resources/../../etc/cron.d/x",
		},
		{
			name:      "path traversal at the start",
			archive:   func(t *testing.T) []byte { return buildArchive(t, file("../resources/pods/cluster/a.json", "x")) },
			wantErr:   ErrUnsafePath,
			wantEntry: "../resources/pods/cluster/a.json",
		},
		{
			name: "traversal in a directory entry",
			archive: func(t *testing.T) []byte {
				return buildArchive(t, rawEntry{hdr: tar.Header{Name: "resources/../../", Typeflag: tar.TypeDir}})
			},
			wantErr:   ErrUnsafePath,
			wantEntry: "resources/../../",
		},
		{
			name:      "absolute path",
			archive:   func(t *testing.T) []byte { return buildArchive(t, file("/etc/passwd", "root::0:0::/:/bin/sh")) },
			wantErr:   ErrUnsafePath,
			wantEntry: "/etc/passwd",
		},
		{
			name:      "backslash path",
			archive:   func(t *testing.T) []byte { return buildArchive(t, file(`resources\..\..\x.json`, "x")) },
			wantErr:   ErrUnsafePath,
			wantEntry: `resources\..\..\x.json`,
		},
		{
			name: "outside resources and metadata",
			archive: func(t *testing.T) []byte {
				return buildArchive(t, file("metadata/version", "1.1.0\n"), file("plugins/evil.so", "x"))
			},
			wantErr:   ErrUnsafePath,
			wantEntry: "plugins/evil.so",
			wantRead:  1,
		},
		{
			name:      "non-canonical path",
			archive:   func(t *testing.T) []byte { return buildArchive(t, file("resources//pods/cluster/a.json", "x")) },
			wantErr:   ErrUnsafePath,
			wantEntry: "resources//pods/cluster/a.json",
		},
		{
			name:      "file in place of a top-level directory",
			archive:   func(t *testing.T) []byte { return buildArchive(t, file("metadata", "x")) },
			wantErr:   ErrUnsafePath,
			wantEntry: "metadata",
		},
		{
			name:      "symlink",
			archive:   func(t *testing.T) []byte { return buildArchive(t, link(item, tar.TypeSymlink, "/etc/shadow")) },
			wantErr:   ErrUnsupportedType,
			wantEntry: item,
		},
		{
			name: "hard link",
			archive: func(t *testing.T) []byte {
				return buildArchive(t, file("metadata/version", "1.1.0\n"), link(item, tar.TypeLink, "metadata/version"))
			},
			wantErr:   ErrUnsupportedType,
			wantEntry: item,
			wantRead:  1,
		},
		{
			name: "character device",
			archive: func(t *testing.T) []byte {
				return buildArchive(t, rawEntry{hdr: tar.Header{Name: item, Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}})
			},
			wantErr:   ErrUnsupportedType,
			wantEntry: item,
		},
		{
			name: "entry claiming more than the entry limit",
			archive: func(t *testing.T) []byte {
				return buildArchive(t, rawEntry{hdr: tar.Header{Name: item, Typeflag: tar.TypeReg, Size: 1 << 40}, short: true})
			},
			wantErr:   ErrTooLarge,
			wantEntry: item,
		},
		{
			name:      "compressed bomb over the entry limit",
			archive:   func(t *testing.T) []byte { return bomb(t, 4*mib, item) },
			limits:    Limits{MaxEntryBytes: mib},
			wantErr:   ErrTooLarge,
			wantEntry: item,
		},
		{
			name: "compressed bomb over the total limit",
			archive: func(t *testing.T) []byte {
				return bomb(t, mib, "resources/a/cluster/1.json", "resources/a/cluster/2.json", "resources/a/cluster/3.json")
			},
			limits:    Limits{MaxTotalBytes: 5 * mib / 2},
			wantErr:   ErrTooLarge,
			wantEntry: "resources/a/cluster/3.json",
			wantRead:  2,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			entries, err := readAll(t, tc.archive(t), tc.limits)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("%q", tc.wantEntry)) {
				t.Errorf("error %q does not name entry %q", err, tc.wantEntry)
			}
			if len(entries) != tc.wantRead {
				t.Errorf("read %d entries before the error, want %d", len(entries), tc.wantRead)
			}
		})
	}
}

func TestReaderStopsAtTotalLimitInHeaders(t *testing.T) {
	// Many empty entries carry no data to check against the limit; their
	// header blocks still count.
	var entries []rawEntry
	for i := range 64 {
		entries = append(entries, file(fmt.Sprintf("metadata/f%d", i), ""))
	}
	_, err := readAll(t, buildArchive(t, entries...), Limits{MaxTotalBytes: 8 << 10})
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("error %v, want %v", err, ErrTooLarge)
	}
}

func TestReaderRefusesCorruptStreams(t *testing.T) {
	good := writeArchive(t, configMap)
	tests := []struct {
		name    string
		archive []byte
	}{
		{"not gzip", []byte("resources/pods/cluster/a.json")},
		{"truncated", good[:len(good)-12]},
		{"bad checksum", append(append([]byte{}, good[:len(good)-8]...), 0, 0, 0, 0, 0, 0, 0, 0)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := readAll(t, tc.archive, Limits{}); err == nil {
				t.Fatal("read succeeded")
			}
		})
	}
}

func BenchmarkWriteItem(b *testing.B) {
	data := bytes.Repeat([]byte(`{"k":"v","n":1234567},`), 1536/22+1)[:1536]
	refs := make([]ItemRef, 1024)
	for i := range refs {
		refs[i] = ItemRef{GroupResource: "configmaps", Version: "v1", Namespace: fmt.Sprintf("ns-%d", i%20), Name: fmt.Sprintf("cm-%d", i)}
	}
	w := NewWriter(io.Discard, testTime, Limits{})
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if err := w.WriteItem(refs[i%len(refs)], data); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
}

func TestReaderRefusesADecompressionBombEarly(t *testing.T) {
	var buf bytes.Buffer
	// 10 GB unpacked, from a few MiB.
	if err := archivetest.Bomb(&buf, 10<<30, 32<<20); err != nil {
		t.Fatal(err)
	}
	r, err := NewReader(&buf, Limits{MaxRatio: 200})
	if err != nil {
		t.Fatal(err)
	}
	var read int
	for {
		_, err = r.Next()
		if err != nil {
			break
		}
		read++
	}
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "decompression bomb") {
		t.Fatalf("got %v after %d entries, want a bomb error", err, read)
	}
	// The guard trips just past RatioGrace, long before 10 GB.
	if int64(read)*(32<<20) > 2*RatioGrace {
		t.Errorf("read %d entries (%d MiB) before refusing", read, int64(read)*32)
	}
}

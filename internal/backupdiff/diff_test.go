package backupdiff

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/lifeboat-io/lifeboat/internal/archive"
	"github.com/lifeboat-io/lifeboat/internal/integrity"
	"github.com/lifeboat-io/lifeboat/internal/storage"
	"github.com/lifeboat-io/lifeboat/internal/storage/filesystem"
)

func decode(t *testing.T, data []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := utiljson.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

type fakeItem struct {
	ref  archive.ItemRef
	json string
}

// backup writes items as a backup does: the tarball, and the item digests
// file recorded while it is written.
func backup(t *testing.T, items []fakeItem) (tarball, digests []byte) {
	t.Helper()
	var tb bytes.Buffer
	w := archive.NewWriter(&tb, time.Unix(1700000000, 0), archive.Limits{})
	d, err := integrity.NewItemDigests(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	w.RecordEntries(d)
	if err := w.WriteVersion(); err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if err := w.WriteItem(it.ref, []byte(it.json)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "bucket"), 0o700); err != nil {
		t.Fatal(err)
	}
	fs, err := filesystem.New(map[string]string{filesystem.PathKey: root})
	if err != nil {
		t.Fatal(err)
	}
	store := storage.NewBackupStore(fs, "bucket", "")
	if err := d.Upload(t.Context(), store, "b"); err != nil {
		t.Fatal(err)
	}
	digests, err = os.ReadFile(filepath.Join(root, "bucket", "backups", "b", integrity.ItemDigestsFile("b")))
	if err != nil {
		t.Fatal(err)
	}
	return tb.Bytes(), digests
}

func cm(ns, name, data string) fakeItem {
	return fakeItem{archive.ItemRef{GroupResource: "configmaps", Version: "v1", Namespace: ns, Name: name},
		fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":%q},"data":{"k":%q}}`, name, ns, data)}
}

func run(t *testing.T, a, b Source) (Result, []Change) {
	t.Helper()
	var changes []Change
	res, err := Diff(a, b, t.TempDir(), func(c Change) error {
		changes = append(changes, c)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return res, changes
}

func TestDiffListsExactlyWhatChanged(t *testing.T) {
	ns := fakeItem{archive.ItemRef{GroupResource: "namespaces", Version: "v1", Name: "shop"}, `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"shop"}}`}
	deploy := fakeItem{archive.ItemRef{GroupResource: "deployments.apps", Version: "v1", Namespace: "shop", Name: "web"}, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"shop"}}`}
	tarA, digA := backup(t, []fakeItem{ns, cm("shop", "settings", "1"), cm("shop", "other", "x"), deploy})
	tarB, digB := backup(t, []fakeItem{ns, cm("shop", "settings", "2"), cm("shop", "other", "x"), cm("shop", "added", "y")})

	want := []Change{
		{Kind: Added, Key: "configmaps shop/added"},
		{Kind: Changed, Key: "configmaps shop/settings"},
		{Kind: Removed, Key: "deployments.apps shop/web"},
	}
	wantRes := Result{Added: 1, Removed: 1, Changed: 1, Unchanged: 2}
	limits := archive.Limits{}
	for name, pair := range map[string][2]func() Source{
		"digests":            {func() Source { return FromItemDigests(bytes.NewReader(digA)) }, func() Source { return FromItemDigests(bytes.NewReader(digB)) }},
		"tarballs":           {func() Source { return FromTarball(bytes.NewReader(tarA), limits) }, func() Source { return FromTarball(bytes.NewReader(tarB), limits) }},
		"digests vs tarball": {func() Source { return FromItemDigests(bytes.NewReader(digA)) }, func() Source { return FromTarball(bytes.NewReader(tarB), limits) }},
	} {
		res, changes := run(t, pair[0](), pair[1]())
		if res != wantRes || !reflect.DeepEqual(changes, want) {
			t.Errorf("%s: %+v %+v, want %+v %+v", name, res, changes, wantRes, want)
		}
	}
	// A backup compared with itself differs in nothing.
	res, changes := run(t, FromItemDigests(bytes.NewReader(digA)), FromTarball(bytes.NewReader(tarA), limits))
	if res != (Result{Unchanged: 4}) || len(changes) != 0 {
		t.Errorf("a backup against itself: %+v %+v", res, changes)
	}
}

// More items than one sorted chunk holds: the runs on disk are merged
// and the answer is the same.
func TestDiffAtScaleSpills(t *testing.T) {
	old := chunkBytes
	chunkBytes = 4 << 10
	t.Cleanup(func() { chunkBytes = old })
	var a, b []fakeItem
	for i := range 3000 {
		name := fmt.Sprintf("cm-%04d", i)
		a = append(a, cm("ns", name, "same"))
		switch {
		case i%100 == 0: // removed in b
		case i%100 == 1:
			b = append(b, cm("ns", name, "changed"))
		default:
			b = append(b, cm("ns", name, "same"))
		}
	}
	b = append(b, cm("ns", "zz-new", "n"))
	_, digA := backup(t, a)
	_, digB := backup(t, b)
	res, changes := run(t, FromItemDigests(bytes.NewReader(digA)), FromItemDigests(bytes.NewReader(digB)))
	if res != (Result{Added: 1, Removed: 30, Changed: 30, Unchanged: 2940}) || len(changes) != 61 {
		t.Fatalf("result %+v with %d changes", res, len(changes))
	}
	if !slices.IsSortedFunc(changes, func(x, y Change) int { return strings.Compare(x.Key, y.Key) }) {
		t.Errorf("changes are not in key order")
	}
}

func gzipLines(t *testing.T, lines ...string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	for _, l := range lines {
		fmt.Fprintln(gz, l)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// The item digests file comes from the bucket: lines naming no item
// (or an unsafe path) are passed over, malformed ones are refused.
func TestFromItemDigestsHostile(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	ok := gzipLines(t,
		`{"path":"metadata/version","sha256":"`+sum+`","size":1}`,
		`{"path":"resources/configmaps/namespaces/../../etc/x.json","sha256":"`+sum+`","size":1}`,
		`{"path":"resources/configmaps/namespaces/ns/a.json","sha256":"`+sum+`","size":1}`,
	)
	var got []Item
	err := FromItemDigests(bytes.NewReader(ok))(func(it Item) error { got = append(got, it); return nil })
	if err != nil || len(got) != 1 || got[0].Key != "configmaps ns/a" {
		t.Errorf("items %+v, error %v; want the one item", got, err)
	}
	for name, data := range map[string][]byte{
		"not gzip":      []byte("plain"),
		"bad json":      gzipLines(t, `{"path":`),
		"bad digest":    gzipLines(t, `{"path":"resources/configmaps/namespaces/ns/a.json","sha256":"zz","size":1}`),
		"line too long": gzipLines(t, strings.Repeat("x", maxDigestLine+1)),
	} {
		err := FromItemDigests(bytes.NewReader(data))(func(Item) error { return nil })
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestFindItemAndFields(t *testing.T) {
	tarA, _ := backup(t, []fakeItem{cm("shop", "settings", "1"), cm("shop", "other", "x")})
	tarB, _ := backup(t, []fakeItem{
		{archive.ItemRef{GroupResource: "configmaps", Version: "v1", Namespace: "shop", Name: "settings"},
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"settings","namespace":"shop","labels":{"app.kubernetes.io/name":"shop"}},"data":{"k":"2","n":[1,2]}}`},
	})
	a, err := FindItem(bytes.NewReader(tarA), archive.Limits{}, "configmaps shop/settings")
	if err != nil {
		t.Fatal(err)
	}
	b, err := FindItem(bytes.NewReader(tarB), archive.Limits{}, "configmaps shop/settings")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := FindItem(bytes.NewReader(tarB), archive.Limits{}, "configmaps shop/other"); err != ErrItemNotFound {
		t.Errorf("a missing item: %v", err)
	}
	got := Fields(decode(t, a), decode(t, b))
	want := []FieldChange{
		{Path: "data.k", Kind: Changed, Old: "1", New: "2"},
		{Path: "data.n", Kind: Added, New: []any{int64(1), int64(2)}},
		{Path: `metadata.labels`, Kind: Added, New: map[string]any{"app.kubernetes.io/name": "shop"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("fields %+v, want %+v", got, want)
	}
	got = Fields(map[string]any{"l": []any{"a", "b"}, "m": map[string]any{"a.b": "x"}}, map[string]any{"l": []any{"a"}, "m": map[string]any{"a.b": "y"}})
	want = []FieldChange{
		{Path: "l[1]", Kind: Removed, Old: "b"},
		{Path: `m["a.b"]`, Kind: Changed, Old: "x", New: "y"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("fields %+v, want %+v", got, want)
	}
}

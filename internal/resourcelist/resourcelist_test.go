package resourcelist

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/lifeboat-io/lifeboat/internal/spill"
)

// want is the file as encoding/json writes the map the old code built.
func want(t *testing.T, m map[string][]string) string {
	t.Helper()
	for _, v := range m {
		sort.Strings(v)
	}
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(m); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestWriteIsWhatEncodingJSONWritesForTheMap(t *testing.T) {
	keys := []string{"v1/ConfigMap", "v1/Secret", "apps/v1/Deployment", "v1/Config", "example.io/v1<beta>/Thing&"}
	for _, chunk := range []int{64, 4096, spill.DefaultChunkBytes} {
		t.Run(fmt.Sprint(chunk), func(t *testing.T) {
			dir := t.TempDir()
			rng := rand.New(rand.NewPCG(1, uint64(chunk)))
			l := newList(dir, chunk)
			m := map[string][]string{}
			for i := range 3000 {
				k := keys[rng.IntN(len(keys))]
				e := fmt.Sprintf("ns-%d/item-%d", rng.IntN(7), rng.IntN(100000))
				if i%500 == 0 {
					e = "cluster-<scoped>&" + e // escaped as json.Marshal escapes it
				}
				l.Add(k, e)
				m[k] = append(m[k], e)
			}
			var got bytes.Buffer
			if err := l.WriteJSON(&got); err != nil {
				t.Fatal(err)
			}
			if w := want(t, m); got.String() != w {
				t.Fatalf("got %d bytes that differ from encoding/json's %d:\n got %.300s\nwant %.300s", got.Len(), len(w), got.String(), w)
			}
			if chunk < spill.DefaultChunkBytes && l.sorted.Spilled() == 0 {
				t.Fatalf("chunk of %d bytes: nothing was spilled", chunk)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if left, _ := os.ReadDir(dir); len(left) != 0 {
				t.Fatalf("Close left %d files in the run directory", len(left))
			}
		})
	}
}

func TestEmptyListIsAnEmptyObject(t *testing.T) {
	l := New(t.TempDir())
	defer l.Close()
	var got bytes.Buffer
	if err := l.WriteJSON(&got); err != nil {
		t.Fatal(err)
	}
	if w := want(t, map[string][]string{}); got.String() != w {
		t.Fatalf("got %q, want %q", got.String(), w)
	}
}

func TestSimilarKeysStayApart(t *testing.T) {
	// "v1/Foo" is a prefix of "v1/FooBar": each keeps its own entries.
	l := newList(t.TempDir(), 1)
	defer l.Close()
	m := map[string][]string{}
	for _, kv := range [][2]string{{"v1/FooBar", "a"}, {"v1/Foo", "z"}, {"v1/Foo", "b"}, {"v1/FooBar", "0"}, {"v1/Fo", "ns/x"}} {
		l.Add(kv[0], kv[1])
		m[kv[0]] = append(m[kv[0]], kv[1])
	}
	var got bytes.Buffer
	if err := l.WriteJSON(&got); err != nil {
		t.Fatal(err)
	}
	if w := want(t, m); got.String() != w {
		t.Fatalf("got %s, want %s", got.String(), w)
	}
}

func TestANULByteIsRefusedNotMisfiled(t *testing.T) {
	l := New(t.TempDir())
	defer l.Close()
	l.Add("v1/ConfigMap", "ns/a\x00b")
	err := l.WriteJSON(&bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "NUL") {
		t.Fatalf("got %v, want an error about the NUL byte", err)
	}
}

func TestASpillThatCannotBeWrittenFailsTheWrite(t *testing.T) {
	l := newList(t.TempDir()+"/missing", 1)
	defer l.Close()
	l.Add("v1/ConfigMap", "ns/a")
	if err := l.WriteJSON(&bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "spilling") {
		t.Fatalf("got %v, want the spill's error", err)
	}
}

func TestQuotedIsWhatJSONMarshalWrites(t *testing.T) {
	var cases []string
	for c := range 256 {
		cases = append(cases, string([]byte{byte(c)}), "ns/name-"+string([]byte{byte(c)}))
	}
	cases = append(cases, "", "\u2028", "caf\u00e9/x", "a\"b", `a\b`, "kube-system/coredns")
	for _, s := range cases {
		w, _ := json.Marshal(s)
		if got := quoted(s); got != string(w) {
			t.Fatalf("quoted(%q) = %s, json.Marshal writes %s", s, got, w)
		}
	}
}

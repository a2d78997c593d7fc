package listpage

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// reference is what the backup decoded with encoding/json before this
// package: the page, then each item's head.
func reference(body []byte) (*Page, error) {
	var lp struct {
		Metadata struct {
			Continue           string `json:"continue"`
			RemainingItemCount *int64 `json:"remainingItemCount"`
		} `json:"metadata"`
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(body, &lp); err != nil {
		return nil, err
	}
	p := &Page{Continue: lp.Metadata.Continue, Remaining: -1}
	if lp.Metadata.RemainingItemCount != nil {
		p.Remaining = *lp.Metadata.RemainingItemCount
	}
	for _, raw := range lp.Items {
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name      string            `json:"name"`
				Namespace string            `json:"namespace"`
				UID       string            `json:"uid"`
				Labels    map[string]string `json:"labels"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(raw, &head); err != nil {
			return nil, err
		}
		p.Items = append(p.Items, Item{APIVersion: head.APIVersion, Kind: head.Kind, Namespace: head.Metadata.Namespace,
			Name: head.Metadata.Name, UID: head.Metadata.UID, Labels: head.Metadata.Labels, JSON: raw})
	}
	return p, nil
}

func sameAsReference(t *testing.T, body []byte) *Page {
	t.Helper()
	want, werr := reference(body)
	got, gerr := Decode(body)
	if (werr != nil) != (gerr != nil) {
		t.Fatalf("encoding/json error %v, Decode error %v, for %s", werr, gerr, body)
	}
	if werr != nil {
		return nil
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Decode(%s)\n got %+v\nwant %+v", body, got, want)
	}
	// Each item read on its own reads the same.
	for _, it := range want.Items {
		obj, err := Object(it.JSON)
		if err != nil || !reflect.DeepEqual(obj, it) {
			t.Fatalf("Object(%s) = %+v, %v; want %+v", it.JSON, obj, err, it)
		}
	}
	return got
}

func TestObjectRefusesWhatEncodingJSONRefuses(t *testing.T) {
	for _, body := range []string{``, `{`, `{} {}`, `[]`, `{"metadata":{"uid":1}}`, `null`} {
		if _, err := Object([]byte(body)); err == nil {
			t.Errorf("Object(%q) accepted", body)
		}
	}
	it, err := Object([]byte(` {"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"a","uid":"1234-5"}} ` + "\n"))
	if err != nil || it.UID != "1234-5" || it.Name != "a" || it.Kind != "PartialObjectMetadata" {
		t.Fatalf("Object = %+v, %v", it, err)
	}
}

func TestDecodeReadsWhatEncodingJSONRead(t *testing.T) {
	for _, body := range []string{
		`{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"7","continue":"abc","remainingItemCount":1500},"items":[` +
			`{"metadata":{"name":"a","namespace":"ns","uid":"u","labels":{"app":"x","k":"v"},"annotations":{"a":"{\"b\":[1]}"}},"data":{"k":"v"}},` +
			`{"metadata":{"name":"b","namespace":"ns"},"data":{}}]}`,
		// A custom resource list: every item carries its type.
		`{"apiVersion":"example.io/v1","items":[{"apiVersion":"example.io/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"x":[1,2.5e3,true,null,"s"]}}],"kind":"WidgetList","metadata":{"continue":""}}`,
		// Indented, as some aggregated API servers write.
		"{\n  \"metadata\": {},\n  \"items\": [\n    {\n      \"metadata\": {\"name\": \"a\"}\n    } ,\n    {\"metadata\":{\"name\":\"b\",\"labels\":null}}\n  ]\n}\n",
		// Escapes in names, labels and member names; non-ASCII.
		`{"items":[{"met\u0061data":{"name":"\u00e9t\u00e9","namespace":"n\"s","labels":{"a\/b":"\u2603","e":""}}}]}`,
		// Invalid UTF-8 in names and values: replaced, as encoding/json does.
		"{\"items\":[{\"metadata\":{\"name\":\"a\xff\",\"labels\":{\"k\xfe\\u00e9\":\"v\",\"\xc3\":\"\xe2\x98\"}},\"kind\xff\":\"K\"}]}",
		`{"items":[]}`,
		`{"items":null,"metadata":null}`,
		`{}`,
		`{"items":[{}]}`,
		`{"items":[{"metadata":{"name":null,"labels":{"a":null}}}]}`,
		`{"metadata":{"remainingItemCount":null},"items":[{"metadata":{"name":"x"},"kind":"K"}]}`,
		// Malformed pages: both refuse.
		``,
		`[]`,
		`{"items":[{"metadata":{"name":"a"}}]`,
		`{"items":[{"metadata":{"name":"a"}}]} {}`,
		`{"items":[{"metadata":{"name":1}}]}`,
		`{"items":[{"metadata":{"labels":{"a":1}}}]}`,
		`{"items":[{"metadata":"x"}]}`,
		`{"items":{}}`,
		`{"metadata":{"remainingItemCount":"3"}}`,
		`{"items":[{"metadata":{"name":"a"},}]}`,
		`{"items":[{"metadata":{"name":"a"}},]}`,
	} {
		sameAsReference(t, []byte(body))
	}
}

// TestDecodeRandomPages compares Decode with encoding/json on pages made
// of random objects, compact and indented.
func TestDecodeRandomPages(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		items := make([]any, rng.IntN(6))
		for j := range items {
			items[j] = randomObject(rng)
		}
		list := map[string]any{"kind": "List", "apiVersion": "v1", "items": items,
			"metadata": map[string]any{"continue": randomString(rng), "remainingItemCount": rng.IntN(1000)}}
		var body []byte
		var err error
		if i%2 == 0 {
			body, err = json.Marshal(list)
		} else {
			body, err = json.MarshalIndent(list, "", "\t")
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := sameAsReference(t, body); got == nil || len(got.Items) != len(items) {
			t.Fatalf("page %d: decoded %v, want %d items", i, got, len(items))
		}
	}
}

func randomObject(rng *rand.Rand) map[string]any {
	meta := map[string]any{"name": randomString(rng), "uid": randomString(rng)}
	if rng.IntN(2) == 0 {
		meta["namespace"] = randomString(rng)
	}
	if rng.IntN(2) == 0 {
		labels := map[string]any{}
		for range rng.IntN(4) {
			labels[randomString(rng)] = randomString(rng)
		}
		meta["labels"] = labels
	}
	obj := map[string]any{"metadata": meta, "data": map[string]any{"k": randomString(rng), "n": []any{1.5, true, nil, map[string]any{}}}}
	if rng.IntN(3) == 0 {
		obj["apiVersion"], obj["kind"] = "example.io/v1", "Widget"
	}
	return obj
}

func randomString(rng *rand.Rand) string {
	const chars = `abc-./"\<>&` + "\u00e9\u2603\t\n\x01"
	r := []rune(chars)
	var b strings.Builder
	for range rng.IntN(12) {
		b.WriteRune(r[rng.IntN(len(r))])
	}
	return b.String()
}

func TestItemBytesCannotBeAppendedIntoTheNext(t *testing.T) {
	p, err := Decode([]byte(`{"items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	first := append(p.Items[0].JSON, `garbage`...)
	_ = first
	if got := string(p.Items[1].JSON); got != `{"metadata":{"name":"b"}}` {
		t.Fatalf("second item is %s after an append to the first", got)
	}
}

// FuzzDecode: whatever Decode accepts, each item it cuts out is a JSON
// object on its own, and encoding/json reads the same head from it.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"metadata":{"continue":"c","remainingItemCount":3},"items":[{"apiVersion":"v1","kind":"K","metadata":{"name":"a","namespace":"n","labels":{"x":"y"}}},{"metadata":{}}]}`))
	f.Add([]byte("{\"items\":[ {\"metadata\":{\"name\":\"\\u00e9\"}} , {} ]}"))
	f.Add([]byte(`{"items":null}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := Decode(body)
		if err != nil {
			return
		}
		for i, it := range p.Items {
			if !json.Valid(it.JSON) || !bytes.HasPrefix(it.JSON, []byte("{")) {
				t.Fatalf("item %d is not a JSON object: %q", i, it.JSON)
			}
			var obj map[string]any
			if err := json.Unmarshal(it.JSON, &obj); err != nil {
				t.Fatalf("item %d: %v", i, err)
			}
			// Exact member names only: encoding/json would also match
			// "Metadata", which the API server never writes.
			for k := range obj {
				if k != "metadata" && strings.EqualFold(k, "metadata") {
					return
				}
			}
			meta, _ := obj["metadata"].(map[string]any)
			if s, _ := meta["name"].(string); s != it.Name {
				t.Fatalf("item %d: name %q, encoding/json reads %q", i, it.Name, s)
			}
			if s, _ := meta["namespace"].(string); s != it.Namespace {
				t.Fatalf("item %d: namespace %q, encoding/json reads %q", i, it.Namespace, s)
			}
			if s, _ := obj["kind"].(string); s != it.Kind {
				t.Fatalf("item %d: kind %q, encoding/json reads %q", i, it.Kind, s)
			}
		}
	})
}

func benchPage(n, dataBytes int) []byte {
	items := make([]map[string]any, n)
	for i := range items {
		items[i] = map[string]any{
			"metadata": map[string]any{"name": fmt.Sprintf("cm-%05d", i), "namespace": "bench-03", "uid": "0b7d3e1c-8f3a-4c55-9a55-2e6f1b0d9c1a",
				"resourceVersion": "123456", "creationTimestamp": "2026-12-07T20:00:00Z", "labels": map[string]string{"app": "bench"},
				"managedFields": []any{map[string]any{"manager": "bench", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1",
					"fieldsV1": map[string]any{"f:data": map[string]any{".": map[string]any{}, "f:payload": map[string]any{}}}}}},
			"data": map[string]string{"payload": strings.Repeat("x", dataBytes)},
		}
	}
	body, _ := json.Marshal(map[string]any{"kind": "ConfigMapList", "apiVersion": "v1", "metadata": map[string]any{"continue": "abc"}, "items": items})
	return body
}

// BenchmarkDecode: a page of 500 ConfigMaps of about 1.5 KB, as the
// backup benchmark's, against the encoding/json decoding it replaced.
func BenchmarkDecode(b *testing.B) {
	body := benchPage(500, 1000)
	for _, c := range []struct {
		name   string
		decode func([]byte) (*Page, error)
	}{{"listpage", Decode}, {"encoding-json", reference}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, err := c.decode(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// createAnswer is what the API server answers a restore's create with
// (metadata only, as internal/restore asks): a ConfigMap's, its managed
// fields listing twenty data keys.
func createAnswer() []byte {
	keys := map[string]any{".": map[string]any{}}
	for i := range 20 {
		keys[fmt.Sprintf("f:key-%02d", i)] = map[string]any{}
	}
	body, _ := json.Marshal(map[string]any{
		"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
		"metadata": map[string]any{
			"name": "cm-00042", "namespace": "bench-03", "uid": "0b7d3e1c-8f3a-4c55-9a55-2e6f1b0d9c1a",
			"resourceVersion": "123456", "creationTimestamp": "2026-12-07T20:00:00Z",
			"labels": map[string]string{"app": "bench", "velero.io/restore-name": "r1"},
			"managedFields": []any{map[string]any{"manager": "lifeboat", "operation": "Update", "apiVersion": "v1",
				"time": "2026-12-07T20:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": map[string]any{"f:data": keys}}},
		},
	})
	return body
}

// BenchmarkObject: one create's answer, read once per restored item.
func BenchmarkObject(b *testing.B) {
	body := createAnswer()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if it, err := Object(body); err != nil || it.UID == "" {
			b.Fatal(it, err)
		}
	}
}

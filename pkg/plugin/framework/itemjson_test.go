package framework

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// itemJSONSamples are JSON texts whose decoding and encoding must match
// the slow path's, valid or not.
var itemJSONSamples = []string{
	`{}`, ` { } `, "\t{\n\"a\" :\r1 }\n", `{"a":1}x`, `{"a":1}{}`, `[]`, `null`, `"x"`, `1`, ``, ` `,
	`{"a":null,"b":true,"c":false,"d":[],"e":{},"f":[1,[2,[3]]],"g":""}`,
	`{"a":1,"a":{"b":2}}`, `{"a":{"b":1},"a":{"c":2}}`,
	`{"n":[0,-0,1,-1,9223372036854775807,-9223372036854775808,9223372036854775808,-9223372036854775809]}`,
	`{"n":[0.0,-0.0,1.5,1e3,1E3,1e+3,1e-3,-2.5e-7,123456789012345678901234567890,1e21,1e20,1e-6,1e-7,5e-324,1.7976931348623157e308]}`,
	`{"n":1e400}`, `{"n":-1e400}`, `{"n":01}`, `{"n":1.}`, `{"n":.5}`, `{"n":+1}`, `{"n":-}`, `{"n":1e}`, `{"n":1e+}`, `{"n":--1}`, `{"n":0x10}`,
	`{"s":"\"\\\/\b\f\n\r\t"}`, `{"s":"\u0041\u00e9\u20ac\uD83D\uDE00"}`, `{"s":"\uD83D"}`, `{"s":"\uDE00"}`, `{"s":"\uD83Dx"}`,
	`{"s":"\uD83D\u0041"}`, `{"s":"\uD83D\uD83D\uDE00"}`, `{"s":"\uD83D\uZZZZ"}`, `{"s":"\u12"}`, `{"s":"\u12G4"}`, `{"s":"\'"}`, `{"s":"\x"}`,
	`{"s":"<>&` + "\u2028\u2029\u007f" + `"}`, "{\"s\":\"\x01\"}", "{\"s\":\"a\tb\"}", `{"s":"é ü 日本"}`,
	"{\"s\":\"\xff\xfe\"}", "{\"s\":\"a\xc3\"}", "{\"s\":\"\xed\xa0\x80\"}", "{\"s\":\"\xef\xbf\xbd\"}", "{\"\xff\":1}",
	`{"s":"unterminated}`, `{"a":1,}`, `{"a" 1}`, `{a:1}`, `{"a":1 "b":2}`, `{"a":[1,]}`, `{"a":[1 2]}`, `{"a":tru}`, `{"a":nul}`, `{"a":True}`,
	`{"":1,"\u0000":2}`, `{"k":"` + strings.Repeat("x", 3000) + `"}`,
	`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","namespace":"ns","labels":{"app":"x"},"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"apiVersion\":\"v1\",\"data\":{\"a\":\"<b>\"}}\n"},"managedFields":[{"manager":"kubectl","operation":"Update","fieldsV1":{"f:data":{".":{},"f:a":{}}}}]},"data":{"a":"<b>"}}`,
	strings.Repeat(`{"a":`, 200) + `1` + strings.Repeat(`}`, 200),
	strings.Repeat(`{"a":[`, 5001) + strings.Repeat(`]}`, 5001),
}

// checkItemJSON compares the fast decoder and encoder with the slow path
// on data.
func checkItemJSON(t *testing.T, data []byte) {
	t.Helper()
	var want map[string]any
	wantErr := utiljson.Unmarshal(data, &want)
	got, ok := decodeItemObject(data)
	if ok {
		if wantErr != nil {
			t.Fatalf("%q: decoded, the slow path fails: %v", data, wantErr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: decoded %#v, want %#v", data, got, want)
		}
	} else if wantErr == nil && want != nil && bytes.HasPrefix(bytes.TrimLeft(data, " \t\r\n"), []byte("{")) {
		t.Fatalf("%q: not decoded, the slow path decodes %#v", data, want)
	}
	// decodeItem, as plugins see it, agrees either way.
	item, err := decodeItem("item", data)
	if (err == nil) != (wantErr == nil && want != nil) || (err == nil && !reflect.DeepEqual(item.Object, want)) {
		t.Fatalf("%q: decodeItem = %v, %v; slow path %v, %v", data, item, err, want, wantErr)
	}
	if wantErr != nil || want == nil {
		return
	}
	wantJSON, wantErr := json.Marshal(want)
	gotJSON, err := encodeItemContent(want)
	if (err == nil) != (wantErr == nil) || !bytes.Equal(gotJSON, wantJSON) {
		t.Fatalf("%q: encoded %s, %v; want %s, %v", data, gotJSON, err, wantJSON, wantErr)
	}
}

func TestItemJSONMatchesTheSlowPath(t *testing.T) {
	for _, s := range itemJSONSamples {
		checkItemJSON(t, []byte(s))
	}
}

func FuzzItemJSON(f *testing.F) {
	for _, s := range itemJSONSamples {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkItemJSON(t, data) })
}

// TestEncodeItemContentValues covers values decoding never produces but a
// plugin may put into an item: other Go types go through encoding/json.
func TestEncodeItemContentValues(t *testing.T) {
	type custom struct {
		A string `json:"a"`
	}
	for _, obj := range []map[string]any{
		{"a": int32(1), "b": uint64(math.MaxUint64), "c": float32(1.5), "d": []string{"x"}, "e": map[string]string{"z": "<", "a": ""}},
		{"a": custom{A: "&"}, "b": &custom{}, "c": (*custom)(nil), "d": json.RawMessage(`{"y" : 1}`), "e": json.Number("12")},
		{"a": map[string]any(nil), "b": []any(nil), "c": []any{}, "d": map[string]any{}, "e": []any{nil, map[string]any{"x": int(7)}}},
		{"f": []any{0.1, 1e21, 1e-7, 123456789.0, -1e-9, 1e100}},
		{"s": "\u2028\u2029<>&\"\\\b\f\n\r\t\x01\x1f\x7f" + "\xff" + "é"},
	} {
		want, wantErr := json.Marshal(obj)
		got, err := encodeItemContent(obj)
		if wantErr != nil || err != nil || !bytes.Equal(got, want) {
			t.Errorf("encodeItemContent(%#v) = %s, %v; want %s, %v", obj, got, err, want, wantErr)
		}
	}
	for _, obj := range []map[string]any{
		{"a": math.NaN()}, {"a": []any{math.Inf(1)}}, {"a": make(chan int)}, {"a": map[string]any{"b": math.Inf(-1)}},
	} {
		if _, err := encodeItemContent(obj); err == nil {
			t.Errorf("encodeItemContent(%v) did not fail", obj)
		}
	}
	// A cycle fails as it does in encoding/json, rather than recursing
	// forever.
	cyclic := map[string]any{}
	cyclic["self"] = cyclic
	if _, err := encodeItemContent(cyclic); err == nil {
		t.Error("encoding a cyclic object did not fail")
	}
}

func BenchmarkItemJSON(b *testing.B) {
	data := []byte(itemJSONSamples[len(itemJSONSamples)-3])
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := decodeItemObject(data); !ok {
				b.Fatal("not decoded")
			}
		}
	})
	obj, _ := decodeItemObject(data)
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := encodeItemContent(obj); err != nil {
				b.Fatal(err)
			}
		}
	})
}

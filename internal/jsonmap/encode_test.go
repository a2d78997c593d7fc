package jsonmap

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// sameAsMarshal checks that Encode writes what json.Marshal writes, or
// fails where it fails, and that Append agrees with Encode.
func sameAsMarshal(t *testing.T, m map[string]any) []byte {
	t.Helper()
	want, werr := json.Marshal(m)
	got, gerr := Encode(m)
	if (werr != nil) != (gerr != nil) {
		t.Fatalf("Encode(%#v): error %v, json.Marshal's %v", m, gerr, werr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Encode(%#v)\n got %s\nwant %s", m, got, want)
	}
	appended, aerr := Append([]byte("prefix"), m)
	if (aerr != nil) != (gerr != nil) || string(appended) != "prefix"+string(got) {
		t.Fatalf("Append = %q, %v; Encode = %q, %v", appended, aerr, got, gerr)
	}
	return got
}

func TestEncodeWritesWhatMarshalWrites(t *testing.T) {
	var allASCII strings.Builder
	for c := range 128 {
		allASCII.WriteByte(byte(c))
	}
	for _, v := range []any{
		nil, "", "plain", allASCII.String(), "<a href=\"x\">&amp;</a>", "\u2028\u2029", "é☃😀\ufffd",
		"\xff", "a\xc3", "\xe2\x98x", "\xed\xa0\x80", "\xc0\xaf", "\x00\x1f\x7f",
		true, false,
		int64(0), int64(math.MaxInt64), int64(math.MinInt64), int64(9007199254740993),
		0, -1, math.MaxInt, int32(math.MinInt32), int32(7),
		0.0, math.Copysign(0, -1), 0.1, 1.5, -2.0, 1e20, 1e21, 123456789e15, 1e-6, 1e-7, 9.99e-7,
		5e-324, math.MaxFloat64, -math.SmallestNonzeroFloat64, 1e300, 1e-300, 9007199254740993.0, 1 << 62,
		float32(0.1), float32(1e-7), float32(1e21), float32(16777217), float32(math.MaxFloat32), float32(math.Copysign(0, -1)),
		map[string]any{}, []any{}, map[string]any(nil), []any(nil),
		[]any{nil, "x", int64(1), []any{map[string]any{"b": 1, "a": 2}}},
		map[string]any{"z": 1, "a": map[string]any{"y": nil, "b": []any{}}, "": "empty", "é": 1, "Z": 2, "a/b~c": 3},
		// Types Encode leaves to encoding/json.
		map[string]string{"b": "<", "a": "x"}, []string{"a", "b"}, []int{1, 2}, json.Number("12.50"),
		json.RawMessage(`{"b":1, "a":2}`), time.Date(2026, 12, 7, 20, 0, 0, 0, time.UTC), uint64(math.MaxUint64),
		int8(-3), uint(7), struct {
			A string `json:"a"`
		}{"<"}, &struct{ X []byte }{[]byte("hi")},
	} {
		sameAsMarshal(t, map[string]any{"v": v})
	}
	if got := sameAsMarshal(t, nil); string(got) != "null" {
		t.Fatalf("Encode(nil) = %s", got)
	}
}

func TestEncodeRefusesWhatMarshalRefuses(t *testing.T) {
	for _, c := range []struct {
		m    map[string]any
		path string
	}{
		{map[string]any{"spec": map[string]any{"ratio": math.NaN()}}, "/spec/ratio"},
		{map[string]any{"a": []any{1, math.Inf(1)}}, "/a/1"},
		{map[string]any{"a/b": math.Inf(-1)}, "/a~1b"},
		{map[string]any{"f": float32(math.NaN())}, "/f"},
		{map[string]any{"c": map[string]any{"d": make(chan int)}}, "/c/d"},
		{map[string]any{"fn": func() {}}, "/fn"},
		{map[string]any{"m": map[string]float64{"x": math.NaN()}}, "/m"},
	} {
		sameAsMarshal(t, c.m)
		_, err := Encode(c.m)
		if err == nil || !strings.Contains(err.Error(), c.path+":") {
			t.Errorf("Encode(%#v): error %v, want one naming %s", c.m, err, c.path)
		}
	}
	_, err := Encode(map[string]any{"c": make(chan int)})
	if err == nil || !strings.Contains(err.Error(), "chan int") {
		t.Errorf("error %v does not name the type", err)
	}
}

// TestEncodeDeep: values nested past where encoding/json looks for cycles
// are written whole; a cycle is an error, not a stack overflow.
func TestEncodeDeep(t *testing.T) {
	deep := map[string]any{"leaf": 0.5}
	for i := range 3000 {
		if i%2 == 0 {
			deep = map[string]any{"m": deep}
		} else {
			deep = map[string]any{"a": []any{deep, "x"}}
		}
	}
	sameAsMarshal(t, deep)

	cyclic := map[string]any{"a": 1}
	cyclic["self"] = cyclic
	if _, err := Encode(cyclic); err == nil {
		t.Fatal("a cycle encoded")
	}
	list := []any{1}
	list[0] = list
	if _, err := Encode(map[string]any{"l": list}); err == nil {
		t.Fatal("a cycle through a slice encoded")
	}
}

// TestEncodeRandom compares Encode with json.Marshal on random values of
// every type unstructured content holds.
func TestEncodeRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 8))
	for range 500 {
		m := map[string]any{}
		for range rng.IntN(8) {
			m[randomGoString(rng)] = randomValueGo(rng, 0)
		}
		sameAsMarshal(t, m)
	}
}

// TestEncodeDecodesBack: what Decode made, encoded, decodes to itself
// again (but for integral floats; see Encode).
func TestEncodeDecodesBack(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 4))
	inputs := [][]byte{configMapJSON(), deploymentJSON(), customResourceJSON()}
	for range 500 {
		inputs = append(inputs, randomJSON(rng))
	}
	for _, data := range inputs {
		roundTrip(t, data)
	}
}

// roundTrip checks Encode(Decode(data)) against what utiljson and Decode
// read back from it.
func roundTrip(t *testing.T, data []byte) {
	t.Helper()
	m, err := Decode(data)
	if err != nil {
		return
	}
	out := sameAsMarshal(t, m)
	back, err := reference(out)
	if err != nil {
		t.Fatalf("utiljson cannot read Encode(Decode(%q)) = %s: %v", data, out, err)
	}
	if d := sameAfterEncode(m, back); d != "" {
		t.Fatalf("Encode(Decode(%q)) = %s reads back differently at %s", data, out, d)
	}
	again, err := Decode(out)
	if err != nil || same(back, again) != "" {
		t.Fatalf("Decode(%s) = %v, %v; utiljson reads %v", out, again, err, back)
	}
}

func TestEncodeKeepsTheCustomResourceNumbers(t *testing.T) {
	m, err := Decode(customResourceJSON())
	if err != nil {
		t.Fatal(err)
	}
	out, err := Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"serial":9007199254740993`, `"ratio":0.1`, `"huge":1e+300`, `"tiny":5e-324`, `"big":18446744073709552000`} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("Encode wrote %s, without %s", out, want)
		}
	}
	// As encoding/json writes them: -0.0 and 2.0 read back as int64.
	back, _ := Decode(out)
	spec := back["spec"].(map[string]any)
	if spec["negativeZero"] != int64(0) || spec["whole"] != int64(2) {
		t.Errorf("negativeZero %#v, whole %#v", spec["negativeZero"], spec["whole"])
	}
}

package jsonmap

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

// sameAsReference checks Decode against utiljson.Unmarshal on data and
// returns Decode's result.
func sameAsReference(t *testing.T, data []byte) (map[string]any, error) {
	t.Helper()
	want, werr := reference(data)
	got, gerr := Decode(data)
	if (werr != nil) != (gerr != nil) {
		t.Fatalf("Decode(%q): error %v, utiljson's %v", data, gerr, werr)
	}
	if gerr == nil {
		if d := same(want, got); d != "" {
			t.Fatalf("Decode(%q) differs from utiljson at %s", data, d)
		}
	}
	return got, gerr
}

func TestDecodeValues(t *testing.T) {
	negZero := math.Copysign(0, -1)
	for _, c := range []struct {
		in   string
		want any // the value of "a"
	}{
		{`{"a":0}`, int64(0)},
		{`{"a":-0}`, int64(0)},
		{`{"a":-0.0}`, negZero},
		{`{"a":1.0}`, 1.0},
		{`{"a":1e2}`, 100.0},
		{`{"a":1E+2}`, 100.0},
		{`{"a":1e0}`, 1.0},
		{`{"a":0.1}`, 0.1},
		{`{"a":1e300}`, 1e300},
		{`{"a":1e-400}`, 0.0},
		{`{"a":9007199254740993}`, int64(9007199254740993)},
		{`{"a":9223372036854775807}`, int64(math.MaxInt64)},
		{`{"a":-9223372036854775808}`, int64(math.MinInt64)},
		{`{"a":9223372036854775808}`, 9223372036854775808.0},
		{`{"a":-9223372036854775809}`, -9223372036854775809.0},
		{`{"a":true}`, true},
		{`{"a":false}`, false},
		{`{"a":null}`, nil},
		{`{"a":""}`, ""},
		{`{"a":{}}`, map[string]any{}},
		{`{"a":[]}`, []any{}},
		{`{"a":[1,"x",null,[{}]]}`, []any{int64(1), "x", nil, []any{map[string]any{}}}},
		// The last of repeated names wins, whole: objects are not merged.
		{`{"a":1,"a":2}`, int64(2)},
		{`{"a":{"b":1},"a":{"c":2}}`, map[string]any{"c": int64(2)}},
		{` {"a" : 1 } ` + "\n\t\r", int64(1)},
		{`{"a":"\"\\\/\b\f\n\r\t\u0000\u00e9\u2603"}`, "\"\\/\b\f\n\r\t\x00é☃"},
		{`{"a":"<&>\u003c"}`, "<&><"},
		{`{"a":"\ud83d\ude00\uD834\uDD1E"}`, "😀𝄞"},
		// Unpaired surrogates: U+FFFD each; the escape after one that
		// does not pair is read on its own.
		{`{"a":"\ud800"}`, "\ufffd"},
		{`{"a":"\udc00\ud800x"}`, "\ufffd\ufffdx"},
		{`{"a":"\ud800\u0041"}`, "\ufffdA"},
		{`{"a":"\ud800\ud800\udc00"}`, "\ufffd𐀀"},
		// Invalid UTF-8: U+FFFD for each byte.
		{"{\"a\":\"x\xffy\"}", "x\ufffdy"},
		{"{\"a\":\"\xe2\x98\"}", "\ufffd\ufffd"},
		{"{\"a\":\"\xed\xa0\x80\"}", "\ufffd\ufffd\ufffd"},
		{"{\"a\":\"\xef\xbf\xbd\\n\"}", "\ufffd\n"},
		{"{\"a\":\"\x7f\"}", "\x7f"},
	} {
		got, err := sameAsReference(t, []byte(c.in))
		if err != nil {
			t.Fatalf("Decode(%q): %v", c.in, err)
		}
		if d := same(c.want, got["a"]); d != "" {
			t.Errorf("Decode(%q): a is %#v, want %#v (%s)", c.in, got["a"], c.want, d)
		}
	}
}

func TestDecodeTopLevel(t *testing.T) {
	for _, in := range []string{`null`, " null\n"} {
		m, err := sameAsReference(t, []byte(in))
		if err != nil || m != nil {
			t.Errorf("Decode(%q) = %#v, %v; want a nil map, as utiljson", in, m, err)
		}
	}
	m, err := sameAsReference(t, []byte(`{}`))
	if err != nil || m == nil || len(m) != 0 {
		t.Errorf("Decode({}) = %#v, %v; want an empty map", m, err)
	}
}

func TestDecodeRefusesWhatUtiljsonRefuses(t *testing.T) {
	for _, in := range []string{
		``, ` `, `{`, `}`, `{"a"}`, `{"a":}`, `{,}`, `{"a":1,}`, `{"a":1 "b":2}`, `{"a":[1,]}`, `{"a":[1 2]}`,
		`[]`, `[{}]`, `"s"`, `1`, `true`, `false`, `{} {}`, `{}x`, `{}]`, `null null`, `nul`, `{"a":nul}`,
		`{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":-}`, `{"a":+1}`, `{"a":1e}`, `{"a":0x1}`, `{"a":NaN}`, `{"a":Infinity}`,
		`{"a":1e400}`, `{"a":-1e400}`, `{"b":[{"a":1e309}]}`,
		"{\"a\":\"\x01\"}", "{\"a\":\"\n\"}", `{"a":"\q"}`, `{"a":"\u12"}`, `{"a":"\u12G4"}`, `{"a":"\'"}`, `{"a":"x}`,
		`{'a':1}`, `{a:1}`, `{"a":True}`, `{"a":tru}`, "\ufeff{}", "{}\x00", "{\"a\xff\":1,}",
	} {
		if _, err := sameAsReference(t, []byte(in)); err == nil {
			t.Errorf("Decode(%q) accepted", in)
		}
	}
}

func TestDecodeDepth(t *testing.T) {
	// encoding/json's limit, and jsontext's: 10,000 levels.
	for _, depth := range []int{9999, 10000, 10001} {
		arrays := `{"a":` + strings.Repeat(`[`, depth-1) + strings.Repeat(`]`, depth-1) + `}`
		objects := strings.Repeat(`{"a":`, depth) + `1` + strings.Repeat(`}`, depth)
		for _, in := range []string{arrays, objects} {
			_, err := sameAsReference(t, []byte(in))
			if (err == nil) != (depth <= 10000) {
				t.Errorf("depth %d: error %v", depth, err)
			}
		}
	}
}

// TestDecodeRandom compares Decode with utiljson on random JSON text.
func TestDecodeRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for range 500 {
		// The comparison is the test; whether the text was an error
		// (both agree, or sameAsReference fails) does not matter here.
		_, _ = sameAsReference(t, randomJSON(rng))
	}
}

// TestDecodeRandomValues compares them on what encoding/json writes for
// random values, compact and indented.
func TestDecodeRandomValues(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for i := range 300 {
		m := map[string]any{}
		for range 1 + rng.IntN(8) {
			m[randomGoString(rng)] = randomValueGo(rng, 0)
		}
		var data []byte
		var err error
		if i%2 == 0 {
			data, err = json.Marshal(m)
		} else {
			data, err = json.MarshalIndent(m, "", "  ")
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sameAsReference(t, data); err != nil {
			t.Fatalf("Decode(%s): %v", data, err)
		}
	}
}

func TestDecodeKubernetesObjects(t *testing.T) {
	for name, data := range map[string][]byte{"configmap": configMapJSON(), "deployment": deploymentJSON(), "crd": customResourceJSON()} {
		t.Run(name, func(t *testing.T) {
			if _, err := sameAsReference(t, data); err != nil {
				t.Fatal(err)
			}
		})
	}
	m, _ := Decode(customResourceJSON())
	spec := m["spec"].(map[string]any)
	if spec["serial"] != int64(9007199254740993) || spec["ratio"] != 0.1 || spec["huge"] != 1e300 {
		t.Errorf("spec = %#v", spec)
	}
	if z, ok := spec["negativeZero"].(float64); !ok || z != 0 || !math.Signbit(z) {
		t.Errorf("negativeZero = %#v, want float64 -0", spec["negativeZero"])
	}
}

// TestDecodedStringsAreCopies: changing the input afterwards changes
// nothing decoded, names and values, plain or unquoted.
func TestDecodedStringsAreCopies(t *testing.T) {
	data := []byte(`{"name":"value","esc\u0061ped":"x\ny","n":12,"a":["s"]}`)
	m, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprint(m)
	for i := range data {
		data[i] = 'X'
	}
	if got := fmt.Sprint(m); got != want {
		t.Fatalf("after the input changed: %s, was %s", got, want)
	}
}

// TestDecodeReusesDecodersSafely: pooled decoders, after a failure and
// side by side, decode each input on its own.
func TestDecodeReusesDecodersSafely(t *testing.T) {
	if _, err := Decode([]byte(`{"a":[{"b":`)); err == nil {
		t.Fatal("truncated input accepted")
	}
	inputs := [][]byte{configMapJSON(), deploymentJSON(), customResourceJSON(), []byte(`{"a":"\u00e9"}`)}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				data := inputs[(g+i)%len(inputs)]
				want, _ := reference(data)
				got, err := Decode(data)
				if err != nil {
					t.Error(err)
					return
				}
				if d := same(want, got); d != "" {
					t.Errorf("input %d: %s", (g+i)%len(inputs), d)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestDecodeEmptyIsNotEOF(t *testing.T) {
	for _, in := range []string{"", " \n"} {
		if _, err := Decode([]byte(in)); err == nil || errors.Is(err, io.EOF) {
			t.Errorf("Decode(%q): error %v, want one that is not io.EOF", in, err)
		}
	}
}

func TestDecodeErrorSaysWhere(t *testing.T) {
	_, err := Decode([]byte(`{"spec":{"x":[1,1e999]}}`))
	if err == nil || !strings.Contains(err.Error(), "/spec/x/1") || !strings.Contains(err.Error(), "1e999") {
		t.Fatalf("error %v, want one naming /spec/x/1 and the number", err)
	}
	_, err = Decode([]byte(`{"spec":{"x":[1,}}`))
	if err == nil || !strings.Contains(err.Error(), "/spec/x") {
		t.Fatalf("error %v, want one naming /spec/x", err)
	}
}

func TestVerbatim(t *testing.T) {
	for s, want := range map[string]bool{"": true, "abc": true, "é☃": true, `a\n`: false, "é\\": false, "\xff": false, "a\xe2\x98": false} {
		if got := verbatim([]byte(s)); got != want {
			t.Errorf("verbatim(%q) = %v", s, got)
		}
	}
	if got := unquote(nil, []byte(`a\u00E9\/`)); !bytes.Equal(got, []byte("aé/")) {
		t.Errorf("unquote = %q", got)
	}
}

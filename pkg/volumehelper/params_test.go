package volumehelper

import (
	"encoding/json"
	"fmt"
	"math"
	"testing"

	"go.yaml.in/yaml/v3"
)

type myString string

type point struct{ X, Y int }

func TestValuesEqual(t *testing.T) {
	selfMap := map[string]any{}
	selfMap["me"] = selfMap
	otherSelfMap := map[string]any{}
	otherSelfMap["me"] = otherSelfMap
	var selfIface any
	selfIface = &selfIface
	one := 1
	var nilMap map[string]any
	var nilSlice []any
	var nilPtr *int

	tests := []struct {
		name string
		a, b any
		want bool
	}{
		// Numbers compare by value across Go types.
		{"int and float64 from YAML/JSON", 1, 1.0, true},
		{"int64 and int", int64(42), 42, true},
		{"uint and int", uint(7), 7, true},
		{"uint8 and float64", uint8(255), 255.0, true},
		{"int32 and int16", int32(-3), int16(-3), true},
		{"negative int and uint", -1, uint64(math.MaxUint64), false},
		{"float with fraction and int", 1.5, 1, false},
		{"different ints", 1, 2, false},
		{"max uint64 and its float", uint64(math.MaxUint64), float64(math.MaxUint64), false}, // 2^64 is out of range
		{"2^63 as uint and float", uint64(1 << 63), float64(1 << 63), true},
		{"min int64 and its float", int64(math.MinInt64), float64(math.MinInt64), true},
		{"int beyond float precision", int64(1<<53 + 1), float64(1 << 53), false},
		{"NaN is not equal to itself", math.NaN(), math.NaN(), false},
		{"infinity and an int", math.Inf(1), math.MaxInt64, false},
		{"float32 and float64 of a binary fraction", float32(0.5), 0.5, true},
		{"json.Number and int", json.Number("10"), 10, true},
		{"json.Number float and float64", json.Number("2.5"), 2.5, true},
		{"big json.Number and uint64", json.Number("18446744073709551615"), uint64(math.MaxUint64), true},
		{"json.Number and string of the same text", json.Number("10"), "10", false},
		{"pointer to int and int", &one, 1, true},

		// Strings and bools are exact, and never equal a number.
		{"strings", "fast", "fast", true},
		{"strings differ in case", "fast", "Fast", false},
		{"named string type", myString("fast"), "fast", true},
		{"string and number", "1", 1, false},
		{"bools", true, true, true},
		{"bool and string", true, "true", false},
		{"bool and number", true, 1, false},

		// nil only equals nil; a nil map or slice is nil (JSON null).
		{"nil and nil", nil, nil, true},
		{"nil and zero", nil, 0, false},
		{"nil and empty string", nil, "", false},
		{"nil map and nil", nilMap, nil, true},
		{"nil slice and nil", nilSlice, nil, true},
		{"nil pointer and nil", nilPtr, nil, true},
		{"empty map and nil", map[string]any{}, nil, false},
		{"empty map and empty list", map[string]any{}, []any{}, false},

		// Lists element by element, whatever their Go types.
		{"lists", []any{1, "a", true}, []any{1.0, "a", true}, true},
		{"typed list and []any", []int{1, 2}, []any{1.0, 2.0}, true},
		{"array and slice", [2]int{1, 2}, []any{1, 2}, true},
		{"lists of different length", []any{1}, []any{1, 1}, false},
		{"lists in another order", []any{1, 2}, []any{2, 1}, false},
		{"list and map", []any{1}, map[string]any{"0": 1}, false},

		// Maps key by key, map[any]any from yaml.v2 included.
		{"map[string]any and map[any]any", map[string]any{"a": 1}, map[any]any{"a": 1.0}, true},
		{"nested maps and lists", map[string]any{"a": map[string]any{"b": []any{1, map[string]any{"c": 2}}}},
			map[any]any{"a": map[any]any{"b": []any{1.0, map[any]any{"c": int64(2)}}}}, true},
		{"nested value differs", map[string]any{"a": map[string]any{"b": []any{1, 2}}},
			map[string]any{"a": map[string]any{"b": []any{1, 3}}}, false},
		{"extra key", map[string]any{"a": 1}, map[string]any{"a": 1, "b": 2}, false},
		{"different key", map[string]any{"a": 1}, map[string]any{"b": 1}, false},
		{"numeric keys by value", map[any]any{1: "x"}, map[any]any{1.0: "x"}, true},
		{"named string keys", map[myString]any{"a": 1}, map[string]any{"a": 1}, true},
		{"two keys equal by value against two distinct keys", map[any]any{1: "x", 1.0: "x"}, map[any]any{1: "x", "other": "x"}, false},
		{"map of typed values", map[string]int{"a": 1}, map[string]any{"a": 1.0}, true},

		// Anything else is unequal rather than a panic.
		{"self-referencing maps", selfMap, otherSelfMap, false},
		{"self-referencing interface", selfIface, selfIface, false},
		{"funcs", func() {}, func() {}, false},
		{"channel and map", make(chan int), map[string]any{}, false},
		{"equal structs", point{1, 2}, point{1, 2}, true},
		{"struct and map", point{1, 2}, map[string]any{"X": 1, "Y": 2}, false},
		{"complex numbers", complex(1, 2), complex(1, 2), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ValuesEqual(tc.a, tc.b); got != tc.want {
				t.Errorf("ValuesEqual(%#v, %#v) = %v, want %v", tc.a, tc.b, got, tc.want)
			}
			if got := ValuesEqual(tc.b, tc.a); got != tc.want {
				t.Errorf("ValuesEqual(%#v, %#v) = %v, want %v (not symmetric)", tc.b, tc.a, got, tc.want)
			}
		})
	}
}

// TestValuesEqualFromYAML compares parameters as the policy parser and a
// plugin decoding its own YAML produce them.
func TestValuesEqualFromYAML(t *testing.T) {
	p := mustParse(t, `
version: v1
volumePolicies:
- conditions: {}
  action:
    type: custom
    parameters:
      driver: vault
      retries: 3
      ratio: 0.5
      enabled: true
      targets: [{region: eu, weight: 1}, {region: us, weight: 2}]
`)
	have := p.VolumePolicies[0].Action.Parameters

	var fromJSON map[string]any
	if err := json.Unmarshal([]byte(`{"retries": 3, "ratio": 0.5, "targets": [{"region": "eu", "weight": 1}, {"region": "us", "weight": 2}]}`), &fromJSON); err != nil {
		t.Fatal(err)
	}
	if !ParamsMatch(have, fromJSON) {
		t.Errorf("JSON-decoded params (float64 numbers) do not match %v", have)
	}

	var fromYAML map[string]any
	if err := yaml.Unmarshal([]byte("driver: vault\nenabled: true\ntargets:\n- {region: eu, weight: 1.0}\n- {region: us, weight: 2}\n"), &fromYAML); err != nil {
		t.Fatal(err)
	}
	if !ParamsMatch(have, fromYAML) {
		t.Errorf("YAML-decoded params do not match %v", have)
	}

	// yaml.v2 style: nested maps are map[any]any.
	v2 := map[string]any{"targets": []any{map[any]any{"region": "eu", "weight": 1}, map[any]any{"region": "us", "weight": int64(2)}}}
	if !ParamsMatch(have, v2) {
		t.Errorf("map[any]any params do not match %v", have)
	}
	v2["targets"] = []any{map[any]any{"region": "eu", "weight": 1}}
	if ParamsMatch(have, v2) {
		t.Errorf("a shorter list matched %v", have)
	}
}

func TestParamsMatch(t *testing.T) {
	have := map[string]any{"plugin": "vault", "level": 2, "opts": map[string]any{"fast": true}, "none": nil}
	tests := []struct {
		name string
		want map[string]any
		ok   bool
	}{
		{"nil matches any parameters", nil, true},
		{"empty matches any parameters", map[string]any{}, true},
		{"subset", map[string]any{"plugin": "vault"}, true},
		{"subset with int as float", map[string]any{"plugin": "vault", "level": 2.0}, true},
		{"nested map", map[string]any{"opts": map[any]any{"fast": true}}, true},
		{"nil value present", map[string]any{"none": nil}, true},
		{"nil value absent", map[string]any{"other": nil}, false},
		{"value differs", map[string]any{"plugin": "other"}, false},
		{"missing key", map[string]any{"plugin": "vault", "zone": "a"}, false},
		{"type differs", map[string]any{"level": "2"}, false},
		{"map against scalar", map[string]any{"plugin": map[string]any{"x": 1}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ParamsMatch(have, tc.want); got != tc.ok {
				t.Errorf("ParamsMatch(%v, %v) = %v, want %v", have, tc.want, got, tc.ok)
			}
		})
	}
	if !ParamsMatch(nil, nil) || ParamsMatch(nil, map[string]any{"a": 1}) {
		t.Error("nil parameters: want match only for empty matchParams")
	}
}

// TestValuesEqualNeverPanics compares every pair of an assortment of odd
// values; a panic fails the test, and equality must be symmetric.
func TestValuesEqualNeverPanics(t *testing.T) {
	cyclic := []any{nil}
	cyclic[0] = cyclic
	var iface fmt.Stringer
	values := []any{
		nil, 0, -1, uint64(math.MaxUint64), math.NaN(), math.Inf(-1), float32(1), complex64(1),
		"", "x", json.Number("x"), json.Number("1e400"), true,
		[]any{}, []byte("ab"), [0]int{}, map[string]any{}, map[any]any{nil: nil}, map[any]any{[2]int{}: 1},
		map[fmt.Stringer]any{iface: 1}, map[float64]any{math.NaN(): 1}, cyclic,
		struct{ a func() }{}, func() {}, make(chan int), new(any), (*int)(nil), iface,
	}
	for _, a := range values {
		for _, b := range values {
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("ValuesEqual(%#v, %#v) panicked: %v", a, b, r)
					}
				}()
				if ValuesEqual(a, b) != ValuesEqual(b, a) {
					t.Errorf("ValuesEqual(%#v, %#v) is not symmetric", a, b)
				}
				ParamsMatch(map[string]any{"k": a}, map[string]any{"k": b})
			}()
		}
	}
}

func TestCopyParams(t *testing.T) {
	orig := map[string]any{"a": []any{map[string]any{"b": 1}}, "c": map[any]any{"d": []any{2}}}
	cp := copyParams(orig)
	if !ValuesEqual(orig, cp) {
		t.Fatalf("copy %v differs from %v", cp, orig)
	}
	cp["a"].([]any)[0].(map[string]any)["b"] = 99
	cp["c"].(map[any]any)["d"].([]any)[0] = 99
	cp["new"] = true
	want := map[string]any{"a": []any{map[string]any{"b": 1}}, "c": map[any]any{"d": []any{2}}}
	if !ValuesEqual(orig, want) {
		t.Errorf("changing the copy changed the original: %v", orig)
	}
	if copyParams(nil) != nil {
		t.Error("copy of nil parameters is not nil")
	}
}

package volumehelper

import (
	"encoding/json"
	"math"
	"reflect"
	"strconv"
)

// A custom action's parameters come from YAML (int, float64, map[string]any)
// while a plugin's matchParams come from Go literals or its own JSON/YAML
// decoding (int64, uint, json.Number, map[any]any from yaml.v2...). Comparing
// them with == would call 1 and 1.0 different and panic on maps and slices,
// so values are compared the way a reader of the policy would: by value.

// maxDepth bounds recursion so that a self-referencing value (a map holding
// itself, a pointer to an interface holding that pointer) ends in "unequal"
// rather than a stack overflow, which no recover can catch.
const maxDepth = 100

// ParamsMatch reports whether every key of want is present in have with a
// value equal to want's by ValuesEqual. An empty or nil want matches any
// parameters, so a plugin that claims every custom volume can pass nil.
func ParamsMatch(have, want map[string]any) bool {
	for k, w := range want {
		h, ok := have[k]
		if !ok || !ValuesEqual(h, w) {
			return false
		}
	}
	return true
}

// ValuesEqual compares two parameter values by value: numbers of any Go
// type (and json.Number) are equal when numerically equal, strings and bools
// exactly, maps and lists element by element whatever their Go types,
// pointers and interfaces by what they point to, and nil only to nil (a nil
// map or slice counts as nil, as JSON's null). Values of mismatched kinds
// are unequal; it never panics.
func ValuesEqual(a, b any) bool {
	return equal(reflect.ValueOf(a), reflect.ValueOf(b), 0)
}

var jsonNumberType = reflect.TypeFor[json.Number]()

func equal(a, b reflect.Value, depth int) bool {
	if depth > maxDepth {
		return false
	}
	a, okA := indirect(a)
	b, okB := indirect(b)
	if !okA || !okB {
		return false
	}
	if !a.IsValid() || !b.IsValid() {
		return a.IsValid() == b.IsValid()
	}
	na, aIsNum := number(a)
	nb, bIsNum := number(b)
	if aIsNum || bIsNum {
		return aIsNum && bIsNum && na.equal(nb)
	}
	switch a.Kind() {
	case reflect.String:
		return b.Kind() == reflect.String && a.String() == b.String()
	case reflect.Bool:
		return b.Kind() == reflect.Bool && a.Bool() == b.Bool()
	case reflect.Slice, reflect.Array:
		if (b.Kind() != reflect.Slice && b.Kind() != reflect.Array) || a.Len() != b.Len() {
			return false
		}
		for i := range a.Len() {
			if !equal(a.Index(i), b.Index(i), depth+1) {
				return false
			}
		}
		return true
	case reflect.Map:
		if b.Kind() != reflect.Map || a.Len() != b.Len() {
			return false
		}
		// Equal lengths are not enough when keys can be equal by value
		// without being identical (1 and 1.0 in a map[any]any), so check
		// that b has no key a lacks as well as the other way round.
		return mapWithin(a, b, depth, true) && mapWithin(b, a, depth, false)
	}
	// Structs, channels, functions and the like do not come out of YAML or
	// JSON; DeepEqual is exact for them and, unlike ==, cannot panic.
	if a.Type() != b.Type() || !a.CanInterface() || !b.CanInterface() {
		return false
	}
	return reflect.DeepEqual(a.Interface(), b.Interface())
}

// indirect unwraps interfaces and pointers down to the value they hold; a
// nil one, nil map or nil slice becomes the invalid Value that stands for
// nil. ok is false for a chain too long to be anything but a cycle.
func indirect(v reflect.Value) (reflect.Value, bool) {
	for range maxDepth {
		if !v.IsValid() {
			return v, true
		}
		switch v.Kind() {
		case reflect.Interface, reflect.Pointer:
			if v.IsNil() {
				return reflect.Value{}, true
			}
			v = v.Elem()
		case reflect.Map, reflect.Slice:
			if v.IsNil() {
				return reflect.Value{}, true
			}
			return v, true
		default:
			return v, true
		}
	}
	return reflect.Value{}, false
}

// mapWithin reports whether every key of a has an equal key in b, and, when
// values is set, whether the values under those keys are equal too.
func mapWithin(a, b reflect.Value, depth int, values bool) bool {
	it := a.MapRange()
	for it.Next() {
		bv, ok := lookup(b, it.Key(), depth)
		if !ok {
			return false
		}
		if values && !equal(it.Value(), bv, depth+1) {
			return false
		}
	}
	return true
}

// lookup finds the value under a key of m equal to key. The direct map
// index answers the common case (string keys on both sides) without a scan;
// a miss is final only when m's keys are plain strings, since any other key
// type may hold a value-equal key of another Go type.
func lookup(m reflect.Value, key reflect.Value, depth int) (reflect.Value, bool) {
	k, ok := indirect(key)
	keyType := m.Type().Key()
	if ok && k.IsValid() && k.Kind() == reflect.String && k.Type() != jsonNumberType {
		if keyType.Kind() == reflect.String && keyType != jsonNumberType {
			v := m.MapIndex(reflect.ValueOf(k.String()).Convert(keyType))
			return v, v.IsValid()
		}
		if s := reflect.ValueOf(k.String()); s.Type().AssignableTo(keyType) {
			if v := m.MapIndex(s); v.IsValid() {
				return v, true
			}
		}
	}
	it := m.MapRange()
	for it.Next() {
		if equal(key, it.Key(), depth+1) {
			return it.Value(), true
		}
	}
	return reflect.Value{}, false
}

type numKind uint8

const (
	numInt numKind = iota + 1
	numUint
	numFloat
)

// num is a number reduced to one of three exact representations, so that
// comparing never goes through a lossy conversion.
type num struct {
	kind numKind
	i    int64
	u    uint64
	f    float64
}

func number(v reflect.Value) (num, bool) {
	if v.Type() == jsonNumberType {
		s := v.String()
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return num{kind: numInt, i: i}, true
		}
		if u, err := strconv.ParseUint(s, 10, 64); err == nil {
			return num{kind: numUint, u: u}, true
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			return num{kind: numFloat, f: f}, true
		}
		// Not a number after all; it compares as the text it is.
		return num{}, false
	}
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return num{kind: numInt, i: v.Int()}, true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return num{kind: numUint, u: v.Uint()}, true
	case reflect.Float32, reflect.Float64:
		return num{kind: numFloat, f: v.Float()}, true
	}
	return num{}, false
}

func (x num) equal(y num) bool {
	if x.kind == numFloat || y.kind == numFloat {
		if x.kind != numFloat {
			x, y = y, x
		}
		return floatEquals(x.f, y)
	}
	switch {
	case x.kind == numInt && y.kind == numInt:
		return x.i == y.i
	case x.kind == numUint && y.kind == numUint:
		return x.u == y.u
	case x.kind == numInt:
		return x.i >= 0 && uint64(x.i) == y.u
	default:
		return y.i >= 0 && uint64(y.i) == x.u
	}
}

// floatEquals compares f with n exactly: a float equals an integer only when
// it has no fraction and lies in the integer type's range (a bare int64(f)
// would round or wrap).
func floatEquals(f float64, n num) bool {
	switch n.kind {
	case numFloat:
		return f == n.f
	case numInt:
		return f == math.Trunc(f) && f >= -(1<<63) && f < 1<<63 && int64(f) == n.i
	case numUint:
		return f == math.Trunc(f) && f >= 0 && f < 1<<64 && uint64(f) == n.u
	}
	return false
}

// copyParams returns a copy of a policy's parameters that shares no map or
// slice with it, so that a plugin changing what it got cannot change the
// decisions of every later call (the policies are shared by all workers).
func copyParams(p map[string]any) map[string]any {
	if p == nil {
		return nil
	}
	out := make(map[string]any, len(p))
	for k, v := range p {
		out[k] = copyValue(v, 0)
	}
	return out
}

func copyValue(v any, depth int) any {
	if depth > maxDepth {
		return v
	}
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = copyValue(e, depth+1)
		}
		return out
	case map[any]any:
		out := make(map[any]any, len(x))
		for k, e := range x {
			out[k] = copyValue(e, depth+1)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = copyValue(e, depth+1)
		}
		return out
	}
	return v
}

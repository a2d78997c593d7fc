package jsonmap

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// reference is what Decode replaces.
func reference(data []byte) (map[string]any, error) {
	var m map[string]any
	err := utiljson.Unmarshal(data, &m)
	return m, err
}

// same compares two decoded values more strictly than reflect.DeepEqual:
// floats by their bits, so that -0 and 0 differ. It says where they
// differ, "" where they do not.
func same(a, b any) string { return diff(a, b, false) }

// sameAfterEncode is same, but for what encoding cannot keep (see
// Encode): an integral float64 in a may come back as the int64 of the same
// value in b.
func sameAfterEncode(a, b any) string { return diff(a, b, true) }

// diff builds the path to a difference on the way out, only when there
// is one: built on the way in, deep values would make long paths at
// every level.
func diff(a, b any, floatToInt bool) string {
	switch a := a.(type) {
	case map[string]any:
		bm, ok := b.(map[string]any)
		if !ok || (a == nil) != (bm == nil) || len(a) != len(bm) {
			return fmt.Sprintf(": %#v, %#v", a, b)
		}
		for k, v := range a {
			w, ok := bm[k]
			if !ok {
				return fmt.Sprintf(": %q missing", k)
			}
			if d := diff(v, w, floatToInt); d != "" {
				return "/" + k + d
			}
		}
		return ""
	case []any:
		ba, ok := b.([]any)
		if !ok || (a == nil) != (ba == nil) || len(a) != len(ba) {
			return fmt.Sprintf(": %#v, %#v", a, b)
		}
		for i := range a {
			if d := diff(a[i], ba[i], floatToInt); d != "" {
				return "/" + strconv.Itoa(i) + d
			}
		}
		return ""
	case float64:
		if bf, ok := b.(float64); ok && math.Float64bits(a) == math.Float64bits(bf) {
			return ""
		}
		if bi, ok := b.(int64); ok && floatToInt && float64(bi) == a {
			return ""
		}
	default:
		if a == b {
			return ""
		}
	}
	return fmt.Sprintf(": %#v (%T), %#v (%T)", a, a, b, b)
}

// randomJSON writes a random JSON object as text, in the forms the
// decoders may disagree on: numbers of every shape, escapes, invalid
// UTF-8, repeated names, white space anywhere.
func randomJSON(rng *rand.Rand) []byte {
	var b strings.Builder
	space(rng, &b)
	randomObject(rng, &b, 0)
	space(rng, &b)
	return []byte(b.String())
}

func space(rng *rand.Rand, b *strings.Builder) {
	if rng.IntN(4) == 0 {
		b.WriteString([]string{" ", "\n", "\t", "\r\n  "}[rng.IntN(4)])
	}
}

func randomObject(rng *rand.Rand, b *strings.Builder, depth int) {
	b.WriteByte('{')
	n := rng.IntN(6)
	names := []string{}
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		space(rng, b)
		// Now and then a name seen before: the last one wins.
		if len(names) > 0 && rng.IntN(8) == 0 {
			b.WriteString(names[rng.IntN(len(names))])
		} else {
			name := randomString(rng)
			names = append(names, name)
			b.WriteString(name)
		}
		space(rng, b)
		b.WriteByte(':')
		space(rng, b)
		randomValue(rng, b, depth+1)
		space(rng, b)
	}
	b.WriteByte('}')
}

func randomValue(rng *rand.Rand, b *strings.Builder, depth int) {
	k := rng.IntN(10)
	if depth > 5 {
		k = 2 + rng.IntN(8)
	}
	switch k {
	case 0:
		randomObject(rng, b, depth)
	case 1:
		b.WriteByte('[')
		for i := range rng.IntN(5) {
			if i > 0 {
				b.WriteByte(',')
			}
			space(rng, b)
			randomValue(rng, b, depth+1)
			space(rng, b)
		}
		b.WriteByte(']')
	case 2, 3:
		b.WriteString(randomString(rng))
	case 4, 5, 6:
		b.WriteString(randomNumber(rng))
	case 7:
		b.WriteString("true")
	case 8:
		b.WriteString("false")
	default:
		b.WriteString("null")
	}
}

// randomString is a JSON string literal.
func randomString(rng *rand.Rand) string {
	pieces := []string{
		"a", "metadata", "k8s.io/name", " ", "é", "☃", "😀", "<&>", "\u2028", "\ufffd",
		`\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`, `\u0000`, `\u001f`, `\u00e9`, `\u2603`,
		`\ud83d\ude00`, `\ud800`, `\udc00`, `\ud800\u0041`, `\udbff\udfff`, `\uD834\uDD1E`, `\ud800\ud800`,
		"\xff", "\xc3", "\xe2\x98", "\xed\xa0\x80", "\x7f", "\xc0\xaf",
	}
	var b strings.Builder
	b.WriteByte('"')
	for range rng.IntN(6) {
		b.WriteString(pieces[rng.IntN(len(pieces))])
	}
	b.WriteByte('"')
	return b.String()
}

func randomNumber(rng *rand.Rand) string {
	switch rng.IntN(12) {
	case 0:
		return strconv.FormatInt(rng.Int64(), 10)
	case 1:
		return strconv.FormatInt(-rng.Int64(), 10)
	case 2:
		return []string{"9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
			"18446744073709551616", "9007199254740993", "-0", "0", "1e400", "-1e400", "1e-400", "1E+2", "1e0"}[rng.IntN(13)]
	case 3:
		return strconv.FormatFloat(rng.NormFloat64()*1e6, 'f', -1, 64)
	case 4:
		return strconv.FormatFloat(math.Float64frombits(rng.Uint64()&^(0x7ff<<52)|uint64(rng.IntN(0x7ff))<<52), 'g', -1, 64)
	case 5:
		return strconv.Itoa(rng.IntN(100)) + ".0"
	case 6:
		return "-0.0"
	case 7:
		return strconv.Itoa(rng.IntN(1000)) + "e" + strconv.Itoa(rng.IntN(40)-20)
	case 8:
		return "0." + strconv.Itoa(rng.IntN(1e6))
	default:
		return strconv.Itoa(rng.IntN(1000))
	}
}

// randomValueGo is a random value of a type unstructured content holds.
func randomValueGo(rng *rand.Rand, depth int) any {
	k := rng.IntN(14)
	if depth > 5 {
		k = 2 + rng.IntN(12)
	}
	switch k {
	case 0:
		m := map[string]any{}
		for range rng.IntN(6) {
			m[randomGoString(rng)] = randomValueGo(rng, depth+1)
		}
		return m
	case 1:
		a := make([]any, rng.IntN(5))
		for i := range a {
			a[i] = randomValueGo(rng, depth+1)
		}
		return a
	case 2, 3:
		return randomGoString(rng)
	case 4:
		return rng.Int64() >> rng.IntN(64)
	case 5:
		return -rng.Int64()
	case 6:
		return math.Float64frombits(rng.Uint64()&^(0x7ff<<52) | uint64(rng.IntN(0x7ff))<<52)
	case 7:
		return []float64{0.1, 1e300, 1e21, 1e20, 1e-6, 1e-7, 5e-324, math.MaxFloat64, math.Copysign(0, -1), 0, 1.5, -2}[rng.IntN(12)]
	case 8:
		return rng.IntN(2) == 0
	case 9:
		return nil
	case 10:
		return rng.IntN(1<<40) - 1<<39
	case 11:
		return rng.Int32()
	case 12:
		return math.Float32frombits(rng.Uint32()&^(0xff<<23) | uint32(rng.IntN(0xff))<<23)
	default:
		return float64(rng.IntN(1000)) / 8
	}
}

func randomGoString(rng *rand.Rand) string {
	var b strings.Builder
	for range rng.IntN(8) {
		switch rng.IntN(4) {
		case 0:
			b.WriteByte(byte(rng.IntN(256)))
		case 1:
			b.WriteRune(rune(rng.IntN(0x30000)))
		default:
			b.WriteByte(byte('a' + rng.IntN(26)))
		}
	}
	return b.String()
}

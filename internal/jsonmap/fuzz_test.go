package jsonmap

import (
	"encoding/binary"
	"math"
	"testing"
	"unicode/utf8"
)

// FuzzDecode: Decode accepts what utiljson.Unmarshal accepts and reads
// the same from it; what it reads, Encode writes as json.Marshal does,
// and that reads back the same (see roundTrip).
func FuzzDecode(f *testing.F) {
	for _, seed := range [][]byte{
		configMapJSON(), deploymentJSON(), customResourceJSON(),
		[]byte(`{"a":[1,-0,-0.0,1.0,1e2,9223372036854775808,1e400],"a":"\ud800\u0041\ud83d\ude00"}`),
		[]byte("{\"\xff\":\"\xe2\x98\\u2028<&>\"} "), []byte(`null`), []byte(`{}{}`), []byte(`[]`),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := sameAsReference(t, data); err == nil {
			roundTrip(t, data)
		}
	})
}

// FuzzEncode: for values built from the fuzzer's bytes (strings of any
// bytes, floats of any bits, every type unstructured content holds),
// Encode writes what json.Marshal writes and fails where it fails; when
// the value holds only what Decode makes, it reads back the same.
func FuzzEncode(f *testing.F) {
	f.Add([]byte{0, 3, 2, 4, 'a', '<', 0xff, '\n', 4, 0, 0, 0, 0, 0, 0, 0xf8, 0x7f})
	f.Add([]byte{0, 2, 1, 'k', 9, 0x80, 0, 0, 0, 10, 200, 2, 2, 0xe2, 0x80})
	f.Add([]byte{0, 1, 0, 1, 2, 3, 1, 0, 0, 0, 0, 0, 0, 0x80, 0x0})
	f.Fuzz(func(t *testing.T, data []byte) {
		b := &builder{data: data}
		m, _ := b.value(0).(map[string]any)
		out := sameAsMarshal(t, m)
		if out == nil || b.foreign {
			return
		}
		back, err := reference(out)
		if err != nil {
			t.Fatalf("utiljson cannot read Encode(%#v) = %s: %v", m, out, err)
		}
		if d := sameAfterEncode(m, back); d != "" {
			t.Fatalf("Encode(%#v) = %s reads back differently at %s", m, out, d)
		}
	})
}

// builder makes a value from bytes: each value's first byte picks its
// type, the bytes after it its contents.
type builder struct {
	data []byte
	// foreign is set by a value Decode never makes (int, int32,
	// float32, a string of invalid UTF-8, a nil map or slice, which is
	// written as null), which cannot read back as itself.
	foreign bool
}

func (b *builder) next(n int) []byte {
	n = min(n, len(b.data))
	p := b.data[:n]
	b.data = b.data[n:]
	return p
}

func (b *builder) byte() byte {
	if p := b.next(1); len(p) == 1 {
		return p[0]
	}
	return 0
}

func (b *builder) uint64() uint64 {
	var p [8]byte
	copy(p[:], b.next(8))
	return binary.LittleEndian.Uint64(p[:])
}

// string takes up to max bytes as they are, valid UTF-8 or not.
func (b *builder) string(max byte) string {
	s := string(b.next(int(b.byte() % max)))
	if !utf8.ValidString(s) {
		b.foreign = true
	}
	return s
}

func (b *builder) value(depth int) any {
	kind := b.byte() % 12
	if depth > 8 && kind < 2 {
		kind = 6
	}
	switch kind {
	case 0:
		m := map[string]any{}
		for range b.byte() % 5 {
			m[b.string(8)] = b.value(depth + 1)
		}
		return m
	case 1:
		a := make([]any, b.byte()%5)
		for i := range a {
			a[i] = b.value(depth + 1)
		}
		return a
	case 2:
		return b.string(24)
	case 3:
		return int64(b.uint64())
	case 4:
		return math.Float64frombits(b.uint64())
	case 5:
		return b.byte()%2 == 0
	case 6:
		return nil
	case 7:
		b.foreign = true
		return int(b.uint64())
	case 8:
		b.foreign = true
		return int32(b.uint64())
	case 9:
		b.foreign = true
		return math.Float32frombits(uint32(b.uint64()))
	case 10:
		// An integral float: written as an integer.
		return float64(int8(b.byte())) * math.Pow(10, float64(b.byte()%25))
	default:
		b.foreign = true
		if b.byte()%2 == 0 {
			return map[string]any(nil)
		}
		return []any(nil)
	}
}

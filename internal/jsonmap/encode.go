package jsonmap

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// Encode returns m as JSON, byte for byte what encoding/json.Marshal(m)
// returns: names in sorted order, strings escaped as it escapes them
// (<, > and & too; invalid UTF-8 as \ufffd), numbers formatted as it
// formats them. So what the API server is sent is what it was sent
// before this package; and decoded again with Decode (or
// k8s.io/apimachinery/pkg/util/json.Unmarshal) it is m, but for one thing
// that encoding/json does too: a float64 with an integral value below
// 1e21 is written without a fraction ("1", "-0") and so reads back as an
// int64 of the same value. Writing "1.0" instead would keep the type, but
// the API server refuses "1.0" for an integer field of a built-in type,
// and keeps no difference between the two in a custom resource.
//
// Encode writes map[string]any, []any, string, bool, nil, int64, int,
// int32, float64 and float32 itself; a value of any other type is handed
// to encoding/json.Marshal, whose output it keeps as it is. NaN and the
// infinities are errors, as they are to encoding/json.
func Encode(m map[string]any) ([]byte, error) {
	e := getEncoder()
	defer e.release()
	b, err := e.top(e.buf[:0], m)
	e.buf = b
	if err != nil {
		return nil, err
	}
	return bytes.Clone(b), nil
}

// Append appends m's JSON, as Encode writes it, to dst. On an error it
// returns dst as it was.
func Append(dst []byte, m map[string]any) ([]byte, error) {
	e := getEncoder()
	defer e.release()
	b, err := e.top(dst, m)
	if err != nil {
		return dst, err
	}
	return b, nil
}

// encoder keeps, for reuse, the output buffer of Encode and the members
// of the objects being written (one stretch per object, sorted in place).
type encoder struct {
	buf     []byte
	members []member
	// path collects, innermost first, where a value that cannot be
	// encoded is.
	path []string
}

var encoders = sync.Pool{New: func() any { return new(encoder) }}

// maxKeptOutput bounds the output buffer a pooled encoder keeps.
const maxKeptOutput = 1 << 20

func getEncoder() *encoder { return encoders.Get().(*encoder) }

func (e *encoder) release() {
	if cap(e.buf) > maxKeptOutput {
		e.buf = nil
	}
	clear(e.members[:cap(e.members)])
	e.members = e.members[:0]
	e.path = e.path[:0]
	encoders.Put(e)
}

func (e *encoder) top(b []byte, m map[string]any) ([]byte, error) {
	b, err := e.value(b, m, 0)
	if err != nil {
		slices.Reverse(e.path)
		return b, fmt.Errorf("at /%s: %w", strings.Join(e.path, "/"), err)
	}
	return b, nil
}

// maxDepth is where encoding/json starts to look for cycles. A value
// nested deeper is handed to it: it writes a deep value as Encode would,
// and returns an error for a cycle where Encode would run out of stack.
const maxDepth = 1000

func (e *encoder) value(b []byte, v any, depth int) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return appendString(b, v), nil
	case bool:
		return strconv.AppendBool(b, v), nil
	case int64:
		return strconv.AppendInt(b, v, 10), nil
	case float64:
		return appendFloat(b, v, 64)
	case map[string]any:
		if v == nil {
			return append(b, "null"...), nil
		}
		if depth >= maxDepth {
			return appendMarshaled(b, v)
		}
		return e.object(b, v, depth+1)
	case []any:
		if v == nil {
			return append(b, "null"...), nil
		}
		if depth >= maxDepth {
			return appendMarshaled(b, v)
		}
		return e.array(b, v, depth+1)
	case int:
		return strconv.AppendInt(b, int64(v), 10), nil
	case int32:
		return strconv.AppendInt(b, int64(v), 10), nil
	case float32:
		return appendFloat(b, float64(v), 32)
	}
	return appendMarshaled(b, v)
}

func appendMarshaled(b []byte, v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return b, fmt.Errorf("a %T: %w", v, err)
	}
	return append(b, data...), nil
}

// member is a name and its value: sorted together, the values need not be
// looked up again by name.
type member struct {
	name  string
	value any
}

func (e *encoder) object(b []byte, m map[string]any, depth int) ([]byte, error) {
	// This object's members are e.members[start:end]; the objects inside
	// it push theirs after end and take them off again before returning.
	start := len(e.members)
	for name, v := range m {
		e.members = append(e.members, member{name, v})
	}
	end := len(e.members)
	slices.SortFunc(e.members[start:end], func(a, b member) int { return strings.Compare(a.name, b.name) })
	b = append(b, '{')
	for i := start; i < end; i++ {
		if i > start {
			b = append(b, ',')
		}
		mb := e.members[i]
		b = appendString(b, mb.name)
		b = append(b, ':')
		var err error
		if b, err = e.value(b, mb.value, depth); err != nil {
			e.path = append(e.path, escapePointer(mb.name))
			return b, err
		}
	}
	e.members = e.members[:start]
	return append(b, '}'), nil
}

func (e *encoder) array(b []byte, a []any, depth int) ([]byte, error) {
	b = append(b, '[')
	for i, v := range a {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = e.value(b, v, depth); err != nil {
			e.path = append(e.path, strconv.Itoa(i))
			return b, err
		}
	}
	return append(b, ']'), nil
}

// escapePointer escapes a name for a JSON pointer (RFC 6901).
func escapePointer(name string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(name)
}

// appendFloat formats f as encoding/json does for a float of bits bits:
// the shortest decimal that reads back as f, with an exponent only below
// 1e-6 or from 1e21 on, and no leading zero in a negative exponent.
func appendFloat(b []byte, f float64, bits int) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return b, fmt.Errorf("unsupported value %v: JSON has no NaN or infinities", f)
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	b = strconv.AppendFloat(b, f, format, -1, bits)
	if format == 'e' {
		// e-07 -> e-7
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}

const hexDigits = "0123456789abcdef"

// plain marks the ASCII bytes written as they are: not control
// characters, '"' or '\\', nor '<', '>' and '&', which encoding/json
// escapes so that JSON can be put into HTML.
var plain = func() (t [utf8.RuneSelf]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendString quotes s as encoding/json does: short escapes for '"',
// '\\' and \b \f \n \r \t, \u00XX for the other control characters and
// for <, > and &, \ufffd for each byte of invalid UTF-8, and \u2028 and
// \u2029, which JavaScript does not take in a string literal.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	done := 0 // s[:done] is in b
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if plain[c] {
				i++
				continue
			}
			b = append(b, s[done:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			done = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[done:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[done:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		done = i
	}
	b = append(b, s[done:]...)
	return append(b, '"')
}

package framework

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// An item action decodes every item it gets into the map of an
// *unstructured.Unstructured and encodes what it returns. With
// encoding/json (reflection, a validating pass before decoding) that is
// most of a plugin's CPU per item. The two functions below do the same for
// the shapes JSON decodes into, map[string]any, []any, string, int64,
// float64, bool and nil, with results identical to
// k8s.io/apimachinery/pkg/util/json.Unmarshal and encoding/json.Marshal;
// anything else (a syntax error, a value of another Go type) is left to
// those, so that errors and unusual values come out exactly as before.

// maxItemDepth is encoding/json's nesting limit; deeper input is left to
// the slow path, which reports it.
const maxItemDepth = 10000

// decodeItemObject decodes a JSON object the way
// k8s.io/apimachinery/pkg/util/json.Unmarshal decodes it into a
// map[string]any (whole numbers as int64, other numbers as float64). ok is
// false for anything but a valid JSON object.
func decodeItemObject(data []byte) (obj map[string]any, ok bool) {
	// One string of the whole text: plain strings (nearly all of them) are
	// its substrings instead of an allocation each. They keep the text
	// alive as long as the item, which holds nearly all of it anyway.
	d := itemDecoder{data: data, text: string(data)}
	d.skipSpace()
	if d.pos >= len(d.data) || d.data[d.pos] != '{' {
		return nil, false
	}
	v, ok := d.value(0)
	if !ok {
		return nil, false
	}
	d.skipSpace()
	if d.pos != len(d.data) {
		return nil, false
	}
	return v.(map[string]any), true
}

type itemDecoder struct {
	data []byte
	text string // data as a string
	pos  int
	// buf collects a string that has escapes or bytes to replace.
	buf []byte
}

func (d *itemDecoder) skipSpace() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

// value decodes the value at pos (no leading space).
func (d *itemDecoder) value(depth int) (any, bool) {
	if d.pos >= len(d.data) {
		return nil, false
	}
	switch c := d.data[d.pos]; {
	case c == '{':
		return d.object(depth + 1)
	case c == '[':
		return d.array(depth + 1)
	case c == '"':
		s, ok := d.str()
		return s, ok
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	}
	return nil, false
}

func (d *itemDecoder) literal(word string) bool {
	if len(d.data)-d.pos < len(word) || string(d.data[d.pos:d.pos+len(word)]) != word {
		return false
	}
	d.pos += len(word)
	return true
}

func (d *itemDecoder) object(depth int) (any, bool) {
	if depth > maxItemDepth {
		return nil, false
	}
	d.pos++ // {
	obj := map[string]any{}
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		return obj, true
	}
	for {
		if d.pos >= len(d.data) || d.data[d.pos] != '"' {
			return nil, false
		}
		key, ok := d.str()
		if !ok {
			return nil, false
		}
		d.skipSpace()
		if d.pos >= len(d.data) || d.data[d.pos] != ':' {
			return nil, false
		}
		d.pos++
		d.skipSpace()
		v, ok := d.value(depth)
		if !ok {
			return nil, false
		}
		obj[key] = v
		d.skipSpace()
		if d.pos >= len(d.data) {
			return nil, false
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
			d.skipSpace()
		case '}':
			d.pos++
			return obj, true
		default:
			return nil, false
		}
	}
}

func (d *itemDecoder) array(depth int) (any, bool) {
	if depth > maxItemDepth {
		return nil, false
	}
	d.pos++ // [
	arr := make([]any, 0)
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == ']' {
		d.pos++
		return arr, true
	}
	for {
		v, ok := d.value(depth)
		if !ok {
			return nil, false
		}
		arr = append(arr, v)
		d.skipSpace()
		if d.pos >= len(d.data) {
			return nil, false
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
			d.skipSpace()
		case ']':
			d.pos++
			return arr, true
		default:
			return nil, false
		}
	}
}

// str decodes the string at pos. Most strings hold neither escapes nor
// anything but ASCII and are taken as they are.
func (d *itemDecoder) str() (string, bool) {
	d.pos++ // "
	start := d.pos
	for d.pos < len(d.data) && plainInString[d.data[d.pos]] {
		d.pos++
	}
	if d.pos >= len(d.data) {
		return "", false
	}
	switch c := d.data[d.pos]; {
	case c == '"':
		s := d.text[start:d.pos]
		d.pos++
		return s, true
	case c == '\\' || c >= utf8.RuneSelf:
		return d.unquote(start)
	}
	return "", false // a control character
}

// plainInString marks the bytes a string decodes to as they are: ASCII but
// control characters, '"' and '\\'.
var plainInString = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// unquote decodes a string with escapes or non-ASCII bytes from pos on,
// its first start bytes plain, as encoding/json does: a surrogate escape
// that does not pair, and each byte of invalid UTF-8, become U+FFFD.
func (d *itemDecoder) unquote(start int) (string, bool) {
	b := append(d.buf[:0], d.data[start:d.pos]...)
	defer func() { d.buf = b[:0] }()
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		switch {
		case c == '"':
			d.pos++
			return string(b), true
		case c < 0x20:
			return "", false
		case c == '\\':
			if d.pos+1 >= len(d.data) {
				return "", false
			}
			switch e := d.data[d.pos+1]; e {
			case '"', '\\', '/':
				b = append(b, e)
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r := hex4(d.data[d.pos+2:])
				if r < 0 {
					return "", false
				}
				d.pos += 6
				if utf16.IsSurrogate(r) {
					// Only a valid pair is taken as one; the second
					// escape of an invalid one is decoded on its own.
					var r2 rune = -1
					if len(d.data)-d.pos >= 6 && d.data[d.pos] == '\\' && d.data[d.pos+1] == 'u' {
						r2 = hex4(d.data[d.pos+2:])
					}
					if pair := utf16.DecodeRune(r, r2); pair != utf8.RuneError {
						r = pair
						d.pos += 6
					} else {
						r = utf8.RuneError
					}
				}
				b = utf8.AppendRune(b, r)
				continue
			default:
				return "", false
			}
			d.pos += 2
		case c < utf8.RuneSelf:
			b = append(b, c)
			d.pos++
		default:
			r, size := utf8.DecodeRune(d.data[d.pos:])
			if r == utf8.RuneError && size == 1 {
				b = utf8.AppendRune(b, utf8.RuneError)
			} else {
				b = append(b, d.data[d.pos:d.pos+size]...)
			}
			d.pos += size
		}
	}
	return "", false
}

// hex4 reads four hex digits; -1 if there are not four.
func hex4(s []byte) rune {
	if len(s) < 4 {
		return -1
	}
	var r rune
	for _, c := range s[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// number decodes a number as sigs.k8s.io/json does with PreserveInts:
// int64 when it has no fraction part and fits, float64 otherwise.
func (d *itemDecoder) number() (any, bool) {
	start := d.pos
	data := d.data
	if data[d.pos] == '-' {
		d.pos++
	}
	digits := func() int {
		n := 0
		for d.pos < len(data) && data[d.pos] >= '0' && data[d.pos] <= '9' {
			d.pos++
			n++
		}
		return n
	}
	if d.pos < len(data) && data[d.pos] == '0' {
		d.pos++
	} else if digits() == 0 {
		return nil, false
	}
	fraction := false
	if d.pos < len(data) && data[d.pos] == '.' {
		fraction = true
		d.pos++
		if digits() == 0 {
			return nil, false
		}
	}
	if d.pos < len(data) && (data[d.pos] == 'e' || data[d.pos] == 'E') {
		d.pos++
		if d.pos < len(data) && (data[d.pos] == '+' || data[d.pos] == '-') {
			d.pos++
		}
		if digits() == 0 {
			return nil, false
		}
	}
	s := data[start:d.pos]
	if !fraction {
		if i, err := strconv.ParseInt(string(s), 10, 64); err == nil {
			return i, true
		}
	}
	f, err := strconv.ParseFloat(string(s), 64)
	if err != nil {
		return nil, false
	}
	return f, true
}

// maxEncodeDepth is where encoding/json starts to look for cycles; deeper
// content is left to it.
const maxEncodeDepth = 1000

var encodeBuffers = sync.Pool{New: func() any { return new([]byte) }}

// encodeItemContent encodes obj as json.Marshal does.
func encodeItemContent(obj map[string]any) ([]byte, error) {
	bp := encodeBuffers.Get().(*[]byte)
	defer encodeBuffers.Put(bp)
	b, ok := appendItemValue((*bp)[:0], obj, 0)
	if cap(b) <= 1<<20 {
		*bp = b[:0]
	}
	if !ok {
		return json.Marshal(obj)
	}
	return slices.Clone(b), nil
}

// appendItemValue appends v as json.Marshal encodes it; ok is false when
// v holds a value of a type it leaves to encoding/json and that does not
// encode (a NaN, a channel).
func appendItemValue(b []byte, v any, depth int) ([]byte, bool) {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), true
	case string:
		return appendItemString(b, v), true
	case bool:
		return strconv.AppendBool(b, v), true
	case int64:
		return strconv.AppendInt(b, v, 10), true
	case int:
		return strconv.AppendInt(b, int64(v), 10), true
	case float64:
		return appendItemFloat(b, v)
	case map[string]any:
		if v == nil {
			return append(b, "null"...), true
		}
		if depth >= maxEncodeDepth {
			return appendMarshaled(b, v)
		}
		return appendItemObject(b, v, depth+1)
	case []any:
		if v == nil {
			return append(b, "null"...), true
		}
		if depth >= maxEncodeDepth {
			return appendMarshaled(b, v)
		}
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			var ok bool
			if b, ok = appendItemValue(b, e, depth+1); !ok {
				return b, false
			}
		}
		return append(b, ']'), true
	}
	return appendMarshaled(b, v)
}

func appendMarshaled(b []byte, v any) ([]byte, bool) {
	data, err := json.Marshal(v)
	if err != nil {
		return b, false
	}
	return append(b, data...), true
}

type itemField struct {
	key   string
	value any
}

var fieldLists = sync.Pool{New: func() any { return new([]itemField) }}

// appendItemObject writes the fields in key order, as encoding/json does.
func appendItemObject(b []byte, m map[string]any, depth int) ([]byte, bool) {
	fp := fieldLists.Get().(*[]itemField)
	fields := (*fp)[:0]
	for k, v := range m {
		fields = append(fields, itemField{k, v})
	}
	slices.SortFunc(fields, func(a, b itemField) int { return strings.Compare(a.key, b.key) })
	b = append(b, '{')
	ok := true
	for i, f := range fields {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendItemString(b, f.key)
		b = append(b, ':')
		if b, ok = appendItemValue(b, f.value, depth); !ok {
			break
		}
	}
	clear(fields)
	*fp = fields[:0]
	fieldLists.Put(fp)
	return append(b, '}'), ok
}

// appendItemFloat formats like encoding/json: ES6 style, exponent only
// outside [1e-6, 1e21), without a leading zero in the exponent.
func appendItemFloat(b []byte, f float64) ([]byte, bool) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return b, false
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, true
}

const hexDigits = "0123456789abcdef"

// htmlSafe marks the ASCII bytes json.Marshal writes as they are.
var htmlSafe = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendItemString quotes s as encoding/json does with HTML escaping (the
// json.Marshal default): <, > and & escaped, invalid UTF-8 as \ufffd,
// U+2028 and U+2029 escaped.
func appendItemString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if htmlSafe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
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
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

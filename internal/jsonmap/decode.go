// Package jsonmap decodes and encodes the generic JSON values that
// Kubernetes' unstructured objects hold: map[string]any, []any, string,
// int64, float64, bool and nil.
//
// Decode gives what k8s.io/apimachinery/pkg/util/json.Unmarshal gives for
// a map[string]any, and Encode writes what encoding/json.Marshal writes.
// Those two were a large part of a restore's CPU per created item (a
// 20,000-item restore spent 1.8 s of 13 s in the first and 0.6 s in the
// second): Unmarshal scans the whole input once to validate it, then again
// to decode it, a byte at a time through a state machine, and Marshal
// goes through reflection for every value.
package jsonmap

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// Decode decodes a JSON object as
// k8s.io/apimachinery/pkg/util/json.Unmarshal(data, &m) with m a
// map[string]any does, value for value and error for error (the messages
// differ):
//
//   - a number without '.', 'e' or 'E' that fits an int64 is an int64,
//     any other a float64 (so "-0" is int64 0, "1.0" and "1e2" are
//     float64); one beyond float64's range is an error;
//   - of repeated names in an object the last one wins;
//   - invalid UTF-8 and unpaired UTF-16 surrogate escapes in strings
//     become U+FFFD, each invalid byte one;
//   - the top-level value must be an object, or null, which decodes to a
//     nil map without an error; nothing but white space may follow it;
//   - objects and arrays nest at most 10,000 deep.
//
// The strings of the result share one copy of data (its own, so data may
// change afterwards): one allocation instead of one per string, but a
// single string kept alive keeps the whole copy.
func Decode(data []byte) (map[string]any, error) {
	d := getDecoder(data)
	defer d.release()
	return d.top()
}

// decoder is a jsontext.Decoder kept for reuse (a new one's stacks of
// objects and names are allocated again for each input) with the input as
// a string and a buffer for the strings that must be unquoted.
type decoder struct {
	dec  jsontext.Decoder
	in   bytes.Buffer
	text string
	buf  []byte
}

var (
	decoders = sync.Pool{New: func() any { return new(decoder) }}
	// decodeOptions let through what encoding/json lets through: repeated
	// names and invalid UTF-8 are not syntax errors to it.
	decodeOptions = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}
)

// maxKeptBuffer bounds the unquoting buffer a pooled decoder keeps.
const maxKeptBuffer = 64 << 10

// getDecoder returns a decoder reading data in place: jsontext reads a
// bytes.Buffer's contents without copying them, so every value read is a
// slice of data, at the same offset as in text.
func getDecoder(data []byte) *decoder {
	d := decoders.Get().(*decoder)
	d.in = *bytes.NewBuffer(data)
	d.text = string(data)
	d.dec.Reset(&d.in, decodeOptions...)
	return d
}

// release returns d to the pool without its references to the input.
func (d *decoder) release() {
	d.in = bytes.Buffer{}
	d.text = ""
	d.dec.Reset(&d.in)
	if cap(d.buf) > maxKeptBuffer {
		d.buf = nil
	}
	decoders.Put(d)
}

func (d *decoder) top() (map[string]any, error) {
	switch k := d.dec.PeekKind(); k {
	case '{':
		m, err := d.object()
		if err == nil {
			err = d.atEnd()
		}
		if err != nil {
			return nil, err
		}
		return m, nil
	case 'n':
		if _, err := d.dec.ReadToken(); err != nil {
			return nil, err
		}
		return nil, d.atEnd()
	case 0:
		// PeekKind keeps its error for the next read. io.EOF there means
		// the input is empty (or all white space), an error here, not the
		// clean end of a stream.
		_, err := d.dec.ReadToken()
		if errors.Is(err, io.EOF) {
			return nil, errors.New("no JSON value: the input is empty")
		}
		return nil, err
	default:
		return nil, fmt.Errorf("a JSON %s, not an object", kindName(k))
	}
}

// atEnd checks that nothing but white space follows the value read.
func (d *decoder) atEnd() error {
	if _, err := d.dec.ReadToken(); err == nil {
		return errors.New("data after the top-level value")
	} else if !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

func (d *decoder) value() (any, error) {
	switch d.dec.PeekKind() {
	case '{':
		return d.object()
	case '[':
		return d.array()
	case '"':
		raw, err := d.dec.ReadValue()
		if err != nil {
			return nil, err
		}
		return d.str(raw), nil
	case '0':
		raw, err := d.dec.ReadValue()
		if err != nil {
			return nil, err
		}
		return d.number(raw)
	}
	// A literal, or (PeekKind's 0, an end of object or array where a
	// value belongs) an error that ReadToken reports.
	tok, err := d.dec.ReadToken()
	if err != nil {
		return nil, err
	}
	switch tok.Kind() {
	case 't':
		return true, nil
	case 'f':
		return false, nil
	case 'n':
		return nil, nil
	}
	return nil, fmt.Errorf("a JSON %s where a value belongs", kindName(tok.Kind()))
}

func (d *decoder) object() (map[string]any, error) {
	if _, err := d.dec.ReadToken(); err != nil {
		return nil, err
	}
	m := make(map[string]any)
	for d.dec.PeekKind() != '}' {
		// Only a string can come here: the decoder refuses anything else
		// where a name belongs.
		raw, err := d.dec.ReadValue()
		if err != nil {
			return nil, err
		}
		name := d.str(raw)
		v, err := d.value()
		if err != nil {
			return nil, err
		}
		m[name] = v
	}
	_, err := d.dec.ReadToken()
	return m, err
}

func (d *decoder) array() ([]any, error) {
	if _, err := d.dec.ReadToken(); err != nil {
		return nil, err
	}
	// Empty, not nil, as encoding/json decodes [].
	a := make([]any, 0)
	for d.dec.PeekKind() != ']' {
		v, err := d.value()
		if err != nil {
			return nil, err
		}
		a = append(a, v)
	}
	_, err := d.dec.ReadToken()
	return a, err
}

// offset is where raw, the value just read, starts in the input.
func (d *decoder) offset(raw []byte) int {
	return int(d.dec.InputOffset()) - len(raw)
}

// str decodes a string the decoder has checked: quotes, well-formed
// escapes, no control characters. Most strings have neither escapes nor
// invalid UTF-8, and are their text in the input as it is.
func (d *decoder) str(raw []byte) string {
	body := raw[1 : len(raw)-1]
	if verbatim(body) {
		start := d.offset(raw) + 1
		return d.text[start : start+len(body)]
	}
	d.buf = unquote(d.buf[:0], body)
	return string(d.buf)
}

// verbatim reports whether a string's body decodes to itself.
func verbatim(b []byte) bool {
	for i, c := range b {
		if c == '\\' {
			return false
		}
		if c >= utf8.RuneSelf {
			return bytes.IndexByte(b[i:], '\\') < 0 && utf8.Valid(b[i:])
		}
	}
	return true
}

// unquote appends the decoded body of a string as encoding/json decodes
// it: an escaped UTF-16 surrogate that does not pair with the escape after
// it is U+FFFD (the escape after it is then decoded on its own), and so is
// each byte of invalid UTF-8.
func unquote(dst, b []byte) []byte {
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case c == '\\':
			e := b[i+1]
			i += 2
			switch e {
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				r := hex4(b[i:])
				i += 4
				if utf16.IsSurrogate(r) {
					r2 := rune(-1)
					if i+6 <= len(b) && b[i] == '\\' && b[i+1] == 'u' {
						r2 = hex4(b[i+2:])
					}
					if pair := utf16.DecodeRune(r, r2); pair != utf8.RuneError {
						r = pair
						i += 6
					} else {
						r = utf8.RuneError
					}
				}
				dst = utf8.AppendRune(dst, r)
			default: // '"', '\\' and '/' stand for themselves
				dst = append(dst, e)
			}
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			i++
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				dst = utf8.AppendRune(dst, utf8.RuneError)
			} else {
				dst = append(dst, b[i:i+size]...)
			}
			i += size
		}
	}
	return dst
}

// hex4 reads the four hex digits of a \u escape; -1 if they are not.
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// number converts a number as sigs.k8s.io/json's PreserveInts does: an
// int64 when the literal has no '.' and strconv.ParseInt takes it (no
// exponent, in range), else strconv.ParseFloat's float64, whose range
// error is an error.
func (d *decoder) number(raw []byte) (any, error) {
	start := d.offset(raw)
	s := d.text[start : start+len(raw)]
	if !bytes.ContainsAny(raw, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i, nil
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, fmt.Errorf("number %s at %s: %w", s, d.dec.StackPointer(), err)
	}
	return f, nil
}

func kindName(k jsontext.Kind) string {
	switch k {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case '0':
		return "number"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	case '}':
		return "end of object"
	case ']':
		return "end of array"
	}
	return k.String()
}

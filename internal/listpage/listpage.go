// Package listpage reads a Kubernetes LIST response (a JSON object with
// "metadata" and "items") in one pass over its bytes, cutting each item
// out as it goes and reading on the way only the fields a backup routes
// and filters on: apiVersion, kind, metadata.name, namespace and labels.
// encoding/json needs four passes for the same (validating the page,
// cutting out each item, validating it again, decoding its head), which
// made JSON scanning a quarter of a backup's CPU.
package listpage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// Item is one object of a page.
type Item struct {
	APIVersion string
	Kind       string
	Namespace  string
	Name       string
	UID        string
	// Labels is nil when the object has none.
	Labels map[string]string
	// JSON is the object as the API server wrote it.
	JSON []byte
}

// Page is one LIST response.
type Page struct {
	Items []Item
	// Continue is the token for the next page, "" after the last.
	Continue string
	// Remaining is the API server's estimate of the items still to come,
	// -1 when it gave none.
	Remaining int64
}

// Decode reads a LIST response.
//
// Item bytes alias body (capacity cut at the item's end, so an append to
// one cannot run into the next); body must not change afterwards.
//
// Names are matched exactly, as the API server writes them. Duplicate
// names and invalid UTF-8 are let through, as encoding/json let them
// through: the item's bytes are stored as they came either way.
func Decode(body []byte) (*Page, error) {
	d := getDecoder(body)
	defer d.release()
	dec := &d.dec
	p := &Page{Remaining: -1}
	err := readObject(dec, false, func(name []byte) error {
		switch string(name) {
		case "metadata":
			return readListMeta(dec, p)
		case "items":
			return readItems(dec, body, p)
		}
		return skipValue(dec)
	})
	if err != nil {
		return nil, err
	}
	if err := atEnd(dec); err != nil {
		return nil, err
	}
	return p, nil
}

// Object reads one object (a GET's or a create's answer, or an item of an
// archive) the way Decode reads each item of a page; JSON is body.
func Object(body []byte) (Item, error) {
	d := getDecoder(body)
	defer d.release()
	dec := &d.dec
	it, err := readHead(dec)
	if err != nil {
		return Item{}, err
	}
	if err := atEnd(dec); err != nil {
		return Item{}, err
	}
	it.JSON = body
	return it, nil
}

// decoder is a jsontext.Decoder kept for reuse: a new one's stacks of
// objects and names were most of the allocations of reading a create's
// answer, read once per restored item.
type decoder struct {
	dec jsontext.Decoder
	in  bytes.Buffer
}

var (
	decoders = sync.Pool{New: func() any { return new(decoder) }}
	// decodeOptions let through what encoding/json let through (see
	// Decode).
	decodeOptions = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}
)

// getDecoder returns a decoder reading body in place (a bytes.Buffer is
// read without a copy).
func getDecoder(body []byte) *decoder {
	d := decoders.Get().(*decoder)
	d.in = *bytes.NewBuffer(body)
	d.dec.Reset(&d.in, decodeOptions...)
	return d
}

// release returns d to the pool without its reference to the body, which
// may be a large page.
func (d *decoder) release() {
	d.in = bytes.Buffer{}
	d.dec.Reset(&d.in)
	decoders.Put(d)
}

// atEnd checks that nothing but white space follows the value read, as
// encoding/json checks.
func atEnd(dec *jsontext.Decoder) error {
	if _, err := dec.ReadToken(); err == nil {
		return errors.New("data after the top-level value")
	} else if !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// readObject reads a JSON object, handing each member's name to member,
// which reads (or skips) its value. With nullable, null reads as an
// object without members, as encoding/json leaves a struct field alone.
// The name is valid until the body changes; member compares it without
// making a string of it (a string per member was half the allocations of
// reading an object).
func readObject(dec *jsontext.Decoder, nullable bool, member func(name []byte) error) error {
	if nullable && dec.PeekKind() == 'n' {
		_, err := dec.ReadToken()
		return err
	}
	if err := expectDelim(dec, '{'); err != nil {
		return err
	}
	for dec.PeekKind() != '}' {
		name, err := readName(dec)
		if err != nil {
			return err
		}
		if err := member(name); err != nil {
			return fmt.Errorf("%q: %w", name, err)
		}
	}
	_, err := dec.ReadToken()
	return err
}

func readListMeta(dec *jsontext.Decoder, p *Page) error {
	return readObject(dec, true, func(name []byte) (err error) {
		switch string(name) {
		case "continue":
			p.Continue, err = readString(dec)
			return err
		case "remainingItemCount":
			tok, err := dec.ReadToken()
			if err != nil {
				return err
			}
			switch tok.Kind() {
			case '0':
				p.Remaining = tok.Int()
			case 'n':
			default:
				return fmt.Errorf("a JSON %s, not a number", kindName(tok.Kind()))
			}
			return nil
		}
		return skipValue(dec)
	})
}

func readItems(dec *jsontext.Decoder, body []byte, p *Page) error {
	if dec.PeekKind() == 'n' {
		_, err := dec.ReadToken()
		return err
	}
	if err := expectDelim(dec, '['); err != nil {
		return err
	}
	for dec.PeekKind() != ']' {
		// The offset before an item's opening brace may still be before
		// the comma and spaces that separate it from the one before.
		start := dec.InputOffset()
		it, err := readHead(dec)
		if err != nil {
			return fmt.Errorf("item %d: %w", len(p.Items), err)
		}
		end := dec.InputOffset()
		it.JSON = bytes.TrimLeft(body[start:end:end], " \t\r\n,")
		p.Items = append(p.Items, it)
	}
	_, err := dec.ReadToken()
	return err
}

// readHead reads one object, keeping the fields of Item.
func readHead(dec *jsontext.Decoder) (Item, error) {
	var head Item
	err := readObject(dec, false, func(name []byte) (err error) {
		switch string(name) {
		case "apiVersion":
			head.APIVersion, err = readString(dec)
		case "kind":
			head.Kind, err = readString(dec)
		case "metadata":
			err = readObjectMeta(dec, &head)
		default:
			err = skipValue(dec)
		}
		return err
	})
	return head, err
}

func readObjectMeta(dec *jsontext.Decoder, head *Item) error {
	return readObject(dec, true, func(name []byte) (err error) {
		switch string(name) {
		case "name":
			head.Name, err = readString(dec)
		case "namespace":
			head.Namespace, err = readString(dec)
		case "uid":
			head.UID, err = readString(dec)
		case "labels":
			head.Labels, err = readStringMap(dec)
		default:
			err = skipValue(dec)
		}
		return err
	})
}

// skipValue skips a value unread. The body is in memory, so ReadValue
// validates it in one tight pass and hands back a slice of the body;
// SkipValue would go token by token, which was half the time of reading a
// create's answer (its managed fields).
func skipValue(dec *jsontext.Decoder) error {
	_, err := dec.ReadValue()
	return err
}

// readStringMap reads an object of strings; null is a nil map.
func readStringMap(dec *jsontext.Decoder) (map[string]string, error) {
	if dec.PeekKind() == 'n' {
		_, err := dec.ReadToken()
		return nil, err
	}
	m := map[string]string{}
	err := readObject(dec, false, func(k []byte) error {
		v, err := readString(dec)
		m[string(k)] = v
		return err
	})
	return m, err
}

// readName reads an object member's name. The decoder has already
// checked that a name comes next, so only a syntax error is possible.
// A name without escapes or invalid UTF-8 (nearly all) is its bytes in
// the body; another is decoded as jsontext decodes a string token
// (invalid UTF-8 replaced), into a new slice.
func readName(dec *jsontext.Decoder) ([]byte, error) {
	raw, err := dec.ReadValue()
	if err != nil {
		return nil, err
	}
	name := raw[1 : len(raw)-1]
	if bytes.IndexByte(name, '\\') < 0 && utf8.Valid(name) {
		return name, nil
	}
	// The only error left to report is invalid UTF-8, replaced by now.
	decoded, _ := jsontext.AppendUnquote(nil, raw)
	return decoded, nil
}

// readString reads a string value; null reads as "", as encoding/json
// leaves a string field untouched by null.
func readString(dec *jsontext.Decoder) (string, error) {
	tok, err := dec.ReadToken()
	if err != nil {
		return "", err
	}
	switch tok.Kind() {
	case '"':
		return tok.String(), nil
	case 'n':
		return "", nil
	}
	return "", fmt.Errorf("a JSON %s where a string belongs", kindName(tok.Kind()))
}

func expectDelim(dec *jsontext.Decoder, want jsontext.Kind) error {
	tok, err := dec.ReadToken()
	if err != nil {
		return err
	}
	if tok.Kind() != want {
		return fmt.Errorf("a JSON %s where a JSON %s belongs", kindName(tok.Kind()), kindName(want))
	}
	return nil
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
	}
	return strings.TrimSpace(k.String())
}

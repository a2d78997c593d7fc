package selection

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Velero matches include/exclude entries as glob patterns. It documents
// "*", "?", "[abc]" and "[a-z]" for namespaces and refuses the rest of the
// glob and regex syntax ("**", "!", "{}", ",", "|", "()"); Lifeboat accepts
// exactly that documented subset.
const globMeta = "*?["

func isPattern(s string) bool { return strings.ContainsAny(s, globMeta) }

type tokenKind uint8

const (
	tokLiteral tokenKind = iota
	tokAny               // ?
	tokStar              // *
	tokClass             // [...]
)

type token struct {
	kind tokenKind
	lit  rune
	// ranges holds inclusive [lo, hi] pairs of a character class.
	ranges []rune
}

func (t *token) matches(r rune) bool {
	switch t.kind {
	case tokAny:
		return true
	case tokLiteral:
		return r == t.lit
	case tokClass:
		for i := 0; i < len(t.ranges); i += 2 {
			if t.ranges[i] <= r && r <= t.ranges[i+1] {
				return true
			}
		}
	}
	return false
}

type pattern struct {
	toks []token
}

// compilePattern parses a glob; it refuses the syntax Velero refuses, so a
// pattern that compiles here means the same in both tools.
func compilePattern(s string) (pattern, error) {
	if strings.ContainsAny(s, "|(){},!") {
		return pattern{}, errors.New(`only "*", "?", "[abc]" and "[a-z]" are supported in patterns`)
	}
	if strings.Contains(s, "**") {
		return pattern{}, errors.New(`consecutive "*" are not supported`)
	}
	var p pattern
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch r {
		case '*':
			p.toks = append(p.toks, token{kind: tokStar})
		case '?':
			p.toks = append(p.toks, token{kind: tokAny})
		case '[':
			end := strings.IndexByte(s[i:], ']')
			if end < 0 {
				return pattern{}, errors.New(`unclosed "["`)
			}
			class, err := parseClass(s[i : i+end])
			if err != nil {
				return pattern{}, err
			}
			p.toks = append(p.toks, class)
			i += end + 1
		case ']':
			return pattern{}, errors.New(`unmatched "]"`)
		default:
			p.toks = append(p.toks, token{kind: tokLiteral, lit: r})
		}
	}
	return p, nil
}

func parseClass(body string) (token, error) {
	if body == "" {
		return token{}, errors.New(`empty "[]"`)
	}
	if body[0] == '^' {
		return token{}, errors.New(`negated classes "[^...]" are not supported`)
	}
	if strings.ContainsRune(body, '[') {
		return token{}, errors.New(`"[" inside "[...]"`)
	}
	runes := []rune(body)
	t := token{kind: tokClass}
	for i := 0; i < len(runes); i++ {
		lo, hi := runes[i], runes[i]
		if i+2 < len(runes) && runes[i+1] == '-' {
			hi = runes[i+2]
			i += 2
			if hi < lo {
				return token{}, fmt.Errorf("range %q-%q is reversed", lo, hi)
			}
		}
		t.ranges = append(t.ranges, lo, hi)
	}
	return t, nil
}

// match reports whether s matches the whole pattern. A "*" matches any run
// of characters, dots included, so "*.apps" matches "deployments.apps".
func (p *pattern) match(s string) bool {
	ti, si := 0, 0
	starTok, starStr := -1, 0
	for si < len(s) {
		if ti < len(p.toks) {
			t := &p.toks[ti]
			if t.kind == tokStar {
				starTok, starStr = ti, si
				ti++
				continue
			}
			r, size := utf8.DecodeRuneInString(s[si:])
			if t.matches(r) {
				ti++
				si += size
				continue
			}
		}
		if starTok < 0 {
			return false
		}
		// Let the last "*" swallow one more character and retry.
		_, size := utf8.DecodeRuneInString(s[starStr:])
		starStr += size
		si, ti = starStr, starTok+1
	}
	for ti < len(p.toks) && p.toks[ti].kind == tokStar {
		ti++
	}
	return ti == len(p.toks)
}

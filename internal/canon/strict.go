package canon

import (
	"github.com/jobgate/jobgate/pkg/api"

	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth bounds the nesting of objects and arrays DecodeStrict accepts, so
// no request can make a decoder, validator or canonicalizer recurse deeply.
const MaxDepth = 64

// DecodeStrict parses exactly one JSON value (RFC 8259, I-JSON rules) into
// the types encoding/json produces with UseNumber: map[string]any, []any,
// string, json.Number, bool and nil. Unlike encoding/json it refuses, with
// an error wrapping api.ErrMalformed, what would make two readers disagree on a
// value: a member name used twice in one object (the error names the member
// and the JSON pointer of its object), strings that are not valid UTF-8 or
// hold a lone surrogate escape, trailing data after the value, and nesting
// deeper than MaxDepth.
func DecodeStrict(data []byte) (any, error) {
	// One copy of the input as a string: member names, plain strings and
	// numbers are slices of it rather than an allocation each.
	p := strictParser{b: data, s: string(data)}
	p.ws()
	if p.i == len(p.b) {
		return nil, api.Userf(api.ErrMalformed, "empty body")
	}
	v, err := p.value(0)
	if err == nil {
		p.ws()
		if p.i != len(p.b) {
			err = p.fail("trailing data after the JSON value")
		}
	}
	if err != nil {
		var d *duplicateError
		if errors.As(err, &d) {
			return nil, api.Userf(api.ErrMalformed, "duplicate member name %q at %s", d.name, pointerOrRoot(d.at))
		}
		// The parser's own words, about the client's bytes.
		return nil, api.Userf(api.ErrMalformed, "%s", err.Error())
	}
	return v, nil
}

// duplicateError travels up from the object holding the duplicate; each
// enclosing container adds its reference token on the way, so the pointer
// is built only when there is an error.
type duplicateError struct {
	name string
	at   []string // reference tokens, innermost first
}

func (e *duplicateError) Error() string { return "duplicate member name " + e.name }

func pointerOrRoot(innermostFirst []string) string {
	if len(innermostFirst) == 0 {
		return "the top level"
	}
	var sb strings.Builder
	for i := len(innermostFirst) - 1; i >= 0; i-- {
		sb.WriteByte('/')
		sb.WriteString(EscapePointerToken(innermostFirst[i]))
	}
	return sb.String()
}

// EscapePointerToken escapes one reference token of a JSON pointer
// (RFC 6901): "~" becomes "~0" and "/" becomes "~1".
func EscapePointerToken(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

type strictParser struct {
	b []byte
	s string // the same bytes as b
	i int
}

type syntaxError struct {
	msg    string
	offset int
}

func (e *syntaxError) Error() string { return fmt.Sprintf("%s at offset %d", e.msg, e.offset) }

func (p *strictParser) fail(msg string) error { return &syntaxError{msg: msg, offset: p.i} }

func (p *strictParser) unexpected() error {
	if p.i >= len(p.b) {
		return p.fail("unexpected end of JSON input")
	}
	c := p.b[p.i]
	if c >= ' ' && c <= '~' {
		return p.fail(fmt.Sprintf("invalid character %q", c))
	}
	return p.fail(fmt.Sprintf("invalid byte %#x", c))
}

func (p *strictParser) ws() { p.i = SkipSpace(p.b, p.i) }

// value parses the value starting at p.i (white space already skipped).
// depth counts the containers around it.
func (p *strictParser) value(depth int) (any, error) {
	if p.i >= len(p.b) {
		return nil, p.unexpected()
	}
	switch c := p.b[p.i]; {
	case c == '{':
		return p.object(depth + 1)
	case c == '[':
		return p.array(depth + 1)
	case c == '"':
		return p.string()
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	case c == 't':
		return true, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return nil, p.literal("null")
	}
	return nil, p.unexpected()
}

func (p *strictParser) literal(word string) error {
	for i := 0; i < len(word); i++ {
		if p.i >= len(p.b) || p.b[p.i] != word[i] {
			return p.unexpected()
		}
		p.i++
	}
	return nil
}

func (p *strictParser) object(depth int) (any, error) {
	if depth > MaxDepth {
		return nil, p.fail(fmt.Sprintf("nesting deeper than %d", MaxDepth))
	}
	p.i++ // '{'
	p.ws()
	m := make(map[string]any, 4)
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return m, nil
	}
	for {
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			return nil, p.unexpected()
		}
		k, err := p.string()
		if err != nil {
			return nil, err
		}
		if _, dup := m[k]; dup {
			return nil, &duplicateError{name: k}
		}
		p.ws()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return nil, p.unexpected()
		}
		p.i++
		p.ws()
		v, err := p.value(depth)
		if err != nil {
			var d *duplicateError
			if errors.As(err, &d) {
				d.at = append(d.at, k)
			}
			return nil, err
		}
		m[k] = v
		p.ws()
		if p.i < len(p.b) && p.b[p.i] == ',' {
			p.i++
			p.ws()
			continue
		}
		if p.i < len(p.b) && p.b[p.i] == '}' {
			p.i++
			return m, nil
		}
		return nil, p.unexpected()
	}
}

func (p *strictParser) array(depth int) (any, error) {
	if depth > MaxDepth {
		return nil, p.fail(fmt.Sprintf("nesting deeper than %d", MaxDepth))
	}
	p.i++ // '['
	p.ws()
	a := []any{}
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		return a, nil
	}
	for {
		v, err := p.value(depth)
		if err != nil {
			var d *duplicateError
			if errors.As(err, &d) {
				d.at = append(d.at, strconv.Itoa(len(a)))
			}
			return nil, err
		}
		a = append(a, v)
		p.ws()
		if p.i < len(p.b) && p.b[p.i] == ',' {
			p.i++
			p.ws()
			continue
		}
		if p.i < len(p.b) && p.b[p.i] == ']' {
			p.i++
			return a, nil
		}
		return nil, p.unexpected()
	}
}

// string parses a string literal at p.i ('"'). Plain strings (no escapes)
// are one copy out of the input.
func (p *strictParser) string() (string, error) {
	p.i++ // '"'
	start := p.i
	for {
		p.i = PlainRun(p.b, p.i)
		if p.i >= len(p.b) {
			return "", p.unexpected()
		}
		switch c := p.b[p.i]; {
		case c == '"':
			s := p.s[start:p.i]
			p.i++
			return s, nil
		case c == '\\':
			return p.escapedString(start)
		case c < ' ':
			return "", p.fail("control character in string")
		default: // DEL or beyond ASCII
			r, size := utf8.DecodeRune(p.b[p.i:])
			if r == utf8.RuneError && size <= 1 {
				return "", p.fail("invalid UTF-8 in string")
			}
			p.i += size
		}
	}
}

// escapedString continues a string that has escapes; p.i is at the first
// backslash, start at the string's first byte.
func (p *strictParser) escapedString(start int) (string, error) {
	buf := make([]byte, 0, p.i-start+16)
	buf = append(buf, p.b[start:p.i]...)
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return string(buf), nil
		case c == '\\':
			if p.i+1 >= len(p.b) {
				return "", p.unexpected()
			}
			e := p.b[p.i+1]
			p.i += 2
			switch e {
			case '"', '\\', '/':
				buf = append(buf, e)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				r, ok := p.hex4()
				if !ok {
					return "", p.fail("invalid \\u escape")
				}
				if utf16.IsSurrogate(r) {
					// Only a high surrogate followed by an escaped low one
					// is a character; I-JSON forbids anything else.
					if r >= 0xDC00 || p.i+1 >= len(p.b) || p.b[p.i] != '\\' || p.b[p.i+1] != 'u' {
						return "", p.fail("lone surrogate escape in string")
					}
					p.i += 2
					lo, ok := p.hex4()
					if !ok || lo < 0xDC00 || lo > 0xDFFF {
						return "", p.fail("lone surrogate escape in string")
					}
					r = utf16.DecodeRune(r, lo)
				}
				buf = utf8.AppendRune(buf, r)
			default:
				p.i--
				return "", p.fail("invalid escape in string")
			}
		case c < ' ':
			return "", p.fail("control character in string")
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			p.i++
		default:
			r, size := utf8.DecodeRune(p.b[p.i:])
			if r == utf8.RuneError && size <= 1 {
				return "", p.fail("invalid UTF-8 in string")
			}
			buf = append(buf, p.b[p.i:p.i+size]...)
			p.i += size
		}
	}
	return "", p.unexpected()
}

func (p *strictParser) hex4() (rune, bool) {
	if len(p.b)-p.i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range p.b[p.i : p.i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	p.i += 4
	return r, true
}

// number parses -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? (ScanNumber)
// and keeps its text, as encoding/json's UseNumber does.
func (p *strictParser) number() (any, error) {
	start := p.i
	end, ok := ScanNumber(p.b, p.i)
	p.i = end
	if !ok {
		return nil, p.unexpected()
	}
	return json.Number(p.s[start:end]), nil
}

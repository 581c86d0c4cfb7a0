package schema

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/jobgate/jobgate/internal/canon"
)

// fastSchema checks the shape nearly every params schema has (a closed
// object of integers, booleans and length-bounded strings with integer
// bounds, like permit_report's) without the general validator, which
// costs several microseconds per submission. It only ever answers "surely
// valid"; for anything else (an error, a number like 47.0, a keyword it
// does not know) Apply takes the general path, which also writes every
// error message. fuzz_test.go checks it never accepts what the general
// validator refuses.
type fastSchema struct {
	props    map[string]*fastProp
	required []string
}

type fastProp struct {
	kind           string // "integer", "number", "string", "boolean"
	min, max       *int64
	exMin, exMax   *int64
	minLen, maxLen int // -1: none
}

// annotations are keywords that never change validity.
var annotations = map[string]bool{
	"title": true, "description": true, "$comment": true, "examples": true, "default": true,
	"deprecated": true, "readOnly": true, "writeOnly": true,
}

// buildFast returns nil unless root is inside the fast subset.
func buildFast(root map[string]any) *fastSchema {
	f := &fastSchema{props: map[string]*fastProp{}}
	for k, v := range root {
		switch {
		case k == "type" && v == "object", k == "additionalProperties" && v == false, k == "$schema", annotations[k]:
		case k == "required":
			list, ok := v.([]any)
			if !ok {
				return nil
			}
			for _, e := range list {
				name, ok := e.(string)
				if !ok {
					return nil
				}
				f.required = append(f.required, name)
			}
		case k == "properties":
			props, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			for name, ps := range props {
				p := buildFastProp(ps)
				if p == nil {
					return nil
				}
				f.props[name] = p
			}
		default:
			return nil
		}
	}
	if root["additionalProperties"] != false {
		return nil
	}
	return f
}

func buildFastProp(v any) *fastProp {
	s, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	p := &fastProp{minLen: -1, maxLen: -1}
	switch t := s["type"]; t {
	case "integer", "number", "string", "boolean":
		p.kind = t.(string)
	default:
		return nil
	}
	for k, v := range s {
		var ok bool
		switch {
		case k == "type" || annotations[k]:
			ok = true
		case k == "minimum":
			p.min, ok = smallInt(v)
		case k == "maximum":
			p.max, ok = smallInt(v)
		case k == "exclusiveMinimum":
			p.exMin, ok = smallInt(v)
		case k == "exclusiveMaximum":
			p.exMax, ok = smallInt(v)
		case k == "minLength" && p.kind == "string":
			var n *int64
			if n, ok = smallInt(v); ok {
				p.minLen = int(*n)
			}
		case k == "maxLength" && p.kind == "string":
			var n *int64
			if n, ok = smallInt(v); ok {
				p.maxLen = int(*n)
			}
		}
		if !ok {
			return nil
		}
	}
	return p
}

// smallInt: a bound or length given as a plain integer literal within
// int64. Instance values the fast path accepts have at most 15 digits
// (exactSmallInt), so comparing them with such a bound in int64 is exact,
// as the general validator's rationals are: 9007199254740991 (2^53-1, the
// largest integer a double holds exactly, a common maximum) qualifies.
func smallInt(v any) (*int64, bool) {
	n, ok := v.(json.Number)
	if !ok || !plainInt(string(n)) {
		return nil, false
	}
	i, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil { // beyond int64
		return nil, false
	}
	return &i, true
}

// plainInt: digits with an optional minus sign, no leading zero.
func plainInt(s string) bool {
	_, ok := canon.IntDigits(s)
	return ok
}

// plainSmallInt: plainInt with at most 15 digits, exact in a double.
func plainSmallInt(s string) bool {
	n, ok := canon.IntDigits(s)
	return ok && n <= 15
}

// valid reports true only if m surely validates.
func (f *fastSchema) valid(m map[string]any) bool {
	for k, v := range m {
		p := f.props[k]
		if p == nil || !p.valid(v) {
			return false
		}
	}
	for _, r := range f.required {
		if _, ok := m[r]; !ok {
			return false
		}
	}
	return true
}

func (p *fastProp) valid(v any) bool {
	switch p.kind {
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "string":
		s, ok := v.(string)
		if !ok || !utf8.ValidString(s) {
			return false
		}
		if p.minLen >= 0 || p.maxLen >= 0 {
			n := utf8.RuneCountInString(s)
			if p.minLen >= 0 && n < p.minLen || p.maxLen >= 0 && n > p.maxLen {
				return false
			}
		}
		return true
	}
	// integer or number: only numbers with a small integral value are sure.
	num, ok := v.(json.Number)
	if !ok {
		return false
	}
	n, ok := exactSmallInt(string(num))
	if !ok {
		return false
	}
	return (p.min == nil || n >= *p.min) && (p.max == nil || n <= *p.max) &&
		(p.exMin == nil || n > *p.exMin) && (p.exMax == nil || n < *p.exMax)
}

// exactSmallInt returns the value of a number literal whose exact value is
// an integer of at most 15 digits (47, 47.0, 4.7e1, -0).
func exactSmallInt(lit string) (int64, bool) {
	if plainSmallInt(lit) {
		n, err := strconv.ParseInt(lit, 10, 64)
		return n, err == nil
	}
	s, neg := strings.CutPrefix(lit, "-")
	mant, expPart, hasExp := strings.Cut(strings.ToLower(s), "e")
	exp := 0
	if hasExp {
		var err error
		if exp, err = strconv.Atoi(expPart); err != nil || exp > maxExponent || exp < -maxExponent {
			return 0, false
		}
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	if intPart == "" {
		return 0, false
	}
	exp -= len(frac)
	digits := strings.TrimLeft(intPart+frac, "0")
	if digits == "" {
		return 0, true
	}
	trimmed := strings.TrimRight(digits, "0")
	exp += len(digits) - len(trimmed)
	if exp < 0 || len(trimmed)+exp > 15 {
		return 0, false
	}
	n, err := strconv.ParseInt(trimmed, 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	for range exp {
		n *= 10
	}
	if neg {
		n = -n
	}
	return n, true
}

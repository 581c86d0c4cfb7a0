package canon

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// CanonicalError says that a value has no canonical JSON form, and where:
// Pointer is the JSON pointer of the offending value inside the value given
// to AppendCanonical ("" for the value itself).
type CanonicalError struct {
	Pointer string
	Reason  string
}

func (e *CanonicalError) Error() string {
	if e.Pointer == "" {
		return "no canonical JSON form: " + e.Reason
	}
	return "no canonical JSON form at " + e.Pointer + ": " + e.Reason
}

// canonError travels up the recursion collecting reference tokens
// (innermost first), so pointers cost nothing unless there is an error.
type canonError struct {
	reason string
	at     []string
}

func (e *canonError) Error() string { return e.reason }

func (e *canonError) public() *CanonicalError {
	var sb strings.Builder
	for i := len(e.at) - 1; i >= 0; i-- {
		sb.WriteByte('/')
		sb.WriteString(EscapePointerToken(e.at[i]))
	}
	return &CanonicalError{Pointer: sb.String(), Reason: e.reason}
}

// AppendCanonical appends the RFC 8785 (JSON Canonicalization Scheme) form
// of v to b: object members sorted by the UTF-16 code units of their names,
// no white space, strings escaped as the RFC says, numbers written as
// ECMAScript writes an IEEE 754 double.
//
// v is what DecodeStrict returns (map[string]any, []any, string,
// json.Number, bool, nil); float64 and Go integers are also accepted. The
// error is a *CanonicalError for a number that is not finite or out of a
// double's range, for an integer that a double would silently change (a
// json.Number literal with an integral value, or a Go integer, that the
// double nearest to it does not write back as the same value, which can
// only happen beyond ±2^53), for a string that is not valid UTF-8, and for
// any other Go type.
func AppendCanonical(b []byte, v any) ([]byte, error) {
	out, err := appendCanonical(b, v)
	if err != nil {
		if ce, ok := err.(*canonError); ok {
			return b, ce.public()
		}
		return b, err
	}
	return out, nil
}

// Canonicalize returns the RFC 8785 form of one JSON text. Input that
// DecodeStrict refuses is api.ErrMalformed; a value without canonical form is
// a *CanonicalError.
func Canonicalize(data []byte) ([]byte, error) {
	v, err := DecodeStrict(data)
	if err != nil {
		return nil, err
	}
	return AppendCanonical(make([]byte, 0, len(data)), v)
}

func appendCanonical(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case bool:
		if v {
			return append(b, "true"...), nil
		}
		return append(b, "false"...), nil
	case string:
		return appendCanonicalString(b, v)
	case json.Number:
		return appendCanonicalNumber(b, string(v))
	case float64:
		return appendES6Number(b, v)
	case float32:
		return appendES6Number(b, float64(v))
	case int:
		return appendCanonicalInt(b, int64(v))
	case int64:
		return appendCanonicalInt(b, v)
	case int32:
		return appendCanonicalInt(b, int64(v))
	case uint64:
		if v > maxExactInt+1 {
			return appendCanonicalNumber(b, strconv.FormatUint(v, 10))
		}
		return strconv.AppendUint(b, v, 10), nil
	case uint32:
		return strconv.AppendUint(b, uint64(v), 10), nil
	case map[string]any:
		return appendCanonicalObject(b, v)
	case []any:
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendCanonical(b, e); err != nil {
				if ce, ok := err.(*canonError); ok {
					ce.at = append(ce.at, strconv.Itoa(i))
				}
				return b, err
			}
		}
		return append(b, ']'), nil
	}
	return b, &canonError{reason: fmt.Sprintf("unsupported Go type %T", v)}
}

func appendCanonicalObject(b []byte, m map[string]any) ([]byte, error) {
	var small [8]string
	keys := small[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareUTF16)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = appendCanonicalString(b, k); err != nil {
			return b, err
		}
		b = append(b, ':')
		if b, err = appendCanonical(b, m[k]); err != nil {
			if ce, ok := err.(*canonError); ok {
				ce.at = append(ce.at, k)
			}
			return b, err
		}
	}
	return append(b, '}'), nil
}

// compareUTF16 orders strings by their UTF-16 code units, as RFC 8785
// sorts member names. UTF-8 byte order is code point order, which differs
// from UTF-16 order only where a character beyond U+FFFF (a surrogate pair,
// D800–DFFF) meets one in E000–FFFF; so compare bytes up to the first
// difference and decide on the two characters there.
func compareUTF16(a, b string) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		return len(a) - len(b)
	}
	for i > 0 && !utf8.RuneStart(a[i]) { // the same bytes precede in b
		i--
	}
	ra, _ := utf8.DecodeRuneInString(a[i:])
	rb, _ := utf8.DecodeRuneInString(b[i:])
	ua, ub := firstUTF16Unit(ra), firstUTF16Unit(rb)
	if ua != ub {
		return int(ua) - int(ub)
	}
	return int(ra) - int(rb) // two pairs with the same high surrogate
}

func firstUTF16Unit(r rune) rune {
	if r >= 0x10000 {
		return 0xD800 + (r-0x10000)>>10
	}
	return r
}

// appendCanonicalString writes s quoted and escaped as RFC 8785
// §3.2.2.2 says (AppendEscaped, Canonical).
func appendCanonicalString(b []byte, s string) ([]byte, error) {
	b = append(b, '"')
	b, ok := AppendEscaped(b, s, Canonical)
	if !ok {
		return b, &canonError{reason: "string is not valid UTF-8"}
	}
	return append(b, '"'), nil
}

func appendCanonicalInt(b []byte, n int64) ([]byte, error) {
	if n > maxExactInt+1 || n < -(maxExactInt+1) {
		return appendCanonicalNumber(b, strconv.FormatInt(n, 10))
	}
	return strconv.AppendInt(b, n, 10), nil
}

// appendCanonicalNumber writes a JSON number literal in canonical form.
func appendCanonicalNumber(b []byte, lit string) ([]byte, error) {
	if plainSmallInt(lit) {
		if lit == "-0" {
			return append(b, '0'), nil
		}
		return append(b, lit...), nil
	}
	if !validNumber(lit) { // a json.Number made in Go may hold anything
		return b, &canonError{reason: fmt.Sprintf("invalid number %q", lit)}
	}
	if n, ok := smallIntegral(lit); ok { // 47.0, 6.3e1: no float round trip
		return strconv.AppendInt(b, n, 10), nil
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return b, &canonError{reason: "number out of the range of a double"}
		}
		return b, &canonError{reason: fmt.Sprintf("invalid number %q", lit)}
	}
	// A double rounds; for a fraction that is what JSON numbers mean, but an
	// integer that comes back as another integer would change an id or a
	// count without anyone noticing.
	if digits, exp, ok := decimalParts(lit); ok && exp >= 0 && digits != "" {
		sd, sexp := shortestParts(f)
		if sd != digits || sexp != exp {
			return b, &canonError{reason: "integer beyond ±2^53, which a double cannot hold exactly"}
		}
	}
	return appendES6Number(b, f)
}

// plainSmallInt: -?(0|[1-9][0-9]{0,14}), an integer that is written as
// itself in canonical form.
func plainSmallInt(s string) bool {
	n, ok := IntDigits(s)
	return ok && n <= 15
}

// IntDigits reports whether s is an integer literal as JSON writes one,
// -?(0|[1-9][0-9]*), and how many digits it has: the one scan of it that
// the canonical form and the schema's fast path share.
func IntDigits(s string) (int, bool) {
	i := 0
	if i < len(s) && s[0] == '-' {
		i++
	}
	if i == len(s) || (s[i] == '0' && len(s)-i > 1) {
		return 0, false
	}
	for j := i; j < len(s); j++ {
		if s[j] < '0' || s[j] > '9' {
			return 0, false
		}
	}
	return len(s) - i, true
}

// validNumber: lit follows the JSON number grammar (strconv also takes
// hex, underscores, "Inf" and "NaN").
func validNumber(lit string) bool {
	p := strictParser{b: []byte(lit), s: lit}
	if lit == "" || (lit[0] != '-' && (lit[0] < '0' || lit[0] > '9')) {
		return false
	}
	_, err := p.number()
	return err == nil && p.i == len(lit)
}

// decimalParts splits a JSON number literal into significant digits
// (without leading or trailing zeros; "" for zero) and the power of ten
// they are multiplied by. ok is false for a literal that is not a number.
func decimalParts(lit string) (digits string, exp int, ok bool) {
	s := strings.TrimPrefix(lit, "-")
	mant, expPart, hasExp := s, "", false
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant, expPart, hasExp = s[:i], s[i+1:], true
	}
	if hasExp {
		e, err := strconv.Atoi(expPart)
		if err != nil {
			// Only an exponent too long for an int gets here; ParseFloat
			// has already made it ±Inf (an error) or zero.
			if strings.HasPrefix(expPart, "-") {
				e = math.MinInt32
			} else {
				e = math.MaxInt32
			}
		}
		exp = e
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	exp -= len(frac)
	digits = strings.TrimLeft(intPart+frac, "0")
	trimmed := strings.TrimRight(digits, "0")
	exp += len(digits) - len(trimmed)
	return trimmed, exp, true
}

// smallIntegral returns the value of a literal whose exact value is an
// integer of at most 15 digits, which is written as that integer.
func smallIntegral(lit string) (int64, bool) {
	digits, exp, ok := decimalParts(lit)
	if !ok || exp < 0 || exp > 400 || len(digits)+exp > 15 {
		return 0, false
	}
	if digits == "" {
		return 0, true
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	for range exp {
		n *= 10
	}
	if strings.HasPrefix(lit, "-") {
		n = -n
	}
	return n, true
}

// shortestParts is decimalParts of the shortest decimal that reads back as
// f (what ECMAScript and strconv print).
func shortestParts(f float64) (string, int) {
	var buf [32]byte
	s := strconv.AppendFloat(buf[:0], math.Abs(f), 'e', -1, 64)
	digits, exp, _ := decimalParts(string(s))
	return digits, exp
}

// appendES6Number writes a double as ECMAScript's Number.prototype.toString
// does (ECMA-262 Number::toString), which RFC 8785 §3.2.2.3 adopts: the
// shortest digits that read back as the same double, in plain notation for
// magnitudes in [1e-6, 1e21) and in exponent notation ("1e+21") otherwise.
func appendES6Number(b []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return b, &canonError{reason: "NaN and infinities are not JSON numbers"}
	}
	if f == 0 { // also -0
		return append(b, '0'), nil
	}
	if f < 0 {
		b = append(b, '-')
		f = -f
	}
	var buf [32]byte
	s := strconv.AppendFloat(buf[:0], f, 'e', -1, 64) // d[.ddd]e±xx
	e := 0
	for s[e] != 'e' {
		e++
	}
	exp, _ := strconv.Atoi(string(s[e+1:]))
	var dbuf [24]byte
	digits := append(dbuf[:0], s[0])
	if e > 1 {
		digits = append(digits, s[2:e]...)
	}
	k, n := len(digits), exp+1 // value = 0.digits × 10^n
	switch {
	case k <= n && n <= 21:
		b = append(b, digits...)
		for range n - k {
			b = append(b, '0')
		}
	case 0 < n && n <= 21:
		b = append(b, digits[:n]...)
		b = append(b, '.')
		b = append(b, digits[n:]...)
	case -6 < n && n <= 0:
		b = append(b, '0', '.')
		for range -n {
			b = append(b, '0')
		}
		b = append(b, digits...)
	default:
		b = append(b, digits[0])
		if k > 1 {
			b = append(b, '.')
			b = append(b, digits[1:]...)
		}
		b = append(b, 'e')
		if n-1 >= 0 {
			b = append(b, '+')
		}
		b = strconv.AppendInt(b, int64(n-1), 10)
	}
	return b, nil
}

// maxExactInt is the largest integer every JSON number parser keeps exactly.
const maxExactInt = 1<<53 - 1

package canon

import "unicode/utf8"

// Escaping says how AppendEscaped writes a string: the one JSON string
// escaper of jobgate, for the canonical form and for the records'
// hand-built encoders (internal/codec) alike.
type Escaping uint8

const (
	// Canonical escapes as RFC 8785 §3.2.2.2: the two-character forms for
	// \b \t \n \f \r " and \, \u00xx (lower case) for the other control
	// characters, everything else as itself. A string that is not valid
	// UTF-8 has no canonical form.
	Canonical Escaping = iota
	// HTMLSafe escapes exactly as encoding/json's Marshal does: as
	// Canonical, and <, > and & as \u003c, \u003e and \u0026, U+2028 and
	// U+2029 as \u2028 and \u2029, and each byte that is not valid UTF-8
	// as \ufffd.
	HTMLSafe
)

// plainASCII tells, for each mode, the ASCII bytes written as themselves.
var plainASCII = func() (t [2][utf8.RuneSelf]bool) {
	for c := byte(' '); c < utf8.RuneSelf; c++ {
		if c == '"' || c == '\\' {
			continue
		}
		t[Canonical][c] = true
		t[HTMLSafe][c] = c != '<' && c != '>' && c != '&'
	}
	return t
}()

const hexDigits = "0123456789abcdef"

// AppendEscaped appends the characters of s to b escaped as mode says,
// without the quotes. ok is false only for Canonical and a string that is
// not valid UTF-8; b then holds a prefix of the escaped string.
func AppendEscaped(b []byte, s string, mode Escaping) (_ []byte, ok bool) {
	plain := &plainASCII[mode&1]
	html := mode == HTMLSafe
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if plain[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\t':
				b = append(b, '\\', 't')
			case '\n':
				b = append(b, '\\', 'n')
			case '\f':
				b = append(b, '\\', 'f')
			case '\r':
				b = append(b, '\\', 'r')
			default: // other control characters; <, > and & when HTMLSafe
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			if !html {
				return b, false
			}
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case html && (r == '\u2028' || r == '\u2029'):
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(b, s[start:]...), true
}

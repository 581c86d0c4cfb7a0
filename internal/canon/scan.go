package canon

// The scanner primitives every hand-written JSON reader of jobgate shares:
// DecodeStrict's and the fast path of internal/codec's record decoder. Each
// takes the input and a position in it and returns the position after what
// it read; what to make of the bytes (a copy, an unescaped string, an
// error) is the reader's.

// SkipSpace returns the position of the first byte at or after i that is
// not JSON white space (space, tab, line feed, carriage return).
func SkipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// plainByte tells the bytes a string's plain run holds: printable ASCII
// but the quote and the backslash.
var plainByte = func() (t [256]bool) {
	for c := ' '; c <= '~'; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// PlainRun returns the position of the first byte at or after i that ends
// a plain run of a string's bytes: a quote, a backslash, a control
// character, DEL or any byte beyond ASCII (where a reader must unescape or
// check UTF-8), or len(b).
func PlainRun(b []byte, i int) int {
	for i < len(b) && plainByte[b[i]] {
		i++
	}
	return i
}

// ScanNumber reads the number literal
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? at i and returns the
// position after it. ok is false, with the position where the grammar
// failed, when none starts there.
func ScanNumber(b []byte, i int) (end int, ok bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i, _ = scanDigits(b, i)
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		if i, ok = scanDigits(b, i+1); !ok {
			return i, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i, ok = scanDigits(b, i); !ok {
			return i, false
		}
	}
	return i, true
}

// scanDigits reads [0-9]* at i; ok is false when there is none.
func scanDigits(b []byte, i int) (int, bool) {
	start := i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i, i > start
}

package codec

import "github.com/jobgate/jobgate/internal/canon"

// fastParser reads the one JSON shape its caller expects (a stored record,
// see decode.go) without reflection; any surprise makes the caller fall
// back to encoding/json. Its white space, strings and numbers are
// canon's scanner primitives, DecodeStrict's too.
type fastParser struct {
	b []byte
	i int
}

func (p *fastParser) ws() { p.i = canon.SkipSpace(p.b, p.i) }

// lit consumes white space and then c.
func (p *fastParser) lit(c byte) bool {
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// plain reads a string of printable ASCII without escapes and returns its
// bytes (in p.b, not a copy).
func (p *fastParser) plain() ([]byte, bool) {
	if !p.lit('"') {
		return nil, false
	}
	start := p.i
	p.i = canon.PlainRun(p.b, p.i)
	if p.i < len(p.b) && p.b[p.i] == '"' {
		p.i++
		return p.b[start : p.i-1], true
	}
	return nil, false
}

// str reads a plain string (plain) as a string.
func (p *fastParser) str() (string, bool) {
	s, ok := p.plain()
	return string(s), ok
}

// number reads a number literal (canon.ScanNumber).
func (p *fastParser) number() bool {
	end, ok := canon.ScanNumber(p.b, p.i)
	p.i = end
	return ok
}

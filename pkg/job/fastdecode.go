package job

import "encoding/json"

// fastDecode parses the shape nearly every submission has — an object with
// exactly a "type" string and a "params" object of numbers, plain ASCII, no
// escapes, no duplicate keys, JSON white space anywhere — into what the
// general decoder (encoding/json with UseNumber) would produce for it. ok is
// false for anything else, and the caller then takes the general path, which
// also produces every error message; so this path can only ever accept
// inputs the general one accepts, with the same result.
func fastDecode(body []byte) (typ string, params map[string]any, ok bool) {
	p := fastParser{b: body}
	if !p.lit('{') {
		return "", nil, false
	}
	var haveType, haveParams bool
	for {
		key, ok := p.str()
		if !ok || !p.lit(':') {
			return "", nil, false
		}
		switch key {
		case "type":
			if haveType {
				return "", nil, false
			}
			if typ, ok = p.str(); !ok || typ == "" {
				return "", nil, false
			}
			haveType = true
		case "params":
			if haveParams {
				return "", nil, false
			}
			if params, ok = p.numbers(); !ok {
				return "", nil, false
			}
			haveParams = true
		default:
			return "", nil, false
		}
		if p.lit(',') {
			continue
		}
		if !p.lit('}') {
			return "", nil, false
		}
		break
	}
	p.ws()
	if p.i != len(p.b) || !haveType || !haveParams {
		return "", nil, false
	}
	return typ, params, true
}

type fastParser struct {
	b []byte
	i int
}

func (p *fastParser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// lit consumes white space and then c.
func (p *fastParser) lit(c byte) bool {
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// str reads a string of printable ASCII without escapes.
func (p *fastParser) str() (string, bool) {
	if !p.lit('"') {
		return "", false
	}
	start := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			s := string(p.b[start:p.i])
			p.i++
			return s, true
		case c < ' ' || c > '~' || c == '\\':
			return "", false
		}
		p.i++
	}
	return "", false
}

// numbers reads an object whose values are all JSON numbers, as
// json.Number like the general decoder.
func (p *fastParser) numbers() (map[string]any, bool) {
	if !p.lit('{') {
		return nil, false
	}
	m := make(map[string]any, 4)
	if p.lit('}') {
		return m, true
	}
	for {
		k, ok := p.str()
		if !ok || !p.lit(':') {
			return nil, false
		}
		if _, dup := m[k]; dup {
			return nil, false
		}
		p.ws()
		n, ok := p.number()
		if !ok {
			return nil, false
		}
		m[k] = json.Number(n)
		if p.lit(',') {
			continue
		}
		return m, p.lit('}')
	}
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (p *fastParser) number() (string, bool) {
	start := p.i
	if p.i < len(p.b) && p.b[p.i] == '-' {
		p.i++
	}
	switch {
	case p.i < len(p.b) && p.b[p.i] == '0':
		p.i++
	case p.i < len(p.b) && p.b[p.i] >= '1' && p.b[p.i] <= '9':
		p.digits()
	default:
		return "", false
	}
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		if !p.digits() {
			return "", false
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if !p.digits() {
			return "", false
		}
	}
	return string(p.b[start:p.i]), true
}

func (p *fastParser) digits() bool {
	start := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	return p.i > start
}

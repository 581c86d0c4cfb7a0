package schema

import (
	"fmt"
	"maps"
	"regexp/syntax"
	"slices"
)

// Compiling a pattern costs in proportion to its program: Go's regexp
// expands a repetition into copies, so `^\p{L}{1000}$`, 15 bytes, is a
// program of a thousand instructions, and 460 of them took the library
// 250 ms and 220 MB to compile. A schema's patterns (pattern and
// patternProperties) are bounded by their estimated programs, before
// anything compiles them.
const (
	// MaxPatternInsts bounds the program of one pattern.
	MaxPatternInsts = 4096
	// MaxSchemaPatternInsts bounds the programs of all of a schema's
	// patterns together (each counted where it is written).
	MaxSchemaPatternInsts = 20000
)

// checkPatterns adds up the programs of the subschema's patterns.
func (c *checker) checkPatterns(s map[string]any, at string) error {
	var exprs []string
	var where []string
	if p, ok := s["pattern"].(string); ok {
		exprs, where = append(exprs, p), append(where, at+"/pattern")
	}
	if m, ok := s["patternProperties"].(map[string]any); ok {
		for _, p := range slices.Sorted(maps.Keys(m)) {
			exprs, where = append(exprs, p), append(where, at+"/patternProperties")
		}
	}
	for i, expr := range exprs {
		kw := "pattern"
		if where[i] != at+"/pattern" {
			kw = "patternProperties"
		}
		n, err := patternInsts(expr)
		if err != nil {
			continue // the library refuses it, with its own message
		}
		if n > MaxPatternInsts {
			return &Error{Pointer: where[i], Keyword: kw, Reason: fmt.Sprintf("the pattern %q compiles to about %d instructions, at most %d: repetition counts multiply (x{1000} is a thousand copies of x)", clipPattern(expr), n, MaxPatternInsts)}
		}
		c.patternInsts += n
		if c.patternInsts > MaxSchemaPatternInsts {
			return &Error{Pointer: where[i], Keyword: kw, Reason: fmt.Sprintf("the schema's patterns compile to more than %d instructions in all", MaxSchemaPatternInsts)}
		}
	}
	return nil
}

func clipPattern(expr string) string {
	if len(expr) > 64 {
		return expr[:61] + "..."
	}
	return expr
}

// patternInsts estimates the size of a pattern's program from its syntax
// tree, without compiling it (an upper bound of syntax.Compile's count,
// saturating far above the bounds).
func patternInsts(expr string) (int, error) {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return 0, err
	}
	return insts(re), nil
}

func insts(re *syntax.Regexp) int {
	const limit = 1 << 30
	sat := func(n int) int { return min(n, limit) }
	switch re.Op {
	case syntax.OpLiteral:
		return max(1, len(re.Rune))
	case syntax.OpCapture:
		return sat(insts(re.Sub[0]) + 2)
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest:
		return sat(insts(re.Sub[0]) + 1)
	case syntax.OpRepeat:
		n := re.Max
		if n < 0 {
			n = re.Min + 1
		}
		return sat(max(n, 1) * (insts(re.Sub[0]) + 1))
	case syntax.OpConcat, syntax.OpAlternate:
		total := len(re.Sub)
		for _, sub := range re.Sub {
			total = sat(total + insts(sub))
		}
		return total
	default:
		return 1
	}
}

package schema

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/canon"
)

// FuzzCostModel checks the cost model against the real validator: for
// generated schemas (required and dependentRequired lists, enums,
// patterns, uniqueItems, allOf, nested arrays and objects) and bodies, any
// params Apply lets through (within MaxValidationCost) allocate at most
// bytesPerUnit per counted unit, and, while fuzzing, take at most
// nsPerUnit per unit (a generous bound: the seed corpus, run by go test,
// checks no time, as no unit test times anything).
func FuzzCostModel(f *testing.F) {
	for _, seed := range []uint64{1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233} {
		f.Add(seed)
	}
	fuzzing := flag.Lookup("test.fuzz") != nil && flag.Lookup("test.fuzz").Value.String() != ""
	f.Fuzz(func(t *testing.T, seed uint64) {
		g := &gen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
		raw := g.schema(0, true)
		s, err := Compile([]byte(raw))
		if err != nil {
			return // refused declarations cost nothing at submission
		}
		params := g.body(raw)
		v, err := decodeMaybe(params)
		if err != nil {
			return
		}
		out, cost, ve := s.prepare(v)
		if ve != nil || cost < 0 {
			return
		}
		var took time.Duration
		bytes := allocated(func() {
			start := time.Now()
			_, _ = s.validate(out)
			took = time.Since(start)
		})
		if bytes > uint64(bytesPerUnit*cost+baseBytes) {
			t.Fatalf("validating allocated %d bytes for a cost of %d (at most %d a unit)\nschema %s\nparams %s", bytes, cost, bytesPerUnit, raw, params)
		}
		// A busy machine stalls any one run: the fastest of three is
		// what the validator needs.
		for i := 0; fuzzing && i < 2; i++ {
			start := time.Now()
			_, _ = s.validate(out)
			took = min(took, time.Since(start))
		}
		if fuzzing && took > time.Duration(cost)*nsPerUnit+20*time.Millisecond {
			t.Fatalf("validating took %v for a cost of %d\nschema %s\nparams %s", took, cost, raw, params)
		}
	})
}

func decodeMaybe(s string) (any, error) { return canon.DecodeStrict([]byte(s)) }

// nsPerUnit is the time a counted unit may take while fuzzing: the model
// says about a microsecond, a loaded machine is slower.
const nsPerUnit = 5 * time.Microsecond

// gen makes random schemas and params of their shape.
type gen struct {
	r     *rand.Rand
	shape map[string]string // what gen.schema wrote, for gen.body: pointer → kind
}

func (g *gen) names(n int, prefix string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`"%s%d"`, prefix, g.r.IntN(n*2+1))
	}
	return strings.Join(dedupe(parts), ",")
}

func dedupe(xs []string) []string {
	seen := map[string]bool{}
	out := xs[:0]
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// schema writes a subschema; the top level is a closed object.
func (g *gen) schema(depth int, top bool) string {
	kind := g.r.IntN(6)
	if top {
		kind = 0
	}
	if depth > 3 && kind < 2 {
		kind = 2
	}
	switch kind {
	case 0: // object
		var props []string
		for i := range g.r.IntN(4) + 1 {
			props = append(props, fmt.Sprintf(`"p%d":%s`, i, g.schema(depth+1, false)))
		}
		s := `{"type":"object","maxProperties":` + fmt.Sprint(g.r.IntN(50)+1) + `,"properties":{` + strings.Join(props, ",") + `}`
		if g.r.IntN(2) == 0 {
			s += `,"required":[` + g.names(g.r.IntN(400)+1, "p") + `]`
		}
		if g.r.IntN(4) == 0 {
			s += `,"dependentRequired":{"p0":[` + g.names(g.r.IntN(200)+1, "q") + `]}`
		}
		if g.r.IntN(3) == 0 {
			s += `,"additionalProperties":` + g.schema(depth+1, false)
		}
		return s + `}`
	case 1: // array
		s := `{"type":"array","maxItems":` + fmt.Sprint([]int{4, 100, 1000, 65536}[g.r.IntN(4)]) + `,"items":` + g.schema(depth+1, false)
		if g.r.IntN(3) == 0 {
			s += `,"uniqueItems":true`
		}
		return s + `}`
	case 2: // string
		s := `{"type":"string","maxLength":` + fmt.Sprint([]int{8, 200, 5000}[g.r.IntN(3)])
		if g.r.IntN(2) == 0 {
			s += `,"pattern":"` + []string{`^[a-z]+$`, `^(ab|cd)*e?$`, `^\\p{L}{1,100}$`, `x`}[g.r.IntN(4)] + `"`
		}
		if g.r.IntN(4) == 0 {
			s += `,"format":"email"`
		}
		return s + `}`
	case 3: // enum
		vals := make([]string, g.r.IntN(500)+1)
		for i := range vals {
			if g.r.IntN(2) == 0 {
				vals[i] = fmt.Sprint(i * 7)
			} else {
				vals[i] = fmt.Sprintf(`"e%d"`, i)
			}
		}
		return `{"enum":[` + strings.Join(vals, ",") + `]}`
	case 4: // allOf
		return `{"allOf":[` + g.schema(depth+1, false) + `,` + g.schema(depth+1, false) + `]}`
	default:
		return `{"type":"integer","minimum":` + fmt.Sprint(g.r.IntN(10)) + `}`
	}
}

// body writes params that reach deep into a schema of gen's shapes: the
// members it names, arrays of many small items, long strings.
func (g *gen) body(raw string) string {
	v, err := decodeMaybe(raw)
	if err != nil {
		return "{}"
	}
	var sb strings.Builder
	g.value(&sb, v, 0)
	return sb.String()
}

func (g *gen) value(sb *strings.Builder, s any, depth int) {
	m, _ := s.(map[string]any)
	if all, ok := m["allOf"].([]any); ok && len(all) > 0 {
		g.value(sb, all[g.r.IntN(len(all))], depth)
		return
	}
	switch m["type"] {
	case "object":
		sb.WriteByte('{')
		props, _ := m["properties"].(map[string]any)
		i := 0
		for name, sub := range props {
			if g.r.IntN(3) == 0 {
				continue
			}
			if i > 0 {
				sb.WriteByte(',')
			}
			i++
			fmt.Fprintf(sb, "%q:", name)
			g.value(sb, sub, depth+1)
		}
		for range g.r.IntN(20) {
			if i > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(sb, `"x%d":{}`, i)
			i++
		}
		sb.WriteByte('}')
	case "array":
		n := []int{0, 3, 50, 2000}[g.r.IntN(4)]
		if depth > 1 {
			n = min(n, 20)
		}
		sb.WriteByte('[')
		for i := range n {
			if i > 0 {
				sb.WriteByte(',')
			}
			g.value(sb, m["items"], depth+1)
		}
		sb.WriteByte(']')
	case "string":
		fmt.Fprintf(sb, "%q", strings.Repeat("ab", g.r.IntN(300)))
	default:
		if e, ok := m["enum"].([]any); ok && len(e) > 0 && g.r.IntN(2) == 0 {
			if str, ok := e[g.r.IntN(len(e))].(string); ok {
				fmt.Fprintf(sb, "%q", str)
			} else {
				fmt.Fprint(sb, e[g.r.IntN(len(e))])
			}
			return
		}
		fmt.Fprint(sb, g.r.IntN(5000))
	}
}

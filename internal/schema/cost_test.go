package schema

import (
	"fmt"
	"github.com/jobgate/jobgate/internal/canon"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jobgate/jobgate/pkg/api"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"
)

// allOfBomb is the declaration of issue 22: each level's definition is
// {"allOf":[{"$ref":"#/$defs/dN+1"},{"$ref":"#/$defs/dN+1"}]}, so one value
// costs 2^(depth+1) visits.
func allOfBomb(depth int) string {
	defs := make([]string, 0, depth+1)
	for i := range depth {
		defs = append(defs, fmt.Sprintf(`"d%d":{"allOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]}`, i, i+1, i+1))
	}
	defs = append(defs, fmt.Sprintf(`"d%d":{"type":"integer"}`, depth))
	return `{"type":"object","additionalProperties":false,"properties":{"x":{"$ref":"#/$defs/d0"}},"$defs":{` + strings.Join(defs, ",") + `}}`
}

// defaultsBomb is a schema whose property "a" leads from q0 to q0 and q1,
// "b" to q0, and q1..qn-1 lead on to the next: the sets of subschemas that
// apply to an object n levels down are every subset with q0 (a DFA's
// states, from an NFA's), and the default planner used to visit them all.
func defaultsBomb(n int) string {
	defs := []string{`"q0":{"type":"object","maxProperties":2,"properties":{"a":{"allOf":[{"$ref":"#/$defs/q0"},{"$ref":"#/$defs/q1"}]},"b":{"$ref":"#/$defs/q0"},"d":{"type":"integer","default":1}}}`}
	for i := 1; i < n; i++ {
		defs = append(defs, fmt.Sprintf(`"q%d":{"properties":{"a":{"$ref":"#/$defs/q%d"},"b":{"$ref":"#/$defs/q%d"}}}`, i, i+1, i+1))
	}
	defs = append(defs, fmt.Sprintf(`"q%d":{"properties":{"e":{"type":"integer","default":2}}}`, n))
	return `{"type":"object","additionalProperties":false,"properties":{"r":{"$ref":"#/$defs/q0"}},"$defs":{` + strings.Join(defs, ",") + `}}`
}

// enumBomb is a params schema of about size bytes, nearly all one enum.
func enumBomb(size int, numbers bool) (string, string) {
	var vals []string
	n := 0
	for i := 0; n < size-100; i++ {
		v := fmt.Sprintf(`"v%06d"`, i)
		if numbers {
			v = fmt.Sprint(1000000 + i)
		}
		vals = append(vals, v)
		n += len(v) + 1
	}
	return `{"type":"object","additionalProperties":false,"properties":{"x":{"enum":[` + strings.Join(vals, ",") + `]}}}`, vals[len(vals)-1]
}

// repeat joins n copies of s, each with @ replaced by its index.
func repeat(s string, n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = strings.ReplaceAll(s, "@", fmt.Sprint(i))
	}
	return strings.Join(parts, ",")
}

// Both declarations of issue 22 are refused by Compile, at once: the
// 1.6 KB allOf/$ref bomb (34 s per submission before) and a 32 KB enum;
// so is a schema that made Compile itself take seconds.
func TestCompileRefusesTheSchemaBombs(t *testing.T) {
	t.Parallel()
	bomb := allOfBomb(24)
	require.InDelta(t, 1600, len(bomb), 200)
	// Refused by a bound, not by running out the clock: no wall-clock
	// assertion (a loaded CI machine is slow, an exponential compile is
	// hours, which the package's timeout catches).
	_, err := Compile([]byte(bomb))
	var se *Error
	require.ErrorAs(t, err, &se)
	require.Contains(t, se.Reason, "chain of more than")
	// Smaller ones too, down to where one value costs more than
	// MaxNodesPerPosition visits (about 2^11 at depth 9); from depth 16 the
	// chain of $refs is also longer than MaxInPlaceDepth.
	for depth := 9; depth < 24; depth++ {
		_, err := Compile([]byte(allOfBomb(depth)))
		require.ErrorAs(t, err, &se, "depth %d", depth)
	}
	// Below, they compile and validate quickly.
	s := mustCompile(t, allOfBomb(8))
	_, fe := s.Apply(decode(t, `{"x":1}`))
	require.Empty(t, fe)

	for _, numbers := range []bool{false, true} {
		raw, _ := enumBomb(32<<10-64, numbers)
		_, err := Compile([]byte(raw))
		require.ErrorAs(t, err, &se)
		require.Equal(t, "enum", se.Keyword, "%v", err)
		require.Contains(t, se.Reason, "16384 bytes")
	}
	// A third, found on the way: defaults under properties that lead to
	// two subschemas at once, level after level, made Compile find 2^n
	// sets of subschemas to plan the defaults of (4 s for 1.5 KB at n=16).
	for _, n := range []int{16, 24} { // 2^8 times the work at 24 without the bound
		_, err = Compile([]byte(defaultsBomb(n)))
		require.ErrorAs(t, err, &se)
		require.Equal(t, "default", se.Keyword)
		require.Contains(t, se.Reason, "more than 1024 combinations")
	}
	_, err = Compile([]byte(defaultsBomb(8)))
	require.NoError(t, err)

	_, err = Compile([]byte(`{"type":"object","additionalProperties":false,"description":"` + strings.Repeat("x", api.MaxSchemaBytes) + `"}`))
	require.ErrorAs(t, err, &se)
	require.Contains(t, se.Reason, "at most 32768")
}

// The bounds hold wherever the schema puts them: under patternProperties,
// unevaluatedProperties, not, if/then/else, dependentSchemas, propertyNames,
// items and $defs, and behind $refs; what stays within them compiles.
func TestBoundsCannotBeBypassed(t *testing.T) {
	t.Parallel()
	const closed = `"type":"object","additionalProperties":false`
	const open = `"type":"object","maxProperties":8`
	// heavy is 1,100 visits per value: two of it where one value goes are
	// too many.
	heavy := `"heavy":{"allOf":[` + repeat(`{"minimum":@}`, 1099) + `]}`
	for _, c := range []struct{ name, schema, pointer, keyword string }{
		// Visits per value.
		{"bomb behind patternProperties", `{` + open + `,"patternProperties":{"^a":{"$ref":"#/$defs/d0"}},"$defs":{` + allOfDefs(12) + `}}`, "/$defs/d3", "allOf"},
		{"bomb behind unevaluatedProperties", `{` + open + `,"unevaluatedProperties":{"$ref":"#/$defs/d0"},"$defs":{` + allOfDefs(12) + `}}`, "/$defs/d3", "allOf"},
		{"bomb behind not", `{` + closed + `,"properties":{"x":{"not":{"$ref":"#/$defs/d0"}}},"$defs":{` + allOfDefs(12) + `}}`, "/$defs/d3", "allOf"},
		{"bomb in $defs behind additionalProperties", `{` + open + `,"additionalProperties":{"$ref":"#/$defs/d0"},"$defs":{` + allOfDefs(12) + `}}`, "/$defs/d3", "allOf"},
		{"bomb in if/then/else", `{` + closed + `,"properties":{"x":{"if":{"$ref":"#/$defs/heavy"},"then":{"$ref":"#/$defs/heavy"}}},"$defs":{` + heavy + `}}`, "/properties/x", "allOf"},
		{"bomb in dependentSchemas", `{` + open + `,"dependentSchemas":{"a":{"$ref":"#/$defs/heavy"},"b":{"$ref":"#/$defs/heavy"}},"$defs":{` + heavy + `}}`, "", "allOf"},
		{"bomb in propertyNames", `{` + open + `,"propertyNames":{"allOf":[{"$ref":"#/$defs/heavy"},{"$ref":"#/$defs/heavy"}]},"$defs":{` + heavy + `}}`, "/propertyNames", "allOf"},
		{"patterns that all match one name", `{` + open + `,"patternProperties":{"^a":{"$ref":"#/$defs/heavy"},"a$":{"$ref":"#/$defs/heavy"}},"$defs":{` + heavy + `}}`, "", "allOf"},
		{"a pattern and unevaluatedProperties on one member", `{` + open + `,"patternProperties":{"^a":{"$ref":"#/$defs/heavy"}},"unevaluatedProperties":{"$ref":"#/$defs/heavy"},"$defs":{` + heavy + `}}`, "", "allOf"},
		{"items and contains on one item", `{` + closed + `,"properties":{"xs":{"type":"array","maxItems":3,"items":{"$ref":"#/$defs/heavy"},"contains":{"$ref":"#/$defs/heavy"}}},"$defs":{` + heavy + `}}`, "", "allOf"},
		{"doubling at every depth", `{` + closed + `,"properties":{"t":{"$ref":"#/$defs/n"}},"$defs":{"n":{"type":"array","maxItems":2,"allOf":[{"items":{"$ref":"#/$defs/n"}},{"items":{"$ref":"#/$defs/n"}}]}}}`, "", "allOf"},
		// Chains and cycles of in-place keywords.
		{"$ref cycle", `{` + closed + `,"properties":{"x":{"$ref":"#/$defs/a"}},"$defs":{"a":{"allOf":[{"$ref":"#/$defs/b"}]},"b":{"$ref":"#/$defs/a"}}}`, "/$defs/a", "$ref"},
		{"$ref cycle through not", `{` + closed + `,"properties":{"x":{"$ref":"#/$defs/a"}},"$defs":{"a":{"not":{"$ref":"#/$defs/a"}}}}`, "/$defs/a", "$ref"},
		{"$ref cycle through the root", `{` + closed + `,"anyOf":[{"$ref":"#"}]}`, "", "$ref"},
		{"$ref cycle in unused $defs", `{` + closed + `,"$defs":{"a":{"if":{"$ref":"#/$defs/a"}}}}`, "/$defs/a", "$ref"},
		{"$ref cycle through dependentSchemas", `{` + open + `,"dependentSchemas":{"a":{"$ref":"#"}}}`, "", "$ref"},
		{"long chain", chain(40), "/$defs/c8", "$ref"},
		// Values no request meets or needs.
		{"maxLength 1e300 under patternProperties", `{` + open + `,"patternProperties":{"^a":{"type":"string","maxLength":1e300}}}`, "/patternProperties/^a/maxLength", "maxLength"},
		{"maxItems over 64 KiB under not", `{` + closed + `,"properties":{"x":{"not":{"type":"array","maxItems":70000}}}}`, "/properties/x/not/maxItems", "maxItems"},
		{"fractional maxProperties under unevaluatedProperties", `{"type":"object","maxProperties":2,"unevaluatedProperties":{"type":"object","maxProperties":2.5}}`, "/unevaluatedProperties/maxProperties", "maxProperties"},
		{"negative minLength in $defs", `{` + closed + `,"$defs":{"s":{"type":"string","maxLength":3,"minLength":-1}}}`, "/$defs/s/minLength", "minLength"},
		{"minItems above maxItems", `{` + closed + `,"properties":{"x":{"type":"array","minItems":5,"maxItems":4}}}`, "/properties/x/minItems", "minItems"},
		{"maxContains in items", `{` + closed + `,"properties":{"x":{"type":"array","maxItems":4,"items":{"type":"array","maxItems":4,"maxContains":1e6}}}}`, "/properties/x/items/maxContains", "maxContains"},
		{"minimum beyond a double", `{` + open + `,"additionalProperties":{"minimum":1e400}}`, "/additionalProperties/minimum", "minimum"},
		{"minimum above maximum behind a $ref", `{` + closed + `,"properties":{"n":{"$ref":"#/x"}},"x":{"minimum":5,"maximum":4}}`, "/x/minimum", "minimum"},
		{"long pattern under not", `{` + closed + `,"properties":{"s":{"type":"string","maxLength":9,"not":{"pattern":"` + strings.Repeat("a", 513) + `"}}}}`, "/properties/s/not/pattern", "pattern"},
		{"long patternProperties name", `{` + open + `,"patternProperties":{"` + strings.Repeat("b", 513) + `":true}}`, "/patternProperties", "patternProperties"},
		{"format regex without a short maxLength", `{` + closed + `,"properties":{"re":{"type":"string","maxLength":60000,"format":"regex"}}}`, "/properties/re/format", "format"},
		{"enums over 16 KiB in all, split across $defs", `{` + closed + `,"$defs":{"a":{"enum":[` + repeat(`"aaaaaaaa@"`, 700) + `]},"b":{"const":"` + strings.Repeat("b", 9000) + `"}}}`, "/$defs/b/const", "const"},
	} {
		_, err := Compile([]byte(c.schema))
		var se *Error
		require.ErrorAs(t, err, &se, "%s: %v", c.name, err)
		require.Equal(t, c.keyword, se.Keyword, "%s: %v", c.name, err)
		require.Equal(t, c.pointer, se.Pointer, "%s: %v", c.name, err)
	}
	// What stays within the bounds compiles: recursion through a value's
	// members or items (each level is a new value, and the body bounds the
	// levels), a long but acyclic chain, many subschemas that each apply to
	// other values, and bounds up to 64 KiB.
	for _, ok := range []string{
		`{"type":"object","additionalProperties":false,"properties":{"t":{"$ref":"#/$defs/n"}},"$defs":{"n":{"type":"object","additionalProperties":false,"properties":{"l":{"$ref":"#/$defs/n"},"r":{"$ref":"#/$defs/n"},"v":{"type":"integer"}}}}}`,
		`{"type":"object","additionalProperties":false,"properties":{"t":{"$ref":"#/$defs/n"}},"$defs":{"n":{"type":"array","maxItems":4,"items":{"anyOf":[{"type":"integer"},{"$ref":"#/$defs/n"}]}}}}`,
		chain(MaxInPlaceDepth - 2),
		`{"type":"object","additionalProperties":false,"properties":{"x":{"allOf":[` + repeat(`true`, MaxNodesPerPosition-2) + `]}}}`,
		`{"type":"object","additionalProperties":false,"properties":{` + repeat(`"p@":{"allOf":[{"$ref":"#/$defs/heavy"}]}`, 50) + `},"$defs":{"heavy":{"allOf":[` + repeat(`{"minimum":@}`, 1000) + `]}}}`,
		`{"type":"object","additionalProperties":false,"properties":{"s":{"type":"string","minLength":0,"maxLength":65536},"xs":{"type":"array","maxItems":65536,"minItems":1,"items":{"type":"integer","minimum":-1e308,"maximum":1e308}}}}`,
		`{"type":"object","additionalProperties":false,"properties":{"re":{"type":"string","maxLength":512,"format":"regex"}}}`,
	} {
		_, err := Compile([]byte(ok))
		require.NoError(t, err, "%.300s", ok)
	}
}

// allOfDefs is allOfBomb's $defs.
func allOfDefs(depth int) string {
	b := allOfBomb(depth)
	return b[strings.Index(b, `"$defs":{`)+len(`"$defs":{`) : len(b)-2]
}

// chain is a schema whose one property is a chain of n $refs.
func chain(n int) string {
	defs := make([]string, n)
	for i := range defs {
		defs[i] = fmt.Sprintf(`"c%d":{"$ref":"#/$defs/c%d"}`, i, i+1)
	}
	return `{"type":"object","additionalProperties":false,"properties":{"x":{"$ref":"#/$defs/c0"}},"$defs":{` + strings.Join(defs, ",") + fmt.Sprintf(`,"c%d":true}}`, n)
}

// Params that would cost more than MaxValidationCost answer one error,
// rule "cost", without the validator running: an enum of 2,000 numbers
// costs two big.Rat parses per value compared, so 6,000 items of it took
// the validator 30 s. (With maxItems 65,536 the schema itself is refused
// now: TestCompileRefusesCostlyWorstCases.)
func TestApplyRefusesCostlyParams(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, `{"type":"object","additionalProperties":false,"properties":{"xs":{"type":"array","maxItems":200,"items":{"enum":[`+repeat("@", 2000)+`]}}}}`)
	items := func(n int) any {
		return decode(t, `{"xs":[`+strings.TrimSuffix(strings.Repeat("1999,", n), ",")+`]}`)
	}
	fe := fieldsOf(s.Apply(items(6000))) // refused by its cost, before the validator runs
	require.Equal(t, []api.FieldError{{Field: "/params", Rule: "cost", Message: fe[0].Message}}, fe)
	require.Contains(t, fe[0].Message, "more than 40000")
	out, ve := s.Apply(items(4))
	require.Nil(t, ve)
	require.NotNil(t, out)

	// An array of 30,000 integers is within the budget.
	ints := mustCompile(t, `{"type":"object","additionalProperties":false,"properties":{"xs":{"type":"array","maxItems":65536,"items":{"type":"integer"}}}}`)
	_, ve = ints.Apply(decode(t, `{"xs":[`+strings.TrimSuffix(strings.Repeat("7,", 30000), ",")+`]}`))
	require.Nil(t, ve)

	// A default is checked within the same budget when the schema compiles.
	_, err := Compile([]byte(`{"type":"object","additionalProperties":false,"properties":{"xs":{"type":"array","maxItems":200,"items":{"enum":[` + repeat("@", 2000) + `]},"default":[` + strings.TrimSuffix(strings.Repeat("1,", 20), ",") + `]}}}`))
	var se *Error
	require.ErrorAs(t, err, &se)
	require.Equal(t, "/properties/xs/default", se.Pointer)
	require.Contains(t, se.Reason, "costs more than")
	// In all: many defaults, each within it, are not (compiling them
	// would take the validator seconds).
	defaults := func(n int) string {
		return `{"type":"object","additionalProperties":false,"properties":{` +
			repeat(`"p@":{"$ref":"#/$defs/l","default":[1,2]}`, n) +
			`},"$defs":{"l":{"type":"array","maxItems":9,"items":{"allOf":[` + repeat("true", 1000) + `]}}}}`
	}
	_, err = Compile([]byte(defaults(2)))
	require.NoError(t, err)
	_, err = Compile([]byte(defaults(30)))
	require.ErrorAs(t, err, &se)
	require.Equal(t, "default", se.Keyword)
	require.Contains(t, se.Reason, "in all")
}

// The count is an upper bound of the visits the validator makes: a
// vocabulary whose keyword every subschema has counts them.
func TestCostCountsEveryVisit(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ schema, params string }{
		{permitReport, `{"case_id":1,"revision":2,"pages":3}`},
		{rich, `{"case_id":1,"title":"ab","tags":["a","b"],"ref":{"depth":1},"both":{"depth":5},"kind":"draft","opts":{"mode":"auto","size":{"w":1}}}`},
		{allOfBomb(8), `{"x":1}`},
		{`{"type":"object","maxProperties":99,"patternProperties":{"^a":{"type":"integer"},"b$":{"allOf":[{"type":"integer"},{"minimum":0}]}},"additionalProperties":{"anyOf":[{"type":"string","maxLength":3},{"type":"integer"}]},"propertyNames":{"maxLength":4}}`, `{"a":1,"ab":2,"xb":3,"c":"x","d":4}`},
		{`{"type":"object","maxProperties":9,"allOf":[{"properties":{"a":{"type":"integer"}}}],"unevaluatedProperties":{"not":{"type":"boolean"}},"dependentSchemas":{"a":{"required":["a"]},"q":{"required":["q"]}}}`, `{"a":1,"b":2,"c":3}`},
		{`{"type":"object","additionalProperties":false,"properties":{"t":{"$ref":"#/$defs/n"}},"$defs":{"n":{"type":"array","maxItems":4,"prefixItems":[{"type":"integer"}],"items":{"anyOf":[{"type":"integer"},{"$ref":"#/$defs/n"}]},"contains":{"type":"integer"},"unevaluatedItems":true}}}`, `{"t":[1,[2,[3,4],5],[6]]}`},
		{`{"type":"object","additionalProperties":false,"properties":{"v":{"if":{"type":"integer"},"then":{"minimum":1},"else":{"type":"string","maxLength":2}}}}`, `{"v":3}`},
	} {
		s := mustCompile(t, c.schema)
		params := decode(t, c.params)
		_, fe := s.Apply(params)
		require.Empty(t, fe, c.schema)
		visits := libraryVisits(t, c.schema, params)
		e := &estimator{g: s.cost, budget: 1 << 40}
		require.True(t, e.visit(params, []int32{0}, 0))
		require.GreaterOrEqual(t, e.cost, visits, "%s with %s", c.schema, c.params)
		require.Positive(t, visits)
	}
}

// libraryVisits validates params (which must be valid) with a validator
// that counts the subschemas it visits.
func libraryVisits(t *testing.T, raw string, params any) int {
	t.Helper()
	var visits atomic.Int64
	c := newCompiler()
	meta, err := jsonschema.UnmarshalJSON(strings.NewReader(`{}`))
	require.NoError(t, err)
	mc := jsonschema.NewCompiler()
	require.NoError(t, mc.AddResource("urn:jobgate:count", meta))
	metaSchema, err := mc.Compile("urn:jobgate:count")
	require.NoError(t, err)
	c.AssertVocabs()
	c.RegisterVocabulary(&jsonschema.Vocabulary{URL: "urn:jobgate:count", Schema: metaSchema,
		Compile: func(*jsonschema.CompilerContext, map[string]any) (jsonschema.SchemaExt, error) {
			return visitCounter{&visits}, nil
		}})
	doc, err := canon.DecodeStrict([]byte(raw))
	require.NoError(t, err)
	require.NoError(t, c.AddResource(location, doc))
	sch, err := c.Compile(location)
	require.NoError(t, err)
	require.NoError(t, sch.Validate(params))
	return int(visits.Load())
}

type visitCounter struct{ n *atomic.Int64 }

func (v visitCounter) Validate(*jsonschema.ValidatorContext, any) { v.n.Add(1) }

// What the validator may allocate per unit of counted cost, plus a base
// for the params' own copies: the bound TestTheTwoMillionErrorRequestIsBounded
// and FuzzCostModel check (docs/reliability.md quotes it).
const (
	bytesPerUnit = 1024
	baseBytes    = 256 << 10
)

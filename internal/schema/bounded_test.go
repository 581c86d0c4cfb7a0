package schema

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/pkg/api"
	"github.com/stretchr/testify/require"
)

// requiredBomb is issue 34's declaration: array items that require names
// of their own, so every {} in the body misses all of them.
func requiredBomb(names, maxItems int) string {
	return `{"type":"object","additionalProperties":false,"properties":{"a":{"type":"array","maxItems":` + fmt.Sprint(maxItems) +
		`,"items":{"type":"object","maxProperties":1,"required":[` + repeat(`"a@"`, names) + `]}}}}`
}

func emptyObjects(n int) string {
	return `{"a":[` + strings.TrimSuffix(strings.Repeat("{},", n), ",") + `]}`
}

// allocated is what f allocates, in bytes.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Issue 34: a 32 KB declaration whose items require 4,200 names made a
// 1.5 KB body cost 2.1 million field errors (a 154 MB 422) and a 60 KB one
// 22 GB. Such a declaration is refused; one with fewer items allowed is
// accepted, and its costliest body lists 100 errors, the same ones every
// time, for about what its cost says. (Not parallel: it measures the
// process's allocations.)
func TestTheTwoMillionErrorRequestIsBounded(t *testing.T) {
	bomb := requiredBomb(4200, 65536)
	require.Less(t, len(bomb), api.MaxSchemaBytes)
	_, err := Compile([]byte(bomb))
	var se *Error
	require.ErrorAs(t, err, &se)
	require.Equal(t, "required", se.Keyword)
	require.Equal(t, "/properties/a/items", se.Pointer)
	require.Contains(t, se.Reason, "64 KiB body")

	s := mustCompile(t, requiredBomb(4200, 500))
	// 500 items: refused by its count, the validator never runs.
	ve := requireProblems(t, s, emptyObjects(500))
	require.Equal(t, []api.FieldError{{Field: "/params", Rule: "cost", Message: ve.Errors[0].Message}}, ve.Errors)
	// 30 items (126,000 missing names) are within the budget: the first
	// 100 errors, in order, and the list says it was cut.
	var first *api.ValidationError
	bytes := allocated(func() { first = requireProblems(t, s, emptyObjects(30)) })
	require.Len(t, first.Errors, api.MaxFieldErrors)
	require.True(t, first.Truncated)
	require.Equal(t, api.FieldError{Field: "/params/a/0/a0", Rule: "required", Message: "is required"}, first.Errors[0])
	for range 3 {
		require.Equal(t, first, requireProblems(t, s, emptyObjects(30)))
	}
	cost, _ := s.cost.estimate(decode(t, emptyObjects(30)), 0, MaxValidationCost)
	require.LessOrEqual(t, bytes, uint64(bytesPerUnit*cost+baseBytes), "allocated %d bytes for a cost of %d", bytes, cost)
}

// A closed schema answers a 64 KB body of 6,500 unknown members with 100
// of them (it listed all 6,500 in a 538 KB answer), sorted.
func TestUnknownMembersAreListedUpToTheBound(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, permitReport)
	var members []string
	for i := range 6500 {
		members = append(members, fmt.Sprintf(`"u%04d":1`, i))
	}
	body := `{"case_id":1,"revision":1,` + strings.Join(members, ",") + `}`
	require.Less(t, len(body), 64<<10)
	ve := requireProblems(t, s, body)
	require.Len(t, ve.Errors, api.MaxFieldErrors)
	require.True(t, ve.Truncated)
	require.Equal(t, "/params/u0000", ve.Errors[0].Field)
	require.Equal(t, "/params/u0099", ve.Errors[99].Field)

	// Numbers out of range stop at the bound as well.
	var huge []string
	for i := range 3000 {
		huge = append(huge, fmt.Sprintf(`"n%04d":1e999`, i))
	}
	ve = requireProblems(t, s, `{`+strings.Join(huge, ",")+`}`)
	require.Len(t, ve.Errors, api.MaxFieldErrors)
	require.True(t, ve.Truncated)
	require.Equal(t, "range", ve.Errors[0].Rule)
}

func requireProblems(t *testing.T, s ParamsSchema, body string) *api.ValidationError {
	t.Helper()
	_, ve := s.Apply(decode(t, body))
	require.NotNil(t, ve, body)
	return ve
}

// The schema's patterns are bounded by their programs before anything
// compiles them: 460 of `^\p{L}{1000}$` took 250 ms and 220 MB.
func TestCompileBoundsPatternPrograms(t *testing.T) {
	t.Parallel()
	prop := `"p@":{"type":"string","maxLength":64,"pattern":"^\\p{L}{1000}$"}`
	_, err := Compile([]byte(`{"type":"object","additionalProperties":false,"properties":{` + repeat(prop, 460) + `}}`))
	var se *Error
	require.ErrorAs(t, err, &se)
	require.Equal(t, "pattern", se.Keyword)
	require.Contains(t, se.Reason, "instructions")
	// Each small enough, too many together.
	prop = `"p@":{"type":"string","maxLength":64,"pattern":"^\\p{L}{1,200}$"}`
	_, err = Compile([]byte(`{"type":"object","additionalProperties":false,"properties":{` + repeat(prop, 60) + `}}`))
	require.ErrorAs(t, err, &se)
	require.Contains(t, se.Reason, "in all")
	// patternProperties count too.
	_, err = Compile([]byte(`{"type":"object","maxProperties":4,"patternProperties":{"^(ab|cd){1000}$":{"type":"integer"}}}`))
	require.ErrorAs(t, err, &se)
	require.Equal(t, "patternProperties", se.Keyword)
	// Ordinary patterns are far below.
	mustCompile(t, `{"type":"object","additionalProperties":false,"properties":{`+
		repeat(`"p@":{"type":"string","maxLength":64,"pattern":"^[a-z0-9_-]{1,64}$"}`, 50)+`}}`)
}

// Compile refuses a schema where a body of 64 KiB could cost more than
// MaxDeclaredCost, naming the keyword; the same keyword under a tighter
// bound is accepted.
func TestCompileRefusesCostlyWorstCases(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ schema, keyword string }{
		{`{"type":"object","additionalProperties":false,"properties":{"xs":{"type":"array","maxItems":65536,"items":{"enum":[` + repeat("@", 2000) + `]}}}}`, "enum"},
		{`{"type":"object","additionalProperties":false,"properties":{"xs":{"type":"array","maxItems":65536,"items":{"type":"string","maxLength":65536,"pattern":"^[a-z]{1,400}$"}}}}`, "pattern"},
		{`{"type":"object","additionalProperties":false,"properties":{"xs":{"type":"array","maxItems":65536,"items":{"type":"array","maxItems":65536,"uniqueItems":true,"items":{"type":"integer"}}}}}`, "uniqueItems"},
		{`{"type":"object","maxProperties":65536,"additionalProperties":{"type":"object","maxProperties":9,"dependentRequired":{"x":[` + repeat(`"d@"`, 200) + `]}}}`, "required"},
		// A recursive schema applies to as many values as fit.
		{`{"type":"object","additionalProperties":false,"properties":{"t":{"$ref":"#/$defs/n"}},"$defs":{"n":{"type":"object","maxProperties":2,"required":[` + repeat(`"r@"`, 300) + `],"properties":{"l":{"$ref":"#/$defs/n"}}}}}`, "required"},
	} {
		_, err := Compile([]byte(c.schema))
		var se *Error
		require.ErrorAs(t, err, &se, c.schema)
		require.Equal(t, c.keyword, se.Keyword, se.Reason)
	}
	mustCompile(t, `{"type":"object","additionalProperties":false,"properties":{"xs":{"type":"array","maxItems":100,"items":{"enum":[`+repeat("@", 2000)+`]}}}}`)
	mustCompile(t, `{"type":"object","additionalProperties":false,"properties":{"xs":{"type":"array","maxItems":65536,"items":{"type":"object","maxProperties":9,"required":["a","b","c","d","e"]}}}}`)
	mustCompile(t, permitReport)
	mustCompile(t, rich)
}

// Params the registry's schemas find costly are validated through its
// gate, at most its slots at once; one that cannot be validated within
// the deadline is a validation error, rule "cost", never a hang.
func TestCostlyValidationsPassTheGate(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	r.Set("bomb", mustCompile(t, requiredBomb(4200, 500)))
	s, _ := r.Schema("bomb")
	ve := requireProblems(t, s, emptyObjects(30))
	require.True(t, ve.Truncated)
	require.EqualValues(t, 1, r.gate.ran.Load())
	// Cheap params do not.
	_, ve = s.Apply(decode(t, `{"a":[]}`))
	require.Nil(t, ve)
	require.EqualValues(t, 1, r.gate.ran.Load())

	// With every slot taken, a costly request waits no longer than the
	// deadline.
	tight := &Registry{gate: newGate(1, 50*time.Millisecond)}
	tight.Set("bomb", mustCompile(t, requiredBomb(4200, 500)))
	s, _ = tight.Schema("bomb")
	tight.gate.slots <- struct{}{}
	ve = requireProblems(t, s, emptyObjects(30))
	require.Equal(t, "cost", ve.Errors[0].Rule)
	require.Contains(t, ve.Errors[0].Message, "took longer than 50ms")
	<-tight.gate.slots
	tight.gate.deadline = time.Minute // a slow machine is not what this checks
	ve = requireProblems(t, s, emptyObjects(30))
	require.Equal(t, "required", ve.Errors[0].Rule)
}

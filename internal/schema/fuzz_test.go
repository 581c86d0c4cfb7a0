package schema

import (
	"github.com/jobgate/jobgate/internal/canon"
	"testing"

	"github.com/stretchr/testify/require"
)

const flat = `{"type":"object","additionalProperties":false,"required":["a"],"properties":{
  "a":{"type":"string","minLength":1,"maxLength":3},"b":{"type":"boolean","default":true},
  "n":{"type":"number","exclusiveMinimum":-5,"exclusiveMaximum":5},"i":{"type":"integer","minimum":-3,"maximum":3,"title":"i"}}}`

// permitDeclared is permit_report as its worker declares it (renderer.Schema):
// its maxima are 2^53-1, beyond the 15 digits of the instance values the
// fast path takes, and still compared exactly.
const permitDeclared = `{"$schema":"https://json-schema.org/draft/2020-12/schema","title":"permit_report params",
  "type":"object","additionalProperties":false,"required":["case_id","revision"],"properties":{
  "case_id":{"type":"integer","minimum":1,"maximum":9007199254740991,"description":"the permit case"},
  "revision":{"type":"integer","minimum":1,"maximum":9007199254740991,"description":"the case revision to report on"},
  "pages":{"type":"integer","minimum":1,"maximum":2000,"default":10,"description":"pages of the report"}}}`

func TestFastPathCoversFlatSchemas(t *testing.T) {
	t.Parallel()
	require.NotNil(t, mustCompile(t, permitReport).fast)
	require.NotNil(t, mustCompile(t, permitDeclared).fast, "bounds up to 2^53-1 keep the fast path")
	for _, in := range []string{`{"case_id":47,"revision":29,"pages":63}`, `{"case_id":999999999999999,"revision":1}`, `{"case_id":4.7e1,"revision":29.0}`} {
		checkFastPath(t, mustCompile(t, permitDeclared), []byte(in))
		_, fe := mustCompile(t, permitDeclared).Apply(decode(t, in))
		require.Empty(t, fe, in)
	}
	for _, in := range []string{`{"case_id":9007199254740992,"revision":1}`, `{"case_id":0,"revision":1}`, `{"case_id":1e16,"revision":1}`} {
		_, fe := mustCompile(t, permitDeclared).Apply(decode(t, in))
		require.NotEmpty(t, fe, in)
	}
	require.NotNil(t, mustCompile(t, flat).fast)
	require.Nil(t, mustCompile(t, rich).fast)
	require.Nil(t, mustCompile(t, `{"type":"object","additionalProperties":false,"properties":{"m":{"type":"integer","multipleOf":2}}}`).fast)
	require.Nil(t, mustCompile(t, `{"type":"object","additionalProperties":false,"properties":{"m":{"type":"integer","maximum":2.5}}}`).fast)
	for _, in := range []string{`{"a":"x"}`, `{"a":"xyz","b":false,"n":-4,"i":3}`, `{"a":"é😀"}`, `{"a":"x","i":3.0,"n":-40e-1}`, `{"a":"x","i":-0.0e5}`} {
		checkFastPath(t, mustCompile(t, flat), []byte(in))
		_, fe := mustCompile(t, flat).Apply(decode(t, in))
		require.Empty(t, fe, in)
	}
}

// checkFastPath: what the fast path accepts, the general validator accepts.
func checkFastPath(t *testing.T, s *Schema, data []byte) {
	v, err := canon.DecodeStrict(data)
	if err != nil {
		return
	}
	m, ok := v.(map[string]any)
	if !ok {
		return
	}
	if s.defaults != nil {
		m, _ = s.defaults.apply(m, 0)
	}
	if s.fast.valid(m) {
		if err := s.compiled.Validate(m); err != nil {
			t.Fatalf("fast path accepted %s, the validator refuses: %v", data, err)
		}
	}
	out, fe := s.Apply(v)
	if fe == nil {
		if err := s.compiled.Validate(out); err != nil {
			t.Fatalf("Apply accepted %s, the validator refuses: %v", data, err)
		}
	}
}

// FuzzApplyFastPath: the fast path never accepts params the general
// validator refuses, and Apply never panics.
func FuzzApplyFastPath(f *testing.F) {
	for _, s := range []string{
		`{"case_id":47,"revision":29,"pages":63}`, `{"case_id":47.0,"revision":29}`, `{"case_id":9007199254740991,"revision":1}`, `{"case_id":0,"revision":1,"pages":2001}`,
		`{"a":"xyz","b":false,"n":-4,"i":3}`, `{"a":"","n":5}`, `{"a":"x","i":3.0e0,"n":-0.4e1}`, `{"a":"abcd","i":-0}`, `{"a":"\u00e9\u00e9\u00e9"}`, `{"x":1}`,
	} {
		f.Add([]byte(s))
	}
	permit, err := Compile([]byte(permitReport))
	require.NoError(f, err)
	flatS, err := Compile([]byte(flat))
	require.NoError(f, err)
	declared, err := Compile([]byte(permitDeclared))
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, data []byte) {
		checkFastPath(t, permit, data)
		checkFastPath(t, declared, data)
		checkFastPath(t, flatS, data)
	})
}

func TestExactSmallInt(t *testing.T) {
	t.Parallel()
	for lit, want := range map[string]int64{"0": 0, "-0": 0, "47": 47, "47.0": 47, "4.7e1": 47, "4.70E+1": 47, "470e-1": 47, "-2.5e1": -25, "0.0e0": 0, "999999999999999": 999999999999999, "9.99999999999999e14": 999999999999999} {
		n, ok := exactSmallInt(lit)
		require.True(t, ok, lit)
		require.Equal(t, want, n, lit)
	}
	for _, lit := range []string{"4.75e1", "0.5", "1e15", "1000000000000000", "1e-1", "1e401", "x", "", "-", "1.5e", "46.99999999999999999"} {
		_, ok := exactSmallInt(lit)
		require.False(t, ok, lit)
	}
}

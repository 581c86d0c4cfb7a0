package schema

import (
	"testing"

	"github.com/jobgate/jobgate/pkg/job"
	"github.com/stretchr/testify/require"
)

const flat = `{"type":"object","additionalProperties":false,"required":["a"],"properties":{
  "a":{"type":"string","minLength":1,"maxLength":3},"b":{"type":"boolean","default":true},
  "n":{"type":"number","exclusiveMinimum":-5,"exclusiveMaximum":5},"i":{"type":"integer","minimum":-3,"maximum":3,"title":"i"}}}`

func TestFastPathCoversFlatSchemas(t *testing.T) {
	t.Parallel()
	require.NotNil(t, mustCompile(t, permitReport).fast)
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
	v, err := job.DecodeStrict(data)
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
	if len(fe) == 0 {
		if err := s.compiled.Validate(out); err != nil {
			t.Fatalf("Apply accepted %s, the validator refuses: %v", data, err)
		}
	}
}

// FuzzApplyFastPath: the fast path never accepts params the general
// validator refuses, and Apply never panics.
func FuzzApplyFastPath(f *testing.F) {
	for _, s := range []string{
		`{"case_id":47,"revision":29,"pages":63}`, `{"case_id":47.0,"revision":29}`, `{"case_id":0,"revision":1,"pages":2001}`,
		`{"a":"xyz","b":false,"n":-4,"i":3}`, `{"a":"","n":5}`, `{"a":"x","i":3.0e0,"n":-0.4e1}`, `{"a":"abcd","i":-0}`, `{"a":"\u00e9\u00e9\u00e9"}`, `{"x":1}`,
	} {
		f.Add([]byte(s))
	}
	permit, err := Compile([]byte(permitReport))
	require.NoError(f, err)
	flatS, err := Compile([]byte(flat))
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, data []byte) {
		checkFastPath(t, permit, data)
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

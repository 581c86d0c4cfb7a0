package job

import (
	"encoding/json"
	"errors"
	"github.com/jobgate/jobgate/internal/schema"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// stubTypes declares "permit_report" with a schema that only adds the
// pages default, and "strict" whose schema refuses everything: enough to
// test the envelope, which is DecodeSubmission's own job. The real schemas
// are tested with DecodeSubmission in permit_submission_test.go.
type stubTypes struct{}

type stubSchema struct{ refuse bool }

func (s stubSchema) Apply(params any) (any, *ValidationError) {
	if s.refuse {
		return nil, &ValidationError{Errors: []FieldError{{Field: "/params/x", Rule: "required", Message: "is required"}}}
	}
	m := params.(map[string]any)
	if _, ok := m["pages"]; !ok {
		c := map[string]any{"pages": json.Number("10")}
		for k, v := range m {
			c[k] = v
		}
		return c, nil
	}
	return m, nil
}

func (stubTypes) Schema(name string) (schema.ParamsSchema, bool) {
	switch name {
	case "permit_report":
		return stubSchema{}, true
	case "strict":
		return stubSchema{refuse: true}, true
	}
	return nil, false
}

func TestDecodeSubmissionKeepsPinnedFingerprints(t *testing.T) {
	t.Parallel()
	for _, p := range pinnedFingerprints {
		r, err := DecodeSubmission([]byte(p.body), stubTypes{})
		require.NoError(t, err)
		require.Equal(t, p.canonical, string(r.Canonical))
		require.Equal(t, p.fingerprint, r.Fingerprint)
		require.Equal(t, "permit_report", r.Type)
		require.Equal(t, p.canonical[len(`{"params":`):strings.Index(p.canonical, `,"type":`)], string(r.Params))
	}
	// Form only: key order, white space, 47 vs 47.0 vs 4.7e1.
	r, err := DecodeSubmission([]byte("{\n \"params\": {\"revision\": 2.9e1, \"case_id\": 47.0, \"pages\": 63.00},\n \"type\": \"permit_report\"\n}"), stubTypes{})
	require.NoError(t, err)
	require.Equal(t, pinnedFingerprints[0].fingerprint, r.Fingerprint)
	r, err = DecodeSubmission([]byte(`{"type":"permit_report"}`), stubTypes{})
	require.NoError(t, err)
	require.Equal(t, `{"params":{"pages":10},"type":"permit_report"}`, string(r.Canonical))
	require.Equal(t, `{"pages":10}`, string(r.Params))
}

func TestDecodeSubmissionErrors(t *testing.T) {
	t.Parallel()
	malformed := map[string]string{
		``:      "empty body",
		`{`:     "unexpected end",
		`null`:  "must be a JSON object",
		`[]`:    "must be a JSON object",
		`"x"`:   "must be a JSON object",
		`{} {}`: "trailing data",
		`{"type":"permit_report","params":{"case_id":47,"case_id":1,"revision":2}}`: `duplicate member name "case_id" at /params`,
		`{"type":"permit_report","type":"permit_report","params":{}}`:               `duplicate member name "type" at the top level`,
		`{"type":"permit_report","params":{"a":[{"b":1,"b":1}]}}`:                   `duplicate member name "b" at /params/a/0`,
	}
	for body, msg := range malformed {
		_, err := DecodeSubmission([]byte(body), stubTypes{})
		require.ErrorIs(t, err, ErrMalformed, body)
		require.NotErrorIs(t, err, ErrValidation, body)
		require.ErrorContains(t, err, msg, body)
	}
	for body, want := range map[string][]FieldError{
		`{}`:                                     {{Field: "/type", Rule: "required", Message: "is required"}},
		`{"type":7}`:                             {{Field: "/type", Rule: "type", Message: "must be a string"}},
		`{"type":"nope"}`:                        {{Field: "/type", Rule: "enum", Message: `unknown job type "nope"`}},
		`{"type":"nope","params":1}`:             {{Field: "/params", Rule: "type", Message: "must be an object"}, {Field: "/type", Rule: "enum", Message: `unknown job type "nope"`}},
		`{"type":"permit_report","params":null}`: {{Field: "/params", Rule: "type", Message: "must be an object"}},
		`{"type":"permit_report","params":[]}`:   {{Field: "/params", Rule: "type", Message: "must be an object"}},
		`{"type":"permit_report","params":{},"x/y":1,"id":2}`: {
			{Field: "/id", Rule: "additionalProperties", Message: "is not allowed"},
			{Field: "/x~1y", Rule: "additionalProperties", Message: "is not allowed"},
		},
		`{"type":"strict","params":{}}`: {{Field: "/params/x", Rule: "required", Message: "is required"}},
	} {
		_, err := DecodeSubmission([]byte(body), stubTypes{})
		var ve *ValidationError
		require.ErrorAs(t, err, &ve, body)
		require.ErrorIs(t, err, ErrValidation)
		require.Equal(t, want, ve.Errors, body)
	}
	// A long type name is not echoed whole.
	_, err := DecodeSubmission([]byte(`{"type":"`+strings.Repeat("x", 10000)+`"}`), stubTypes{})
	var long *ValidationError
	require.ErrorAs(t, err, &long)
	require.Equal(t, `unknown job type "`+strings.Repeat("x", MaxTypeNameLen)+`..."`, long.Errors[0].Message)

	// A number a double cannot hold exactly is not silently rounded.
	_, err = DecodeSubmission([]byte(`{"type":"permit_report","params":{"case_id":12345678901234567890,"revision":1}}`), stubTypes{})
	var ve *ValidationError
	require.ErrorAs(t, err, &ve)
	require.Len(t, ve.Errors, 1)
	require.Equal(t, "/params/case_id", ve.Errors[0].Field)
	require.Equal(t, "range", ve.Errors[0].Rule)
}

// FuzzDecodeSubmission: any body decodes or fails with a known sentinel,
// and a decoded request's canonical form decodes to itself.
func FuzzDecodeSubmission(f *testing.F) {
	for _, p := range pinnedFingerprints {
		f.Add([]byte(p.body))
	}
	for _, s := range []string{`{"type":"strict"}`, `{"type":"permit_report","params":{"x":[1,{"y":"\u00e9"}],"pages":1e400}}`, `{"type":1}`, `[]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := DecodeSubmission(body, stubTypes{})
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrValidation) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		again, err := DecodeSubmission(r.Canonical, stubTypes{})
		if err != nil || string(again.Canonical) != string(r.Canonical) || again.Fingerprint != r.Fingerprint {
			t.Fatalf("canonical form %s not stable: %v", r.Canonical, err)
		}
		if !json.Valid(r.Params) {
			t.Fatalf("params not valid JSON: %s", r.Params)
		}
	})
}

// Two spellings of one double are one request (docs/api.md): the
// fingerprint follows the value a worker decodes, not the bytes.
func TestEqualDoublesAreOneRequest(t *testing.T) {
	t.Parallel()
	a, err := DecodeSubmission([]byte(`{"type":"permit_report","params":{"ratio":0.1}}`), stubTypes{})
	require.NoError(t, err)
	b, err := DecodeSubmission([]byte(`{"type":"permit_report","params":{"ratio":0.10000000000000001}}`), stubTypes{})
	require.NoError(t, err)
	require.Equal(t, a.Fingerprint, b.Fingerprint)
	c, err := DecodeSubmission([]byte(`{"type":"permit_report","params":{"ratio":0.1000000000000001}}`), stubTypes{})
	require.NoError(t, err)
	require.NotEqual(t, a.Fingerprint, c.Fingerprint, "another double is another request")
}

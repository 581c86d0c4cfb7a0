package job_test

import (
	"testing"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

// DecodeSubmission with the real permit_report schema.
func TestDecodeSubmissionPermitReport(t *testing.T) {
	t.Parallel()
	types := jobtest.PermitTypes(t)
	a, err := job.DecodeSubmission([]byte(`{"type":"permit_report","params":{"case_id":47,"revision":29}}`), types)
	require.NoError(t, err)
	b, err := job.DecodeSubmission([]byte(`{"type":"permit_report","params":{"case_id":47.0,"revision":29,"pages":10}}`), types)
	require.NoError(t, err)
	require.Equal(t, a.Fingerprint, b.Fingerprint)
	// The fingerprint the first decoder gave this request (pkg/job's pin).
	require.Equal(t, "8d23ea64891ffb70ec1337afe8ff9ca616e16055f7b9077808ef8b3ff0c10642", a.Fingerprint)
	require.Equal(t, `{"case_id":47,"pages":10,"revision":29}`, string(a.Params))
	c, err := job.DecodeSubmission([]byte(`{"type":"permit_report","params":{"case_id":47,"revision":29,"pages":63}}`), types)
	require.NoError(t, err)
	require.Equal(t, "254e2692e84c05912ffa04644ab131847c592e59f63eb5d2de7af5753d7b27c9", c.Fingerprint)

	_, err = job.DecodeSubmission([]byte(`{"type":"permit_report","params":{"case_id":47,"case_id":1,"revision":2}}`), types)
	require.ErrorIs(t, err, job.ErrMalformed)
	require.ErrorContains(t, err, `duplicate member name "case_id" at /params`)

	_, err = job.DecodeSubmission([]byte(`{"type":"permit_report","params":{"case_id":47,"revision":29,"pages":0,"color":1}}`), types)
	var ve *job.ValidationError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, []job.FieldError{
		{Field: "/params/color", Rule: "additionalProperties", Message: "is not allowed"},
		{Field: "/params/pages", Rule: "minimum", Message: "must be at least 1"},
	}, ve.Errors)
	_, err = job.DecodeSubmission([]byte(`{"type":"permit_report","params":{"case_id":46.99999999999999999,"revision":29}}`), types)
	require.ErrorAs(t, err, &ve)
	require.Equal(t, []job.FieldError{{Field: "/params/case_id", Rule: "type", Message: "must be an integer"}}, ve.Errors)
	_, err = job.DecodeSubmission([]byte(`{"type":"permit_report","params":{"case_id":9007199254740993,"revision":29}}`), types)
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "/params/case_id", ve.Errors[0].Field)
	// The shipped schema bounds ids at 2^53-1: an integer past that is refused
	// by its bound before it could lose precision.
	require.Equal(t, "maximum", ve.Errors[0].Rule)
	_, err = job.DecodeSubmission([]byte(`{"type":"other","params":{}}`), types)
	require.ErrorAs(t, err, &ve)
	require.Equal(t, []job.FieldError{{Field: "/type", Rule: "enum", Message: `unknown job type "other"`}}, ve.Errors)
}

// Admission cost with the real schema.
func BenchmarkDecodeSubmission(b *testing.B) {
	types := jobtest.PermitTypes(b)
	for name, body := range map[string]string{
		"all":      `{"type":"permit_report","params":{"case_id":47,"revision":29,"pages":63}}`,
		"defaults": `{"type":"permit_report","params":{"case_id":47,"revision":29}}`,
		"floats":   `{"type":"permit_report","params":{"case_id":47.0,"revision":29,"pages":6.3e1}}`,
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := job.DecodeSubmission([]byte(body), types); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/stretchr/testify/require"
)

// The slugs and statuses the contract names; the catalogue must say exactly
// these for them.
var contractProblems = map[string]int{
	"idempotency-key-reused":  409,
	"idempotency-key-missing": 400,
	"idempotency-key-invalid": 400,
	"malformed-request":       400,
	"validation":              422,
	"payload-too-large":       413,
	"unauthorized":            401,
	"rate-limited":            429,
	"unavailable":             503,
	"not-found":               404,
	"result-not-ready":        409,
	"job-failed":              409,
	"job-canceled":            409,
	"link-expired":            410,
	"link-invalid":            403,
	"unsupported-media-type":  415,
	"forbidden":               403,
}

func TestCatalogueCoversTheContract(t *testing.T) {
	t.Parallel()
	bySlug := map[string]job.ProblemKind{}
	for _, k := range job.ProblemKinds() {
		_, dup := bySlug[k.Slug]
		require.False(t, dup, "slug %s twice", k.Slug)
		bySlug[k.Slug] = k
		require.NotEmpty(t, k.Title, k.Slug)
		require.NotEmpty(t, k.Detail, k.Slug)
		require.NotNil(t, k.Err, k.Slug)
	}
	for slug, status := range contractProblems {
		k, ok := bySlug[slug]
		require.True(t, ok, "contract slug %s missing", slug)
		require.Equal(t, status, k.Status, slug)
	}
}

// What the server writes for an error, a client reads back as the same
// sentinel: one catalogue for both sides.
func TestProblemRoundTrip(t *testing.T) {
	t.Parallel()
	for _, k := range job.ProblemKinds() {
		t.Run(k.Slug, func(t *testing.T) {
			t.Parallel()
			sent := problemOf(fmt.Errorf("job_x: %w", k.Err))
			require.Equal(t, "/problems/"+k.Slug, sent.Type)
			require.Equal(t, k.Status, sent.Status)
			raw, err := json.Marshal(sent)
			require.NoError(t, err)
			var got job.Problem
			require.NoError(t, json.Unmarshal(raw, &got))
			require.ErrorIs(t, &got, k.Err)
			for _, other := range job.ProblemKinds() {
				if other.Slug != k.Slug && !errors.Is(k.Err, other.Err) {
					require.NotErrorIs(t, &got, other.Err, "%s read back as %s", k.Slug, other.Slug)
				}
			}
		})
	}
}

func TestProblemDetails(t *testing.T) {
	t.Parallel()
	p := problemOf(errors.New("disk on fire at /var/secret"))
	require.Equal(t, 500, p.Status)
	require.Equal(t, "/problems/internal", p.Type)
	require.Equal(t, job.InternalProblem.Detail, p.Detail, "an internal error's text is not shown")
	require.NotContains(t, p.Detail, "disk on fire")

	p = problemOf(fmt.Errorf("job_other of tenant 4: %w", job.ErrNotFound))
	require.NotContains(t, p.Detail, "tenant 4", "not-found says the same words for a missing and a foreign job")

	p = problemOf(&job.ValidationError{Errors: []job.FieldError{{Field: "params.pages", Message: "too big"}}})
	require.Equal(t, 422, p.Status)
	require.Len(t, p.Errors, 1)
	var ve *job.ValidationError
	require.ErrorAs(t, p, &ve)
	require.Equal(t, "params.pages", ve.Errors[0].Field)
	require.Same(t, p, ve.Problem)

	require.Contains(t, p.Error(), "params.pages: too big", "a client's error names the fields")

	p = problemOf(&job.ConflictError{JobID: "job_abc"})
	require.Equal(t, 409, p.Status)
	p.Detail = "the journal holds this key for a different request"
	require.Contains(t, p.Error(), "job_abc", "a client's error names the job the key belongs to")
	require.Equal(t, "job_abc", p.JobID)
	var ce *job.ConflictError
	require.ErrorAs(t, p, &ce)
	require.Equal(t, "job_abc", ce.JobID)
	require.ErrorIs(t, ce, job.ErrKeyReused)
	require.False(t, errors.As(problemOf(job.ErrNotFound), &ce), "only a reused key is a conflict error")
}

// A catalogued error's own text never reaches the client: it may name the
// store and its transport. The client reads the kind's fixed detail.
func TestProblemDetailIsTheCataloguesNotTheErrors(t *testing.T) {
	t.Parallel()
	const internals = "nats: no responders available for request"
	for _, k := range job.ProblemKinds() {
		err := fmt.Errorf("index read: %w: %w", k.Err, errors.New(internals))
		p := problemOf(err)
		require.Equal(t, k.Detail, p.Detail, k.Slug)
		raw, merr := json.Marshal(p)
		require.NoError(t, merr)
		require.NotContains(t, string(raw), "nats", k.Slug)
		require.NotContains(t, string(raw), "index read", k.Slug)
	}
	p := problemOf(fmt.Errorf("index read: %w: %s", job.ErrUnavailable, internals))
	require.Equal(t, "the job store is unavailable; retry after Retry-After with the same Idempotency-Key", p.Detail)
}

// Only an error written for the client adds its words: a *UserError's
// message becomes the detail, however it is wrapped, when it stands for
// the problem's own kind.
func TestUserErrorsCarryTheirMessage(t *testing.T) {
	t.Parallel()
	ue := job.Userf(job.ErrBadRequest, "limit must be 1 to %d", 100)
	require.ErrorIs(t, ue, job.ErrBadRequest)
	require.Equal(t, "bad request: limit must be 1 to 100", ue.Error())
	require.Equal(t, "limit must be 1 to 100", problemOf(ue).Detail)
	require.Equal(t, "limit must be 1 to 100", problemOf(fmt.Errorf("list jobs: %w", ue)).Detail, "wrapped")

	// A user message under another kind does not speak for it.
	mixed := fmt.Errorf("%w: %w", job.ErrUnavailable, ue)
	p := problemOf(mixed)
	require.Equal(t, 503, p.Status)
	require.Equal(t, job.ProblemFor(job.ErrUnavailable).Detail, p.Detail)

	// The typed client errors keep their fields.
	v := problemOf(fmt.Errorf("schema: %w", &job.ValidationError{Errors: []job.FieldError{{Field: "/params/pages", Message: "must be at least 1"}}}))
	require.Equal(t, "one or more fields are invalid", v.Detail)
	require.Len(t, v.Errors, 1)
	c := problemOf(&job.ConflictError{JobID: "job_abc"})
	require.Contains(t, c.Detail, "job_abc")
}

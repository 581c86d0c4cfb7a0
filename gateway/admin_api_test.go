package gateway

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/auth"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/pkg/api"
	"github.com/stretchr/testify/require"
)

func (b *testBundle) operator(t *testing.T, sub string) string {
	t.Helper()
	tok, err := auth.Mint(b.secret, auth.Identity{Requester: sub, Operator: true}, time.Hour, time.Now())
	require.NoError(t, err)
	return tok
}

func adminPage(t *testing.T, r response) api.AdminJobPage {
	t.Helper()
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var p api.AdminJobPage
	require.NoError(t, json.Unmarshal(r.body, &p))
	return p
}

func adminJob(t *testing.T, r response) api.AdminJob {
	t.Helper()
	var j api.AdminJob
	require.NoError(t, json.Unmarshal(r.body, &j), "%s", r.body)
	return j
}

func pageIDs(p api.AdminJobPage) []string {
	out := make([]string, len(p.Jobs))
	for i, j := range p.Jobs {
		out[i] = j.ID
	}
	return out
}

// The roles: a requester token gets 403 on every admin path; a tenant admin
// lists and reads its tenant's jobs only (another tenant's is 404); an
// operator reaches every tenant, and without a tenant of its own has no
// requester API.
func TestAdminRoles(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	alice := b.token(t, "4", "alice", false)
	bob := b.token(t, "4", "bob", false)
	other := b.token(t, "5", "carol", false)
	admin := b.token(t, "4", "ops", true)
	op := b.operator(t, "root")

	a := b.submit(t, alice, "a", permit).job(t).ID
	bb := b.submit(t, bob, "b", permit).job(t).ID
	c := b.submit(t, other, "c", permit).job(t).ID

	for _, path := range []string{"/v1/admin/jobs", "/v1/admin/jobs/" + a, "/v1/admin/stats"} {
		r := b.do(t, http.MethodGet, path, alice, "")
		require.Equal(t, http.StatusForbidden, r.status, "%s: %s", path, r.body)
		require.Equal(t, "/problems/forbidden", r.json(t)["type"])
	}
	r := b.do(t, http.MethodPost, "/v1/admin/jobs/"+a+"/cancel", alice, "")
	require.Equal(t, http.StatusForbidden, r.status)

	p := adminPage(t, b.do(t, http.MethodGet, "/v1/admin/jobs", admin, ""))
	require.Equal(t, []string{bb, a}, pageIDs(p), "the tenant's jobs, newest first")
	require.Equal(t, "4", p.Jobs[0].Tenant)
	require.Equal(t, "bob", p.Jobs[0].Requester)
	p = adminPage(t, b.do(t, http.MethodGet, "/v1/admin/jobs?tenant=5", admin, ""))
	require.Equal(t, []string{bb, a}, pageIDs(p), "a tenant admin always gets its own tenant")

	got := b.do(t, http.MethodGet, "/v1/admin/jobs/"+c, admin, "")
	missing := b.do(t, http.MethodGet, "/v1/admin/jobs/job_aaaaaaaaaaaaaaaaaaaaaaaaaa", admin, "")
	require.Equal(t, http.StatusNotFound, got.status, "%s", got.body)
	require.Equal(t, missing.json(t)["type"], got.json(t)["type"])
	require.Equal(t, http.StatusNotFound, b.do(t, http.MethodPost, "/v1/admin/jobs/"+c+"/cancel", admin, "").status)

	p = adminPage(t, b.do(t, http.MethodGet, "/v1/admin/jobs", op, ""))
	require.Equal(t, []string{c, bb, a}, pageIDs(p), "an operator reaches every tenant")
	p = adminPage(t, b.do(t, http.MethodGet, "/v1/admin/jobs?tenant=5", op, ""))
	require.Equal(t, []string{c}, pageIDs(p))
	require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/v1/admin/jobs/"+c, op, "").status)

	r = b.do(t, http.MethodPost, "/v1/admin/jobs/"+c+"/cancel", op, "")
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
	require.Equal(t, job.StateCanceled, adminJob(t, r).State)
	require.Equal(t, "canceled", b.do(t, http.MethodGet, "/v1/jobs/"+c, other, "").json(t)["state"])

	r = b.do(t, http.MethodGet, "/v1/jobs", op, "")
	require.Equal(t, http.StatusForbidden, r.status, "an operator without a tenant has no jobs of its own")
	r = b.submit(t, op, "x", permit)
	require.Equal(t, http.StatusForbidden, r.status)
}

// Filters, pages and bounds of GET /v1/admin/jobs; bad input is a 400
// problem, never a 500.
func TestAdminListFiltersAndBounds(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	alice := b.token(t, "4", "alice", false)
	bob := b.token(t, "4", "bob", false)
	admin := b.token(t, "4", "ops", true)
	var ids []string
	for i := range 5 {
		tok := alice
		if i%2 == 1 {
			tok = bob
		}
		r := b.submit(t, tok, "k"+string(rune('a'+i)), permit)
		require.Equal(t, http.StatusAccepted, r.status)
		ids = append(ids, r.job(t).ID)
	}
	b.advance(t, "4", "alice", ids[0], func(r *job.Record) error {
		if err := r.Claim("w1", time.Now()); err != nil {
			return err
		}
		return r.Fail(&job.Failure{Category: job.CategoryTimeout, Message: "late"}, time.Now())
	})

	p := adminPage(t, b.do(t, http.MethodGet, "/v1/admin/jobs?requester=bob", admin, ""))
	require.Equal(t, []string{ids[3], ids[1]}, pageIDs(p))
	p = adminPage(t, b.do(t, http.MethodGet, "/v1/admin/jobs?state=failed&category=timeout", admin, ""))
	require.Equal(t, []string{ids[0]}, pageIDs(p))
	p = adminPage(t, b.do(t, http.MethodGet, "/v1/admin/jobs?state=queued&type=permit_report", admin, ""))
	require.Equal(t, []string{ids[4], ids[3], ids[2], ids[1]}, pageIDs(p))

	first := adminPage(t, b.do(t, http.MethodGet, "/v1/admin/jobs?limit=2", admin, ""))
	require.Equal(t, []string{ids[4], ids[3]}, pageIDs(first))
	require.NotEmpty(t, first.NextCursor)
	second := adminPage(t, b.do(t, http.MethodGet, "/v1/admin/jobs?limit=2&cursor="+first.NextCursor, admin, ""))
	require.Equal(t, []string{ids[2], ids[1]}, pageIDs(second))

	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	p = adminPage(t, b.do(t, http.MethodGet, "/v1/admin/jobs?created_after="+future, admin, ""))
	require.Empty(t, p.Jobs)
	p = adminPage(t, b.do(t, http.MethodGet, "/v1/admin/jobs?created_before="+future+"&limit=1", admin, ""))
	require.Equal(t, []string{ids[4]}, pageIDs(p))

	for _, q := range []string{"limit=0", "limit=101", "limit=x", "state=done", "category=oops", "type=Bad-Type",
		"created_after=yesterday", "cursor=" + strings.Repeat("A", 300), "cursor=bm9wZQ", "requester=a.b", "color=red", "limit=1&limit=2"} {
		r := b.do(t, http.MethodGet, "/v1/admin/jobs?"+q, admin, "")
		require.Equal(t, http.StatusBadRequest, r.status, "%s: %s", q, r.body)
		require.Equal(t, "application/problem+json", r.header.Get("Content-Type"), q)
	}
}

// A retry makes one new linked job per Idempotency-Key; the old job keeps
// its terminal state and gains retried_as; a job not failed or canceled is
// not retryable. The detail shows the attempts with the full message, the
// owner's view never does.
func TestAdminRetryAndAttempts(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	alice := b.token(t, "4", "alice", false)
	admin := b.token(t, "4", "ops", true)
	id := b.submit(t, alice, "a", permit).job(t).ID
	queued := b.submit(t, alice, "q", permit).job(t).ID

	r := b.do(t, http.MethodPost, "/v1/admin/jobs/"+queued+"/retry", admin, "", "Idempotency-Key: r1")
	require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
	require.Equal(t, "/problems/job-not-retryable", r.json(t)["type"])
	r = b.do(t, http.MethodPost, "/v1/admin/jobs/"+id+"/retry", admin, "")
	require.Equal(t, http.StatusBadRequest, r.status, "an Idempotency-Key is required")

	secret := "render: /srv/fonts/cache.db is corrupt (inode 7741)"
	b.advance(t, "4", "alice", id, func(r *job.Record) error {
		now := time.Now()
		if err := r.Claim("worker-a", now); err != nil {
			return err
		}
		if err := r.ScheduleRetry(&job.Failure{Category: job.CategoryRenderError, Message: "the job's worker reported an error", Retryable: true}, now, now); err != nil {
			return err
		}
		r.NoteCause(secret)
		if err := r.Claim("worker-b", now); err != nil {
			return err
		}
		return r.Fail(&job.Failure{Category: job.CategoryRenderError, Message: "the job's worker could not do it"}, now)
	})
	before := b.do(t, http.MethodGet, "/v1/admin/jobs/"+id, admin, "")
	require.Equal(t, http.StatusOK, before.status, "%s", before.body)
	d := adminJob(t, before)
	require.Len(t, d.Attempts, 2)
	require.Equal(t, "worker-a", d.Attempts[0].Worker)
	require.Equal(t, api.OutcomeFailed, d.Attempts[0].Outcome)
	require.Equal(t, secret, d.Attempts[0].Error.Message, "the admin reads the full message")
	require.NotNil(t, d.Attempts[1].EndedAt)
	own := b.do(t, http.MethodGet, "/v1/jobs/"+id, alice, "")
	require.NotContains(t, string(own.body), "inode", "the owner never reads the full message")
	require.NotContains(t, string(own.body), "attempts")

	// It failed permanently: the retry is confirmed (issue 34).
	r = b.do(t, http.MethodPost, "/v1/admin/jobs/"+id+"/retry?confirm_permanent=true", admin, "", "Idempotency-Key: r1")
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	n := adminJob(t, r)
	require.Equal(t, id, n.RetryOf)
	require.NotEqual(t, id, n.ID)
	require.Equal(t, job.StateQueued, n.State)
	require.Equal(t, "alice", n.Requester)
	require.Equal(t, "/v1/admin/jobs/"+n.ID, r.header.Get("Location"))

	again := b.do(t, http.MethodPost, "/v1/admin/jobs/"+id+"/retry", admin, "", "Idempotency-Key: r1")
	require.Equal(t, http.StatusOK, again.status, "%s", again.body)
	require.Equal(t, n.ID, adminJob(t, again).ID, "the same key: the same job")

	old := adminJob(t, b.do(t, http.MethodGet, "/v1/admin/jobs/"+id, admin, ""))
	require.Equal(t, n.ID, old.RetriedAs)
	require.Equal(t, job.StateFailed, old.State, "the old job keeps its terminal state")
	require.Equal(t, *d.FinishedAt, *old.FinishedAt)
	require.Equal(t, d.UpdatedAt, old.UpdatedAt)

	mine := b.do(t, http.MethodGet, "/v1/jobs/"+n.ID, alice, "")
	require.Equal(t, http.StatusOK, mine.status, "the owner reads the new job")
	p := adminPage(t, b.do(t, http.MethodGet, "/v1/admin/jobs?state=queued", admin, ""))
	require.Contains(t, pageIDs(p), n.ID)
}

// Stats count per type what waits, runs and finished; a job admitted
// before the call is counted.
func TestAdminStats(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	alice := b.token(t, "4", "alice", false)
	admin := b.token(t, "4", "ops", true)
	op := b.operator(t, "root")
	var ids []string
	for i := range 4 {
		ids = append(ids, b.submit(t, alice, "k"+string(rune('a'+i)), permit).job(t).ID)
	}
	b.submit(t, b.token(t, "5", "x", false), "other", permit)
	b.advance(t, "4", "alice", ids[0], func(r *job.Record) error { return r.Claim("w", time.Now()) })
	b.advance(t, "4", "alice", ids[1], func(r *job.Record) error { return r.Cancel(time.Now()) })

	var s api.Stats
	r := b.do(t, http.MethodGet, "/v1/admin/stats", admin, "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.NoError(t, json.Unmarshal(r.body, &s))
	require.Equal(t, "4", s.Tenant)
	require.Len(t, s.Types, 1)
	require.EqualValues(t, 2, s.Types[0].Queued)
	require.EqualValues(t, 1, s.Types[0].Running)
	require.EqualValues(t, 1, s.Types[0].LastHour.Canceled)
	require.EqualValues(t, 1, s.Types[0].LastDay.Canceled)
	require.Greater(t, s.Types[0].OldestQueuedSeconds, 0.0)

	r = b.do(t, http.MethodGet, "/v1/admin/stats", op, "")
	require.NoError(t, json.Unmarshal(r.body, &s))
	require.EqualValues(t, 3, s.Types[0].Queued, "every tenant")
	require.Equal(t, http.StatusBadRequest, b.do(t, http.MethodGet, "/v1/admin/stats?tenant=a.b", op, "").status)
}

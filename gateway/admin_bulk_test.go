package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/pkg/api"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

// bulk sends a bulk call that must answer 200 and returns its result.
func (b *testBundle) bulk(t *testing.T, action, token, body string, headers ...string) api.AdminBulkResult {
	t.Helper()
	r := b.do(t, http.MethodPost, "/v1/admin/jobs/"+action, token, body, headers...)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var res api.AdminBulkResult
	require.NoError(t, json.Unmarshal(r.body, &res), "%s", r.body)
	require.Equal(t, action, res.Action)
	return res
}

// submitN submits n permit_report jobs as token, keys prefix-0..n-1.
func (b *testBundle) submitN(t *testing.T, token, prefix string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		r := b.submit(t, token, fmt.Sprintf("%s-%d", prefix, i), permit)
		require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
		ids[i] = r.job(t).ID
	}
	return ids
}

// failAll fails each job as a worker would (claim, then fail) on its last
// attempt with a failure that may be retried: an admin retry needs no
// confirmation (failPermanently's would).
func (b *testBundle) failAll(t *testing.T, tenant, requester string, ids []string) {
	t.Helper()
	b.failWith(t, tenant, requester, ids, &job.Failure{Category: job.CategoryRenderError,
		Message: "the job's worker reported an error (attempt 3 of 3)", Retryable: true})
}

// failPermanently fails each job with a verdict that another attempt
// cannot help (retryable false).
func (b *testBundle) failPermanently(t *testing.T, tenant, requester string, ids []string) {
	t.Helper()
	b.failWith(t, tenant, requester, ids, &job.Failure{Category: job.CategoryRenderError, Message: "the job's worker could not do it"})
}

func (b *testBundle) failWith(t *testing.T, tenant, requester string, ids []string, f *job.Failure) {
	t.Helper()
	for _, id := range ids {
		b.advance(t, tenant, requester, id, func(r *job.Record) error {
			if err := r.Claim("w1", time.Now()); err != nil {
				return err
			}
			return r.Fail(f, time.Now())
		})
	}
}

func (b *testBundle) stateOf(t *testing.T, tenant, requester, id string) job.State {
	t.Helper()
	rec, err := b.res.Jobs.Get(t.Context(), job.StoreKey(tenant, requester, id))
	require.NoError(t, err)
	return rec.State
}

// A dry run counts what the call would do and changes nothing: no state,
// no new job, no retried_as.
func TestAdminBulkDryRunChangesNothing(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	alice := b.token(t, "4", "alice", false)
	admin := b.token(t, "4", "ops", true)
	queued := b.submitN(t, alice, "q", 5)
	failed := b.submitN(t, alice, "f", 3)
	b.failAll(t, "4", "alice", failed)
	before := b.countJobs(t)

	res := b.bulk(t, "cancel", admin, `{"type":"permit_report","dry_run":true}`)
	require.True(t, res.DryRun)
	require.Equal(t, api.AdminBulkResult{Action: "cancel", DryRun: true, Matched: 8, Canceled: 5, Skipped: 3}, res)
	res = b.bulk(t, "retry", admin, `{"state":"failed","dry_run":true}`)
	require.Equal(t, api.AdminBulkResult{Action: "retry", DryRun: true, Matched: 3, Retried: 3}, res)
	res = b.bulk(t, "retry", admin, `{"type":"permit_report","dry_run":true}`, "Idempotency-Key: k1")
	require.Equal(t, api.AdminBulkResult{Action: "retry", DryRun: true, Matched: 8, Retried: 3, Skipped: 5}, res)

	for _, id := range queued {
		require.Equal(t, job.StateQueued, b.stateOf(t, "4", "alice", id))
	}
	for _, id := range failed {
		j := adminJob(t, b.do(t, http.MethodGet, "/v1/admin/jobs/"+id, admin, ""))
		require.Equal(t, job.StateFailed, j.State)
		require.Empty(t, j.RetriedAs)
	}
	require.Equal(t, before, b.countJobs(t), "a dry run makes no job")

	// The same key for real, then as a dry run: the dry run counts replays.
	require.Equal(t, 3, b.bulk(t, "retry", admin, `{"state":"failed"}`, "Idempotency-Key: k1").Retried)
	res = b.bulk(t, "retry", admin, `{"state":"failed","dry_run":true}`, "Idempotency-Key: k1")
	require.Equal(t, api.AdminBulkResult{Action: "retry", DryRun: true, Matched: 3, Replayed: 3}, res)
	require.Equal(t, before+3, b.countJobs(t))
}

// A bulk cancel of one type's 50 queued jobs cancels those and leaves
// another type's jobs, and the finished ones, as they are.
func TestAdminBulkCancelOneType(t *testing.T) {
	t.Parallel()
	g, b := setup(t)
	jobtest.DeclareTypes(t, b.res, &job.TypeDecl{Name: "csv_export", Schema: json.RawMessage(`{"type":"object","additionalProperties":false}`),
		TimeoutSeconds: 60, Attempts: 1, MaxResultBytes: 1 << 20, ContentType: "text/csv"})
	require.Eventually(t, func() bool { _, ok := g.types.decl("csv_export"); return ok }, 10*time.Second, 10*time.Millisecond)
	alice := b.token(t, "4", "alice", false)
	bob := b.token(t, "4", "bob", false)
	admin := b.token(t, "4", "ops", true)

	reports := b.submitN(t, alice, "r", 50)
	var exports []string
	for i := range 5 {
		r := b.submit(t, bob, fmt.Sprintf("x-%d", i), `{"type":"csv_export","params":{}}`)
		require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
		exports = append(exports, r.job(t).ID)
	}
	done := b.submitN(t, bob, "d", 1)[0]
	b.failAll(t, "4", "bob", []string{done})

	res := b.bulk(t, "cancel", admin, `{"type":"permit_report"}`)
	require.Equal(t, api.AdminBulkResult{Action: "cancel", Matched: 51, Canceled: 50, Skipped: 1}, res)
	for _, id := range reports {
		require.Equal(t, job.StateCanceled, b.stateOf(t, "4", "alice", id))
	}
	for _, id := range exports {
		require.Equal(t, job.StateQueued, b.stateOf(t, "4", "bob", id), "another type's job is left alone")
	}
	require.Equal(t, job.StateFailed, b.stateOf(t, "4", "bob", done), "a finished job never moves")
	own := b.do(t, http.MethodGet, "/v1/jobs/"+reports[0], alice, "")
	require.Equal(t, "canceled", own.json(t)["state"], "the owner sees it canceled")

	again := b.bulk(t, "cancel", admin, `{"type":"permit_report"}`)
	require.Equal(t, api.AdminBulkResult{Action: "cancel", Matched: 51, Skipped: 51}, again, "the same call again changes nothing")
}

// A bulk retry done twice with one Idempotency-Key makes each new job once:
// 50 failed jobs, 50 new jobs, not 100. Another key skips jobs retried.
func TestAdminBulkRetryTwiceOneKey(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	alice := b.token(t, "4", "alice", false)
	admin := b.token(t, "4", "ops", true)
	old := b.submitN(t, alice, "f", 50)
	b.failAll(t, "4", "alice", old)
	require.Equal(t, 50, b.countJobs(t))

	first := b.bulk(t, "retry", admin, `{"state":"failed","type":"permit_report"}`, "Idempotency-Key: bulk-1")
	require.Equal(t, api.AdminBulkResult{Action: "retry", Matched: 50, Retried: 50}, first)
	second := b.bulk(t, "retry", admin, `{"state":"failed","type":"permit_report"}`, "Idempotency-Key: bulk-1")
	require.Equal(t, api.AdminBulkResult{Action: "retry", Matched: 50, Replayed: 50}, second)
	require.Equal(t, 100, b.countJobs(t), "50 new jobs, not 100")

	news := map[string]bool{}
	for _, id := range old {
		o := adminJob(t, b.do(t, http.MethodGet, "/v1/admin/jobs/"+id, admin, ""))
		require.Equal(t, job.StateFailed, o.State, "the old job keeps its state")
		require.NotEmpty(t, o.RetriedAs)
		n := adminJob(t, b.do(t, http.MethodGet, "/v1/admin/jobs/"+o.RetriedAs, admin, ""))
		require.Equal(t, id, n.RetryOf)
		require.Equal(t, job.StateQueued, n.State)
		require.Equal(t, "alice", n.Requester)
		news[n.ID] = true
	}
	require.Len(t, news, 50)

	other := b.bulk(t, "retry", admin, `{"state":"failed"}`, "Idempotency-Key: bulk-2")
	require.Equal(t, api.AdminBulkResult{Action: "retry", Matched: 50, Skipped: 50}, other, "jobs retried under another key are skipped")
	require.Equal(t, 100, b.countJobs(t))
	queued := b.bulk(t, "retry", admin, `{"state":"queued"}`, "Idempotency-Key: bulk-3")
	require.Equal(t, api.AdminBulkResult{Action: "retry", Matched: 50, Skipped: 50}, queued, "a queued job is not retryable")
}

// A tenant admin's bulk call reaches its own tenant only: another tenant's
// jobs stay as they are, and naming another tenant is 403. An operator
// names the tenant it means.
func TestAdminBulkStaysInTheTenant(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	mine := b.submitN(t, b.token(t, "4", "alice", false), "a", 3)
	theirs := b.submitN(t, b.token(t, "5", "carol", false), "c", 3)
	b.failAll(t, "5", "carol", theirs[:1])
	admin := b.token(t, "4", "ops", true)
	op := b.operator(t, "root")

	r := b.do(t, http.MethodPost, "/v1/admin/jobs/cancel", admin, `{"tenant":"5","state":"queued"}`)
	require.Equal(t, http.StatusForbidden, r.status, "%s", r.body)
	require.Equal(t, "/problems/forbidden", r.json(t)["type"])
	r = b.do(t, http.MethodPost, "/v1/admin/jobs/retry", admin, `{"tenant":"5","state":"failed"}`, "Idempotency-Key: k")
	require.Equal(t, http.StatusForbidden, r.status, "%s", r.body)
	r = b.do(t, http.MethodPost, "/v1/admin/jobs/cancel", b.token(t, "4", "alice", false), `{"state":"queued"}`)
	require.Equal(t, http.StatusForbidden, r.status, "a requester token has no admin role")

	require.Equal(t, 0, b.bulk(t, "retry", admin, `{"state":"failed"}`, "Idempotency-Key: k").Matched)
	res := b.bulk(t, "cancel", admin, `{"state":"queued"}`)
	require.Equal(t, api.AdminBulkResult{Action: "cancel", Matched: 3, Canceled: 3}, res)
	res = b.bulk(t, "cancel", admin, `{"tenant":"4","requester":"carol"}`)
	require.Zero(t, res.Matched)
	for _, id := range mine {
		require.Equal(t, job.StateCanceled, b.stateOf(t, "4", "alice", id))
	}
	require.Equal(t, job.StateFailed, b.stateOf(t, "5", "carol", theirs[0]))
	for _, id := range theirs[1:] {
		require.Equal(t, job.StateQueued, b.stateOf(t, "5", "carol", id), "another tenant's job is never touched")
	}

	res = b.bulk(t, "cancel", op, `{"tenant":"5","state":"queued","dry_run":true}`)
	require.Equal(t, api.AdminBulkResult{Action: "cancel", DryRun: true, Matched: 2, Canceled: 2}, res)
	res = b.bulk(t, "cancel", op, `{"tenant":"5"}`)
	require.Equal(t, api.AdminBulkResult{Action: "cancel", Matched: 3, Canceled: 2, Skipped: 1}, res)
}

// One call looks at most at its limit of jobs and answers a cursor that
// goes on from the next one; the calls together see each job once.
func TestAdminBulkLimitAndCursor(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	ids := b.submitN(t, b.token(t, "4", "alice", false), "q", 25)
	admin := b.token(t, "4", "ops", true)

	var counts []int
	cursor := ""
	for range 10 {
		body := `{"state":"queued","limit":10}`
		if cursor != "" {
			body = `{"state":"queued","limit":10,"cursor":"` + cursor + `"}`
		}
		res := b.bulk(t, "cancel", admin, body)
		counts = append(counts, res.Canceled)
		require.Equal(t, res.Matched, res.Canceled)
		if res.NextCursor == "" {
			require.Empty(t, res.Truncated)
			break
		}
		require.Equal(t, api.TruncatedLimit, res.Truncated)
		cursor = res.NextCursor
	}
	require.Equal(t, []int{10, 10, 5}, counts)
	for _, id := range ids {
		require.Equal(t, job.StateCanceled, b.stateOf(t, "4", "alice", id))
	}
}

// Past its time budget a call stops between jobs and answers a cursor
// right after the last job it changed; going on, every job is changed
// once.
func TestAdminBulkTimeBudget(t *testing.T) {
	t.Parallel()
	_, b := setup(t, func(c *Config) { c.BulkTimeBudget = time.Nanosecond })
	alice := b.token(t, "4", "alice", false)
	old := b.submitN(t, alice, "f", 20)
	b.failAll(t, "4", "alice", old)
	admin := b.token(t, "4", "ops", true)

	total, calls := 0, 0
	cursor := ""
	for ; calls < 20; calls++ {
		body := `{"state":"failed"}`
		if cursor != "" {
			body = `{"state":"failed","cursor":"` + cursor + `"}`
		}
		res := b.bulk(t, "retry", admin, body, "Idempotency-Key: slow")
		require.Equal(t, res.Matched, res.Retried, "no job seen twice")
		total += res.Retried
		if res.NextCursor == "" {
			break
		}
		require.Equal(t, api.TruncatedTime, res.Truncated)
		require.Greater(t, res.Retried, 0, "each call makes progress")
		cursor = res.NextCursor
	}
	require.Greater(t, calls, 1, "the budget cut the walk")
	require.Equal(t, 20, total)
	require.Equal(t, 40, b.countJobs(t))
}

// Bad bodies and headers are problems (400, 413, 415, 422), never a 500;
// a 422 names the fields.
func TestAdminBulkBadBodies(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	admin := b.token(t, "4", "ops", true)
	for _, tc := range []struct {
		body   string
		status int
		field  string
	}{
		{"", 400, ""},
		{"not json", 400, ""},
		{"[]", 400, ""},
		{"null", 400, ""},
		{`{"type":"permit_report","type":"csv_export"}`, 400, ""},
		{`{}`, 422, ""},
		{`{"dry_run":true}`, 422, ""},
		{`{"limit":5}`, 422, ""},
		{`{"state":"done"}`, 422, "/state"},
		{`{"type":"Bad-Type"}`, 422, "/type"},
		{`{"type":1}`, 422, "/type"},
		{`{"type":null}`, 422, "/type"},
		{`{"tenant":"a.b"}`, 422, "/tenant"},
		{`{"requester":"` + strings.Repeat("r", 65) + `"}`, 422, "/requester"},
		{`{"category":"oops"}`, 422, "/category"},
		{`{"created_after":"yesterday"}`, 422, "/created_after"},
		{`{"created_before":"2026-01-01"}`, 422, "/created_before"},
		{`{"state":"queued","limit":0}`, 422, "/limit"},
		{`{"state":"queued","limit":10001}`, 422, "/limit"},
		{`{"state":"queued","limit":"5"}`, 422, "/limit"},
		{`{"state":"queued","limit":1.5}`, 422, "/limit"},
		{`{"state":"queued","cursor":""}`, 422, "/cursor"},
		{`{"state":"queued","cursor":"bm9wZQ"}`, 422, "/cursor"},
		{`{"state":"queued","cursor":"` + strings.Repeat("A", 300) + `"}`, 422, "/cursor"},
		{`{"state":"queued","dry_run":"yes"}`, 422, "/dry_run"},
		{`{"state":"queued","color":"red"}`, 422, "/color"},
		{`{"state":"queued","pad":"` + strings.Repeat("x", 70<<10) + `"}`, 413, ""},
	} {
		for _, action := range []string{"cancel", "retry"} {
			r := b.do(t, http.MethodPost, "/v1/admin/jobs/"+action, admin, tc.body, "Idempotency-Key: k")
			require.Equal(t, tc.status, r.status, "%s %s: %s", action, tc.body, r.body)
			require.Equal(t, "application/problem+json", r.header.Get("Content-Type"))
			if tc.status == 422 {
				var p api.Problem
				require.NoError(t, json.Unmarshal(r.body, &p))
				require.Equal(t, "/problems/validation", p.Type)
				require.NotEmpty(t, p.Errors, "%s", r.body)
				require.Equal(t, tc.field, p.Errors[0].Field, "%s", r.body)
			}
		}
	}
	r := b.do(t, http.MethodPost, "/v1/admin/jobs/retry", admin, `{"state":"failed"}`)
	require.Equal(t, http.StatusBadRequest, r.status, "a bulk retry needs an Idempotency-Key: %s", r.body)
	require.Equal(t, "/problems/idempotency-key-missing", r.json(t)["type"])
	req, err := http.NewRequest(http.MethodPost, b.url+"/v1/admin/jobs/cancel", strings.NewReader(`{"state":"queued"}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+admin)
	req.Header.Set("Content-Type", "text/plain")
	resp, err := b.http.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode)
}

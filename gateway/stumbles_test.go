package gateway

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/pkg/api"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

// A new operator's stumbles (issue 34): each answer says what is wrong in
// the words the caller needs.

// A job that succeeded without a result (its handler wrote nothing) has
// nothing to download: the result path says so, not that the job is
// invisible to the token.
func TestResultOfASuccessWithoutOne(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	tok := b.token(t, "A", "alice", false)
	id := b.submit(t, tok, "k", permit).job(t).ID
	b.advance(t, "A", "alice", id, func(r *job.Record) error {
		if err := r.Transition(job.StateRunning, time.Now()); err != nil {
			return err
		}
		r.Attempt = 1
		return r.Transition(job.StateSucceeded, time.Now())
	})
	r := b.do(t, http.MethodGet, "/v1/jobs/"+id+"/result", tok, "")
	require.Equal(t, http.StatusNotFound, r.status)
	p := r.json(t)
	require.Equal(t, "/problems/no-result", p["type"])
	require.Contains(t, p["detail"], "stored no result")

	admin := b.token(t, "A", "root", true)
	r = b.do(t, http.MethodGet, "/v1/admin/jobs/"+id+"/result", admin, "")
	require.Equal(t, http.StatusNotFound, r.status)
	require.Equal(t, "/problems/no-result", r.json(t)["type"])
}

// ?wait= takes a duration with its unit; a bare number (seconds, as many
// APIs take) is told so.
func TestWaitWithoutAUnit(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	tok := b.token(t, "A", "alice", false)
	id := b.submit(t, tok, "k", permit).job(t).ID
	for _, path := range []string{"/v1/jobs/" + id + "?wait=10", "/v1/jobs/" + id + "?wait=2.5"} {
		r := b.do(t, http.MethodGet, path, tok, "")
		require.Equal(t, http.StatusBadRequest, r.status, path)
		require.Contains(t, r.json(t)["detail"], "wait needs a unit", path)
	}
	r := b.do(t, http.MethodGet, "/v1/jobs/"+id+"?wait=10", tok, "")
	require.Contains(t, r.json(t)["detail"], "10s, not 10")
	r = b.do(t, http.MethodGet, "/v1/jobs/"+id+"?wait=soon", tok, "")
	require.Equal(t, http.StatusBadRequest, r.status)
	require.Contains(t, r.json(t)["detail"], "with a unit, like 20s")
	require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/v1/jobs/"+id+"?wait=1s", tok, "").status)
}

// A retry of a job that failed permanently (retryable false) will likely
// fail the same way: the single retry asks for ?confirm_permanent=true
// (409 permanent-failure without), a bulk retry counts such jobs in
// permanent, dry run or not, and retries them only with
// "confirm_permanent": true.
func TestAdminRetryOfAPermanentFailureNeedsConfirmation(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	alice := b.token(t, "4", "alice", false)
	bob := b.token(t, "4", "bob", false)
	admin := b.token(t, "4", "ops", true)
	perm := b.submitN(t, alice, "p", 2)
	b.failPermanently(t, "4", "alice", perm)
	ran := b.submitN(t, alice, "r", 1)
	b.failAll(t, "4", "alice", ran)
	single := b.submitN(t, bob, "s", 1)[0]
	b.failPermanently(t, "4", "bob", []string{single})
	before := b.countJobs(t)

	r := b.do(t, http.MethodPost, "/v1/admin/jobs/"+single+"/retry", admin, "", "Idempotency-Key: s1")
	require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
	p := r.json(t)
	require.Equal(t, "/problems/permanent-failure", p["type"])
	require.Contains(t, p["detail"], "failed permanently (render_error, retryable: false)")
	require.Contains(t, p["detail"], "confirm_permanent=true")
	require.Equal(t, before, b.countJobs(t), "nothing made")
	r = b.do(t, http.MethodPost, "/v1/admin/jobs/"+single+"/retry?confirm_permanent=yes", admin, "", "Idempotency-Key: s1")
	require.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
	r = b.do(t, http.MethodPost, "/v1/admin/jobs/"+single+"/retry?confirm_permanent=true", admin, "", "Idempotency-Key: s1")
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	require.Equal(t, before+1, b.countJobs(t))

	dry := b.bulk(t, "retry", admin, `{"requester":"alice","state":"failed","dry_run":true}`)
	require.Equal(t, api.AdminBulkResult{Action: "retry", DryRun: true, Matched: 3, Retried: 1, Skipped: 2, Permanent: 2}, dry,
		"2 of these failed permanently: not retried without the confirmation")
	dry = b.bulk(t, "retry", admin, `{"requester":"alice","state":"failed","dry_run":true,"confirm_permanent":true}`)
	require.Equal(t, api.AdminBulkResult{Action: "retry", DryRun: true, Matched: 3, Retried: 3, Permanent: 2}, dry)

	res := b.bulk(t, "retry", admin, `{"requester":"alice","state":"failed"}`, "Idempotency-Key: k1")
	require.Equal(t, api.AdminBulkResult{Action: "retry", Matched: 3, Retried: 1, Skipped: 2, Permanent: 2}, res)
	require.Equal(t, before+2, b.countJobs(t), "only the job that may succeed was retried")
	res = b.bulk(t, "retry", admin, `{"requester":"alice","state":"failed","confirm_permanent":true}`, "Idempotency-Key: k1")
	require.Equal(t, api.AdminBulkResult{Action: "retry", Matched: 3, Retried: 2, Replayed: 1, Permanent: 2}, res)
	require.Equal(t, before+4, b.countJobs(t))

	for body, field := range map[string]string{
		`{"state":"failed","confirm_permanent":"yes"}`: "/confirm_permanent",
	} {
		r := b.do(t, http.MethodPost, "/v1/admin/jobs/retry", admin, body, "Idempotency-Key: k9")
		require.Equal(t, http.StatusUnprocessableEntity, r.status, "%s", r.body)
		require.Contains(t, string(r.body), field)
	}
	r = b.do(t, http.MethodPost, "/v1/admin/jobs/cancel", admin, `{"state":"queued","confirm_permanent":true}`)
	require.Equal(t, http.StatusUnprocessableEntity, r.status, "a cancel has nothing to confirm: %s", r.body)
}

// A queued job of a type no live worker runs says so in its detail
// ("waiting for a worker"); a paused type's, that it waits for the
// resume. The stats count each type's live workers.
func TestAdminJobSaysWhatItWaitsFor(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	alice := b.token(t, "4", "alice", false)
	admin := b.token(t, "4", "ops", true)
	op := b.operator(t, "root")
	waiting := b.submit(t, alice, "w", permit).job(t).ID
	held := b.submit(t, alice, "h", permit).job(t).ID
	b.advance(t, "4", "alice", held, func(r *job.Record) error { return r.Claim("worker-x", time.Now()) })

	detail := func(id string) api.AdminJob {
		r := b.do(t, http.MethodGet, "/v1/admin/jobs/"+id, admin, "")
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		return adminJob(t, r)
	}
	require.Equal(t, api.WaitingForWorker, detail(waiting).WaitingFor, "no worker runs permit_report")
	require.Empty(t, detail(held).WaitingFor, "a job a worker holds waits for nothing")
	stats := func() api.TypeStats {
		r := b.do(t, http.MethodGet, "/v1/admin/stats", admin, "")
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		var s api.Stats
		require.NoError(t, json.Unmarshal(r.body, &s))
		for _, ts := range s.Types {
			if ts.Type == "permit_report" {
				return ts
			}
		}
		t.Fatalf("no permit_report in %s", r.body)
		return api.TypeStats{}
	}
	st := stats()
	require.Equal(t, 0, st.Workers)
	require.EqualValues(t, 1, st.Queued, "work and no worker: the console flags the type")

	now := time.Now().UTC()
	require.NoError(t, b.res.Types.Announce(t.Context(), natsjs.Presence{Worker: "r-1", Type: "permit_report", Concurrency: 2,
		Credential: "jobgate", StartedAt: now, SeenAt: now}))
	require.Eventually(t, func() bool { return detail(waiting).WaitingFor == "" }, 10*time.Second, 20*time.Millisecond,
		"a live worker: the job waits for nothing")
	require.Equal(t, 1, stats().Workers)

	r := b.do(t, http.MethodPost, "/v1/admin/types/permit_report/pause", op, "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Eventually(t, func() bool { return detail(waiting).WaitingFor == api.WaitingForResume }, 10*time.Second, 20*time.Millisecond)
	require.True(t, stats().Paused)
}

// GET /v1/admin/types lists the declared types for operators, as GET
// /v1/types does, with their live workers, paused and owner; it was a 404
// "Job not found".
func TestAdminListTypes(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	op := b.operator(t, "root")
	r := b.do(t, http.MethodGet, "/v1/admin/types", op, "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var page struct {
		Types []struct {
			Name    string `json:"name"`
			Workers int    `json:"workers"`
			Paused  bool   `json:"paused"`
			Owner   string `json:"owner"`
		} `json:"types"`
	}
	require.NoError(t, json.Unmarshal(r.body, &page))
	names := []string{}
	for _, ty := range page.Types {
		names = append(names, ty.Name)
		if ty.Name == "permit_report" {
			require.Equal(t, 0, ty.Workers)
			require.False(t, ty.Paused)
		}
	}
	require.Contains(t, names, "permit_report")
	public := b.do(t, http.MethodGet, "/v1/types", b.token(t, "4", "alice", false), "")
	require.NotContains(t, string(public.body), `"owner"`, "the public list keeps owners to operators")

	for _, tok := range []string{b.token(t, "4", "ops", true), b.token(t, "4", "alice", false)} {
		r := b.do(t, http.MethodGet, "/v1/admin/types", tok, "")
		require.Equal(t, http.StatusForbidden, r.status, "%s", r.body)
	}
	require.Equal(t, http.StatusBadRequest, b.do(t, http.MethodGet, "/v1/admin/types?limit=0", op, "").status)
	require.Equal(t, http.StatusBadRequest, b.do(t, http.MethodGet, "/v1/admin/types?bogus=1", op, "").status)
	one := b.do(t, http.MethodGet, "/v1/admin/types?limit=1", op, "")
	require.Equal(t, http.StatusOK, one.status)
}

// An endpoint type has no worker processes (jobgate calls its HTTP
// endpoint): its queued job waits for no worker, and the stats say it is
// an endpoint type rather than one missing its workers.
func TestAnEndpointTypesJobWaitsForNoWorker(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	d := jobtest.PermitReport()
	d.Name, d.Endpoint = "thumbs", &api.Endpoint{URL: "https://hooks.example.org/thumbs", Concurrency: 4}
	jobtest.DeclareTypes(t, b.res, d)
	alice := b.token(t, "4", "alice", false)
	admin := b.token(t, "4", "ops", true)
	var id string
	require.Eventually(t, func() bool {
		r, err := b.try(http.MethodPost, "/v1/jobs", alice, `{"type":"thumbs","params":{"case_id":1,"revision":1}}`, "Idempotency-Key: t1")
		if err != nil || r.status != http.StatusAccepted {
			return false
		}
		id = r.job(t).ID
		return true
	}, 10*time.Second, 20*time.Millisecond, "the gateway takes the endpoint type")
	r := b.do(t, http.MethodGet, "/v1/admin/jobs/"+id, admin, "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Empty(t, adminJob(t, r).WaitingFor)

	r = b.do(t, http.MethodGet, "/v1/admin/stats", admin, "")
	var s api.Stats
	require.NoError(t, json.Unmarshal(r.body, &s))
	found := false
	for _, ts := range s.Types {
		if ts.Type == "thumbs" {
			found = true
			require.True(t, ts.Endpoint)
			require.Zero(t, ts.Workers)
		}
	}
	require.True(t, found, "%s", r.body)
}

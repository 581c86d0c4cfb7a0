package gateway

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/stretchr/testify/require"
)

// withFlow is the permit submission with extra members (`,"run_at":...`).
func withFlow(extra string) string {
	return strings.TrimSuffix(permit, "}") + extra + "}"
}

// A job with a run_at ahead is admitted scheduled, showing run_at,
// priority and start_by; the flow fields are part of the fingerprint: the
// same request replays (200), another under the key is 409. A delay is
// resolved once: a retry of it later replays the job admitted first.
func TestSubmitScheduled(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	alice := b.token(t, "4", "alice", false)
	runAt := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	body := withFlow(`,"run_at":"` + runAt.Format(time.RFC3339) + `","priority":1,"start_by":"` + runAt.Add(time.Hour).Format(time.RFC3339) + `"`)
	r := b.submit(t, alice, "s1", body)
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
	res := r.job(t)
	require.Equal(t, job.StateScheduled, res.State)
	require.Equal(t, runAt, res.RunAt.UTC())
	require.Equal(t, 1, res.Priority)
	require.Equal(t, runAt.Add(time.Hour), res.StartBy.UTC())
	require.Equal(t, "30", r.header.Get("Retry-After"), "come back at run_at, at most 30 s")

	again := b.submit(t, alice, "s1", strings.Replace(body, runAt.Format(time.RFC3339), runAt.In(time.FixedZone("x", 3600)).Format(time.RFC3339), 1))
	require.Equal(t, http.StatusOK, again.status, "the same instant in another offset is the same request: %s", again.body)
	require.Equal(t, res.ID, again.job(t).ID)
	other := b.submit(t, alice, "s1", withFlow(`,"run_at":"`+runAt.Add(time.Second).Format(time.RFC3339)+`","priority":1`))
	require.Equal(t, http.StatusConflict, other.status, "%s", other.body)
	require.Equal(t, http.StatusConflict, b.submit(t, alice, "s1", permit).status, "without the flow fields it is another request")

	d := b.submit(t, alice, "d1", withFlow(`,"delay":"90s"`))
	require.Equal(t, http.StatusAccepted, d.status, "%s", d.body)
	first := d.job(t)
	require.Equal(t, job.StateScheduled, first.State)
	require.WithinDuration(t, b.clock.now().Add(90*time.Second), *first.RunAt, 2*time.Second)
	b.clock.advance(30 * time.Second)
	replay := b.submit(t, alice, "d1", withFlow(`,"delay":"1m30s"`))
	require.Equal(t, http.StatusOK, replay.status, "%s", replay.body)
	require.Equal(t, first.RunAt.UTC(), replay.job(t).RunAt.UTC(), "the delay resolved once, at admission")

	month := b.submit(t, alice, "m1", withFlow(`,"delay":"720h"`))
	require.Equal(t, http.StatusAccepted, month.status, "30 days ahead, whatever the retention: %s", month.body)

	past := b.submit(t, alice, "p1", withFlow(`,"run_at":"2020-01-01T00:00:00Z"`))
	require.Equal(t, http.StatusAccepted, past.status, "%s", past.body)
	require.Equal(t, job.StateQueued, past.job(t).State, "a run_at in the past is due at once")

	// A scheduled job can be canceled.
	c := b.do(t, http.MethodDelete, "/v1/jobs/"+res.ID, alice, "")
	require.Equal(t, http.StatusAccepted, c.status, "%s", c.body)
	require.Equal(t, job.StateCanceled, c.job(t).State)
}

// Bad flow fields answer 422 with a pointer at each, and leave the key
// unused.
func TestSubmitFlowValidation(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	alice := b.token(t, "4", "alice", false)
	farAhead := time.Now().Add(31 * 24 * time.Hour).UTC().Format(time.RFC3339)
	for extra, field := range map[string]string{
		`,"run_at":"at nine"`:                           "/run_at",
		`,"run_at":"` + farAhead + `"`:                  "/run_at",
		`,"delay":"31d"`:                                "/delay",
		`,"delay":"-1s"`:                                "/delay",
		`,"priority":9`:                                 "/priority",
		`,"start_by":"soon"`:                            "/start_by",
		`,"run_at":"2030-01-01T00:00:00Z","delay":"1m"`: "/delay",
		`,"run_at":"2026-12-05T09:00:00Z","start_by":"2026-12-05T08:00:00Z"`: "/start_by",
	} {
		r := b.submit(t, alice, "v1", withFlow(extra))
		require.Equal(t, http.StatusUnprocessableEntity, r.status, "%s: %s", extra, r.body)
		errs := r.json(t)["errors"].([]any)
		require.Equal(t, field, errs[0].(map[string]any)["field"], extra)
	}
	require.Equal(t, http.StatusAccepted, b.submit(t, alice, "v1", permit).status, "the key was not consumed")
}

// An admin makes a scheduled job due now (queued, with its event); any
// other job answers 409 job-not-scheduled; a requester's token is refused.
// The list and the stats count scheduled jobs.
func TestAdminRunNowAndScheduledCounts(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	alice := b.token(t, "4", "alice", false)
	admin := b.token(t, "4", "ops", true)
	id := b.submit(t, alice, "rn", withFlow(`,"delay":"1h"`)).job(t).ID

	require.Eventually(t, func() bool {
		l := b.do(t, http.MethodGet, "/v1/jobs?state=scheduled", alice, "")
		return l.status == http.StatusOK && strings.Contains(string(l.body), id)
	}, 10*time.Second, 20*time.Millisecond, "GET /v1/jobs?state=scheduled lists it")
	require.Eventually(t, func() bool {
		s := b.do(t, http.MethodGet, "/v1/admin/stats", admin, "")
		return s.status == http.StatusOK && strings.Contains(string(s.body), `"scheduled":1`)
	}, 10*time.Second, 20*time.Millisecond, "the stats count it")

	require.Equal(t, http.StatusForbidden, b.do(t, http.MethodPost, "/v1/admin/jobs/"+id+"/run-now", alice, "").status)
	r := b.do(t, http.MethodPost, "/v1/admin/jobs/"+id+"/run-now", admin, "")
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
	require.Equal(t, "queued", r.json(t)["state"])
	own := b.do(t, http.MethodGet, "/v1/jobs/"+id, alice, "").job(t)
	require.Equal(t, job.StateQueued, own.State)
	require.NotNil(t, own.RunAt, "run_at stays as admitted")

	r = b.do(t, http.MethodPost, "/v1/admin/jobs/"+id+"/run-now", admin, "")
	require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
	require.Equal(t, "/problems/job-not-scheduled", r.json(t)["type"])
}

// A batch item takes the flow fields too: one with a delay is scheduled,
// one without queued; a bad one is pointed at inside the batch.
func TestBatchItemsTakeFlowFields(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	alice := b.token(t, "4", "alice", false)
	item := `{"type":"permit_report","params":{"case_id":1,"revision":1}`
	r := b.postBatch(t, alice, "bf", `{"jobs":[`+item+`,"delay":"1h","priority":5},`+item+`}]}`)
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
	ids := r.batch(t).ids()
	first := b.do(t, http.MethodGet, "/v1/jobs/"+ids[0], alice, "").job(t)
	require.Equal(t, job.StateScheduled, first.State)
	require.Equal(t, 5, first.Priority)
	require.WithinDuration(t, time.Now().Add(time.Hour), *first.RunAt, time.Minute)
	require.Equal(t, job.StateQueued, b.do(t, http.MethodGet, "/v1/jobs/"+ids[1], alice, "").job(t).State)

	far := time.Now().Add(40 * 24 * time.Hour).UTC().Format(time.RFC3339)
	r = b.postBatch(t, alice, "bf2", `{"jobs":[`+item+`},`+item+`,"run_at":"`+far+`"}]}`)
	require.Equal(t, http.StatusUnprocessableEntity, r.status, "%s", r.body)
	require.Equal(t, "/jobs/1/run_at", r.json(t)["errors"].([]any)[0].(map[string]any)["field"])
}

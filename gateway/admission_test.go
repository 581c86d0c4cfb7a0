package gateway

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/stretchr/testify/require"
)

func TestConcurrentDuplicatesMakeOneJob(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	tok := b.token(t, "4", "reviewer-47", false)

	const n = 64
	var wg sync.WaitGroup
	results := make([]response, n)
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = b.try(http.MethodPost, "/v1/jobs", tok, permit, "Idempotency-Key: same-click")
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "request %d", i)
	}

	accepted := 0
	ids := map[string]bool{}
	for _, r := range results {
		require.Contains(t, []int{http.StatusAccepted, http.StatusOK}, r.status, "body: %s", r.body)
		if r.status == http.StatusAccepted {
			accepted++
		} else {
			require.Equal(t, "true", r.header.Get("Idempotent-Replayed"))
		}
		ids[r.job(t).ID] = true
		require.Equal(t, "/v1/jobs/"+r.job(t).ID, r.header.Get("Location"))
	}
	require.Equal(t, 1, accepted, "exactly one 202")
	require.Len(t, ids, 1, "all responses carry the same job id")

	list := b.do(t, http.MethodGet, "/v1/jobs", tok, "")
	require.Equal(t, http.StatusOK, list.status)
	require.Len(t, list.json(t)["jobs"], 1, "one job via the list")
	require.Equal(t, 1, b.countJobs(t), "one job in the bucket")

	// Exactly one work message landed in JetStream.
	stream, err := b.res.JS.Stream(context.Background(), natsjs.StreamWork)
	require.NoError(t, err)
	info, err := stream.Info(context.Background())
	require.NoError(t, err)
	require.EqualValues(t, 1, info.State.Msgs)
}

func TestSeedDrill(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	tok := b.token(t, "4", "reviewer-47", false)
	body := `{"type":"permit_report","params":{"case_id":47,"revision":29}}`

	first := b.submit(t, tok, "r-63", body)
	require.Equal(t, http.StatusAccepted, first.status, "body: %s", first.body)
	j := first.job(t)
	require.Equal(t, job.StateQueued, j.State)
	require.NotEmpty(t, first.header.Get("Retry-After"))
	require.JSONEq(t, `{"case_id":47,"revision":29,"pages":10}`, string(j.Params), "defaults applied")

	again := b.submit(t, tok, "r-63", body)
	require.Equal(t, http.StatusOK, again.status)
	require.Equal(t, j.ID, again.job(t).ID)
	require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))

	changed := b.submit(t, tok, "r-63", `{"type":"permit_report","params":{"case_id":47,"revision":30}}`)
	require.Equal(t, http.StatusConflict, changed.status)
	p := changed.json(t)
	require.Equal(t, "/problems/idempotency-key-reused", p["type"])
	require.Equal(t, j.ID, p["job_id"])
	require.Equal(t, "application/problem+json", changed.header.Get("Content-Type"))
	require.Equal(t, 1, b.countJobs(t), "a conflict admits nothing")

	newKey := b.submit(t, tok, "r-64", body)
	require.Equal(t, http.StatusAccepted, newKey.status)
	require.NotEqual(t, j.ID, newKey.job(t).ID, "same payload, new key: a second job")
	require.Equal(t, 2, b.countJobs(t))

	// The status path shows the job to its requester.
	st := b.do(t, http.MethodGet, "/v1/jobs/"+j.ID, tok, "")
	require.Equal(t, http.StatusOK, st.status)
	require.Equal(t, j.ID, st.job(t).ID)
}

func TestCanonicalFormIsAReplay(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	tok := b.token(t, "4", "reviewer-47", false)
	first := b.submit(t, tok, "k1", `{"type":"permit_report","params":{"case_id":47,"revision":29,"pages":63}}`)
	require.Equal(t, http.StatusAccepted, first.status)
	for _, body := range []string{
		`{"params":{"pages":63,"revision":29,"case_id":47},"type":"permit_report"}`,
		"{ \"type\" : \"permit_report\",\n \"params\": {\"case_id\": 47.0, \"revision\": 29, \"pages\": 63.0} }",
		`{"type":"permit_report","params":{"case_id":4.7e1,"revision":29,"pages":63}}`,
	} {
		r := b.submit(t, tok, "k1", body)
		require.Equal(t, http.StatusOK, r.status, "%s → %s", body, r.body)
		require.Equal(t, first.job(t).ID, r.job(t).ID)
	}
	// Defaults count: pages omitted equals pages 10.
	d1 := b.submit(t, tok, "k2", `{"type":"permit_report","params":{"case_id":1,"revision":1}}`)
	d2 := b.submit(t, tok, "k2", `{"type":"permit_report","params":{"case_id":1,"revision":1,"pages":10}}`)
	require.Equal(t, http.StatusAccepted, d1.status)
	require.Equal(t, http.StatusOK, d2.status)
}

func TestValidationDoesNotConsumeKey(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	tok := b.token(t, "4", "reviewer-47", false)
	bad := b.submit(t, tok, "k", `{"type":"permit_report","params":{"case_id":0,"revision":"29","pages":5000,"color":true}}`)
	require.Equal(t, http.StatusUnprocessableEntity, bad.status)
	p := bad.json(t)
	require.Equal(t, "/problems/validation", p["type"])
	// Each error names the JSON pointer of the field and the schema rule.
	rules := map[string]string{}
	for _, e := range p["errors"].([]any) {
		fe := e.(map[string]any)
		rules[fe["field"].(string)], _ = fe["rule"].(string)
		require.NotEmpty(t, fe["message"])
	}
	require.Equal(t, map[string]string{"/params/case_id": "minimum", "/params/revision": "type",
		"/params/pages": "maximum", "/params/color": "additionalProperties"}, rules)
	require.Equal(t, 0, b.countJobs(t))

	unknown := b.submit(t, tok, "k", `{"type":"tax_return","params":{}}`)
	require.Equal(t, http.StatusUnprocessableEntity, unknown.status)

	good := b.submit(t, tok, "k", permit)
	require.Equal(t, http.StatusAccepted, good.status, "the corrected request with the same key is admitted")
}

func TestBadRequestsGetProblems(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	tok := b.token(t, "4", "reviewer-47", false)
	cases := []struct {
		name   string
		resp   func() response
		status int
		slug   string
	}{
		{"no key", func() response { return b.do(t, http.MethodPost, "/v1/jobs", tok, permit) }, 400, "idempotency-key-missing"},
		{"two keys", func() response {
			return b.do(t, http.MethodPost, "/v1/jobs", tok, permit, "Idempotency-Key: a", "Idempotency-Key: b")
		}, 400, "idempotency-key-invalid"},
		{"long key", func() response { return b.submit(t, tok, strings.Repeat("k", 256), permit) }, 400, "idempotency-key-invalid"},
		{"control char key", func() response { return b.submit(t, tok, "a\tb", permit) }, 400, "idempotency-key-invalid"},
		{"bad json", func() response { return b.submit(t, tok, "j", `{"type":`) }, 400, "malformed-request"},
		{"json array", func() response { return b.submit(t, tok, "j", `[1,2]`) }, 400, "malformed-request"},
		{"trailing data", func() response { return b.submit(t, tok, "j", permit+`{}`) }, 400, "malformed-request"},
		{"too large", func() response {
			return b.submit(t, tok, "j", `{"type":"permit_report","params":{"x":"`+strings.Repeat("a", 70<<10)+`"}}`)
		}, 413, "payload-too-large"},
		{"no token", func() response { return b.submit(t, "", "j", permit) }, 401, "unauthorized"},
		{"bad token", func() response { return b.submit(t, tok+"x", "j", permit) }, 401, "unauthorized"},
		{"foreign secret", func() response {
			return b.submit(t, "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ0ZW5hbnQiOiI0Iiwic3ViIjoiciIsImV4cCI6OTk5OTk5OTk5OX0.c2lnbmF0dXJl", "j", permit)
		}, 401, "unauthorized"},
		{"unknown path", func() response { return b.do(t, http.MethodGet, "/v1/nope", tok, "") }, 404, "not-found"},
	}
	for _, tc := range cases {
		r := tc.resp()
		require.Equal(t, tc.status, r.status, "%s: %s", tc.name, r.body)
		require.Equal(t, "application/problem+json", r.header.Get("Content-Type"), tc.name)
		p := r.json(t)
		require.Equal(t, "/problems/"+tc.slug, p["type"], tc.name)
		require.EqualValues(t, tc.status, p["status"], tc.name)
		require.NotEmpty(t, p["title"], tc.name)
	}
	require.Equal(t, 0, b.countJobs(t))
}

func TestExpiredTokenIsUnauthorized(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	tok := b.token(t, "4", "reviewer-47", false)
	require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/v1/jobs", tok, "").status)
	b.clock.advance(2 * time.Hour)
	r := b.do(t, http.MethodGet, "/v1/jobs", tok, "")
	require.Equal(t, http.StatusUnauthorized, r.status, "a cached token still expires")
}

func TestRestartKeepsKeysAndJobs(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	tok := b.token(t, "4", "reviewer-47", false)
	first := b.submit(t, tok, "r-63", permit)
	require.Equal(t, http.StatusAccepted, first.status)

	b.stop()
	b.start(t)

	again := b.submit(t, tok, "r-63", permit)
	require.Equal(t, http.StatusOK, again.status, "body: %s", again.body)
	require.Equal(t, first.job(t).ID, again.job(t).ID)
	conflict := b.submit(t, tok, "r-63", `{"type":"permit_report","params":{"case_id":47,"revision":30,"pages":63}}`)
	require.Equal(t, http.StatusConflict, conflict.status)
}

func TestUnavailableJetStreamAdmitsNothing(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	tok := b.token(t, "4", "reviewer-47", false)
	b.emb.Shutdown()
	r := b.submit(t, tok, "r-63", permit)
	require.Equal(t, http.StatusServiceUnavailable, r.status, "body: %s", r.body)
	require.Equal(t, "/problems/unavailable", r.json(t)["type"])
	require.NotEmpty(t, r.header.Get("Retry-After"))
}

func TestSubmitRateLimit(t *testing.T) {
	t.Parallel()
	_, b := setup(t, func(c *Config) { c.SubmitRate, c.SubmitBurst = 0.001, 2 })
	tok := b.token(t, "4", "reviewer-47", false)
	require.Equal(t, http.StatusAccepted, b.submit(t, tok, "a", permit).status)
	require.Equal(t, http.StatusOK, b.submit(t, tok, "a", permit).status)
	r := b.submit(t, tok, "a", permit)
	require.Equal(t, http.StatusTooManyRequests, r.status)
	require.Equal(t, "/problems/rate-limited", r.json(t)["type"])
	require.NotEmpty(t, r.header.Get("Retry-After"))
	// Another requester is not affected.
	require.Equal(t, http.StatusAccepted, b.submit(t, b.token(t, "4", "other", false), "a", permit).status)
}

// A create whose ack was lost looks like "exists" on retry; the stored
// fingerprint recognizes it as our own and the client gets its job.
func TestLostCreateAckIsRecognized(t *testing.T) {
	t.Parallel()
	g, b := setup(t)
	tok := b.token(t, "4", "reviewer-47", false)
	req, err := job.DecodeSubmission([]byte(permit), g.types.schemas)
	require.NoError(t, err)
	id := job.DeriveID(g.idSecret, "4", "reviewer-47", "lost")
	now := time.Now().UTC()
	rec := &job.Record{ID: id, Tenant: "4", Requester: "reviewer-47", KeyHash: job.HashKey("lost"),
		Fingerprint: req.Fingerprint, Type: req.Type, Params: req.Params, State: job.StateQueued, CreatedAt: now, UpdatedAt: now}
	require.NoError(t, b.res.Jobs.Create(context.Background(), rec))

	r := b.submit(t, tok, "lost", permit)
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, "true", r.header.Get("Idempotent-Replayed"))
	require.Equal(t, id, r.job(t).ID)
	stored, err := b.res.Jobs.Get(context.Background(), rec.Key())
	require.NoError(t, err)
	require.Equal(t, rec.Revision, stored.Revision, "the replay wrote nothing")
	require.Equal(t, 1, b.countJobs(t))

	// The same key with another request is a conflict, not a second job.
	other := `{"type":"permit_report","params":{"case_id":47,"revision":30,"pages":63}}`
	r = b.submit(t, tok, "lost", other)
	require.Equal(t, http.StatusConflict, r.status)
	require.Equal(t, id, r.json(t)["job_id"])
	require.Equal(t, 1, b.countJobs(t))
}

// A replay through another gateway on the same bucket (one that never saw the
// key, so its seen-keys cache cannot shortcut to a read) meets the stored
// record through the create-only commit and changes nothing: same job, same
// stored revision, no second record.
func TestReplayThroughASecondGateway(t *testing.T) {
	t.Parallel()
	g1, b := setup(t)
	tok := b.token(t, "4", "reviewer-47", false)
	first := b.submit(t, tok, "k-two-gateways", permit)
	require.Equal(t, http.StatusAccepted, first.status)
	id := first.job(t).ID
	key := job.StoreKey("4", "reviewer-47", id)
	before, err := b.res.Jobs.Get(context.Background(), key)
	require.NoError(t, err)

	g2, err := New(g1.cfg, storesOf(b.res), slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	g2.cfg.Addr = "127.0.0.1:0"
	require.NoError(t, g2.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, g2.Stop(context.Background())) })
	require.False(t, g2.seen.has(key), "the second gateway has not seen the key")
	b2 := *b
	b2.url = "http://" + g2.Addr()
	b2.http = &http.Client{Transport: &validatingTransport{t: t, next: http.DefaultTransport, router: specRouter(t, b2.url)}}

	again := b2.submit(t, tok, "k-two-gateways", permit)
	require.Equal(t, http.StatusOK, again.status)
	require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
	require.Equal(t, id, again.job(t).ID)
	after, err := b.res.Jobs.Get(context.Background(), key)
	require.NoError(t, err)
	require.Equal(t, before.Revision, after.Revision, "the replay did not write the record")
	require.Equal(t, 1, b.countJobs(t))

	conflict := b2.submit(t, tok, "k-two-gateways", `{"type":"permit_report","params":{"case_id":47,"revision":30,"pages":63}}`)
	require.Equal(t, http.StatusConflict, conflict.status)
	require.Equal(t, 1, b.countJobs(t))
}

// With LeaveWorkToRelay the admission is the commit alone: nothing lands on
// the work stream until the relay (not running here) publishes it.
func TestLeaveWorkToRelayCommitsOnly(t *testing.T) {
	t.Parallel()
	_, b := setup(t, func(c *Config) { c.LeaveWorkToRelay = true })
	tok := b.token(t, "4", "reviewer-47", false)
	require.Equal(t, http.StatusAccepted, b.submit(t, tok, "k", permit).status)
	require.Equal(t, 1, b.countJobs(t))
	stream, err := b.res.JS.Stream(context.Background(), natsjs.StreamWork)
	require.NoError(t, err)
	info, err := stream.Info(context.Background())
	require.NoError(t, err)
	require.EqualValues(t, 0, info.State.Msgs)
}

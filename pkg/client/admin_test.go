package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/auth"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/pkg/api"
	"github.com/jobgate/jobgate/pkg/client"
	"github.com/stretchr/testify/require"
)

func (b *testBundle) mint(t *testing.T, id auth.Identity) string {
	t.Helper()
	tok, err := auth.Mint(b.Secret, id, time.Hour, time.Now())
	require.NoError(t, err)
	return tok
}

// submitN submits n permit reports as the bundle's requester.
func submitN(t *testing.T, c *client.Client, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		sub, err := c.Submit(t.Context(), "permit_report", map[string]any{"case_id": 47, "revision": i + 1, "pages": 3})
		require.NoError(t, err)
		ids[i] = sub.Job.ID
	}
	return ids
}

func (b *testBundle) fail(t *testing.T, id string) {
	t.Helper()
	b.mutate(t, id, func(r *job.Record) error {
		if err := r.Claim("worker-a", time.Now()); err != nil {
			return err
		}
		return r.Fail(&job.Failure{Category: job.CategoryRenderError, Message: "fonts missing on worker-a", Retryable: true}, time.Now())
	})
}

// A retry of a job that failed permanently is refused until confirmed.
func TestAdminClientRetryOfAPermanentFailure(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := submitN(t, newClient(t, b.URL, b.Token, client.WithoutJournal()), 1)[0]
	b.mutate(t, id, func(r *job.Record) error {
		if err := r.Claim("worker-a", time.Now()); err != nil {
			return err
		}
		return r.Fail(&job.Failure{Category: job.CategoryHandlerError, Message: "no such region"}, time.Now())
	})
	ad := newClient(t, b.URL, b.mint(t, auth.Identity{Tenant: "4", Requester: "ops", Admin: true}), client.WithoutJournal()).Admin()
	_, err := ad.Retry(t.Context(), id)
	require.ErrorIs(t, err, api.ErrPermanentFailure)
	require.NotErrorIs(t, err, client.ErrNotConfirmed, "a refusal is definitive")
	r, err := ad.Retry(t.Context(), id, client.WithConfirmPermanent())
	require.NoError(t, err)
	require.Equal(t, id, r.Job.RetryOf)

	dry, err := ad.BulkRetry(t.Context(), api.AdminBulkRequest{State: api.StateFailed, DryRun: true})
	require.NoError(t, err)
	require.Equal(t, api.AdminBulkResult{Action: api.BulkRetry, DryRun: true, Matched: 1, Skipped: 1}, *dry.Result, "retried already")
}

// Every admin endpoint through the SDK, typed with pkg/api: list with
// filters and pages, get with attempts, cancel, retry with its key, stats;
// a requester token is forbidden, another tenant's job is not found.
func TestAdminClient(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	user := newClient(t, b.URL, b.Token, client.WithoutJournal())
	ids := submitN(t, user, 4)
	other := newClient(t, b.URL, b.mint(t, auth.Identity{Tenant: "5", Requester: "carol"}), client.WithoutJournal())
	foreign := submitN(t, other, 1)[0]
	b.fail(t, ids[0])
	ad := newClient(t, b.URL, b.mint(t, auth.Identity{Tenant: "4", Requester: "ops", Admin: true}), client.WithoutJournal()).Admin()

	p, err := ad.List(ctx, api.AdminJobFilter{State: api.StateQueued, Type: "permit_report", Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []string{ids[3], ids[2]}, adminIDs(p))
	require.Equal(t, "reviewer-47", p.Jobs[0].Requester)
	require.Equal(t, "4", p.Jobs[0].Tenant)
	require.NotEmpty(t, p.NextCursor)
	p, err = ad.List(ctx, api.AdminJobFilter{State: api.StateQueued, Limit: 2, Cursor: p.NextCursor})
	require.NoError(t, err)
	require.Equal(t, []string{ids[1]}, adminIDs(p))
	p, err = ad.List(ctx, api.AdminJobFilter{Requester: "reviewer-47", Category: job.CategoryRenderError,
		CreatedAfter: time.Now().Add(-time.Hour), CreatedBefore: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	require.Equal(t, []string{ids[0]}, adminIDs(p))
	_, err = ad.List(ctx, api.AdminJobFilter{Limit: 1000})
	var perr *client.ProblemError
	require.ErrorAs(t, err, &perr)
	require.Equal(t, http.StatusBadRequest, perr.Status)

	j, err := ad.Get(ctx, ids[0])
	require.NoError(t, err)
	require.Equal(t, api.StateFailed, j.State)
	require.Len(t, j.Attempts, 1)
	require.Equal(t, "worker-a", j.Attempts[0].Worker)
	require.Equal(t, "fonts missing on worker-a", j.Attempts[0].Error.Message)
	_, err = ad.Get(ctx, foreign)
	require.ErrorIs(t, err, api.ErrNotFound, "another tenant's job is not found")

	j, err = ad.Cancel(ctx, ids[1])
	require.NoError(t, err)
	require.Equal(t, api.StateCanceled, j.State)
	_, err = ad.Cancel(ctx, ids[1])
	require.ErrorIs(t, err, api.ErrTerminal)

	r, err := ad.Retry(ctx, ids[0])
	require.NoError(t, err)
	require.False(t, r.Replayed)
	require.True(t, api.ValidKey(r.Key), "a new key is chosen")
	require.Equal(t, ids[0], r.Job.RetryOf)
	again, err := ad.Retry(ctx, ids[0], client.WithKey(r.Key))
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, r.Job.ID, again.Job.ID, "the same key: the same job")
	_, err = ad.Retry(ctx, ids[2], client.WithKey("r-2"))
	require.ErrorIs(t, err, api.ErrNotRetryable)
	_, err = ad.Retry(ctx, ids[0], client.WithKey("bad\nkey"))
	require.ErrorIs(t, err, api.ErrKeyInvalid)

	s, err := ad.Stats(ctx, "")
	require.NoError(t, err)
	require.Equal(t, "4", s.Tenant)
	require.Len(t, s.Types, 1)
	require.EqualValues(t, 3, s.Types[0].Queued, "ids[2], ids[3] and the retry")

	_, err = user.Admin().List(ctx, api.AdminJobFilter{})
	require.ErrorIs(t, err, api.ErrForbidden, "a requester token has no admin role")
	op := newClient(t, b.URL, b.mint(t, auth.Identity{Requester: "root", Operator: true}), client.WithoutJournal()).Admin()
	s, err = op.Stats(ctx, "5")
	require.NoError(t, err)
	require.EqualValues(t, 1, s.Types[0].Queued)
	j, err = op.Get(ctx, foreign)
	require.NoError(t, err)
	require.Equal(t, "5", j.Tenant)
}

// Bulk cancel and retry through the SDK: a dry run counts, the call acts,
// the same retry key again replays, a limit answers a cursor, a bad request
// is a *ValidationError.
func TestAdminClientBulk(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	ids := submitN(t, newClient(t, b.URL, b.Token, client.WithoutJournal()), 6)
	for _, id := range ids[:3] {
		b.fail(t, id)
	}
	ad := newClient(t, b.URL, b.mint(t, auth.Identity{Tenant: "4", Requester: "ops", Admin: true}), client.WithoutJournal()).Admin()

	res, err := ad.BulkCancel(ctx, api.AdminBulkRequest{Type: "permit_report", DryRun: true})
	require.NoError(t, err)
	require.Equal(t, api.AdminBulkResult{Action: api.BulkCancel, DryRun: true, Matched: 6, Canceled: 3, Skipped: 3}, *res)
	res, err = ad.BulkCancel(ctx, api.AdminBulkRequest{State: api.StateQueued, Limit: 2})
	require.NoError(t, err)
	require.Equal(t, 2, res.Canceled)
	require.Equal(t, api.TruncatedLimit, res.Truncated)
	res, err = ad.BulkCancel(ctx, api.AdminBulkRequest{State: api.StateQueued, Cursor: res.NextCursor})
	require.NoError(t, err)
	require.Equal(t, api.AdminBulkResult{Action: api.BulkCancel, Matched: 1, Canceled: 1}, *res)

	dry, err := ad.BulkRetry(ctx, api.AdminBulkRequest{State: api.StateFailed, DryRun: true})
	require.NoError(t, err)
	require.Empty(t, dry.Key, "a dry run sends no key unless given one")
	require.Equal(t, 3, dry.Result.Retried)
	first, err := ad.BulkRetry(ctx, api.AdminBulkRequest{State: api.StateFailed})
	require.NoError(t, err)
	require.True(t, api.ValidKey(first.Key))
	require.Equal(t, api.AdminBulkResult{Action: api.BulkRetry, Matched: 3, Retried: 3}, *first.Result)
	second, err := ad.BulkRetry(ctx, api.AdminBulkRequest{State: api.StateFailed}, client.WithKey(first.Key))
	require.NoError(t, err)
	require.Equal(t, api.AdminBulkResult{Action: api.BulkRetry, Matched: 3, Replayed: 3}, *second.Result)
	p, err := ad.List(ctx, api.AdminJobFilter{State: api.StateQueued})
	require.NoError(t, err)
	require.Len(t, p.Jobs, 3, "three new jobs, not six")

	_, err = ad.BulkCancel(ctx, api.AdminBulkRequest{})
	var ve *client.ValidationError
	require.ErrorAs(t, err, &ve, "no filter")
	_, err = ad.BulkRetry(ctx, api.AdminBulkRequest{State: "done"})
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "/state", ve.Errors[0].Field)
	require.NotErrorIs(t, err, client.ErrNotConfirmed, "a refusal is definitive")
}

// A retry whose answer is lost is sent again with the same key, so the
// server makes one job and the caller gets it; the bulk retry likewise. A
// cancel whose answer is lost returns the job its first attempt canceled.
func TestAdminClientLostAnswers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := submitN(t, newClient(t, b.URL, b.Token, client.WithoutJournal()), 3)
	for _, id := range ids[:2] {
		b.fail(t, id)
	}
	p := newProxy(t, b.URL)
	var mu sync.Mutex
	keys := map[string][]string{}
	dropped := map[string]bool{}
	p.setHook(func(w http.ResponseWriter, r *http.Request, forward func() *http.Response) bool {
		if r.Method != http.MethodPost {
			return false
		}
		mu.Lock()
		keys[r.URL.Path] = append(keys[r.URL.Path], r.Header.Get("Idempotency-Key"))
		drop := !dropped[r.URL.Path]
		dropped[r.URL.Path] = true
		mu.Unlock()
		if !drop {
			return false
		}
		resp := forward() // the server commits, then the answer is lost
		if resp.StatusCode >= 300 {
			t.Errorf("first attempt of %s: %d", r.URL.Path, resp.StatusCode)
		}
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return true
	})
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	ad := newClient(t, srv.URL, b.mint(t, auth.Identity{Tenant: "4", Requester: "ops", Admin: true}), client.WithoutJournal()).Admin()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	r, err := ad.Retry(ctx, ids[0])
	require.NoError(t, err)
	require.True(t, r.Replayed, "the second attempt replays the first")
	require.Equal(t, 2, r.Attempts)
	path := "/v1/admin/jobs/" + ids[0] + "/retry"
	require.Equal(t, []string{r.Key, r.Key}, keys[path], "one key for every attempt")

	bulk, err := ad.BulkRetry(ctx, api.AdminBulkRequest{State: api.StateFailed, Requester: "reviewer-47"})
	require.NoError(t, err)
	require.Equal(t, []string{bulk.Key, bulk.Key}, keys["/v1/admin/jobs/retry"])
	require.Equal(t, api.AdminBulkResult{Action: api.BulkRetry, Matched: 2, Replayed: 1, Skipped: 1}, *bulk.Result,
		"the lost attempt retried ids[1]; ids[0] was retried under another key")
	require.Len(t, b.storedJobs(t), 5, "three old jobs, one retry of each failed one")

	j, err := ad.Cancel(ctx, ids[2])
	require.NoError(t, err, "the first attempt canceled it")
	require.Equal(t, api.StateCanceled, j.State)
	require.Len(t, keys["/v1/admin/jobs/"+ids[2]+"/cancel"], 2)

	// No answer at all: the error carries the key that finishes the call.
	p.setHook(func(w http.ResponseWriter, r *http.Request, _ func() *http.Response) bool {
		w.WriteHeader(http.StatusBadGateway)
		return true
	})
	short := newClient(t, srv.URL, b.mint(t, auth.Identity{Tenant: "4", Requester: "ops", Admin: true}), client.WithoutJournal(),
		client.WithRetryPolicy(client.RetryPolicy{BaseDelay: time.Millisecond, MaxDelay: time.Millisecond, MaxAttempts: 2})).Admin()
	_, err = short.Retry(ctx, ids[1], client.WithKey("lost-1"))
	var nc *client.NotConfirmedError
	require.ErrorAs(t, err, &nc)
	require.Equal(t, "lost-1", nc.Key)
	require.True(t, errors.Is(err, client.ErrNotConfirmed))
	require.NotContains(t, fmt.Sprint(err), "lost-1", "the message never shows the key")
}

func adminIDs(p *api.AdminJobPage) []string {
	out := make([]string, len(p.Jobs))
	for i, j := range p.Jobs {
		out[i] = j.ID
	}
	return out
}

package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/pkg/api"
	"github.com/stretchr/testify/require"
)

// declareOwned stores a small closed type as credential owner, as the
// broker does for a worker's declare.
func (b *testBundle) declareOwned(t *testing.T, name, owner string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return b.res.Types.DeclareOwned(ctx, &job.TypeDecl{Name: name, Schema: json.RawMessage(`{"type":"object","additionalProperties":false}`),
		TimeoutSeconds: 60, Attempts: 2, MaxResultBytes: 1 << 20, ContentType: "text/plain", DeclaredAt: time.Now().UTC(), Owner: owner})
}

// typeListed finds a type in GET /v1/types (nil: not listed).
func (b *testBundle) typeListed(t *testing.T, tok, name string) map[string]any {
	t.Helper()
	r := b.do(t, http.MethodGet, "/v1/types?limit=200", tok, "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	for _, it := range r.json(t)["types"].([]any) {
		if m := it.(map[string]any); m["name"] == name {
			return m
		}
	}
	return nil
}

// waitListed polls GET /v1/types until cond holds for the type's entry
// (nil: not listed); the poll runs on another goroutine, so it fails
// nothing itself.
func (b *testBundle) waitListed(t *testing.T, tok, name string, cond func(map[string]any) bool) {
	t.Helper()
	require.Eventually(t, func() bool {
		r, err := b.try(http.MethodGet, "/v1/types?limit=200", tok, "")
		if err != nil || r.status != http.StatusOK {
			return false
		}
		var page struct {
			Types []map[string]any `json:"types"`
		}
		if json.Unmarshal(r.body, &page) != nil {
			return false
		}
		for _, m := range page.Types {
			if m["name"] == name {
				return cond(m)
			}
		}
		return cond(nil)
	}, 10*time.Second, 20*time.Millisecond)
}

func problemType(t *testing.T, r response) string {
	t.Helper()
	s, _ := r.json(t)["type"].(string)
	return s
}

// Pause and resume: operators only (a requester and a tenant admin get 403
// forbidden), an unknown type 404; a paused type's jobs are admitted and
// wait queued, GET /v1/types and /v1/types/{name} show paused, a worker's
// re-declaration keeps it, and resume lifts it.
func TestAdminPauseAndResumeAType(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	alice := b.token(t, "4", "alice", false)
	admin := b.token(t, "4", "ops", true)
	op := b.operator(t, "root")
	require.NoError(t, b.declareOwned(t, "pausable", "cred-a"))
	b.waitListed(t, alice, "pausable", func(m map[string]any) bool { return m != nil })
	require.Equal(t, false, b.typeListed(t, alice, "pausable")["paused"])

	for _, tok := range []string{alice, admin} {
		for _, path := range []string{"/v1/admin/types/pausable/pause", "/v1/admin/types/pausable/resume"} {
			r := b.do(t, http.MethodPost, path, tok, "")
			require.Equal(t, http.StatusForbidden, r.status, "%s: %s", path, r.body)
			require.Equal(t, "/problems/forbidden", problemType(t, r))
		}
	}
	for _, path := range []string{"/v1/admin/types/nosuch/pause", "/v1/admin/types/Bad-Name/pause", "/v1/admin/types/nosuch/resume"} {
		r := b.do(t, http.MethodPost, path, op, "")
		require.Equal(t, http.StatusNotFound, r.status, "%s: %s", path, r.body)
		require.Equal(t, "/problems/not-found", problemType(t, r))
	}

	r := b.do(t, http.MethodPost, "/v1/admin/types/pausable/pause", op, "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.JSONEq(t, `{"name":"pausable","paused":true}`, string(r.body))
	require.Equal(t, http.StatusOK, b.do(t, http.MethodPost, "/v1/admin/types/pausable/pause", op, "").status, "idempotent")
	b.waitListed(t, alice, "pausable", func(m map[string]any) bool { return m["paused"] == true })
	require.Equal(t, true, b.do(t, http.MethodGet, "/v1/types/pausable", alice, "").json(t)["paused"])

	sub := b.submit(t, alice, "p-1", `{"type":"pausable","params":{}}`)
	require.Equal(t, http.StatusAccepted, sub.status, "a paused type's jobs are admitted: %s", sub.body)
	require.Equal(t, job.StateQueued, sub.job(t).State)

	require.NoError(t, b.declareOwned(t, "pausable", "cred-a"), "the worker restarts and declares again")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := b.res.Types.Get(ctx, "pausable")
	require.NoError(t, err)
	require.True(t, d.Paused, "a re-declaration cleared the pause")

	r = b.do(t, http.MethodPost, "/v1/admin/types/pausable/resume", op, "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.JSONEq(t, `{"name":"pausable","paused":false}`, string(r.body))
	b.waitListed(t, alice, "pausable", func(m map[string]any) bool { return m["paused"] == false })
	require.Equal(t, false, b.do(t, http.MethodGet, "/v1/types/pausable", alice, "").json(t)["paused"])
}

// Delete: 409 type-in-use while a job of the type is open; once it ended,
// 204, the type gone from GET /v1/types, admission 422, and the name free
// for another credential. Built-in types cannot be deleted (403); others
// than operators get 403; an unknown type 404.
func TestAdminDeleteAType(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	alice := b.token(t, "4", "alice", false)
	admin := b.token(t, "4", "ops", true)
	op := b.operator(t, "root")
	require.NoError(t, b.declareOwned(t, "doomed", "cred-a"))
	b.waitListed(t, alice, "doomed", func(m map[string]any) bool { return m != nil })
	body := `{"type":"doomed","params":{}}`
	sub := b.submit(t, alice, "d-1", body)
	require.Equal(t, http.StatusAccepted, sub.status, "%s", sub.body)
	id := sub.job(t).ID

	for _, tok := range []string{alice, admin} {
		r := b.do(t, http.MethodDelete, "/v1/admin/types/doomed", tok, "")
		require.Equal(t, http.StatusForbidden, r.status, "%s", r.body)
	}
	r := b.do(t, http.MethodDelete, "/v1/admin/types/doomed", op, "")
	require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
	require.Equal(t, "/problems/type-in-use", problemType(t, r))

	// Running counts as in use too.
	b.advance(t, "4", "alice", id, func(r *job.Record) error { return r.Claim("w-1", time.Now()) })
	r = b.do(t, http.MethodDelete, "/v1/admin/types/doomed", op, "")
	require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
	require.NotNil(t, b.typeListed(t, alice, "doomed"), "a type in use stays")

	require.Equal(t, http.StatusAccepted, b.do(t, http.MethodDelete, "/v1/jobs/"+id, alice, "").status)
	r = b.do(t, http.MethodDelete, "/v1/admin/types/doomed", op, "")
	require.Equal(t, http.StatusNoContent, r.status, "%s", r.body)
	b.waitListed(t, alice, "doomed", func(m map[string]any) bool { return m == nil })
	require.Equal(t, http.StatusNotFound, b.do(t, http.MethodGet, "/v1/types/doomed", alice, "").status)
	sub = b.submit(t, alice, "d-2", body)
	require.Equal(t, http.StatusUnprocessableEntity, sub.status, "%s", sub.body)
	require.Equal(t, "canceled", b.do(t, http.MethodGet, "/v1/jobs/"+id, alice, "").json(t)["state"], "its ended jobs stay")
	r = b.do(t, http.MethodDelete, "/v1/admin/types/doomed", op, "")
	require.Equal(t, http.StatusNotFound, r.status, "%s", r.body)

	require.NoError(t, b.declareOwned(t, "doomed", "cred-b"), "the name is free for another credential")
	require.ErrorIs(t, b.declareOwned(t, "doomed", "cred-a"), natsjs.ErrOwned)

	r = b.do(t, http.MethodDelete, "/v1/admin/types/permit_report", op, "")
	require.Equal(t, http.StatusForbidden, r.status, "%s", r.body)
	require.NotNil(t, b.typeListed(t, alice, "permit_report"))
	require.Equal(t, http.StatusNotFound, b.do(t, http.MethodDelete, "/v1/admin/types/nosuch", op, "").status)
}

// GET /v1/admin/workers: operators only; the live processes grouped from
// their presence per type, by credential then name, paged; an expired
// presence is not listed.
func TestAdminListWorkers(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	op := b.operator(t, "root")
	admin := b.token(t, "4", "ops", true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	now := time.Now().UTC()
	one, three := 1, 3
	for _, p := range []natsjs.Presence{
		{Worker: "exp-1", Type: "export", Concurrency: 4, Credential: "cred-a", Busy: &three, StartedAt: now.Add(-time.Minute), SeenAt: now},
		{Worker: "exp-1", Type: "import", Concurrency: 2, Credential: "cred-a", Busy: &one, StartedAt: now.Add(-time.Minute), SeenAt: now},
		{Worker: "old-7", Type: "export", Concurrency: 1, Credential: "cred-a", StartedAt: now, SeenAt: now},
		{Worker: "gone", Type: "export", Concurrency: 1, Credential: "cred-a", StartedAt: now, SeenAt: now.Add(-time.Hour)},
	} {
		require.NoError(t, b.res.Types.Announce(ctx, p))
	}
	require.Equal(t, http.StatusForbidden, b.do(t, http.MethodGet, "/v1/admin/workers", admin, "").status)

	var all api.AdminWorkerPage
	require.Eventually(t, func() bool {
		r, err := b.try(http.MethodGet, "/v1/admin/workers", op, "")
		var p api.AdminWorkerPage
		if err != nil || r.status != http.StatusOK || json.Unmarshal(r.body, &p) != nil {
			return false
		}
		ok := len(p.Workers) == 2 && len(p.Workers[0].Types) == 2
		if ok {
			all = p // read by the test after Eventually returned
		}
		return ok
	}, 10*time.Second, 20*time.Millisecond)
	w := all.Workers[0]
	require.Equal(t, "cred-a", w.Credential)
	require.Equal(t, "exp-1", w.Worker)
	require.Equal(t, 6, w.Slots)
	require.NotNil(t, w.Busy)
	require.Equal(t, 4, *w.Busy)
	require.Equal(t, "export", w.Types[0].Type)
	require.Equal(t, 4, w.Types[0].Slots)
	require.Equal(t, 3, *w.Types[0].Busy)
	require.Equal(t, "import", w.Types[1].Type)
	require.WithinDuration(t, now, w.SeenAt, time.Second)
	require.Equal(t, "old-7", all.Workers[1].Worker)
	require.Nil(t, all.Workers[1].Busy, "a worker that does not say how busy it is")
	require.Empty(t, all.NextCursor)

	r := b.do(t, http.MethodGet, "/v1/admin/workers?limit=1", op, "")
	var p1 api.AdminWorkerPage
	require.NoError(t, json.Unmarshal(r.body, &p1))
	require.Len(t, p1.Workers, 1)
	require.Equal(t, "exp-1", p1.Workers[0].Worker)
	require.NotEmpty(t, p1.NextCursor)
	r = b.do(t, http.MethodGet, "/v1/admin/workers?limit=1&cursor="+url.QueryEscape(p1.NextCursor), op, "")
	var p2 api.AdminWorkerPage
	require.NoError(t, json.Unmarshal(r.body, &p2))
	require.Len(t, p2.Workers, 1)
	require.Equal(t, "old-7", p2.Workers[0].Worker)
	require.Empty(t, p2.NextCursor)

	for _, q := range []string{"limit=0", "limit=501", "cursor=nope", "other=1", "limit=1&limit=2"} {
		r := b.do(t, http.MethodGet, "/v1/admin/workers?"+q, op, "")
		require.Equal(t, http.StatusBadRequest, r.status, "%s: %s", q, r.body)
	}
}

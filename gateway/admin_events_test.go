package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/pkg/api"
	"github.com/stretchr/testify/require"
)

// openAdminEvents opens GET /v1/admin/events (with query) and delivers its
// job events.
func (b *testBundle) openAdminEvents(t *testing.T, tok, query, lastID string) (*http.Response, <-chan requesterEvent) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.url+"/v1/admin/events"+query, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tok)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := b.http.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	ch := make(chan requesterEvent, 64)
	if resp.StatusCode != http.StatusOK {
		close(ch)
		return resp, ch
	}
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		var id, name string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && name == "job":
				var e requesterEvent
				if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &e.job) == nil {
					e.id = id
					ch <- e
				}
			}
		}
	}()
	return resp, ch
}

// eventsUntil reads events until every id in want has been seen, and
// returns the ids seen (want's and any other).
func eventsUntil(t *testing.T, ch <-chan requesterEvent, want ...string) map[string]string {
	t.Helper()
	seen := map[string]string{} // job id → last event id
	missing := func() bool {
		for _, id := range want {
			if _, ok := seen[id]; !ok {
				return true
			}
		}
		return false
	}
	for missing() {
		e := nextEvent(t, ch)
		seen[e.job.ID] = e.id
	}
	return seen
}

// GET /v1/admin/events: a tenant admin gets every change of every
// requester of its tenant and none of another tenant's; an operator every
// tenant's, or one tenant's with ?tenant=; each stream is one slot of the
// stream caps; Last-Event-ID resumes; a requester is refused.
func TestAdminEventsStreamTheRoleScope(t *testing.T) {
	t.Parallel()
	g, b := setup(t, func(c *Config) { c.MaxStreamsPerRequester, c.StreamHeartbeat = 1, 20*time.Millisecond })
	alice, bob := b.token(t, "4", "alice", false), b.token(t, "4", "bob", false)
	other := b.token(t, "5", "carol", false)
	admin := b.token(t, "4", "lead", true)
	op := b.operator(t, "ops-1")

	require.Equal(t, http.StatusForbidden, b.do(t, http.MethodGet, "/v1/admin/events", alice, "").status, "a requester has no admin stream")
	require.Equal(t, http.StatusBadRequest, b.do(t, http.MethodGet, "/v1/admin/events?tenant=a.b", op, "").status)

	resp, adminEvents := b.openAdminEvents(t, admin, "", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	second, _ := b.openAdminEvents(t, admin, "", "")
	require.Equal(t, http.StatusTooManyRequests, second.StatusCode, "the admin's one stream counts against its cap")
	opResp, opEvents := b.openAdminEvents(t, op, "", "")
	require.Equal(t, http.StatusOK, opResp.StatusCode)

	a := b.submit(t, alice, "k", permit).job(t)
	bb := b.submit(t, bob, "k", permit).job(t)
	c := b.submit(t, other, "k", permit).job(t)
	for _, x := range []struct{ tok, id string }{{alice, a.ID}, {bob, bb.ID}, {other, c.ID}} {
		require.Equal(t, http.StatusAccepted, b.do(t, http.MethodDelete, "/v1/jobs/"+x.id, x.tok, "").status)
	}

	seen := eventsUntil(t, adminEvents, a.ID, bb.ID)
	require.NotContains(t, seen, c.ID, "another tenant's job")
	ops := eventsUntil(t, opEvents, a.ID, bb.ID, c.ID)
	require.Len(t, ops, 3, "the operator sees every tenant")

	// A resume after a's cancel brings bob's again, and nothing of tenant 5.
	resp.Body.Close()
	require.Eventually(t, func() bool { return g.streams.open() == 1 }, 10*time.Second, 5*time.Millisecond)
	_, again := b.openAdminEvents(t, admin, "", seen[a.ID])
	e := nextEvent(t, again)
	require.Equal(t, bb.ID, e.job.ID)
	require.Equal(t, job.StateCanceled, e.job.State)
	require.Equal(t, seen[bb.ID], e.id)

	// An operator's ?tenant= keeps that tenant's.
	opResp.Body.Close()
	require.Eventually(t, func() bool { return g.streams.open() == 1 }, 10*time.Second, 5*time.Millisecond)
	r5, five := b.openAdminEvents(t, op, "?tenant=5", "")
	require.Equal(t, http.StatusOK, r5.StatusCode)
	d := b.submit(t, alice, "k2", permit).job(t)
	f := b.submit(t, other, "k2", permit).job(t)
	require.Equal(t, http.StatusAccepted, b.do(t, http.MethodDelete, "/v1/jobs/"+d.ID, alice, "").status)
	require.Equal(t, http.StatusAccepted, b.do(t, http.MethodDelete, "/v1/jobs/"+f.ID, other, "").status)
	got := nextEvent(t, five)
	require.Equal(t, f.ID, got.job.ID, "tenant 4's %s is not on tenant 5's stream", d.ID)
}

// GET /v1/admin/stats?series=minutes adds each type's last hour minute by
// minute; GET /v1/admin/jobs/{id}/result is a signed link for the role.
func TestAdminStatsMinutesAndResultLink(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	alice := b.token(t, "4", "alice", false)
	admin := b.token(t, "4", "lead", true)
	outsider := b.token(t, "5", "lead", true)
	j := b.submit(t, alice, "k", permit).job(t)

	r := b.do(t, http.MethodGet, "/v1/admin/jobs/"+j.ID+"/result", admin, "")
	require.Equal(t, http.StatusConflict, r.status, "not ready: %s", r.body)
	b.succeedHostile(t, "4", "alice", j.ID, []byte("the result"))

	var st api.Stats
	require.Eventually(t, func() bool {
		r := b.do(t, http.MethodGet, "/v1/admin/stats?series=minutes", admin, "")
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		require.NoError(t, json.Unmarshal(r.body, &st))
		return len(st.Types) == 1 && st.Types[0].LastHour.Succeeded == 1
	}, 10*time.Second, 20*time.Millisecond)
	m := st.Types[0].Minutes
	require.NotNil(t, m)
	require.Len(t, m.Succeeded, api.SeriesMinutes)
	require.EqualValues(t, 1, m.Succeeded[api.SeriesMinutes-1], "finished this minute")
	r = b.do(t, http.MethodGet, "/v1/admin/stats", admin, "")
	require.NotContains(t, string(r.body), `"minutes"`, "only when asked for")
	require.Equal(t, http.StatusBadRequest, b.do(t, http.MethodGet, "/v1/admin/stats?series=hours", admin, "").status)

	r = b.do(t, http.MethodGet, "/v1/admin/jobs/"+j.ID+"/result", admin, "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Equal(t, "private, no-store", r.header.Get("Cache-Control"))
	var link struct {
		Href      string    `json:"href"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	require.NoError(t, json.Unmarshal(r.body, &link))
	require.True(t, strings.HasPrefix(link.Href, "/v1/results/"), link.Href)
	require.True(t, link.ExpiresAt.After(time.Now()))
	file := b.do(t, http.MethodGet, link.Href, "", "")
	require.Equal(t, http.StatusOK, file.status)
	require.Equal(t, "the result", string(file.body))
	require.Equal(t, http.StatusNotFound, b.do(t, http.MethodGet, "/v1/admin/jobs/"+j.ID+"/result", outsider, "").status,
		"another tenant's admin")
	require.Equal(t, http.StatusForbidden, b.do(t, http.MethodGet, "/v1/admin/jobs/"+j.ID+"/result", alice, "").status,
		"the owner has GET /v1/jobs/{id}/result")
}

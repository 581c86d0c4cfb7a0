package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/metrics"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// advance moves a job the way a worker would (the real store, CAS).
func (b *testBundle) advance(t *testing.T, tenant, requester, id string, fn func(r *job.Record) error) *job.Record {
	t.Helper()
	rec, err := b.res.Jobs.Mutate(context.Background(), job.StoreKey(tenant, requester, id), fn)
	require.NoError(t, err)
	return rec
}

// succeed stores a result object and marks the job succeeded.
func (b *testBundle) succeed(t *testing.T, tenant, requester, id string, content []byte) {
	t.Helper()
	_, err := b.res.Results.Put(context.Background(), jetstream.ObjectMeta{
		Name: id, Headers: map[string][]string{"Content-Type": {"application/pdf"}},
	}, bytes.NewReader(content))
	require.NoError(t, err)
	b.advance(t, tenant, requester, id, func(r *job.Record) error {
		if r.State == job.StateQueued {
			if err := r.Transition(job.StateRunning, time.Now()); err != nil {
				return err
			}
			r.Attempt = 1
		}
		r.Output = &job.Output{Object: id, ContentType: "application/pdf", Size: int64(len(content)), SHA256: "abc"}
		return r.Transition(job.StateSucceeded, time.Now())
	})
}

func TestReadsAreScopedToTenantAndRequester(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	owner := b.token(t, "A", "alice", false)
	r := b.submit(t, owner, "k", permit)
	require.Equal(t, http.StatusAccepted, r.status)
	id := r.job(t).ID
	path := "/v1/jobs/" + id

	require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, path, owner, "").status)
	missing := b.do(t, http.MethodGet, "/v1/jobs/job_aaaaaaaaaaaaaaaaaaaaaaaaaa", owner, "")
	for name, tok := range map[string]string{
		"tenant B":            b.token(t, "B", "alice", false),
		"requester B of A":    b.token(t, "A", "bob", false),
		"admin of B":          b.token(t, "B", "root", true),
		"same sub, tenant Ax": b.token(t, "Ax", "alice", false),
	} {
		for _, p := range []string{path, path + "/result", path + "/events"} {
			got := b.do(t, http.MethodGet, p, tok, "")
			require.Equal(t, http.StatusNotFound, got.status, "%s %s", name, p)
			require.Equal(t, missing.body, got.body, "%s: a foreign job answers exactly like a missing one", name)
		}
		require.Equal(t, http.StatusNotFound, b.do(t, http.MethodDelete, path, tok, "").status, name)
		list := b.do(t, http.MethodGet, "/v1/jobs", tok, "")
		require.Len(t, list.json(t)["jobs"], 0, name)
	}
	admin := b.do(t, http.MethodGet, path, b.token(t, "A", "root", true), "")
	require.Equal(t, http.StatusOK, admin.status, "admin of A reads the tenant's jobs")
	require.Equal(t, id, admin.job(t).ID)
	// A replay of the same key by another requester is a new job in their scope.
	other := b.submit(t, b.token(t, "A", "bob", false), "k", permit)
	require.Equal(t, http.StatusAccepted, other.status)
	require.NotEqual(t, id, other.job(t).ID)
}

func TestStatusETagAndRetryAfter(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	tok := b.token(t, "4", "reviewer-47", false)
	id := b.submit(t, tok, "k", permit).job(t).ID
	path := "/v1/jobs/" + id

	first := b.do(t, http.MethodGet, path, tok, "")
	require.Equal(t, http.StatusOK, first.status)
	require.Equal(t, "private, no-store", first.header.Get("Cache-Control"))
	require.Equal(t, "1", first.header.Get("Retry-After"))
	tag := first.header.Get("ETag")
	require.NotEmpty(t, tag)

	same := b.do(t, http.MethodGet, path, tok, "", "If-None-Match: "+tag)
	require.Equal(t, http.StatusNotModified, same.status)
	require.Empty(t, same.body)

	// Retry-After grows with age, bounded.
	b.clock.advance(45 * time.Second)
	require.Equal(t, "5", b.do(t, http.MethodGet, path, tok, "").header.Get("Retry-After"))
	b.clock.advance(10 * time.Minute)
	require.Equal(t, "30", b.do(t, http.MethodGet, path, tok, "").header.Get("Retry-After"))

	// A progress change is a change: new ETag.
	b.advance(t, "4", "reviewer-47", id, func(r *job.Record) error {
		r.Attempt = 1
		r.Progress = &job.Progress{Done: 6, Total: 63, Unit: "pages"}
		return r.Transition(job.StateRunning, time.Now())
	})
	changed := b.do(t, http.MethodGet, path, tok, "", "If-None-Match: "+tag)
	require.Equal(t, http.StatusOK, changed.status)
	require.NotEqual(t, tag, changed.header.Get("ETag"))
	require.Equal(t, 6, changed.job(t).Progress.Done)

	// Terminal: no Retry-After; the ETag follows the record, not the fresh href.
	b.succeed(t, "4", "reviewer-47", id, []byte("%PDF-1.4 test"))
	done := b.do(t, http.MethodGet, path, tok, "")
	require.Empty(t, done.header.Get("Retry-After"))
	require.NotEmpty(t, done.job(t).Result.Href)
	b.clock.advance(2 * time.Second)
	again := b.do(t, http.MethodGet, path, tok, "", "If-None-Match: "+done.header.Get("ETag"))
	require.Equal(t, http.StatusNotModified, again.status)
}

func TestListNewestFirstWithCursor(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	tok := b.token(t, "4", "reviewer-47", false)
	var ids []string
	for i := range 5 {
		b.clock.advance(time.Second)
		r := b.submit(t, tok, fmt.Sprintf("k%d", i), fmt.Sprintf(`{"type":"permit_report","params":{"case_id":%d,"revision":1}}`, i+1))
		require.Equal(t, http.StatusAccepted, r.status)
		ids = append([]string{r.job(t).ID}, ids...)
	}
	b.submit(t, b.token(t, "4", "someone-else", false), "k0", permit)

	var got []string
	cursor := ""
	for page := 0; ; page++ {
		q := "/v1/jobs?limit=2"
		if cursor != "" {
			q += "&cursor=" + cursor
		}
		r := b.do(t, http.MethodGet, q, tok, "")
		require.Equal(t, http.StatusOK, r.status)
		var body struct {
			Jobs       []job.Resource `json:"jobs"`
			NextCursor string         `json:"next_cursor"`
		}
		require.NoError(t, json.Unmarshal(r.body, &body))
		for _, j := range body.Jobs {
			got = append(got, j.ID)
		}
		if body.NextCursor == "" {
			break
		}
		cursor = body.NextCursor
		require.Less(t, page, 5)
	}
	require.Equal(t, ids, got, "own jobs, newest first, each once")

	b.do(t, http.MethodDelete, "/v1/jobs/"+ids[0], tok, "")
	canceled := b.do(t, http.MethodGet, "/v1/jobs?state=canceled", tok, "")
	require.Len(t, canceled.json(t)["jobs"], 1)
	require.Equal(t, http.StatusBadRequest, b.do(t, http.MethodGet, "/v1/jobs?state=bogus", tok, "").status)
	require.Equal(t, http.StatusBadRequest, b.do(t, http.MethodGet, "/v1/jobs?limit=0", tok, "").status)
	require.Equal(t, http.StatusBadRequest, b.do(t, http.MethodGet, "/v1/jobs?cursor=zzz", tok, "").status)
}

func TestCancel(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	tok := b.token(t, "4", "reviewer-47", false)
	queued := b.submit(t, tok, "q", permit).job(t).ID
	r := b.do(t, http.MethodDelete, "/v1/jobs/"+queued, tok, "")
	require.Equal(t, http.StatusAccepted, r.status)
	require.Equal(t, job.StateCanceled, r.job(t).State)
	require.NotNil(t, r.job(t).FinishedAt)
	again := b.do(t, http.MethodDelete, "/v1/jobs/"+queued, tok, "")
	require.Equal(t, http.StatusConflict, again.status)
	require.Equal(t, "/problems/job-terminal", again.json(t)["type"])
	res := b.do(t, http.MethodGet, "/v1/jobs/"+queued+"/result", tok, "")
	require.Equal(t, "/problems/job-canceled", res.json(t)["type"])
	// A replay of a canceled job's key returns it as it is now.
	replay := b.submit(t, tok, "q", permit)
	require.Equal(t, http.StatusOK, replay.status)
	require.Equal(t, job.StateCanceled, replay.job(t).State)

	running := b.submit(t, tok, "r", permit).job(t).ID
	b.advance(t, "4", "reviewer-47", running, func(r *job.Record) error {
		r.Attempt = 1
		return r.Transition(job.StateRunning, time.Now())
	})
	rr := b.do(t, http.MethodDelete, "/v1/jobs/"+running, tok, "")
	require.Equal(t, http.StatusAccepted, rr.status)
	require.Equal(t, job.StateCanceled, rr.job(t).State)
}

func TestResultLinks(t *testing.T) {
	t.Parallel()
	_, b := setup(t, func(c *Config) { c.LinkTTL = time.Minute })
	tok := b.token(t, "4", "reviewer-47", false)
	id := b.submit(t, tok, "k", permit).job(t).ID

	notReady := b.do(t, http.MethodGet, "/v1/jobs/"+id+"/result", tok, "")
	require.Equal(t, http.StatusConflict, notReady.status)
	require.Equal(t, "/problems/result-not-ready", notReady.json(t)["type"])

	pdf := []byte("%PDF-1.4\n% test result\n")
	b.succeed(t, "4", "reviewer-47", id, pdf)
	redirect := b.do(t, http.MethodGet, "/v1/jobs/"+id+"/result", tok, "")
	require.Equal(t, http.StatusSeeOther, redirect.status)
	link := redirect.header.Get("Location")
	require.True(t, strings.HasPrefix(link, "/v1/results/"))

	file := b.do(t, http.MethodGet, link, "", "")
	require.Equal(t, http.StatusOK, file.status)
	require.Equal(t, "application/pdf", file.header.Get("Content-Type"))
	require.Equal(t, pdf, file.body)

	status := b.do(t, http.MethodGet, "/v1/jobs/"+id, tok, "").job(t)
	require.NotNil(t, status.Result)
	require.True(t, strings.HasPrefix(status.Result.Href, "/v1/results/"))
	require.EqualValues(t, len(pdf), status.Result.Size)

	// Tampered: flip one character of the payload.
	tok64 := strings.TrimPrefix(link, "/v1/results/")
	flipped := []byte(tok64)
	flipped[3] ^= 1
	tampered := b.do(t, http.MethodGet, "/v1/results/"+string(flipped), "", "")
	require.Equal(t, http.StatusForbidden, tampered.status)
	require.Equal(t, "/problems/link-invalid", tampered.json(t)["type"])
	require.Equal(t, http.StatusForbidden, b.do(t, http.MethodGet, "/v1/results/garbage", "", "").status)

	// Expired: 410, while the job record stays readable.
	b.clock.advance(2 * time.Minute)
	expired := b.do(t, http.MethodGet, link, "", "")
	require.Equal(t, http.StatusGone, expired.status)
	require.Equal(t, "/problems/link-expired", expired.json(t)["type"])
	require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/v1/jobs/"+id, tok, "").status)
	fresh := b.do(t, http.MethodGet, "/v1/jobs/"+id+"/result", tok, "").header.Get("Location")
	require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, fresh, "", "").status, "a fresh link works again")

	// Failed jobs have no result.
	failed := b.submit(t, tok, "f", permit).job(t).ID
	b.advance(t, "4", "reviewer-47", failed, func(r *job.Record) error {
		r.Error = &job.Failure{Category: job.CategoryRenderError, Message: "boom"}
		return r.Transition(job.StateFailed, time.Now())
	})
	fr := b.do(t, http.MethodGet, "/v1/jobs/"+failed+"/result", tok, "")
	require.Equal(t, "/problems/job-failed", fr.json(t)["type"])
	require.Equal(t, job.CategoryRenderError, b.do(t, http.MethodGet, "/v1/jobs/"+failed, tok, "").job(t).Error.Category)
}

func TestLongPollAnswersOnChange(t *testing.T) {
	t.Parallel()
	g, b := setup(t)
	tok := b.token(t, "4", "reviewer-47", false)
	id := b.submit(t, tok, "k", permit).job(t).ID
	tag := b.do(t, http.MethodGet, "/v1/jobs/"+id, tok, "").header.Get("ETag")

	// Unchanged: 304 at the deadline.
	idle := b.do(t, http.MethodGet, "/v1/jobs/"+id+"?wait=200ms", tok, "", "If-None-Match: "+tag)
	require.Equal(t, http.StatusNotModified, idle.status)

	type answer struct {
		r   response
		err error
	}
	done := make(chan answer, 1)
	go func() {
		r, err := b.try(http.MethodGet, "/v1/jobs/"+id+"?wait=20s", tok, "", "If-None-Match: "+tag)
		done <- answer{r, err}
	}()
	require.Eventually(t, func() bool { return g.changes.watchers() == 1 }, 5*time.Second, 5*time.Millisecond)
	changedAt := time.Now()
	b.advance(t, "4", "reviewer-47", id, func(r *job.Record) error {
		r.Attempt = 1
		return r.Transition(job.StateRunning, time.Now())
	})
	select {
	case a := <-done:
		require.NoError(t, a.err)
		r := a.r
		require.Equal(t, http.StatusOK, r.status)
		require.Equal(t, job.StateRunning, r.job(t).State)
		require.Less(t, time.Since(changedAt), 2*time.Second, "answered on the change, long before the 20s deadline")
	case <-time.After(10 * time.Second):
		t.Fatal("long-poll did not answer after the change")
	}
	require.Equal(t, http.StatusBadRequest, b.do(t, http.MethodGet, "/v1/jobs/"+id+"?wait=soon", tok, "", "If-None-Match: "+tag).status)
}

func TestSSEStreamsEveryChangeThenEnds(t *testing.T) {
	t.Parallel()
	g, b := setup(t)
	tok := b.token(t, "4", "reviewer-47", false)
	id := b.submit(t, tok, "k", permit).job(t).ID

	req, err := http.NewRequest(http.MethodGet, b.url+"/v1/jobs/"+id+"/events", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := b.http.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))

	events := make(chan job.Resource, 16)
	var (
		mu      sync.Mutex
		lastID  string
		retries []string
		names   = map[string]int{}
	)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var name string
		for sc.Scan() {
			line := sc.Text()
			mu.Lock()
			switch {
			case strings.HasPrefix(line, "retry: "):
				retries = append(retries, strings.TrimPrefix(line, "retry: "))
			case strings.HasPrefix(line, "id: "):
				lastID = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				name = strings.TrimPrefix(line, "event: ")
				names[name]++
			case strings.HasPrefix(line, "data: ") && name == "job":
				var r job.Resource
				if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &r) == nil {
					events <- r
				}
			}
			mu.Unlock()
		}
	}()
	next := func() job.Resource {
		select {
		case e, ok := <-events:
			require.True(t, ok, "stream ended early")
			return e
		case <-time.After(10 * time.Second):
			t.Fatal("no event")
		}
		return job.Resource{}
	}
	require.Equal(t, job.StateQueued, next().State, "first event at once")
	require.Eventually(t, func() bool { return g.changes.watchers() == 1 }, 5*time.Second, 5*time.Millisecond)
	b.advance(t, "4", "reviewer-47", id, func(r *job.Record) error {
		r.Attempt = 1
		return r.Transition(job.StateRunning, time.Now())
	})
	require.Equal(t, job.StateRunning, next().State)
	b.succeed(t, "4", "reviewer-47", id, []byte("%PDF-1.4"))
	final := next()
	require.Equal(t, job.StateSucceeded, final.State)
	require.NotEmpty(t, final.Result.Href)
	select {
	case _, ok := <-events:
		require.False(t, ok, "the stream ends after a terminal state")
	case <-time.After(10 * time.Second):
		t.Fatal("stream did not end")
	}
	require.Eventually(t, func() bool { return g.changes.watchers() == 0 }, 5*time.Second, 5*time.Millisecond)

	mu.Lock()
	terminalID := lastID
	require.Equal(t, map[string]int{"job": 3}, names, "every event is named job; none collides with EventSource's own error event")
	require.Len(t, retries, 1, "one retry: field tells EventSource how long to wait before a reconnect")
	require.Regexp(t, `^[1-9][0-9]*$`, retries[0])
	mu.Unlock()

	// An EventSource reconnects after the stream ended, with the terminal
	// event's id: 204 No Content tells it to stop for good.
	for _, last := range []string{terminalID, fmt.Sprint(uint64(1) << 40)} {
		r := b.do(t, http.MethodGet, "/v1/jobs/"+id+"/events", tok, "", "Last-Event-ID: "+last)
		require.Equal(t, http.StatusNoContent, r.status, "Last-Event-ID %s", last)
		require.Empty(t, r.body)
	}
	// A client that missed the terminal event gets it, then the stream ends.
	r := b.do(t, http.MethodGet, "/v1/jobs/"+id+"/events", tok, "", "Last-Event-ID: 1")
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, 1, strings.Count(string(r.body), "event: job\n"))
	require.Contains(t, string(r.body), "id: "+terminalID+"\n")
	require.Contains(t, string(r.body), `"state":"succeeded"`)
}

func TestHealthAndOpenAPI(t *testing.T) {
	t.Parallel()
	_, b := setup(t, func(c *Config) { c.Metrics = metrics.New() })
	tok := b.token(t, "4", "reviewer-47", false)
	b.submit(t, tok, "k", permit)
	b.submit(t, tok, "k", permit)
	b.submit(t, tok, "k", `{"type":"permit_report","params":{"case_id":47,"revision":30}}`)
	m := b.do(t, http.MethodGet, "/metrics", "", "")
	require.Equal(t, http.StatusOK, m.status)
	for _, line := range []string{`jobgate_admissions_total{outcome="new"} 1`, `jobgate_admissions_total{outcome="replayed"} 1`, `jobgate_admissions_total{outcome="conflict"} 1`, `jobgate_admission_duration_seconds_count 2`} {
		require.Contains(t, string(m.body), line)
	}
	require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/healthz", "", "").status)
	require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/readyz", "", "").status)
	spec := b.do(t, http.MethodGet, "/openapi.yaml", "", "")
	require.Equal(t, http.StatusOK, spec.status)
	require.Contains(t, string(spec.body), "openapi: 3.1.0")
	b.emb.Shutdown()
	require.Equal(t, http.StatusServiceUnavailable, b.do(t, http.MethodGet, "/readyz", "", "").status)
	require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/healthz", "", "").status)
}

// Changes that follow each other closely must all reach a stream, the last
// one above all: a stream that misses the terminal change never ends.
func TestSSEDoesNotMissTheLastOfQuickChanges(t *testing.T) {
	t.Parallel()
	g, b := setup(t)
	tok := b.token(t, "4", "reviewer-47", false)
	for i := range 20 {
		id := b.submit(t, tok, fmt.Sprintf("k%d", i), permit).job(t).ID
		req, err := http.NewRequest(http.MethodGet, b.url+"/v1/jobs/"+id+"/events", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+tok)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := b.http.Do(req.WithContext(ctx))
		require.NoError(t, err)
		require.Eventually(t, func() bool { return g.changes.watchers() == 1 }, 5*time.Second, time.Millisecond)
		b.advance(t, "4", "reviewer-47", id, func(r *job.Record) error {
			r.Attempt = 1
			return r.Transition(job.StateRunning, time.Now())
		})
		for p := 1; p <= 5; p++ {
			b.advance(t, "4", "reviewer-47", id, func(r *job.Record) error {
				r.Progress = &job.Progress{Done: p, Total: 5, Unit: "pages"}
				return nil
			})
		}
		b.succeed(t, "4", "reviewer-47", id, []byte("%PDF-1.4"))
		var last string
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "data: ") {
				last = sc.Text()
			}
		}
		resp.Body.Close()
		cancel()
		require.Contains(t, last, `"state":"succeeded"`, "job %d: the stream ended with its terminal event", i)
		require.Eventually(t, func() bool { return g.changes.watchers() == 0 }, 5*time.Second, time.Millisecond)
	}
}

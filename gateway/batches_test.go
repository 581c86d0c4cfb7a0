package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/failpoint"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/stretchr/testify/require"
)

// batchBody is a batch of n permit_report jobs; edit may change item i.
func batchBody(n int, edit func(i int) string) string {
	var sb strings.Builder
	sb.WriteString(`{"jobs":[`)
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		item := fmt.Sprintf(`{"type":"permit_report","params":{"case_id":%d,"revision":1,"pages":1}}`, i+1)
		if edit != nil {
			if e := edit(i); e != "" {
				item = e
			}
		}
		sb.WriteString(item)
	}
	sb.WriteString(`]}`)
	return sb.String()
}

type batchBodyJSON struct {
	ID     string         `json:"id"`
	Done   bool           `json:"done"`
	Total  int            `json:"total"`
	Counts map[string]int `json:"counts"`
	Jobs   []struct {
		ID    string    `json:"id"`
		State job.State `json:"state"`
	} `json:"jobs"`
	NextCursor string `json:"next_cursor"`
	Progress   struct {
		Done, Total int
		Unit        string
	} `json:"progress"`
}

func (r response) batch(t *testing.T) batchBodyJSON {
	t.Helper()
	var v batchBodyJSON
	require.NoError(t, json.Unmarshal(r.body, &v), "body: %s", r.body)
	return v
}

func (v batchBodyJSON) ids() []string {
	out := make([]string, len(v.Jobs))
	for i, j := range v.Jobs {
		out[i] = j.ID
	}
	return out
}

func (b *testBundle) postBatch(t *testing.T, tok, key, body string) response {
	t.Helper()
	return b.do(t, http.MethodPost, "/v1/batches", tok, body, "Idempotency-Key: "+key)
}

// countBatches counts the batch records, whatever their scope.
func (b *testBundle) countBatches(t *testing.T) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := b.res.JS.Stream(ctx, "KV_JOBGATE_BATCHES")
	require.NoError(t, err)
	info, err := st.Info(ctx)
	require.NoError(t, err)
	return int(info.State.Msgs)
}

// Concurrent identical POSTs of one batch make one batch and each item one
// job; all answers carry the same batch and job ids, one 202 and the rest
// 200 replayed.
func TestBatchConcurrentPostsMakeOneBatch(t *testing.T) {
	t.Parallel()
	_, b := setup(t, func(c *Config) { c.SubmitRate, c.SubmitBurst = 1000, 1000 })
	tok := b.token(t, "4", "reviewer-47", false)
	body := batchBody(40, nil)
	const n = 8
	var wg sync.WaitGroup
	answers := make([]response, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i], errs[i] = b.try(http.MethodPost, "/v1/batches", tok, body, "Idempotency-Key: batch-1")
		}()
	}
	wg.Wait()
	created := 0
	var first batchBodyJSON
	for i, a := range answers {
		require.NoError(t, errs[i])
		require.Contains(t, []int{http.StatusAccepted, http.StatusOK}, a.status, "%s", a.body)
		if a.status == http.StatusAccepted {
			created++
		} else {
			require.Equal(t, "true", a.header.Get("Idempotent-Replayed"))
		}
		v := a.batch(t)
		require.Len(t, v.Jobs, 40)
		require.Equal(t, "/v1/batches/"+v.ID, a.header.Get("Location"))
		if i == 0 {
			first = v
			continue
		}
		require.Equal(t, first.ID, v.ID)
		require.Equal(t, first.ids(), v.ids(), "the same job ids in every answer")
	}
	require.Equal(t, 1, created, "exactly one answer created the batch")
	require.Equal(t, 1, b.countBatches(t))
	require.Equal(t, 40, b.countJobs(t), "every item one job")
	seen := map[string]bool{}
	for _, id := range first.ids() {
		require.False(t, seen[id])
		seen[id] = true
		r := b.do(t, http.MethodGet, "/v1/jobs/"+id, tok, "")
		require.Equal(t, http.StatusOK, r.status, "an item is a job of its requester: %s", r.body)
	}

	// A later retry replays the same batch; other jobs under the key are refused.
	again := b.postBatch(t, tok, "batch-1", body)
	require.Equal(t, http.StatusOK, again.status)
	require.Equal(t, first.ids(), again.batch(t).ids())
	other := b.postBatch(t, tok, "batch-1", batchBody(40, func(i int) string {
		if i == 39 {
			return `{"type":"permit_report","params":{"case_id":999,"revision":1}}`
		}
		return ""
	}))
	require.Equal(t, http.StatusConflict, other.status)
	require.Equal(t, "/problems/idempotency-key-reused", other.json(t)["type"])
	require.Equal(t, 40, b.countJobs(t), "a refused batch admits nothing")
	require.Equal(t, 1, b.countBatches(t))
}

// One bad item makes the whole batch a 422 whose errors point at the item;
// nothing is admitted and the key stays unused.
func TestBatchValidationPointsAtTheItem(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	tok := b.token(t, "4", "reviewer-47", false)
	bad := batchBody(5, func(i int) string {
		if i == 3 {
			return `{"type":"permit_report","params":{"case_id":4,"revision":1,"pages":5000}}`
		}
		return ""
	})
	r := b.postBatch(t, tok, "k", bad)
	require.Equal(t, http.StatusUnprocessableEntity, r.status, "%s", r.body)
	p := r.json(t)
	require.Equal(t, "/problems/validation", p["type"])
	errs := p["errors"].([]any)
	require.Len(t, errs, 1, "%s", r.body)
	require.Equal(t, "/jobs/3/params/pages", errs[0].(map[string]any)["field"])

	for _, tc := range []struct{ body, field string }{
		{`{"jobs":[]}`, "/jobs"},
		{`{"jobs":{}}`, "/jobs"},
		{`{}`, "/jobs"},
		{`{"jobs":[{"type":"permit_report","params":{"case_id":1,"revision":1}}],"x":1}`, "/x"},
		{`{"jobs":[1]}`, "/jobs/0"},
		{`{"jobs":[{"type":"nope"}]}`, "/jobs/0/type"},
		{batchBody(job.MaxBatchItems+1, nil), "/jobs"},
	} {
		r := b.postBatch(t, tok, "k", tc.body)
		require.Equal(t, http.StatusUnprocessableEntity, r.status, "%.200s: %s", tc.body, r.body)
		require.Equal(t, tc.field, r.json(t)["errors"].([]any)[0].(map[string]any)["field"], "%.200s", tc.body)
	}
	require.Equal(t, http.StatusBadRequest, b.postBatch(t, tok, "k", `{"jobs":[],"jobs":[]}`).status, "a duplicated member is malformed")
	require.Equal(t, 0, b.countJobs(t), "nothing admitted")
	require.Equal(t, 0, b.countBatches(t))

	fixed := b.postBatch(t, tok, "k", batchBody(5, nil))
	require.Equal(t, http.StatusAccepted, fixed.status, "the key was not consumed: %s", fixed.body)
	require.Equal(t, 5, b.countJobs(t))
}

// A batch of 1,000 items fits the request limits (1 MiB) and the stored
// record; a body past 1 MiB is 413 and admits nothing.
func TestBatchOfAThousandJobs(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	tok := b.token(t, "4", "reviewer-47", false)
	const thousand = 1000 // the contract's bound, not the code's constant
	// Long bodies of 1,000 items: as large as the limit allows.
	body := batchBody(thousand, func(i int) string {
		return fmt.Sprintf(`{"type":"permit_report","params":{"case_id":%d,"revision":%d,"pages":2000}}%s`, 1000000+i, 1000000+i, strings.Repeat(" ", 900))
	})
	require.Less(t, len(body), job.MaxBatchBody)
	require.Greater(t, len(body), job.MaxBatchBody*9/10)
	r := b.postBatch(t, tok, "big", body)
	require.Equal(t, http.StatusAccepted, r.status, "%.300s", r.body)
	v := r.batch(t)
	require.Len(t, v.Jobs, thousand, "the answer lists every job")
	require.Equal(t, thousand, v.Total)
	require.Equal(t, thousand, v.Counts["queued"])
	require.Equal(t, thousand, b.countJobs(t))

	get := b.do(t, http.MethodGet, "/v1/batches/"+v.ID, tok, "")
	require.Equal(t, http.StatusOK, get.status)
	page := get.batch(t)
	require.Len(t, page.Jobs, 100, "a read lists a page")
	require.Equal(t, "100", page.NextCursor)
	last := b.do(t, http.MethodGet, "/v1/batches/"+v.ID+"?limit=300&cursor=900", tok, "").batch(t)
	require.Equal(t, v.ids()[900:], last.ids())
	require.Empty(t, last.NextCursor)

	over := body[:len(body)-2] + strings.Repeat(" ", job.MaxBatchBody-len(body)+10) + "]}"
	tooBig := b.postBatch(t, tok, "too-big", over)
	require.Equal(t, http.StatusRequestEntityTooLarge, tooBig.status)
	require.Equal(t, "/problems/payload-too-large", tooBig.json(t)["type"])
	require.Equal(t, 1, b.countBatches(t))
}

// Another requester's batch, and one that does not exist, answer the same
// 404 on every batch path.
func TestForeignBatchAnswers404(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	owner := b.token(t, "4", "reviewer-47", false)
	other := b.token(t, "4", "reviewer-48", false)
	admin := b.token(t, "4", "boss", true)
	stranger := b.token(t, "5", "reviewer-47", false)
	v := b.postBatch(t, owner, "k", batchBody(2, nil)).batch(t)
	missing := "bat_" + strings.Repeat("a", 26)
	var want []byte
	for _, tok := range []string{other, admin, stranger} {
		for _, id := range []string{v.ID, missing, "nonsense"} {
			for _, m := range []string{http.MethodGet, http.MethodDelete} {
				r := b.do(t, m, "/v1/batches/"+id, tok, "")
				require.Equal(t, http.StatusNotFound, r.status, "%s %s", m, id)
				if want == nil {
					want = r.body
				}
				require.Equal(t, string(want), string(r.body), "a foreign batch answers like a missing one")
			}
			r := b.do(t, http.MethodGet, "/v1/batches/"+id+"/events", tok, "")
			require.Equal(t, http.StatusNotFound, r.status)
			require.Equal(t, string(want), string(r.body))
		}
	}
	require.Equal(t, 2, b.stateCount(t, owner, v.ID, "queued"), "nothing was canceled")
}

func (b *testBundle) stateCount(t *testing.T, tok, id, state string) int {
	t.Helper()
	r := b.do(t, http.MethodGet, "/v1/batches/"+id, tok, "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	return r.batch(t).Counts[state]
}

// A gateway that dies between the batch's commit and its items (here the
// failpoint's error stands for the crash) leaves a batch whose retry
// through any gateway admits every item, once.
func TestBatchRetryAfterACrashBeforeItsItems(t *testing.T) {
	t.Parallel()
	fp, err := failpoint.Parse(failpoint.GatewayBatchAfterCommit + "=error")
	require.NoError(t, err)
	_, b := setup(t, func(c *Config) { c.Failpoints = fp })
	tok := b.token(t, "4", "reviewer-47", false)
	body := batchBody(30, nil)
	// The failpoint's 500 is no answer of the API: sent past the spec check.
	req, err := http.NewRequest(http.MethodPost, b.url+"/v1/batches", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Idempotency-Key", "k")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusInternalServerError, resp.StatusCode)
	require.Equal(t, 1, b.countBatches(t), "committed")
	require.Equal(t, 0, b.countJobs(t), "no item yet")

	b.stop() // the gateway "crashed"; another starts on the same deployment
	b.start(t)
	again := b.postBatch(t, tok, "k", body)
	require.Equal(t, http.StatusOK, again.status, "%s", again.body)
	require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
	v := again.batch(t)
	require.Len(t, v.Jobs, 30)
	require.Equal(t, 30, b.countJobs(t), "every item one job")
	for _, j := range v.Jobs {
		require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/v1/jobs/"+j.ID, tok, "").status)
	}
	require.Equal(t, v.ids(), b.postBatch(t, tok, "k", body).batch(t).ids(), "the same ids again")
	require.Equal(t, 30, b.countJobs(t))
}

// The batch resource counts its items' states, answers 304 to its ETag and
// long-polls until an item changes; DELETE cancels every item not
// terminal, and then the batch is done.
func TestBatchCountsLongPollAndCancel(t *testing.T) {
	t.Parallel()
	g, b := setup(t)
	tok := b.token(t, "4", "reviewer-47", false)
	v := b.postBatch(t, tok, "k", batchBody(3, nil)).batch(t)
	r := b.do(t, http.MethodGet, "/v1/batches/"+v.ID, tok, "")
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, 3, r.batch(t).Counts["queued"])
	require.False(t, r.batch(t).Done)
	require.NotEmpty(t, r.header.Get("Retry-After"))
	tag := r.header.Get("ETag")
	require.NotEmpty(t, tag)
	require.Equal(t, http.StatusNotModified, b.do(t, http.MethodGet, "/v1/batches/"+v.ID, tok, "", "If-None-Match: "+tag).status)

	// A long-poll answers once an item changes.
	polled := make(chan response, 1)
	go func() {
		r, err := b.try(http.MethodGet, "/v1/batches/"+v.ID+"?wait=25s", tok, "", "If-None-Match: "+tag)
		if err != nil {
			r.status = -1
		}
		polled <- r
	}()
	require.Eventually(t, func() bool { return g.changes.watchers() >= 3 }, 10*time.Second, 5*time.Millisecond)
	start := time.Now()
	b.advance(t, "4", "reviewer-47", v.Jobs[1].ID, func(r *job.Record) error { return r.Claim("w1", time.Now()) })
	var p response
	select {
	case p = <-polled:
	case <-time.After(20 * time.Second):
		t.Fatal("the long-poll did not answer the change")
	}
	require.Less(t, time.Since(start), 15*time.Second)
	require.Equal(t, http.StatusOK, p.status, "%s", p.body)
	require.Equal(t, 1, p.batch(t).Counts["running"])
	require.NotEqual(t, tag, p.header.Get("ETag"))

	require.Equal(t, http.StatusAccepted, b.do(t, http.MethodDelete, "/v1/jobs/"+v.Jobs[0].ID, tok, "").status)
	del := b.do(t, http.MethodDelete, "/v1/batches/"+v.ID, tok, "")
	require.Equal(t, http.StatusAccepted, del.status, "%s", del.body)
	d := del.batch(t)
	require.True(t, d.Done)
	require.Equal(t, 3, d.Counts["canceled"])
	require.Equal(t, 3, d.Progress.Done)
	for _, j := range v.Jobs {
		require.Equal(t, job.StateCanceled, b.stateOf(t, "4", "reviewer-47", j.ID))
	}
	again := b.do(t, http.MethodDelete, "/v1/batches/"+v.ID, tok, "")
	require.Equal(t, http.StatusConflict, again.status)
	require.Equal(t, "/problems/job-terminal", again.json(t)["type"])
	done := b.do(t, http.MethodGet, "/v1/batches/"+v.ID, tok, "")
	require.True(t, done.batch(t).Done)
	require.Empty(t, done.header.Get("Retry-After"))
}

// The batch's event stream sends the batch at once, one event per change,
// and ends once it is done; a reconnect with the last id answers 204.
func TestBatchEventsEndWhenDone(t *testing.T) {
	t.Parallel()
	g, b := setup(t)
	tok := b.token(t, "4", "reviewer-47", false)
	v := b.postBatch(t, tok, "k", batchBody(2, nil)).batch(t)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.url+"/v1/batches/"+v.ID+"/events", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := b.http.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	type ev struct {
		id    string
		batch batchBodyJSON
	}
	events := make(chan ev, 16)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		var id, name string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && name == "batch":
				var e ev
				if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &e.batch) == nil {
					e.id = id
					events <- e
				}
			}
		}
	}()
	next := func() (ev, bool) {
		select {
		case e, ok := <-events:
			return e, ok
		case <-ctx.Done():
			t.Fatal("no event")
		}
		return ev{}, false
	}
	first, ok := next()
	require.True(t, ok)
	require.Equal(t, "0", first.id)
	require.Equal(t, 2, first.batch.Counts["queued"])
	require.Empty(t, first.batch.Jobs, "events carry no job list")
	require.Eventually(t, func() bool { return g.changes.watchers() >= 2 }, 10*time.Second, 5*time.Millisecond)

	b.advance(t, "4", "reviewer-47", v.Jobs[0].ID, func(r *job.Record) error { return r.Claim("w1", time.Now()) })
	e, ok := next()
	require.True(t, ok)
	require.Equal(t, "1", e.id)
	require.Equal(t, 1, e.batch.Counts["running"])
	// A progress step is no change of the batch: no event for it.
	b.advance(t, "4", "reviewer-47", v.Jobs[0].ID, func(r *job.Record) error {
		r.SetProgress(job.Progress{Done: 1, Total: 2, Unit: "pages"}, time.Now())
		return nil
	})
	require.Equal(t, http.StatusAccepted, b.do(t, http.MethodDelete, "/v1/batches/"+v.ID, tok, "").status)
	var last ev
	for { // the stream must end by itself once the batch is done
		e, ok := next()
		if !ok {
			break
		}
		last = e
	}
	require.True(t, last.batch.Done, "the stream ends with the done batch")
	require.Equal(t, "4", last.id)
	ids, _ := strconv.Atoi(last.id)
	require.Equal(t, 2*2, ids)

	r := b.do(t, http.MethodGet, "/v1/batches/"+v.ID+"/events", tok, "", "Last-Event-ID: "+last.id)
	require.Equal(t, http.StatusNoContent, r.status)
}

package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// resource is the part of the job resource the clients and the checker
// look at.
type resource struct {
	ID       string `json:"id"`
	State    string `json:"state"`
	Attempt  int    `json:"attempt"`
	Progress *struct {
		Done int `json:"done"`
	} `json:"progress"`
	Result *struct {
		Href   string `json:"href"`
		SHA256 string `json:"sha256"`
	} `json:"result"`
}

func (r *resource) done() int {
	if r.Progress == nil {
		return 0
	}
	return r.Progress.Done
}

// api is raw net/http access to the gateways, so every answer is seen and
// recorded as it came.
type api struct {
	gateways []string // base URLs
	tokens   map[string]string
	short    *http.Client // submits, cancels, plain reads
	long     *http.Client // long-polls
	stream   *http.Client // SSE (deadline per connection via ctx)
}

func newAPI(gateways []string, tokens map[string]string) *api {
	tr := func() *http.Transport {
		return &http.Transport{MaxIdleConnsPerHost: 32, IdleConnTimeout: 30 * time.Second, ResponseHeaderTimeout: 20 * time.Second}
	}
	return &api{
		gateways: gateways, tokens: tokens,
		short:  &http.Client{Timeout: 5 * time.Second, Transport: tr()},
		long:   &http.Client{Timeout: 20 * time.Second, Transport: tr()},
		stream: &http.Client{Transport: tr(), CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
	}
}

func (a *api) do(ctx context.Context, hc *http.Client, method, url, requester string, body []byte, hdr map[string]string) (*http.Response, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+a.tokens[requester])
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return resp, nil, err
	}
	return resp, data, nil
}

// retryable: answers and errors after which a client tries again with the
// same key.
func retryable(status int, err error) bool {
	return err != nil || status == http.StatusTooManyRequests || status >= 500
}

// pause is how long to wait before the next try: the answer's Retry-After
// (capped at 2s) or an exponential backoff, with jitter.
func pause(rng *rand.Rand, n int, resp *http.Response) time.Duration {
	d := time.Duration(min(100<<min(n, 4), 1000)) * time.Millisecond
	if resp != nil {
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			d = min(time.Duration(s)*time.Second, 2*time.Second)
		}
	}
	return d/2 + time.Duration(rng.Int64N(int64(d)))
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// acked is a key a client got a 2xx for.
type acked struct {
	key  string
	body []byte
	job  string
	// A batch's key (POST /v1/batches): its items' bodies and its notice
	// choice, from which a conflicting body is made.
	batch  bool
	items  [][]byte
	notify string
}

// batchResource is the part of the batch resource the clients and the
// snapshot look at.
type batchResource struct {
	ID         string         `json:"id"`
	CreatedAt  time.Time      `json:"created_at"`
	Done       bool           `json:"done"`
	Total      int            `json:"total"`
	Notify     string         `json:"notify"`
	Counts     map[string]int `json:"counts"`
	Jobs       []Item         `json:"jobs"`
	NextCursor string         `json:"next_cursor"`
}

// clientStats counts what the clients did, for the summary.
type clientStats struct {
	attempts, answered2xx, retries, gaveUp, follows, cancels atomic.Int64
}

// client submits jobs with keys, replays and misuses some keys on purpose,
// follows some jobs and cancels a few. Its random choices come from its
// own seeded source.
type client struct {
	id        int
	requester string
	rng       *rand.Rand
	api       *api
	h         *History
	stats     *clientStats
	follow    chan struct{} // follower slots
	followers *sync.WaitGroup
	opts      *Options
	acked     []acked
	n, nb     int
	jobs      func(requester, id string)
	batches   func(requester, id, notify string, jobs []string)
}

func (c *client) gateway() string { return c.api.gateways[c.rng.IntN(len(c.api.gateways))] }

// run submits until submitting ends; every submission it started it
// finishes (retrying until settle ends).
func (c *client) run(submitting, settle context.Context) {
	for submitting.Err() == nil {
		switch p := c.rng.IntN(100); {
		case p < c.opts.ReplayPct && len(c.acked) > 0:
			a := c.acked[c.rng.IntN(len(c.acked))]
			if a.batch {
				c.submitBatch(settle, "replay", a.key, a.body, len(a.items), a.notify)
			} else {
				c.submit(settle, "replay", a.key, a.body)
			}
		case p < c.opts.ReplayPct+c.opts.ConflictPct && len(c.acked) > 0:
			a := c.acked[c.rng.IntN(len(c.acked))]
			if a.batch {
				items, notify := c.conflicting(a)
				c.submitBatch(settle, "conflict", a.key, batchBody(items, notify), len(items), orBatch(notify))
			} else {
				c.submit(settle, "conflict", a.key, c.body())
			}
		case c.rng.IntN(100) < c.opts.BatchPct:
			c.newBatch(settle)
		default:
			c.n++
			key := fmt.Sprintf("k-%d-%d", c.id, c.n)
			body := c.body()
			if id := c.submit(settle, "new", key, body); id != "" {
				c.acked = append(c.acked, acked{key: key, body: body, job: id})
				c.jobs(c.requester, id)
				c.afterAdmit(settle, id)
			}
		}
		sleepCtx(submitting, c.opts.Think/2+time.Duration(c.rng.Int64N(int64(c.opts.Think))))
	}
}

func (c *client) body() []byte {
	// A share of the jobs waits for a run_at a few seconds ahead (delay);
	// a share is of the flow-limited type (flowType) instead of a report.
	// The draws are only made when asked for, so a seed of an earlier run
	// replays the same submissions without them.
	delay := ""
	if c.opts.ScheduledPct > 0 && c.rng.IntN(100) < c.opts.ScheduledPct {
		delay = fmt.Sprintf(`,"delay":"%dms"`, 2000+c.rng.IntN(4000))
	}
	if c.opts.FlowPct > 0 && c.rng.IntN(100) < c.opts.FlowPct {
		return fmt.Appendf(nil, `{"type":%q,"params":{"customer":%q,"n":%d}%s}`,
			flowType, flowCustomers[c.rng.IntN(len(flowCustomers))], 1+c.rng.IntN(1_000_000), delay)
	}
	pages := 1 + c.rng.IntN(12)
	if c.rng.IntN(10) == 0 {
		pages = 40 + c.rng.IntN(160) // renders long enough to be hit mid-way
	}
	return fmt.Appendf(nil, `{"type":"permit_report","params":{"case_id":%d,"revision":%d,"pages":%d}%s}`,
		1+c.rng.IntN(1_000_000), 1+c.rng.IntN(50), pages, delay)
}

// newBatch submits a batch of 2-5 jobs (the singles' bodies) under a fresh
// key, notified as one or each on its own. Batch keys are "b-" keys: the
// gateway hashes a batch's key as a job's, so a shared name would make
// the checker's one-job-per-key-hash check see two owners of one hash.
// One random item is then canceled or followed as a single job may be.
func (c *client) newBatch(settle context.Context) {
	c.nb++
	key := fmt.Sprintf("b-%d-%d", c.id, c.nb)
	items := make([][]byte, 2+c.rng.IntN(4))
	for i := range items {
		items[i] = c.body()
	}
	// The default (no "notify") is "batch"; a third of those say so.
	notify := ""
	switch c.rng.IntN(4) {
	case 1:
		notify = "batch"
	case 2, 3:
		notify = "each"
	}
	body := batchBody(items, notify)
	r := c.submitBatch(settle, "new", key, body, len(items), orBatch(notify))
	if r == nil {
		return
	}
	ids := itemIDs(r.Jobs)
	c.acked = append(c.acked, acked{key: key, body: body, batch: true, items: items, notify: notify})
	c.batches(c.requester, r.ID, orBatch(notify), ids)
	c.afterAdmit(settle, ids[c.rng.IntN(len(ids))])
}

// conflicting returns another request under a's batch key: the same items
// with the other notice choice (part of the request, so 409 too), or
// other items.
func (c *client) conflicting(a acked) ([][]byte, string) {
	if c.rng.IntN(2) == 0 {
		if orBatch(a.notify) == "batch" {
			return a.items, "each"
		}
		return a.items, "batch"
	}
	items := make([][]byte, 2+c.rng.IntN(4))
	for i := range items {
		items[i] = c.body()
	}
	return items, a.notify
}

func batchBody(items [][]byte, notify string) []byte {
	b := []byte(`{"jobs":[`)
	b = append(b, bytes.Join(items, []byte(","))...)
	b = append(b, ']')
	if notify != "" {
		b = fmt.Appendf(b, `,"notify":%q`, notify)
	}
	return append(b, '}')
}

// orBatch is a notice choice as it takes effect: none is "batch".
func orBatch(notify string) string {
	if notify == "" {
		return "batch"
	}
	return notify
}

// submitBatch posts a batch until a definitive answer, retried as submit
// retries (same key, same body, any gateway), and returns the batch of a
// 2xx that names one.
func (c *client) submitBatch(ctx context.Context, probe, key string, body []byte, size int, notify string) *batchResource {
	for n := 0; ; n++ {
		gw := c.gateway()
		e := Entry{Kind: "batch-submit", Client: c.id, Requester: c.requester, Key: key, Probe: probe, Gateway: gw, Start: time.Now(),
			Size: int64(size), Notify: notify}
		c.stats.attempts.Add(1)
		resp, data, err := c.api.do(ctx, c.api.short, http.MethodPost, gw+"/v1/batches", c.requester, body, map[string]string{"Idempotency-Key": key})
		e.End = time.Now()
		if resp != nil {
			e.Status = resp.StatusCode
			e.Replayed = resp.Header.Get("Idempotent-Replayed") == "true"
		}
		if err != nil {
			e.Err = err.Error()
		}
		var r *batchResource
		if err == nil && resp.StatusCode/100 == 2 {
			r = new(batchResource)
			if jerr := json.Unmarshal(data, r); jerr != nil || r.ID == "" || len(r.Jobs) == 0 {
				e.Err = fmt.Sprintf("2xx without a batch and its jobs: %v", jerr)
			}
			e.Batch, e.Created, e.Items = r.ID, r.CreatedAt, r.Jobs
		}
		c.h.Add(e)
		if !retryable(e.Status, err) {
			if e.Status/100 != 2 {
				return nil
			}
			c.stats.answered2xx.Add(1)
			if e.Err != "" {
				return nil
			}
			return r
		}
		c.stats.retries.Add(1)
		if !sleepCtx(ctx, pause(c.rng, n, resp)) {
			c.stats.gaveUp.Add(1)
			c.h.Add(Entry{Kind: "batch-gave-up", Client: c.id, Requester: c.requester, Key: key, Probe: probe, Note: fmt.Sprintf("after %d attempts", n+1)})
			return nil
		}
	}
}

// submit posts until a definitive answer and returns the job id of a 2xx.
func (c *client) submit(ctx context.Context, probe, key string, body []byte) string {
	for n := 0; ; n++ {
		gw := c.gateway()
		e := Entry{Kind: "submit", Client: c.id, Requester: c.requester, Key: key, Probe: probe, Gateway: gw, Start: time.Now()}
		c.stats.attempts.Add(1)
		resp, data, err := c.api.do(ctx, c.api.short, http.MethodPost, gw+"/v1/jobs", c.requester, body, map[string]string{"Idempotency-Key": key})
		e.End = time.Now()
		if resp != nil {
			e.Status = resp.StatusCode
			e.Replayed = resp.Header.Get("Idempotent-Replayed") == "true"
		}
		if err != nil {
			e.Err = err.Error()
		}
		if err == nil && resp.StatusCode/100 == 2 {
			var r resource
			if jerr := json.Unmarshal(data, &r); jerr != nil || r.ID == "" {
				e.Err = fmt.Sprintf("2xx without a job: %v", jerr)
			}
			e.Job, e.State, e.Attempt = r.ID, r.State, r.Attempt
			e.Rev = etagRev(resp.Header.Get("ETag"))
		}
		c.h.Add(e)
		if !retryable(e.Status, err) {
			if e.Status/100 == 2 {
				c.stats.answered2xx.Add(1)
			}
			return e.Job
		}
		c.stats.retries.Add(1)
		if !sleepCtx(ctx, pause(c.rng, n, resp)) {
			c.stats.gaveUp.Add(1)
			c.h.Add(Entry{Kind: "gave-up", Client: c.id, Requester: c.requester, Key: key, Probe: probe, Note: fmt.Sprintf("after %d attempts", n+1)})
			return ""
		}
	}
}

// afterAdmit maybe cancels the job and maybe follows it (poll or SSE) in
// a goroutine of its own.
func (c *client) afterAdmit(ctx context.Context, id string) {
	cancelIt := c.rng.IntN(100) < c.opts.CancelPct
	mode := c.rng.IntN(100)
	seed := c.rng.Uint64()
	if cancelIt {
		c.stats.cancels.Add(1)
		c.followers.Go(func() {
			rng := rand.New(rand.NewPCG(seed, 1))
			sleepCtx(ctx, time.Duration(rng.IntN(800))*time.Millisecond)
			c.cancel(ctx, rng, id)
		})
	}
	if mode >= c.opts.FollowPct {
		return
	}
	select {
	case c.follow <- struct{}{}:
	default:
		return // enough followers already
	}
	c.stats.follows.Add(1)
	c.followers.Go(func() {
		defer func() { <-c.follow }()
		f := &follower{c: c, rng: rand.New(rand.NewPCG(seed, 2)), id: id}
		if mode%2 == 0 {
			f.poll(ctx)
		} else {
			f.sse(ctx)
		}
	})
}

func (c *client) cancel(ctx context.Context, rng *rand.Rand, id string) {
	for n := 0; ; n++ {
		gw := c.api.gateways[rng.IntN(len(c.api.gateways))]
		e := Entry{Kind: "cancel", Client: c.id, Requester: c.requester, Job: id, Gateway: gw, Start: time.Now()}
		resp, data, err := c.api.do(ctx, c.api.short, http.MethodDelete, gw+"/v1/jobs/"+id, c.requester, nil, nil)
		e.End = time.Now()
		if resp != nil {
			e.Status = resp.StatusCode
		}
		if err != nil {
			e.Err = err.Error()
		}
		if e.Status == http.StatusAccepted {
			var r resource
			_ = json.Unmarshal(data, &r)
			e.State, e.Attempt, e.Rev = r.State, r.Attempt, etagRev(resp.Header.Get("ETag"))
		}
		c.h.Add(e)
		if !retryable(e.Status, err) || !sleepCtx(ctx, pause(rng, n, resp)) {
			return
		}
	}
}

// follower watches one job until it is terminal.
type follower struct {
	c   *client
	rng *rand.Rand
	id  string
}

func (f *follower) gateway() string { return f.c.api.gateways[f.rng.IntN(len(f.c.api.gateways))] }

// poll long-polls the job with If-None-Match through random gateways.
func (f *follower) poll(ctx context.Context) {
	etag := ""
	for n := 0; ctx.Err() == nil; n++ {
		gw := f.gateway()
		hdr := map[string]string{}
		url := gw + "/v1/jobs/" + f.id
		if etag != "" {
			hdr["If-None-Match"] = etag
			url += "?wait=10s"
		}
		start := time.Now()
		resp, data, err := f.c.api.do(ctx, f.c.api.long, http.MethodGet, url, f.c.requester, nil, hdr)
		end := time.Now()
		if err != nil || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
			sleepCtx(ctx, pause(f.rng, min(n, 3), resp))
			continue
		}
		e := Entry{Kind: "obs", Via: "poll", Client: f.c.id, Requester: f.c.requester, Job: f.id, Gateway: gw,
			Start: start, End: end, Status: resp.StatusCode, Rev: etagRev(resp.Header.Get("ETag"))}
		if resp.StatusCode == http.StatusOK {
			var r resource
			if err := json.Unmarshal(data, &r); err != nil {
				e.Err = err.Error()
			}
			e.State, e.Attempt, e.Done = r.State, r.Attempt, r.done()
			etag = resp.Header.Get("ETag")
		}
		f.c.h.Add(e)
		if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNotModified {
			return // 404 and the like: recorded, the checker judges
		}
		if terminal(e.State) {
			return
		}
		if etag == "" {
			sleepCtx(ctx, 300*time.Millisecond)
		}
	}
}

// sse follows the job's event stream, reconnecting with Last-Event-ID
// through random gateways until the stream ends after a terminal event
// (or a reconnect answers 204).
func (f *follower) sse(ctx context.Context) {
	last := ""
	for conn := 1; ctx.Err() == nil; conn++ {
		gw := f.gateway()
		done, err := f.sseOnce(ctx, gw, conn, &last)
		if done {
			return
		}
		_ = err
		sleepCtx(ctx, time.Duration(100+f.rng.IntN(400))*time.Millisecond)
	}
}

func (f *follower) sseOnce(ctx context.Context, gw string, conn int, last *string) (bool, error) {
	// A stopped gateway keeps the connection open and silent: reconnect
	// elsewhere after a while.
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodGet, gw+"/v1/jobs/"+f.id+"/events", nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Authorization", "Bearer "+f.c.api.tokens[f.c.requester])
	req.Header.Set("Accept", "text/event-stream")
	if *last != "" {
		req.Header.Set("Last-Event-ID", *last)
	}
	start := time.Now()
	resp, err := f.c.api.stream.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	note := fmt.Sprintf("sse#%d", conn)
	if resp.StatusCode == http.StatusNoContent {
		f.c.h.Add(Entry{Kind: "obs", Via: "sse-end", Client: f.c.id, Requester: f.c.requester, Job: f.id, Gateway: gw,
			Start: start, End: time.Now(), Status: resp.StatusCode, Rev: parseUint(*last), Note: note})
		return true, nil
	}
	if resp.StatusCode != http.StatusOK {
		if resp.StatusCode == http.StatusNotFound {
			f.c.h.Add(Entry{Kind: "obs", Via: "sse", Client: f.c.id, Requester: f.c.requester, Job: f.id, Gateway: gw,
				Start: start, End: time.Now(), Status: resp.StatusCode, Note: note})
			return true, nil
		}
		return false, fmt.Errorf("status %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var id, event string
	var data strings.Builder
	sawTerminal := false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if event == "job" && data.Len() > 0 {
				var r resource
				e := Entry{Kind: "obs", Via: "sse", Client: f.c.id, Requester: f.c.requester, Job: f.id, Gateway: gw,
					Start: start, End: time.Now(), Status: http.StatusOK, Rev: parseUint(id), Note: note}
				if err := json.Unmarshal([]byte(data.String()), &r); err != nil {
					e.Err = err.Error()
				}
				e.State, e.Attempt, e.Done = r.State, r.Attempt, r.done()
				f.c.h.Add(e)
				*last = id
				sawTerminal = sawTerminal || terminal(r.State)
			}
			id, event = "", ""
			data.Reset()
		case strings.HasPrefix(line, "id:"):
			id = strings.TrimSpace(strings.TrimPrefix(line, "id:"))
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	// The stream ends after a terminal event; anything else is a cut.
	return sawTerminal, sc.Err()
}

func newRand(seed, stream uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, stream)) }

func terminal(state string) bool {
	return state == "succeeded" || state == "failed" || state == "canceled"
}

// rank orders states: queued < running < terminal.
func rank(state string) int {
	switch state {
	case "queued":
		return 1
	case "running":
		return 2
	case "succeeded", "failed", "canceled":
		return 3
	}
	return 0
}

func etagRev(tag string) uint64 {
	return parseUint(strings.Trim(strings.TrimPrefix(tag, "W/"), `"`))
}

func parseUint(s string) uint64 {
	n, _ := strconv.ParseUint(s, 10, 64)
	return n
}

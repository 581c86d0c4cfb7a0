package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/sse"
	"github.com/valyala/fasthttp"
)

// SecBatch is the batch section, the last of AllSections: what batches
// cost and save against one job per request, each figure against its
// baseline in the same run.
const SecBatch = "batch"

// batchItems is the batch a reviewer starts in the watch figures: 20
// revisions of a case.
const batchItems = 20

// Batch watch modes, in the order they run.
var batchWatchModes = []string{"per-job Retry-After polling", "requester stream GET /v1/events", "batch stream GET /v1/batches/{id}/events"}

// batchSuite: admission of batches against single POSTs (items/s), then
// Watchers reviewers each starting a batch of batchItems reports and
// watching it for WatchWindow in each mode while the change driver advances
// every job once per ChangeInterval and publishes its event, as a renderer
// would; then the target's RSS with SSEStreams requester streams open.
func (r *runner) batchSuite(ctx context.Context) error {
	p, err := r.start([]string{"gateway"}, false, 0)
	if err != nil {
		return err
	}
	if p != nil {
		defer p.stop()
	}
	a, err := r.apiFor(p, "batch")
	if err != nil {
		return err
	}
	if err := r.batchAdmission(ctx, p, a); err != nil {
		return err
	}
	if err := r.batchWatch(ctx, p, a); err != nil {
		return err
	}
	if p == nil {
		return nil
	}
	return r.requesterStreamsRSS(ctx)
}

func (r *runner) batchAdmission(ctx context.Context, p *proc, a *api) error {
	n := r.o.Clients
	tokens := make([]string, n)
	for w := range tokens {
		tokens[w] = a.token("adm-" + strconv.Itoa(w))
	}
	r.logf("batch: single POSTs, %d clients, %s", n, r.o.Duration)
	body := permitBody(47, 29, 1)
	var single Summary
	u := r.measure(p, "batch-single", func() {
		single = closedLoop(ctx, n, r.o.Duration, 0, func(w, i int) error {
			st, _, err := a.submit(tokens[w], fmt.Sprintf("single-%d-%d", w, i), body)
			return expect(st, http.StatusAccepted, err)
		})
	})
	base := r.rep.add(Row{Section: SecBatch, Name: fmt.Sprintf("admission, single POST /v1/jobs, %d clients", n), Fsync: "default",
		Value: single.Rate, Unit: "items/s", Summary: &single, Note: noteErrors(&single, "")}).use(u)
	for _, size := range []int{batchItems, job.MaxBatchItems} {
		bb := batchBody(size, 47, 1)
		r.logf("batch: batches of %d, %d clients, %s", size, n, r.o.Duration)
		var s Summary
		u := r.measure(p, "batch-"+strconv.Itoa(size), func() {
			s = closedLoop(ctx, n, r.o.Duration, 0, func(w, i int) error {
				st, _, err := a.submitBatch(tokens[w], fmt.Sprintf("batch-%d-%d-%d", size, w, i), bb)
				return expect(st, http.StatusAccepted, err)
			})
		})
		items := s.Rate * float64(size)
		row := r.rep.add(Row{Section: SecBatch, Name: fmt.Sprintf("admission, POST /v1/batches of %d, %d clients", size, n), Fsync: "default",
			Value: items, Unit: "items/s", Summary: &s,
			Note: noteErrors(&s, fmt.Sprintf("%.1f batches/s; latency is per batch", s.Rate))}).use(u)
		if s.Rate > 0 {
			row.ServerCPUPerOp = u.srv / items * 1e6 // per item, as the single POST's is per job
		}
		relate(row, base, "single POST")
	}
	return nil
}

func (r *runner) batchWatch(ctx context.Context, p *proc, a *api) error {
	reviewers := r.o.Watchers
	var polling *Row
	for mi, mode := range batchWatchModes {
		// Fresh batches per mode, so every mode sees the same ages and changes.
		batches := make([]string, reviewers)
		jobs := make([][]string, reviewers)
		var keys []string
		bb := batchBody(batchItems, 47, 63)
		for i := range reviewers {
			requester := fmt.Sprintf("reviewer-%d-%d", mi, i) // own requester per mode: each stream sees only its mode's jobs
			st, body, err := a.submitBatch(a.token(requester), "watch-"+strconv.Itoa(i), bb)
			if err := expect(st, http.StatusAccepted, err); err != nil {
				return fmt.Errorf("bench: batch watch: %w", err)
			}
			var res struct {
				ID   string `json:"id"`
				Jobs []struct {
					ID string `json:"id"`
				} `json:"jobs"`
			}
			if err := json.Unmarshal(body, &res); err != nil || len(res.Jobs) != batchItems {
				return fmt.Errorf("bench: batch watch: the batch's answer: %v (%d jobs)", err, len(res.Jobs))
			}
			batches[i] = res.ID
			for _, j := range res.Jobs {
				jobs[i] = append(jobs[i], j.ID)
				keys = append(keys, job.StoreKey(a.tenant, requester, j.ID))
			}
		}
		if p != nil {
			if _, err := p.call(Request{Op: opDrive, Keys: keys, Interval: r.o.ChangeInterval, Pages: 63, Events: true}); err != nil {
				return err
			}
		}
		r.logf("batch watch: %d reviewers × %d jobs, %s, %s", reviewers, batchItems, mode, r.o.WatchWindow)
		var requests, seen, failures atomic.Int64
		u := r.measure(p, "batch-watch-"+strconv.Itoa(mi), func() {
			wctx, cancel := context.WithTimeout(ctx, r.o.WatchWindow)
			defer cancel()
			var wg sync.WaitGroup
			for i := range reviewers {
				tok := a.token(fmt.Sprintf("reviewer-%d-%d", mi, i))
				switch mi {
				case 0: // every job of the batch polled on its own, as a page without batches would
					for _, id := range jobs[i] {
						wg.Go(func() {
							w := &watcher{a: a, tok: tok, id: id, requests: &requests, seen: &seen, failures: &failures}
							w.run(wctx, 1)
						})
					}
				default:
					path := "/v1/events"
					if mi == 2 {
						path = "/v1/batches/" + batches[i] + "/events"
					}
					wg.Go(func() { followAll(wctx, a, tok, path, mi == 2, &requests, &seen, &failures) })
				}
			}
			wg.Wait()
		})
		var changes int64
		if p != nil {
			resp, err := p.call(Request{Op: opDriveStop})
			if err != nil {
				return err
			}
			changes = resp.Changes
		}
		perMin := float64(requests.Load()) / r.o.WatchWindow.Minutes()
		what := "job changes seen by watchers"
		if mi == 2 {
			what = "batch changes seen (a batch changes when an item's state moves on, not at a progress step)"
		}
		row := r.rep.add(Row{Section: SecBatch, Name: fmt.Sprintf("%d reviewers × batch of %d, %s", reviewers, batchItems, mode), Fsync: "default",
			Value: perMin, Unit: "HTTP req/min",
			Note: fmt.Sprintf("%d job changes made, %d %s", changes, seen.Load(), what)}).use(u)
		if f := failures.Load(); f > 0 {
			row.Note += fmt.Sprintf(", %d failed requests", f)
		}
		if mi == 0 {
			polling = row
			continue
		}
		relate(row, polling, "per-job polling")
		goal(row, "≤ 0.01× per-job polling", polling != nil && row.Ratio <= 0.01)
	}
	return nil
}

// followAll holds one event stream at path for as long as ctx lasts,
// reconnecting with Last-Event-ID when it ends (a batch stream that ends
// because its batch is done answers 204 to that, and is not asked again).
func followAll(ctx context.Context, a *api, tok, path string, batchEvents bool, requests, seen, failures *atomic.Int64) {
	last := ""
	for ctx.Err() == nil {
		requests.Add(1)
		first := batchEvents && last == "" // a batch stream's first event is its state at connect
		status, err := a.stream(ctx, tok, path, last, nil, func(ev sse.Event) bool {
			if ev.ID != "" {
				last = ev.ID
			}
			if ev.Name == "job" || ev.Name == "batch" {
				if !first {
					seen.Add(1)
				}
				first = false
			}
			return false
		})
		if status == http.StatusNoContent {
			<-ctx.Done()
			return
		}
		if err != nil && ctx.Err() == nil {
			failures.Add(1)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

// requesterStreamsRSS measures the target's RSS (gateway and dispatcher,
// as the footprint section runs them) idle and with SSEStreams requester
// streams open, one per requester: GET /v1/events is an ordered consumer
// on JOBGATE_EVENTS per stream, where a job stream is one registration in
// the gateway's change feed.
func (r *runner) requesterStreamsRSS(ctx context.Context) error {
	p, err := r.start([]string{"dispatcher", "gateway"}, false, 0)
	if err != nil {
		return err
	}
	defer p.stop()
	a, err := r.apiFor(p, "rss")
	if err != nil {
		return err
	}
	time.Sleep(2 * time.Second) // let start-up settle, as the footprint section does
	idle := r.rep.add(Row{Section: SecBatch, Name: "target RSS idle", Fsync: "default", Value: mib(p.rss()), Unit: "MiB"})
	if m, err := p.mem(); err == nil {
		idle.Note = memNote(m)
	}
	n := r.o.SSEStreams
	r.logf("batch: %d requester streams", n)
	sctx, closeStreams := context.WithCancel(ctx)
	defer closeStreams()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var streamErr error
	for i := range n {
		tok := a.token("stream-" + strconv.Itoa(i))
		wg.Go(func() {
			_, err := a.stream(sctx, tok, "/v1/events", "", nil, func(sse.Event) bool { return false })
			if err != nil && sctx.Err() == nil {
				mu.Lock()
				streamErr = errors.Join(streamErr, err)
				mu.Unlock()
			}
		})
	}
	open := int64(0)
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		m, err := p.mem()
		if err != nil {
			closeStreams()
			wg.Wait()
			return err
		}
		if open = m.SSEStreams; open >= int64(n) {
			break
		}
	}
	time.Sleep(time.Second)
	row := r.rep.add(Row{Section: SecBatch, Name: fmt.Sprintf("target RSS with %d requester streams (GET /v1/events) open", n), Fsync: "default",
		Value: mib(p.rss()), Unit: "MiB"})
	relate(row, idle, "idle")
	goal(row, "≤ 100 MiB", open >= int64(n) && row.Value <= 100)
	if m, err := p.mem(); err == nil {
		row.Note = fmt.Sprintf("%d streams open; %s", m.SSEStreams, memNote(m))
	}
	if fp := r.rep.find(SecFootprint, fmt.Sprintf("target RSS with %d SSE streams open", n), "default"); fp != nil {
		row.Note += fmt.Sprintf("; job streams in this run's footprint section: %.1f MiB", fp.Value)
	}
	r.profile(p, opHeapProfile, "batch-requester-streams-heap.pprof")
	closeStreams()
	wg.Wait()
	if streamErr != nil {
		row.Note += "; stream errors: " + streamErr.Error()
	}
	return nil
}

// batchBody is a batch of n permit reports, revisions 1..n of the case.
func batchBody(n, caseID, pages int) []byte {
	var b strings.Builder
	b.WriteString(`{"jobs":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(permitBody(caseID, i+1, pages))
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// submitBatch POSTs a batch; it returns the status and the answer's body.
func (a *api) submitBatch(tok, key string, body []byte) (int, []byte, error) {
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(a.base + "/v1/batches")
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.Set("Authorization", tok)
	req.Header.Set("Idempotency-Key", key)
	req.Header.SetContentType("application/json")
	req.SetBodyRaw(body)
	if err := a.hc.Do(req, resp); err != nil {
		return 0, nil, err
	}
	return resp.StatusCode(), append([]byte(nil), resp.Body()...), nil
}

// stream reads the event stream at path and calls onEvent for every event
// until it returns true, the stream ends or ctx is done. It returns the
// response's status (204: nothing more will come).
func (a *api) stream(ctx context.Context, tok, path, lastEventID string, opened func(), onEvent func(sse.Event) bool) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.base+path, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", tok)
	req.Header.Set("Accept", "text/event-stream")
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := a.std.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNoContent {
		return resp.StatusCode, nil
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, fmt.Errorf("%s: status %d", path, resp.StatusCode)
	}
	if opened != nil {
		opened()
	}
	err = sse.Read(resp.Body, nil, func(ev sse.Event) (bool, error) { return onEvent(ev), nil })
	if ctx.Err() != nil {
		return resp.StatusCode, nil
	}
	return resp.StatusCode, err
}

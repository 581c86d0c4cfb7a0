package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jobgate/jobgate/internal/auth"
)

// SecEndpoints is what an endpoint type costs (issue 35, "Measure"): a
// no-op handler, a net/http server in this process on loopback, called
// through the whole of serve (admission, the dispatcher's claim, the
// signed POST, the attempt's outcome recorded, the job succeeded),
// against the same handler called by a plain Go client in the same run,
// and against the same no-op job done by a worker (bench_noop, as in the
// pipeline section): what calling out over HTTP costs beside a worker.
const SecEndpoints = "endpoints"

// EndpointType is the endpoint type the endpoints section declares.
const EndpointType = "bench_endpoint"

// endpointConcurrency is the type's concurrency, and the plain client's
// number of connections: the same requests in flight on both paths, and
// as many as the bench_noop worker's slots it is compared with.
const endpointConcurrency = pipelineWorkers

// noopHandler is the endpoint: it reads the request and answers 204
// (succeeded, no result), counting the calls.
type noopHandler struct {
	srv   *http.Server
	url   string
	calls atomic.Int64
}

func startNoopHandler() (*noopHandler, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h := &noopHandler{url: "http://" + ln.Addr().String() + "/run"}
	h.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		h.calls.Add(1)
		w.WriteHeader(http.StatusNoContent)
	})}
	go func() { _ = h.srv.Serve(ln) }()
	return h, nil
}

func (h *noopHandler) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = h.srv.Shutdown(ctx)
}

// endpointsSuite runs, in interleaved rounds, the plain client and the
// endpoint type at saturation, then the endpoint type open loop at half
// its saturated rate for the latency from admission to succeeded.
func (r *runner) endpointsSuite(ctx context.Context) error {
	h, err := startNoopHandler()
	if err != nil {
		return err
	}
	defer h.stop()
	full := []string{"dispatcher", "renderer", "notifier", "gateway", "noop"}
	p, err := r.startEnv(full, false, 0, []string{"JOBGATE_ENDPOINT_ALLOW=127.0.0.0/8"})
	if err != nil {
		return err
	}
	if p == nil {
		return nil // --url: the handler must be reachable from the target, which is not ours
	}
	defer p.stop()
	a, err := r.apiFor(p, "ep")
	if err != nil {
		return err
	}
	if err := declareEndpointType(a, h.url); err != nil {
		return err
	}
	for _, typ := range []string{EndpointType, NoopType} {
		if err := awaitType(ctx, a, typ); err != nil {
			return err
		}
	}
	if _, err := p.call(Request{Op: opEndpointDone, Tenant: "ep"}); err != nil {
		return err
	}
	tokens := make([]string, pipelineInserters)
	for w := range tokens {
		tokens[w] = a.token("ep-" + strconv.Itoa(w))
	}
	// The plain client sends a body of the size jobgate's requests have.
	sample := bytes.Repeat([]byte("x"), 420)
	plainClient := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: endpointConcurrency, IdleConnTimeout: 30 * time.Second}}
	defer plainClient.CloseIdleConnections()

	var plain Samples
	var plainU, sysU usage
	var sys, work PipeResult
	var sysOps, workOps *PipeStats
	var workU usage
	var lat []time.Duration
	rd := r.o.Duration / 3
	for round := range 3 {
		r.logf("endpoints: plain Go client, %d connections, %s (round %d/3)", endpointConcurrency, rd, round+1)
		plainU.add(r.measure(nil, "", func() {
			plain.Add(closedLoopSamples(ctx, endpointConcurrency, rd, 0, func(int, int) error {
				resp, err := plainClient.Post(h.url, "application/json", bytes.NewReader(sample))
				if err != nil {
					return err
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				return expect(resp.StatusCode, http.StatusNoContent, nil)
			}))
		}))
		r.logf("endpoints: through jobgate, %d submitters, %s (round %d/3)", len(tokens), rd, round+1)
		var pr PipeResult
		var u usage
		var cerr error
		r.measure(p, fmt.Sprintf("endpoints-%d", round), func() {
			pr, u, lat, cerr = r.endpointRound(ctx, p, a, tokens, rd, round, lat)
		})
		if cerr != nil {
			return cerr
		}
		sysU.add(u)
		sys.add(pr)
		sysOps = sysOps.plus(pr.StatsDiff)

		r.logf("endpoints: bench_noop by a worker, %d submitters, %s (round %d/3)", len(tokens), rd, round+1)
		r.measure(p, fmt.Sprintf("endpoints-worker-%d", round), func() {
			pr, u, cerr = r.jobgatePipeline(ctx, p, a, tokens, rd, 10+round)
		})
		if cerr != nil {
			return cerr
		}
		workU.add(u)
		work.add(pr)
		workOps = workOps.plus(pr.StatsDiff)
	}
	ps := plain.Summary()
	plainRow := r.rep.add(Row{Section: SecEndpoints, Name: fmt.Sprintf("plain Go client → no-op handler, %d connections", endpointConcurrency), Fsync: "default",
		Value: ps.Rate, Unit: "calls/s", Summary: &ps, Note: noteErrors(&ps, "net/http, keep-alive, a 420-byte POST answered 204, in this process")}).use(plainU)
	plainRow.ServerCPUPerOp = 0 // the handler runs in this process: gen, not srv
	ls := Summarize(lat, 0, sys.Elapsed)
	sum := sys.summary()
	sum.P50, sum.P99, sum.P999, sum.Max = ls.P50, ls.P99, ls.P999, ls.Max
	sysRow := r.rep.add(Row{Section: SecEndpoints, Name: fmt.Sprintf("endpoint type → no-op handler, %d submitters, concurrency %d, admission → succeeded", len(tokens), endpointConcurrency),
		Fsync: "default", Value: sys.rate(), Unit: "calls/s", Summary: sum,
		Note: sys.note(fmt.Sprintf("admitted at %.0f jobs/s meanwhile; latency from created_at to finished_at (saturated: the backlog's wait included)", float64(sys.Inserted)/sys.Insert.Seconds())) + "; per job: " + sysOps.perJob(sys.Finished)}).use(sysU)
	workRow := r.rep.add(Row{Section: SecEndpoints, Name: fmt.Sprintf("the same no-op job by a worker (bench_noop), %d submitters, %d slots", len(tokens), pipelineWorkers),
		Fsync: "default", Value: work.rate(), Unit: "jobs/s", Summary: work.summary(), Note: work.note("") + "; per job: " + workOps.perJob(work.Finished)}).use(workU)
	relate(sysRow, plainRow, "plain client")
	goal(sysRow, "≥ 2,000 calls/s and ≥ 0.5× plain client", sysRow.Value >= 2000 && sysRow.Ratio >= 0.5)
	if workRow.Value > 0 {
		sysRow.Note += fmt.Sprintf("; %.2f× the worker's rate (%.0f jobs/s)", sysRow.Value/workRow.Value, workRow.Value)
	}

	// Latency at half the saturated rate, open loop.
	half := max(1, sys.rate()/2)
	r.logf("endpoints: open loop at %.0f jobs/s for %s", half, r.o.Duration)
	var hs Summary
	var hu usage
	var herr error
	r.measure(p, "endpoints-half", func() {
		hs, hu, herr = r.endpointHalfRate(ctx, p, a, tokens, half)
	})
	if herr != nil {
		return herr
	}
	r.rep.add(Row{Section: SecEndpoints, Name: fmt.Sprintf("endpoint type at half rate (%.0f/s offered), admission → succeeded, p99", half), Fsync: "default",
		Value: hs.P99, Unit: "ms", Summary: &hs, Note: noteErrors(&hs, "created_at to finished_at of each job, from its succeeded event")}).use(hu)

	// The path's own latency, at a light load.
	const light = 100
	r.logf("endpoints: open loop at %d jobs/s for %s", light, r.o.Duration)
	var ls2 Summary
	var lu usage
	r.measure(p, "endpoints-light", func() {
		ls2, lu, err = r.endpointHalfRate(ctx, p, a, tokens, light)
	})
	if err != nil {
		return err
	}
	r.rep.add(Row{Section: SecEndpoints, Name: fmt.Sprintf("endpoint type at %d/s, admission → succeeded, p50", light), Fsync: "default",
		Value: ls2.P50, Unit: "ms", Summary: &ls2, Note: noteErrors(&ls2, "created_at to finished_at of each job, from its succeeded event")}).use(lu)
	return nil
}

// declareEndpointType PUTs the bench's endpoint type, calling url.
func declareEndpointType(a *api, url string) error {
	op, err := auth.Mint(a.secret, auth.Identity{Operator: true, Requester: "bench-ops"}, time.Hour, time.Now())
	if err != nil {
		return err
	}
	body, _ := json.Marshal(map[string]any{
		"description": "no-op endpoint (jobgate bench)", "schema": noopSchema,
		"timeout_seconds": 30, "attempts": 3, "max_result_bytes": 1024, "content_type": "text/plain",
		"endpoint": map[string]any{"url": url, "concurrency": endpointConcurrency},
	})
	req, err := http.NewRequest(http.MethodPut, a.base+"/v1/admin/types/"+EndpointType, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+op)
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.std.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return fmt.Errorf("bench: declaring %s: %d %s", EndpointType, resp.StatusCode, data)
	}
	return nil
}

// endpointRound submits endpoint jobs from the clients for d and waits
// until as many succeeded; it returns the round, the CPU from the first
// submission to the last success, and lat with the round's latencies.
func (r *runner) endpointRound(ctx context.Context, p *proc, a *api, tokens []string, d time.Duration, round int, lat []time.Duration) (PipeResult, usage, []time.Duration, error) {
	before, err := p.call(Request{Op: opPipeStats})
	if err != nil {
		return PipeResult{}, usage{}, lat, err
	}
	meter := startCPU(p.ready.PID)
	start := time.Now()
	prefix := "ep-" + strconv.Itoa(round) + "-"
	s := closedLoopSamples(ctx, len(tokens), d, 0, func(w, i int) error {
		body := []byte(`{"type":"` + EndpointType + `","params":{"n":` + strconv.Itoa(i) + `}}`)
		st, _, err := a.submit(tokens[w], prefix+strconv.Itoa(w)+"-"+strconv.Itoa(i), body)
		return expect(st, http.StatusAccepted, err)
	})
	insert := time.Since(start)
	admitted := int64(len(s.Lat))
	var finished int64
	var end time.Time
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(10 * time.Millisecond) {
		resp, err := p.call(Request{Op: opEndpointDone, Tenant: "ep"})
		if err != nil {
			return PipeResult{}, usage{}, lat, err
		}
		finished += resp.Changes
		lat = append(lat, resp.Waits...)
		if finished >= admitted || time.Now().After(deadline) {
			end = time.Now()
			break
		}
	}
	used := meter.cores()
	// The relay looks at a terminal change again after its grace: its
	// reads count, as in the pipeline section.
	time.Sleep(2500 * time.Millisecond)
	after, err := p.call(Request{Op: opPipeStats})
	if err != nil {
		return PipeResult{}, usage{}, lat, err
	}
	return PipeResult{Inserted: admitted, Finished: finished, Errors: s.Errors, FirstErr: s.FirstError, Insert: insert,
		Elapsed: end.Sub(start), StatsDiff: after.Stats.minus(before.Stats)}, used, lat, nil
}

// endpointHalfRate submits endpoint jobs at rate for the run's duration
// (open loop) and summarizes admission → succeeded of each.
func (r *runner) endpointHalfRate(ctx context.Context, p *proc, a *api, tokens []string, rate float64) (Summary, usage, error) {
	meter := startCPU(p.ready.PID)
	seq := strconv.FormatInt(time.Now().UnixNano(), 36)
	s := pacedLoop(ctx, 4*len(tokens), rate, r.o.Duration, func(w, i int) error {
		body := []byte(`{"type":"` + EndpointType + `","params":{"n":` + strconv.Itoa(i) + `}}`)
		st, _, err := a.submit(tokens[w%len(tokens)], "half-"+seq+"-"+strconv.Itoa(i), body)
		return expect(st, http.StatusAccepted, err)
	})
	admitted := s.Ops
	var lat []time.Duration
	for deadline := time.Now().Add(time.Minute); int64(len(lat)) < admitted && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		resp, err := p.call(Request{Op: opEndpointDone, Tenant: "ep"})
		if err != nil {
			return Summary{}, usage{}, err
		}
		lat = append(lat, resp.Waits...)
	}
	u := meter.cores()
	out := Summarize(lat, s.Errors, r.o.Duration)
	out.FirstError = s.FirstError
	return out, u, nil
}

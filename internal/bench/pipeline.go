package bench

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
)

// Pipeline section defaults: the anchors of issue 16 (8 inserting clients,
// 100 no-op workers in the same process).
const (
	pipelineInserters = 8
	pipelineWorkers   = 100
)

// NoopWorkers is the bench_noop worker's concurrency in the target.
const NoopWorkers = pipelineWorkers

// pipelineSuite measures worked jobs/s of the whole of `serve` with a no-op
// job type (bench_noop, a pkg/worker worker in the target), against the
// smallest raw JetStream pipeline run in the same target, in interleaved
// rounds; counts the NATS operations per job; and times queued → claimed
// at a light load with the gateway leaving the work message to the relay
// (the default) and with the gateway publishing it itself.
func (r *runner) pipelineSuite(ctx context.Context) error {
	full := []string{"dispatcher", "renderer", "notifier", "gateway", "noop"}
	p, err := r.start(full, false, 0)
	if err != nil {
		return err
	}
	if p == nil {
		return nil // --url: the pipeline needs the target's worker
	}
	defer p.stop()
	a, err := r.apiFor(p, "pipe")
	if err != nil {
		return err
	}
	if err := awaitType(ctx, a, NoopType); err != nil {
		return err
	}
	tokens := make([]string, pipelineInserters)
	for w := range tokens {
		tokens[w] = a.token("pipe-" + strconv.Itoa(w))
	}
	var raw, sys PipeResult
	var rawU, sysU usage
	var rawOps, sysOps *PipeStats
	rd := r.o.Duration / 3
	for round := range 3 {
		r.logf("pipeline: raw JetStream, %s (round %d/3)", rd, round+1)
		var resp Response
		var cerr error
		rawU.add(r.measure(p, fmt.Sprintf("pipeline-raw-%d", round), func() {
			resp, cerr = p.call(Request{Op: opRawPipe, Clients: pipelineInserters, Workers: pipelineWorkers, Duration: rd, Round: round})
		}))
		if cerr != nil {
			return cerr
		}
		raw.add(*resp.Pipe)
		rawOps = rawOps.plus(resp.Pipe.StatsDiff)

		r.logf("pipeline: jobgate, %s (round %d/3)", rd, round+1)
		var pr PipeResult
		traced := false
		if r.o.ProfileDir != "" && round == 1 {
			// Where the pipeline waits (go tool trace -pprof=sync|net|sched).
			path, _ := filepath.Abs(filepath.Join(r.o.ProfileDir, "pipeline-jobgate.trace"))
			if _, err := p.call(Request{Op: opTraceStart, Path: path}); err != nil {
				r.logf("trace: %v", err)
			} else {
				traced = true
			}
		}
		// The round's own meter covers its work only, not the relay's
		// grace after it: averaged over both, the cores looked half idle.
		var u usage
		r.measure(p, fmt.Sprintf("pipeline-jobgate-%d", round), func() {
			pr, u, cerr = r.jobgatePipeline(ctx, p, a, tokens, rd, round)
		})
		sysU.add(u)
		if traced {
			_, _ = p.call(Request{Op: opTraceStop})
		}
		if cerr != nil {
			return cerr
		}
		sys.add(pr)
		sysOps = sysOps.plus(pr.StatsDiff)
	}
	rawRow := r.rep.add(Row{Section: SecPipeline, Name: fmt.Sprintf("raw JetStream pipeline, %d inserters, %d workers", pipelineInserters, pipelineWorkers),
		Fsync: "default", Value: raw.rate(), Unit: "jobs/s", Summary: raw.summary(),
		Note: raw.note("create record, publish work, pull, CAS succeeded, ack; in-process") + "; per job: " + rawOps.perJob(raw.Finished)}).use(rawU)
	sysRow := r.rep.add(Row{Section: SecPipeline, Name: fmt.Sprintf("bench_noop over HTTP → succeeded, %d clients, %d worker slots", pipelineInserters, pipelineWorkers),
		Fsync: "default", Value: sys.rate(), Unit: "jobs/s", Summary: sys.summary(),
		Note: sys.note(fmt.Sprintf("admitted at %.0f jobs/s meanwhile", float64(sys.Inserted)/sys.Insert.Seconds())) + "; per job: " + sysOps.perJob(sys.Finished)}).use(sysU)
	relate(sysRow, rawRow, "raw pipeline")
	if adm := r.admissionRow(); adm != nil {
		x := sysRow.Value / adm.Value
		sysRow.Note += fmt.Sprintf("; %.2f× saturated admission (%.0f jobs/s)", x, adm.Value)
		goal(sysRow, "≥ 0.5× admission", x >= 0.5)
	}

	// Queued → claimed at a light load: the relay's hop.
	light, err := r.claimWaits(ctx, p, a, tokens[0])
	if err != nil {
		return err
	}
	lightRow := r.rep.add(Row{Section: SecPipeline, Name: "queued → claimed at 200 jobs/s, work left to the relay (default), p50", Fsync: "default",
		Value: light.P50, Unit: "ms", Summary: &light, Note: "bench_noop handler start minus created_at"})
	p.stop()

	// The same with the gateway publishing the work itself.
	q, err := r.startEnv(full, false, 0, []string{"JOBGATE_BENCH_GATEWAY_PUBLISHES_WORK=1"})
	if err != nil {
		return err
	}
	defer q.stop()
	b, err := r.apiFor(q, "pipe")
	if err != nil {
		return err
	}
	if err := awaitType(ctx, b, NoopType); err != nil {
		return err
	}
	direct, err := r.claimWaits(ctx, q, b, b.token("pipe-0"))
	if err != nil {
		return err
	}
	row := r.rep.add(Row{Section: SecPipeline, Name: "queued → claimed at 200 jobs/s, gateway publishes the work too, p50", Fsync: "default",
		Value: direct.P50, Unit: "ms", Summary: &direct, Note: "leave_work_to_relay: false"})
	relate(lightRow, row, "gateway publishes")
	return nil
}

// jobgatePipeline submits bench_noop jobs from the clients for d and waits
// until the target's worker finished as many; the operation counts are
// taken after the relay's last pass over the terminal changes. The usage is
// the CPU from the first submission to the last finish.
func (r *runner) jobgatePipeline(ctx context.Context, p *proc, a *api, tokens []string, d time.Duration, round int) (PipeResult, usage, error) {
	return r.jobgatePipelineOf(ctx, p, a, tokens, d, round, func(i int) []byte {
		return []byte(`{"type":"` + NoopType + `","params":{"n":` + strconv.Itoa(i) + `}}`)
	})
}

// jobgatePipelineOf is jobgatePipeline submitting body(i) as job i.
func (r *runner) jobgatePipelineOf(ctx context.Context, p *proc, a *api, tokens []string, d time.Duration, round int, body func(i int) []byte) (PipeResult, usage, error) {
	before, err := p.call(Request{Op: opPipeStats})
	if err != nil {
		return PipeResult{}, usage{}, err
	}
	meter := startCPU(p.ready.PID)
	start := time.Now()
	prefix := "pipe-" + strconv.Itoa(round) + "-"
	s := closedLoopSamples(ctx, len(tokens), d, 0, func(w, i int) error {
		st, _, err := a.submit(tokens[w], prefix+strconv.Itoa(w)+"-"+strconv.Itoa(i), body(i))
		return expect(st, http.StatusAccepted, err)
	})
	insert := time.Since(start)
	admitted := int64(len(s.Lat))
	var finished int64
	var end time.Time
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(10 * time.Millisecond) {
		now, err := p.call(Request{Op: opPipeStats})
		if err != nil {
			return PipeResult{}, usage{}, err
		}
		finished = now.Stats.Succeeded - before.Stats.Succeeded
		if finished >= admitted || time.Now().After(deadline) {
			end = time.Now()
			break
		}
	}
	used := meter.cores()
	// The relay looks at a terminal change again after its 2s grace
	// (dispatcher.eventGrace): wait for it, so its reads count.
	time.Sleep(2500 * time.Millisecond)
	after, err := p.call(Request{Op: opPipeStats})
	if err != nil {
		return PipeResult{}, usage{}, err
	}
	_, _ = p.call(Request{Op: opNoopWaits}) // not a light-load wait
	return PipeResult{Inserted: admitted, Finished: finished, Errors: s.Errors, FirstErr: s.FirstError, Insert: insert,
		Elapsed: end.Sub(start), StatsDiff: after.Stats.minus(before.Stats)}, used, nil
}

// claimWaits submits bench_noop jobs at 200/s for 3s, one client, and
// returns the queued → claimed waits the worker saw.
func (r *runner) claimWaits(ctx context.Context, p *proc, a *api, tok string) (Summary, error) {
	_, _ = p.call(Request{Op: opNoopWaits})
	seq := strconv.FormatInt(time.Now().UnixNano(), 36)
	s := pacedLoop(ctx, 4, 200, 3*time.Second, func(_, i int) error {
		st, _, err := a.submit(tok, "light-"+seq+"-"+strconv.Itoa(i), []byte(`{"type":"`+NoopType+`","params":{"n":1}}`))
		return expect(st, http.StatusAccepted, err)
	})
	if s.Errors > 0 {
		return Summary{}, fmt.Errorf("bench: light pipeline load: %s", s.FirstError)
	}
	var waits []time.Duration
	for deadline := time.Now().Add(30 * time.Second); int64(len(waits)) < s.Ops && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		resp, err := p.call(Request{Op: opNoopWaits})
		if err != nil {
			return Summary{}, err
		}
		waits = append(waits, resp.Waits...)
	}
	return Summarize(waits, 0, 3*time.Second), nil
}

// awaitType waits until the gateway lists typ in GET /v1/types.
func awaitType(ctx context.Context, a *api, typ string) error {
	tok := a.token("types")
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		req.SetRequestURI(a.base + "/v1/types")
		req.Header.Set("Authorization", tok)
		err := a.hc.Do(req, resp)
		ok := err == nil && resp.StatusCode() == http.StatusOK && strings.Contains(string(resp.Body()), `"`+typ+`"`)
		fasthttp.ReleaseRequest(req)
		fasthttp.ReleaseResponse(resp)
		if ok {
			return nil
		}
	}
	return fmt.Errorf("bench: type %s not declared within 30s", typ)
}

// admissionRow is the saturated admission figure of this run, if measured.
func (r *runner) admissionRow() *Row {
	for _, x := range r.rep.Rows {
		if x.Section == SecAdmission && x.Fsync == "default" && strings.HasPrefix(x.Name, "new keys, ") {
			return x
		}
	}
	return nil
}

func (p *PipeResult) add(o PipeResult) {
	p.Inserted += o.Inserted
	p.Finished += o.Finished
	p.Errors += o.Errors
	if p.FirstErr == "" {
		p.FirstErr = o.FirstErr
	}
	p.Insert += o.Insert
	p.Elapsed += o.Elapsed
}

// rate is jobs finished per second, first insert to last finish.
func (p *PipeResult) rate() float64 {
	if p.Elapsed <= 0 {
		return 0
	}
	return float64(p.Finished) / p.Elapsed.Seconds()
}

func (p *PipeResult) summary() *Summary {
	return &Summary{Ops: p.Finished, Errors: p.Errors, Seconds: p.Elapsed.Seconds(), Rate: p.rate(), FirstError: p.FirstErr}
}

func (p *PipeResult) note(extra string) string {
	n := fmt.Sprintf("%d inserted, %d finished in %.1fs (inserts for %.1fs)", p.Inserted, p.Finished, p.Elapsed.Seconds(), p.Insert.Seconds())
	if extra != "" {
		n += "; " + extra
	}
	if p.Errors > 0 {
		n += fmt.Sprintf("; %d errors, first: %s", p.Errors, p.FirstErr)
	}
	return n
}

// plus sums two counter differences (nil is zero).
func (p *PipeStats) plus(o *PipeStats) *PipeStats {
	if p == nil {
		p = &PipeStats{Streams: map[string]uint64{}, ByConn: map[string]uint64{}}
	}
	if o == nil {
		return p
	}
	p.Succeeded += o.Succeeded
	p.ConnOut += o.ConnOut
	p.ConnIn += o.ConnIn
	p.API += o.API
	for k, v := range o.Streams {
		p.Streams[k] += v
	}
	for k, v := range o.ByConn {
		if p.ByConn == nil {
			p.ByConn = map[string]uint64{}
		}
		p.ByConn[k] += v
	}
	return p
}

// perJob writes the counters divided by n jobs.
func (p *PipeStats) perJob(n int64) string {
	if p == nil || n <= 0 {
		return "—"
	}
	f := func(v uint64) string { return strconv.FormatFloat(float64(v)/float64(n), 'f', 2, 64) }
	names := make([]string, 0, len(p.Streams))
	for k := range p.Streams {
		names = append(names, k)
	}
	sort.Strings(names)
	var stored []string
	for _, k := range names {
		stored = append(stored, k+" "+f(p.Streams[k]))
	}
	conns := make([]string, 0, len(p.ByConn))
	for k := range p.ByConn {
		conns = append(conns, k)
	}
	sort.Slice(conns, func(i, j int) bool { return p.ByConn[conns[i]] > p.ByConn[conns[j]] })
	var by []string
	for _, k := range conns {
		by = append(by, k+" "+f(p.ByConn[k]))
	}
	return fmt.Sprintf("connection out %s msgs, in %s msgs (by connection, both ways: %s), JetStream API requests %s; stored: %s",
		f(p.ConnOut), f(p.ConnIn), strings.Join(by, ", "), f(p.API), strings.Join(slices.Clip(stored), ", "))
}

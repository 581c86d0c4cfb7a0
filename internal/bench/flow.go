package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"time"
)

// SecFlow is what flow control costs (issue 37): admission with the flow
// fields (priority, start_by) against without, and the pipeline of a type
// declared with a concurrency key and a rate limit (neither of which holds
// a job back: the cost of taking the place and the token) against the
// same type without, each pair in interleaved rounds on two targets alive
// together — the pipeline both as fast as it goes (closed loop) and paced
// at FlowRate, where the target's CPU a job is the cost compared; then,
// with FlowScheduled jobs waiting an hour ahead, how late scheduled jobs
// start after their run_at (run_at → the handler's start), and the memory
// each waiting scheduled job costs the target.
const SecFlow = "flow"

// Lateness sample: flowLateJobs jobs whose run_at is spread over
// flowLateSpread, the first flowLateLead after they are submitted.
const (
	flowLateJobs   = 1000
	flowLateSpread = 20 * time.Second
	flowLateLead   = 10 * time.Second
	flowRounds     = 4 // an even number: each side goes first as often
)

func (r *runner) flowSuite(ctx context.Context) error {
	full := []string{"dispatcher", "renderer", "notifier", "gateway", "noop"}
	// The worker credential's request rate is not limited here (the
	// broker's default, 2,000 a second, is about the pipeline's rate on
	// this kind of machine): with it, the pipelines measured the limit and
	// the workers' backoff from it rather than what flow control costs.
	unthrottled := "JOBGATE_BENCH_CREDENTIAL_RATE=1000000"
	plain, err := r.startEnv(full, false, 0, []string{unthrottled})
	if err != nil || plain == nil {
		return err
	}
	defer plain.stop()
	flow, err := r.startEnv(full, false, 0, []string{unthrottled, "JOBGATE_BENCH_NOOP_FLOW=" + flowEnv()})
	if err != nil {
		return err
	}
	stopFlow := sync1(flow.stop)
	defer stopFlow()
	if err := r.flowThroughput(ctx, plain, flow); err != nil {
		return err
	}
	stopFlow() // the lateness and memory on the plain target alone
	return r.flowScheduled(ctx, plain)
}

// flowEnv is the flow target's declaration: both limits, unless
// JOBGATE_BENCH_FLOW_ONLY names one (concurrency or rate).
func flowEnv() string {
	if v := os.Getenv("JOBGATE_BENCH_FLOW_ONLY"); v != "" {
		return v
	}
	return "1"
}

// sync1 runs f once, however often the result is called.
func sync1(f func()) func() {
	done := false
	return func() {
		if !done {
			done = true
			f()
		}
	}
}

// flowBody is a bench_noop submission, with the flow fields when flow.
func flowBody(i int, flow bool, startBy string) []byte {
	if !flow {
		return []byte(`{"type":"` + NoopType + `","params":{"n":` + strconv.Itoa(i) + `}}`)
	}
	return []byte(`{"type":"` + NoopType + `","params":{"n":` + strconv.Itoa(i) + `},"priority":2,"start_by":"` + startBy + `"}`)
}

// flowThroughput measures admission and the pipeline on both targets in
// flowRounds interleaved rounds, and relates flow to plain.
func (r *runner) flowThroughput(ctx context.Context, plain, flow *proc) error {
	sides := []*flowSide{{p: plain}, {p: flow, flow: true}}
	for _, s := range sides {
		a, err := r.apiFor(s.p, "flow")
		if err != nil {
			return err
		}
		if err := awaitType(ctx, a, NoopType); err != nil {
			return err
		}
		s.a = a
		for w := range r.o.Clients {
			s.tokens = append(s.tokens, a.token("flow-"+strconv.Itoa(w)))
		}
	}
	startBy := time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)
	rd := max(r.o.Duration/flowRounds, time.Second)
	for round := range flowRounds {
		for _, i := range flowOrder(round) {
			s := sides[i]
			r.logf("flow: admission round %d, flow fields %v, %d clients, %s", round+1, s.flow, len(s.tokens), rd)
			var smp Samples
			u := r.measure(s.p, fmt.Sprintf("flow-admission-%v-%d", s.flow, round), func() {
				smp = closedLoopSamples(ctx, len(s.tokens), rd, 0, func(w, i int) error {
					key := "fa-" + strconv.Itoa(round) + "-" + strconv.Itoa(w) + "-" + strconv.Itoa(i)
					st, _, err := s.a.submit(s.tokens[w], key, flowBody(i, s.flow, startBy))
					return expect(st, http.StatusAccepted, err)
				})
			})
			s.adm.Add(smp)
			s.admU.add(u)
			// The admitted backlog is worked off before anything else is
			// measured.
			if err := r.drainNoop(ctx, s.p, int64(len(s.adm.Lat))); err != nil {
				return err
			}
		}
	}
	for round := range flowRounds {
		for _, i := range flowOrder(round) {
			s := sides[i]
			r.logf("flow: pipeline round %d, flow %v, %d clients, %s", round+1, s.flow, pipelineInserters, rd)
			profiled := r.profile(s.p, opProfileStart, fmt.Sprintf("flow-pipeline-%v-%d.pprof", s.flow, round))
			pr, u, err := r.jobgatePipelineOf(ctx, s.p, s.a, s.tokens[:pipelineInserters], rd, 100+round, func(i int) []byte {
				return flowBody(i, s.flow, startBy)
			})
			if profiled {
				_, _ = s.p.call(Request{Op: opProfileStop})
			}
			if err != nil {
				return err
			}
			r.logf("flow: pipeline round %d, flow %v: %d inserted in %s, finished after %s, %.0f jobs/s, target %.2f cores, %.0f µs a job",
				round+1, s.flow, pr.Inserted, pr.Insert.Round(time.Millisecond), pr.Elapsed.Round(time.Millisecond), pr.rate(), u.srv, u.srv/max(pr.rate(), 1)*1e6)
			s.pipe.add(pr)
			s.pipeU.add(u)
		}
	}
	var admRows, pipeRows [2]*Row
	for i, s := range sides {
		what := "without flow fields"
		if s.flow {
			what = "with priority and start_by"
		}
		sum := s.adm.Summary()
		admRows[i] = r.rep.add(Row{Section: SecFlow, Name: fmt.Sprintf("admission %s, %d clients", what, len(s.tokens)), Fsync: "default",
			Value: sum.Rate, Unit: "jobs/s", Summary: &sum, Note: noteErrors(&sum, fmt.Sprintf("%d interleaved rounds", flowRounds))}).use(s.admU)
		tw := "a type without flow control"
		if s.flow {
			tw = "a concurrency key per requester (limit 1,000) and a 10,000/s rate limit, jobs with priority and start_by"
			if only := flowEnv(); only != "1" {
				tw += " (JOBGATE_BENCH_FLOW_ONLY=" + only + ")"
			}
		}
		pipeRows[i] = r.rep.add(Row{Section: SecFlow, Name: fmt.Sprintf("bench_noop over HTTP → succeeded, %s, %d clients, %d slots", tw, pipelineInserters, pipelineWorkers),
			Fsync: "default", Value: s.pipe.rate(), Unit: "jobs/s", Summary: s.pipe.summary(), Note: s.pipe.note("")}).use(s.pipeU)
		if s.pipe.rate() > 0 {
			pipeRows[i].ServerCPUPerOp = s.pipeU.srv / s.pipe.rate() * 1e6
		}
	}
	relate(admRows[1], admRows[0], "without")
	relate(pipeRows[1], pipeRows[0], "without")
	goal(admRows[1], "≥ 0.95× without", admRows[1].Ratio >= 0.95)
	// The pipeline's goal is held by the paced figure (flowPaced): in a
	// closed loop on a small machine the rate moves with how deep a
	// target's lanes got more than with what a job costs.
	return r.flowPaced(ctx, sides, startBy, rd)
}

// flowSide is one of the flow section's two targets and what was measured
// on it.
type flowSide struct {
	p      *proc
	a      *api
	flow   bool
	tokens []string
	adm    Samples
	admU   usage
	pipe   PipeResult
	pipeU  usage
}

// flowOrder is the order of the sides (plain 0, flow 1) in a round: each
// round swaps which goes first, since the one that follows runs while the
// other's finished jobs are still being relayed.
func flowOrder(round int) []int {
	if round%2 == 1 {
		return []int{1, 0}
	}
	return []int{0, 1}
}

// flowScheduled admits FlowScheduled jobs an hour ahead, reads the memory
// they cost, then times flowLateJobs jobs due within flowLateSpread.
func (r *runner) flowScheduled(ctx context.Context, p *proc) error {
	a, err := r.apiFor(p, "sched")
	if err != nil {
		return err
	}
	tokens := make([]string, r.o.Clients)
	for w := range tokens {
		tokens[w] = a.token("sched-" + strconv.Itoa(w))
	}
	before, err := r.settledMem(p)
	if err != nil {
		return err
	}
	st0, err := p.call(Request{Op: opPipeStats})
	if err != nil {
		return err
	}
	n := r.o.FlowScheduled
	r.logf("flow: scheduling %d jobs an hour ahead", n)
	smp := closedLoopSamples(ctx, len(tokens), 30*time.Minute, int64(n), func(w, i int) error {
		body := []byte(`{"type":"` + NoopType + `","params":{"n":` + strconv.Itoa(i) + `},"delay":"1h"}`)
		st, _, err := a.submit(tokens[w], "fs-"+strconv.Itoa(w)+"-"+strconv.Itoa(i), body)
		return expect(st, http.StatusAccepted, err)
	})
	sum := smp.Summary()
	r.rep.add(Row{Section: SecFlow, Name: fmt.Sprintf("admission of %d jobs scheduled an hour ahead, %d clients", sum.Ops, len(tokens)), Fsync: "default",
		Value: sum.Rate, Unit: "jobs/s", Summary: &sum, Note: noteErrors(&sum, "")})
	// The relay adds each to the scheduled set: wait for its entries.
	admitted := int64(len(smp.Lat))
	var inSet int64
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		now, err := p.call(Request{Op: opPipeStats})
		if err != nil {
			return err
		}
		if inSet = int64(now.Stats.Streams["JOBGATE_SCHEDULE"] - st0.Stats.Streams["JOBGATE_SCHEDULE"]); inSet >= admitted {
			break
		}
	}
	after, err := r.settledMem(p)
	if err != nil {
		return err
	}
	r.profile(p, opHeapProfile, "flow-scheduled-heap.pprof")
	if admitted > 0 {
		note := fmt.Sprintf("%d jobs in the scheduled set; RSS %.0f → %.0f MiB; after a GC; %s", inSet, mib(before.rss), mib(after.rss), memNote(after.mem))
		r.rep.add(Row{Section: SecFlow, Name: "target memory per waiting scheduled job: Go heap in use", Fsync: "default",
			Value: float64(int64(after.mem.HeapInuse)-int64(before.mem.HeapInuse)) / float64(admitted), Unit: "B", Note: note})
		r.rep.add(Row{Section: SecFlow, Name: "target memory per waiting scheduled job: RSS", Fsync: "default",
			Value: float64(after.rss-before.rss) / float64(admitted), Unit: "B",
			Note: "the record, its index entries and its scheduled-set entry as the embedded server and the query index hold them"})
	}

	// The lateness of jobs due now, with those waiting.
	_, _ = p.call(Request{Op: opNoopWaits})
	done0, err := p.call(Request{Op: opPipeStats})
	if err != nil {
		return err
	}
	first := time.Now().Add(flowLateLead)
	r.logf("flow: %d jobs due over %s from %s", flowLateJobs, flowLateSpread, first.Format(time.TimeOnly))
	late := closedLoopSamples(ctx, 8, time.Minute, flowLateJobs, func(w, i int) error {
		at := first.Add(time.Duration(i) * flowLateSpread / flowLateJobs).Truncate(time.Millisecond)
		body := []byte(`{"type":"` + NoopType + `","params":{"n":` + strconv.Itoa(i) + `,"at":` + strconv.FormatInt(at.UnixMilli(), 10) +
			`},"run_at":"` + at.UTC().Format("2006-01-02T15:04:05.000Z07:00") + `"}`)
		st, _, err := a.submit(tokens[w], "fl-"+strconv.Itoa(i), body)
		return expect(st, http.StatusAccepted, err)
	})
	if late.Errors > 0 {
		return fmt.Errorf("bench flow: scheduling the lateness sample: %s", late.FirstError)
	}
	if time.Now().After(first) {
		r.rep.note("flow: the lateness sample took longer to submit than its %s lead", flowLateLead)
	}
	if err := r.drainNoop(ctx, p, done0.Stats.Succeeded+flowLateJobs); err != nil {
		return err
	}
	resp, err := p.call(Request{Op: opNoopWaits})
	if err != nil {
		return err
	}
	ls := Summarize(resp.Waits, 0, flowLateSpread)
	row := r.rep.add(Row{Section: SecFlow, Name: fmt.Sprintf("scheduled job lateness, run_at → handler start, p99, %d jobs due over %s with %d more scheduled", len(resp.Waits), flowLateSpread, inSet),
		Fsync: "default", Value: ls.P99, Unit: "ms", Summary: &ls})
	goal(row, "p99 ≤ 1 s", ls.P99 <= 1000)
	return nil
}

// memReading is one settled memory reading of a target.
type memReading struct {
	rss int64
	mem *MemInfo
}

// settledMem collects the target's garbage (returning it to the OS) and
// reads its heap and RSS.
func (r *runner) settledMem(p *proc) (memReading, error) {
	if _, err := p.call(Request{Op: opGCPercent, Percent: 100}); err != nil {
		return memReading{}, err
	}
	m, err := p.call(Request{Op: opMem})
	if err != nil {
		return memReading{}, err
	}
	return memReading{rss: p.rss(), mem: m.Mem}, nil
}

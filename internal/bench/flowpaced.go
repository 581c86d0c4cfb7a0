package bench

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// flowIdle is how long each target's CPU is read idle before the paced
// rounds: its tickers' share, taken off what a round used.
const flowIdle = 5 * time.Second

// pacedSide is one target's paced pipeline: the jobs it finished, the CPU
// they cost beyond its idle share, and their created → started waits.
type pacedSide struct {
	jobs   int64
	errs   int64
	first  string
	cpu    float64 // target CPU seconds, idle share taken off
	use    usage
	waits  []time.Duration
	behind int // rounds whose last job finished over a second after its submission
}

// flowPaced offers jobs at r.o.FlowRate to each side in turn, flowRounds
// rounds, each side first in turn, and relates the target CPU a job: at
// one offered rate below both targets' capacity both do the same work, so
// CPU a job is what flow control costs (the closed-loop pipeline's rate
// moves with how deep a target's lanes got, more than with a job's cost).
func (r *runner) flowPaced(ctx context.Context, sides []*flowSide, startBy string, rd time.Duration) error {
	idle := make([]float64, len(sides))
	for i, s := range sides {
		m := startCPU(s.p.ready.PID)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(flowIdle):
		}
		idle[i] = m.cores().srv
		r.logf("flow: paced, flow %v: idle target %.3f cores", s.flow, idle[i])
	}
	res := make([]pacedSide, len(sides))
	for round := range flowRounds {
		for _, i := range flowOrder(round) {
			s, ps := sides[i], &res[i]
			r.logf("flow: paced round %d, flow %v, %.0f jobs/s for %s", round+1, s.flow, r.o.FlowRate, rd)
			if err := r.pacedRound(ctx, s, ps, idle[i], startBy, rd, round); err != nil {
				return err
			}
		}
	}
	var rows [2]*Row
	for i, s := range sides {
		ps := &res[i]
		what := "a type without flow control"
		if s.flow {
			what = "a concurrency key per requester and a rate limit, jobs with priority and start_by"
			if only := flowEnv(); only != "1" {
				what += " (JOBGATE_BENCH_FLOW_ONLY=" + only + ")"
			}
		}
		sum := Summarize(ps.waits, ps.errs, time.Duration(ps.use.secs*float64(time.Second)))
		sum.FirstError = ps.first
		perJob := 0.0
		if ps.jobs > 0 {
			perJob = ps.cpu / float64(ps.jobs) * 1e6
		}
		rows[i] = r.rep.add(Row{Section: SecFlow, Name: fmt.Sprintf("target CPU a job, bench_noop paced at %.0f jobs/s, %s", r.o.FlowRate, what),
			Fsync: "default", Value: perJob, Unit: "µs/job", Summary: &sum,
			Note: fmt.Sprintf("%d jobs in %d rounds of %s; idle %.3f cores taken off; %d rounds behind (last job over 1 s after its submission); latency is created → handler start",
				ps.jobs, flowRounds, rd, idle[i], ps.behind)}).use(ps.use)
		rows[i].ServerCPUPerOp = perJob
	}
	relate(rows[1], rows[0], "without")
	goal(rows[1], "≤ 1.05× without", rows[1].Ratio > 0 && rows[1].Ratio <= 1.05)
	return nil
}

// pacedRound offers rd's worth of jobs at r.o.FlowRate to one side, waits
// for all to finish and for the relay's second look at them, and adds the
// jobs and the CPU to ps.
func (r *runner) pacedRound(ctx context.Context, s *flowSide, ps *pacedSide, idle float64, startBy string, rd time.Duration, round int) error {
	_, _ = s.p.call(Request{Op: opNoopWaits}) // earlier rounds' waits
	before, err := s.p.call(Request{Op: opPipeStats})
	if err != nil {
		return err
	}
	profiled := r.profile(s.p, opProfileStart, fmt.Sprintf("flow-paced-%v-%d.pprof", s.flow, round))
	meter := startCPU(s.p.ready.PID)
	start := time.Now()
	prefix := "paced-" + strconv.Itoa(round) + "-"
	n := len(s.tokens[:pipelineInserters])
	sum := pacedLoop(ctx, 4*n, r.o.FlowRate, rd, func(w, i int) error {
		st, _, err := s.a.submit(s.tokens[w%n], prefix+strconv.Itoa(i), flowBody(i, s.flow, startBy))
		return expect(st, http.StatusAccepted, err)
	})
	submitted := time.Since(start)
	var finished int64
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(10 * time.Millisecond) {
		now, err := s.p.call(Request{Op: opPipeStats})
		if err != nil {
			return err
		}
		if finished = now.Stats.Succeeded - before.Stats.Succeeded; finished >= sum.Ops {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: paced round %d: %d of %d jobs finished within 2m", round+1, finished, sum.Ops)
		}
	}
	lag := time.Since(start) - submitted
	if lag > time.Second {
		ps.behind++
	}
	// The relay looks at a terminal change again after its 2s grace
	// (dispatcher.eventGrace): its reads are part of a job's cost.
	time.Sleep(2500 * time.Millisecond)
	u := meter.cores()
	if profiled {
		_, _ = s.p.call(Request{Op: opProfileStop})
	}
	cpu := (u.srv - idle) * u.secs
	waits, err := s.p.call(Request{Op: opNoopWaits})
	if err != nil {
		return err
	}
	r.logf("flow: paced round %d, flow %v: %d jobs (%d errors), admission p99 %.0f ms max %.0f ms, last finished %s after the last submission, target %.2f cores, %.0f µs a job",
		round+1, s.flow, sum.Ops, sum.Errors, sum.P99, sum.Max, lag.Round(time.Millisecond), u.srv, cpu/float64(max(sum.Ops, 1))*1e6)
	ps.jobs += sum.Ops
	ps.errs += sum.Errors
	if ps.first == "" {
		ps.first = sum.FirstError
	}
	ps.cpu += cpu
	ps.use.add(u)
	ps.waits = append(ps.waits, waits.Waits...)
	return nil
}

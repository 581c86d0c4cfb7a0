package bench

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// figure is one throughput measurement of the gateway suite.
type figure struct {
	section, name, unit string
	run                 func(d time.Duration, round int) (Samples, error)
	samples             Samples
	cpu                 usage
}

// gatewaySuite measures sections 1–5 against a target running the gateway
// alone on its embedded server: the raw floor, admission (saturated, then at
// half that rate), replay, conflict and status reads. The saturated figures
// run in interleaved rounds, so a change in what else the machine runs hits
// them all alike and their ratios hold.
func (r *runner) gatewaySuite(ctx context.Context, always bool) error {
	fs := fsyncName(always)
	p, err := r.start([]string{"gateway"}, always, 0)
	if err != nil {
		return err
	}
	if p != nil {
		defer p.stop()
	}
	a, err := r.apiFor(p, "bench")
	if err != nil {
		return err
	}
	n := r.o.Clients
	tokens := make([]string, n)
	for w := range tokens {
		tokens[w] = a.token("client-" + strconv.Itoa(w))
	}
	body, changed := permitBody(47, 29, 1), permitBody(47, 30, 1)
	keyPrefix := "adm-" + fs + "-"

	// Replay, conflict and status reads work on one job per client.
	ids, etags := make([]string, n), make([]string, n)
	sameKey := func(w int) string { return "same-" + fs + "-" + strconv.Itoa(w) }
	if r.any(SecReplay, SecConflict, SecStatus) {
		for w := range n {
			st, id, err := a.submit(tokens[w], sameKey(w), body)
			if err != nil || (st != http.StatusAccepted && st != http.StatusOK) {
				return fmt.Errorf("bench: seeding jobs: status %d: %v", st, err)
			}
			g, err := a.get(tokens[w], "/v1/jobs/"+id, "")
			if err != nil || g.status != http.StatusOK {
				return fmt.Errorf("bench: seeding jobs: read %d: %v", g.status, err)
			}
			ids[w], etags[w] = id, g.etag
		}
	}
	loop := func(fn func(w int, i int) error) func(time.Duration, int) (Samples, error) {
		return func(d time.Duration, _ int) (Samples, error) { return closedLoopSamples(ctx, n, d, 0, fn), nil }
	}
	var figs []*figure
	if r.any(SecFloor) && p != nil {
		figs = append(figs, &figure{section: SecFloor, name: fmt.Sprintf("kv create + work publish, %d clients", n), unit: "jobs/s",
			run: func(d time.Duration, round int) (Samples, error) {
				resp, err := p.call(Request{Op: opFloor, Clients: n, Duration: d, Tenant: "floor" + strconv.Itoa(round)})
				if err != nil {
					return Samples{}, err
				}
				return *resp.Floor, nil
			}})
	}
	if r.any(SecAdmission) {
		figs = append(figs, &figure{section: SecAdmission, name: fmt.Sprintf("new keys, %d clients, saturated", n), unit: "jobs/s",
			run: func(d time.Duration, round int) (Samples, error) {
				prefix := keyPrefix + strconv.Itoa(round) + "-"
				return closedLoopSamples(ctx, n, d, 0, func(w, i int) error {
					st, _, err := a.submit(tokens[w], prefix+strconv.Itoa(w)+"-"+strconv.Itoa(i), body)
					return expect(st, http.StatusAccepted, err)
				}), nil
			}})
	}
	if r.any(SecReplay) {
		figs = append(figs, &figure{section: SecReplay, name: fmt.Sprintf("same key re-posted, %d clients", n), unit: "req/s",
			run: loop(func(w, _ int) error {
				st, _, err := a.submit(tokens[w], sameKey(w), body)
				return expect(st, http.StatusOK, err)
			})})
	}
	if r.any(SecReplay) && !always {
		// What HTTP alone costs, no token and no store: with the admission's
		// and the replay's CPU per request it bounds the replay ratio
		// (docs/performance.md, "Replay").
		figs = append(figs, &figure{section: SecReplay, name: fmt.Sprintf("HTTP alone: GET /healthz (no auth, no store), %d clients", n), unit: "req/s",
			run: loop(func(int, int) error {
				g, err := a.get("", "/healthz", "")
				return expect(g.status, http.StatusOK, err)
			})})
	}
	if r.any(SecConflict) && !always { // the read paths write nothing: fsync does not matter
		figs = append(figs, &figure{section: SecConflict, name: fmt.Sprintf("same key, changed payload, %d clients", n), unit: "req/s",
			run: loop(func(w, _ int) error {
				st, _, err := a.submit(tokens[w], sameKey(w), changed)
				return expect(st, http.StatusConflict, err)
			})})
	}
	if r.any(SecStatus) && !always {
		figs = append(figs,
			&figure{section: SecStatus, name: fmt.Sprintf("GET by id, %d clients", n), unit: "req/s",
				run: loop(func(w, _ int) error {
					g, err := a.get(tokens[w], "/v1/jobs/"+ids[w], "")
					return expect(g.status, http.StatusOK, err)
				})},
			&figure{section: SecStatus, name: fmt.Sprintf("GET by id with If-None-Match (304), %d clients", n), unit: "req/s",
				run: loop(func(w, _ int) error {
					g, err := a.get(tokens[w], "/v1/jobs/"+ids[w], etags[w])
					return expect(g.status, http.StatusNotModified, err)
				})})
	}
	rounds := 3
	if len(figs) == 1 {
		rounds = 1
	}
	rd := r.o.Duration / time.Duration(rounds)
	for round := range rounds {
		for fi, f := range figs {
			r.logf("%s: %s, %s, fsync %s (round %d/%d)", f.section, f.name, rd, fs, round+1, rounds)
			var s Samples
			var err error
			f.cpu.add(r.measure(p, fmt.Sprintf("%s-%d-%s-%d", f.section, fi, fs, round), func() { s, err = f.run(rd, round) }))
			if err != nil {
				return err
			}
			f.samples.Add(s)
		}
	}
	rows := map[string]*Row{}
	for _, f := range figs {
		sum := f.samples.Summary()
		note := ""
		if f.section == SecFloor {
			note = "in-process, on the gateway's own server and NATS connection"
		}
		if rounds > 1 {
			note = strings.TrimPrefix(note+fmt.Sprintf("; %d rounds interleaved with the other figures", rounds), "; ")
		}
		row := r.rep.add(Row{Section: f.section, Name: f.name, Fsync: fs, Value: sum.Rate, Unit: f.unit, Summary: &sum,
			Note: noteErrors(&sum, note)}).use(f.cpu)
		if rows[f.section] == nil {
			rows[f.section] = row
		}
		if f.section == SecStatus && row != rows[SecStatus] {
			relate(row, rows[SecStatus], "GET 200")
		}
	}
	floor, adm := rows[SecFloor], rows[SecAdmission]
	relate(adm, floor, "floor")
	relate(rows[SecReplay], adm, "admission")
	relate(rows[SecConflict], adm, "admission")
	if !always {
		goal(adm, "≥ 0.60× floor", floor != nil && adm != nil && adm.Ratio >= 0.6)
		goal(rows[SecReplay], "≥ 1.5× admission", adm != nil && rows[SecReplay] != nil && rows[SecReplay].Ratio >= 1.5)
	}

	if adm != nil && adm.Value/2 >= 1 {
		half := adm.Value / 2
		r.logf("admission at half the saturated rate (%.0f/s), fsync %s", half, fs)
		var ps Summary
		// An execution trace says where the tail comes from (go tool
		// trace: GC, scheduling, the stream's flush); docs/performance.md.
		tracing := r.profile(p, opTraceStart, "admission-half-"+fs+".trace")
		u := r.measure(p, "admission-half-"+fs, func() { ps = r.admitPaced(ctx, a, tokens, half, keyPrefix+"half-", body) })
		if tracing {
			_, _ = p.call(Request{Op: opTraceStop})
		}
		row := r.rep.add(Row{Section: SecAdmission, Name: fmt.Sprintf("new keys at half rate (%.0f/s offered), p99", half), Fsync: fs,
			Value: ps.P99, Unit: "ms", Summary: &ps,
			Note: noteErrors(&ps, "open loop; latency from each request's scheduled start")}).use(u)
		if !always {
			goal(row, "p99 ≤ 10 ms", ps.Errors == 0 && ps.P99 <= 10)
			r.halfRateWithoutGC(ctx, p, a, tokens, half, keyPrefix, body, row)
		}
	}
	if p != nil {
		r.rep.add(Row{Section: SecFootprint, Name: "target RSS after the gateway figures", Fsync: fs, Value: mib(p.rss()), Unit: "MiB"})
	}
	return nil
}

// admitPaced offers admissions of new keys (prefix and a number) at rate,
// open loop, for the run's duration, from four times as many goroutines as
// there are clients.
func (r *runner) admitPaced(ctx context.Context, a *api, tokens []string, rate float64, prefix string, body []byte) Summary {
	n := len(tokens)
	return pacedLoop(ctx, n*4, rate, r.o.Duration, func(w, i int) error {
		st, _, err := a.submit(tokens[w%n], prefix+strconv.Itoa(i), body)
		return expect(st, http.StatusAccepted, err)
	})
}

// halfRateWithoutGC offers the half rate again with the target's garbage
// collector off, and relates that p99 to the one with it: what the GC adds
// to the tail (docs/performance.md, "The tail"). The heap grows by what the
// window allocates (a few hundred MiB) and is collected right after.
func (r *runner) halfRateWithoutGC(ctx context.Context, p *proc, a *api, tokens []string, half float64, keyPrefix string, body []byte, with *Row) {
	if p == nil {
		return
	}
	prev, err := p.call(Request{Op: opGCPercent, Percent: -1})
	if err != nil {
		r.logf("gc off: %v", err)
		return
	}
	r.logf("admission at half the saturated rate (%.0f/s), the target's GC off", half)
	var s Summary
	u := r.measure(p, "admission-half-nogc", func() { s = r.admitPaced(ctx, a, tokens, half, keyPrefix+"half-nogc-", body) })
	if _, err := p.call(Request{Op: opGCPercent, Percent: prev.Percent}); err != nil {
		r.logf("gc back on: %v", err)
	}
	row := r.rep.add(Row{Section: SecAdmission, Name: fmt.Sprintf("the same half rate, the target's GC off (%.0f/s offered), p99", half), Fsync: "default",
		Value: s.P99, Unit: "ms", Summary: &s,
		Note: noteErrors(&s, "what the garbage collector adds to the tail: the row above minus this one")}).use(u)
	relate(row, with, "with GC")
}

// noteErrors mentions failed operations, which a figure must never hide.
func noteErrors(s *Summary, extra string) string {
	if s == nil || s.Errors == 0 {
		return extra
	}
	msg := fmt.Sprintf("%d failed operations, first: %s", s.Errors, s.FirstError)
	if extra != "" {
		msg = extra + "; " + msg
	}
	return msg
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// Levers are settings of the target that the calibration notes name as
// ways to a faster admission; the levers section measures each against its
// own floor (opt in: --sections levers).
var levers = []struct {
	name string
	env  []string
}{
	{"GOGC=400", []string{"GOGC=400"}},
	{"admission log at warn (no per-job info line)", []string{"JOBGATE_LOG_LEVEL=warn"}},
	{"GOGC=400 and log at warn", []string{"GOGC=400", "JOBGATE_LOG_LEVEL=warn"}},
}

// leversSuite measures floor and admission with each lever applied to the
// target process, default fsync.
func (r *runner) leversSuite(ctx context.Context) error {
	for _, lv := range levers {
		p, err := r.startEnv([]string{"gateway"}, false, 0, lv.env)
		if err != nil {
			return err
		}
		err = func() error {
			defer p.stop()
			a, err := r.apiFor(p, "bench")
			if err != nil {
				return err
			}
			tokens := make([]string, r.o.Clients)
			for w := range tokens {
				tokens[w] = a.token("client-" + strconv.Itoa(w))
			}
			floorS, admS, floorU, admU, err := r.floorVsAdmission(ctx, p, a, tokens)
			if err != nil {
				return err
			}
			fsum, s := floorS.Summary(), admS.Summary()
			floor := &Row{Section: SecLevers, Value: fsum.Rate, Summary: &fsum}
			floor.use(floorU)
			row := r.rep.add(Row{Section: SecLevers, Name: "admission with " + lv.name, Fsync: "default",
				Value: s.Rate, Unit: "jobs/s", Summary: &s,
				Note: noteErrors(&s, fmt.Sprintf("its own floor: %.0f jobs/s at %.0f µs target CPU per job", fsum.Rate, floor.ServerCPUPerOp))}).use(admU)
			relate(row, floor, "floor")
			return nil
		}()
		if err != nil {
			return err
		}
	}
	return nil
}

// floorVsAdmission measures the raw floor and admission in three
// interleaved rounds.
func (r *runner) floorVsAdmission(ctx context.Context, p *proc, a *api, tokens []string) (floorS, admS Samples, floorU, admU usage, err error) {
	n := len(tokens)
	body := permitBody(47, 29, 1)
	rd := r.o.Duration / 3
	for round := range 3 {
		var resp Response
		var ferr error
		floorU.add(r.measure(p, fmt.Sprintf("lever-floor-%d", round), func() {
			resp, ferr = p.call(Request{Op: opFloor, Clients: n, Duration: rd, Tenant: "floor" + strconv.Itoa(round)})
		}))
		if ferr != nil {
			return floorS, admS, floorU, admU, ferr
		}
		floorS.Add(*resp.Floor)
		prefix := "lever-" + strconv.Itoa(round) + "-"
		admU.add(r.measure(p, fmt.Sprintf("lever-admission-%d", round), func() {
			admS.Add(closedLoopSamples(ctx, n, rd, 0, func(w, i int) error {
				st, _, err := a.submit(tokens[w], prefix+strconv.Itoa(w)+"-"+strconv.Itoa(i), body)
				return expect(st, http.StatusAccepted, err)
			}))
		}))
	}
	return floorS, admS, floorU, admU, nil
}

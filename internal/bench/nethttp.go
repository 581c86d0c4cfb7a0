package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"time"
)

// SecNetHTTP is admission as a user's backend sees it (issue 40): Go's
// standard net/http client, one per requester with its own token and the
// default http.Transport's keep-alive, against the raw floor in the same
// target and against Asynq on Redis with appendfsync always (redis.go,
// tools/asynqbench), each in interleaved rounds of one run.
const SecNetHTTP = "nethttp"

// stdClient is one requester of a web backend: its own client and
// connection pool, its own token.
type stdClient struct {
	hc  *http.Client
	tok string
}

func (r *runner) stdClients(a *api, n int, prefix string) []stdClient {
	cs := make([]stdClient, n)
	for w := range cs {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		cs[w] = stdClient{hc: &http.Client{Transport: tr, Timeout: time.Minute}, tok: a.token(prefix + strconv.Itoa(w))}
	}
	return cs
}

func closeStd(cs []stdClient) {
	for _, c := range cs {
		c.hc.CloseIdleConnections()
	}
}

// submitStd POSTs one job as a user's backend would and reads the answer.
func submitStd(base string, c stdClient, key string, body []byte) error {
	req, err := http.NewRequest(http.MethodPost, base+"/v1/jobs", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", c.tok)
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return expect(resp.StatusCode, http.StatusAccepted, nil)
}

// netHTTPSuite measures, per fsync setting, admission through net/http at
// Clients clients and at one, against the floor (default fsync) and
// Asynq-AOF (both settings: Redis fsyncs every write either way), then the
// half-rate tail.
func (r *runner) netHTTPSuite(ctx context.Context) error {
	rd, err := startRedis(r.o.WorkDir)
	if err != nil {
		r.rep.note("nethttp: Asynq not measured: %v", err)
	}
	if rd != nil {
		defer rd.stop()
	}
	aq := r.asynqBench()
	if rd != nil && aq == "" {
		r.rep.note("nethttp: Asynq not measured: no asynqbench binary (make bench builds bin/asynqbench from tools/asynqbench; or --asynq-bench PATH)")
	}
	if aq == "" {
		rd = nil
	}
	for _, always := range r.fsyncs() {
		if err := r.netHTTPRun(ctx, always, rd, aq); err != nil {
			return err
		}
	}
	return nil
}

// asynqBench is the asynqbench binary's path, or "".
func (r *runner) asynqBench() string {
	if r.o.AsynqBench != "" {
		if p, err := exec.LookPath(r.o.AsynqBench); err == nil {
			return p
		}
		return ""
	}
	p, err := exec.LookPath("asynqbench")
	if err != nil {
		return ""
	}
	return p
}

func (r *runner) netHTTPRun(ctx context.Context, always bool, rd *redisProc, aq string) error {
	fs := fsyncName(always)
	p, err := r.start([]string{"gateway"}, always, 0)
	if err != nil {
		return err
	}
	if p != nil {
		defer p.stop()
	}
	a, err := r.apiFor(p, "std")
	if err != nil {
		return err
	}
	body := permitBody(47, 29, 1)
	seq := 0
	jobgate := func(cs []stdClient) func(d time.Duration) (Samples, error) {
		return func(d time.Duration) (Samples, error) {
			seq++
			prefix := "std-" + fs + "-" + strconv.Itoa(seq) + "-"
			return closedLoopSamples(ctx, len(cs), d, 0, func(w, i int) error {
				return submitStd(a.base, cs[w], prefix+strconv.Itoa(w)+"-"+strconv.Itoa(i), body)
			}), nil
		}
	}
	asynq := func(n int) func(d time.Duration) (Samples, error) {
		return func(d time.Duration) (Samples, error) {
			seq++
			return runAsynq(ctx, aq, rd.addr, n, d, fmt.Sprintf("%s-%d-%d", fs, seq, time.Now().UnixNano()))
		}
	}
	for _, n := range []int{r.o.Clients, 1} {
		cs := r.stdClients(a, n, fmt.Sprintf("std%d-", n))
		type fig struct {
			name, kind string
			run        func(time.Duration) (Samples, error)
			pid        int
			s          Samples
			u          usage
		}
		var figs []*fig
		if p != nil && !always && n > 1 {
			figs = append(figs, &fig{name: fmt.Sprintf("floor: kv create + work publish, %d goroutines in the target", n), kind: "floor", pid: p.ready.PID,
				run: func(d time.Duration) (Samples, error) {
					resp, err := p.call(Request{Op: opFloor, Clients: n, Duration: d, Tenant: "stdfloor" + strconv.Itoa(seq)})
					seq++
					if err != nil {
						return Samples{}, err
					}
					return *resp.Floor, nil
				}})
		}
		pid := 0
		if p != nil {
			pid = p.ready.PID
		}
		figs = append(figs, &fig{name: fmt.Sprintf("jobgate POST /v1/jobs, net/http, %d client(s)", n), kind: "jobgate", run: jobgate(cs), pid: pid})
		if n > 1 {
			// The same admission from the bench's usual fasthttp client: what
			// the client library changes, server side and client side.
			toks := make([]string, n)
			for w := range toks {
				toks[w] = a.token("fast" + strconv.Itoa(w))
			}
			figs = append(figs, &fig{name: fmt.Sprintf("jobgate POST /v1/jobs, fasthttp, %d clients", n), kind: "fasthttp", pid: pid,
				run: func(d time.Duration) (Samples, error) {
					seq++
					prefix := "fast-" + fs + "-" + strconv.Itoa(seq) + "-"
					return closedLoopSamples(ctx, n, d, 0, func(w, i int) error {
						st, _, err := a.submit(toks[w], prefix+strconv.Itoa(w)+"-"+strconv.Itoa(i), body)
						return expect(st, http.StatusAccepted, err)
					}), nil
				}})
		}
		if rd != nil {
			figs = append(figs, &fig{name: fmt.Sprintf("Asynq Enqueue (unique TaskID), Redis appendfsync always, %d client(s)", n), kind: "asynq", run: asynq(n), pid: rd.pid})
		}
		rdur := r.o.Duration / 3
		for round := range 3 {
			for _, f := range figs {
				r.logf("nethttp (fsync %s): %s (round %d/3)", fs, f.name, round+1)
				profiled := f.kind == "jobgate" && r.profile(p, opProfileStart, fmt.Sprintf("nethttp-%s-%d-%d.pprof", fs, n, round))
				// The client's side of the same requests: this process.
				stopClient := func() {}
				if profiled {
					stopClient = r.profileSelf(fmt.Sprintf("nethttp-client-%s-%d-%d.pprof", fs, n, round))
				}
				m := startCPU(f.pid)
				s, err := f.run(rdur)
				if profiled {
					stopClient()
					_, _ = p.call(Request{Op: opProfileStop})
				}
				if err != nil {
					closeStd(cs)
					return err
				}
				f.u.add(m.cores())
				f.s.Add(s)
			}
		}
		closeStd(cs)
		var floorRow, jg, aqRow, fastRow *Row
		for _, f := range figs {
			s := f.s.Summary()
			row := r.rep.add(Row{Section: SecNetHTTP, Name: f.name, Fsync: fs, Value: s.Rate, Unit: "jobs/s", Summary: &s,
				Note: noteErrors(&s, "")}).use(f.u)
			switch f.kind {
			case "floor":
				floorRow = row
			case "jobgate":
				jg = row
				if s.Rate > 0 {
					// What the user's side pays: net/http's client CPU per
					// request (this process is the client).
					row.Note = noteErrors(&s, fmt.Sprintf("client (net/http) CPU %.0f µs/request; server + client %.0f µs/job", f.u.gen/s.Rate*1e6, (f.u.srv+f.u.gen)/s.Rate*1e6))
				}
			case "fasthttp":
				fastRow = row
				if s.Rate > 0 {
					row.Note = noteErrors(&s, fmt.Sprintf("client (fasthttp) CPU %.0f µs/request", f.u.gen/s.Rate*1e6))
				}
			case "asynq":
				aqRow = row
				row.ServerCPUPerOp = 0 // the enqueuer's CPU is not redis-server's
				note := "srv = redis-server's CPU; the enqueuer (tools/asynqbench) is a process of its own, in other"
				if f.s.ClientCPU > 0 && s.Ops > 0 {
					note += fmt.Sprintf("; redis %.0f + enqueuer %.0f µs/job", f.u.srv/s.Rate*1e6, float64(f.s.ClientCPU.Microseconds())/float64(s.Ops))
				}
				row.Note = noteErrors(&s, note)
			}
		}
		if floorRow != nil {
			relate(jg, floorRow, "floor")
		}
		if fastRow != nil && fastRow.Value > 0 {
			jg.Note += fmt.Sprintf("; %.2f× fasthttp's rate", jg.Value/fastRow.Value)
		}
		if aqRow != nil {
			if jg.Ratio != 0 {
				jg.Note += fmt.Sprintf("; %.2f× floor", jg.Ratio)
			}
			relate(jg, aqRow, "Asynq-AOF")
			if n > 1 {
				goal(jg, "≥ 0.7× Asynq-AOF", jg.Ratio >= 0.7)
			}
		}
		if n > 1 && p != nil {
			if err := r.netHTTPHalf(ctx, a, fs, jg.Value/2); err != nil {
				return err
			}
		}
	}
	return nil
}

// netHTTPHalf is admission through net/http, open loop at rate, p99.
func (r *runner) netHTTPHalf(ctx context.Context, a *api, fs string, rate float64) error {
	cs := r.stdClients(a, r.o.Clients, "stdhalf-")
	defer closeStd(cs)
	body := permitBody(47, 29, 1)
	prefix := "stdhalf-" + fs + "-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-"
	r.logf("nethttp (fsync %s): half rate, %.0f/s for %s", fs, rate, r.o.Duration)
	s := pacedLoop(ctx, len(cs), rate, r.o.Duration, func(w, i int) error {
		return submitStd(a.base, cs[w], prefix+strconv.Itoa(i), body)
	})
	row := r.rep.add(Row{Section: SecNetHTTP, Name: fmt.Sprintf("jobgate POST /v1/jobs, net/http, half rate (%.0f/s offered), p99", rate), Fsync: fs,
		Value: s.P99, Unit: "ms", Summary: &s, Note: noteErrors(&s, "latency from each request's scheduled start")})
	if fs == "default" {
		goal(row, "p99 ≤ 5 ms", s.P99 <= 5)
	}
	return nil
}

// profileSelf starts a CPU profile of this process (the load generator)
// into name in --profile-dir and returns its stop.
func (r *runner) profileSelf(name string) func() {
	f, err := os.Create(filepath.Join(r.o.ProfileDir, name))
	if err != nil {
		r.logf("profile %s: %v", name, err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		r.logf("profile %s: %v", name, err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

// runAsynq runs tools/asynqbench for d and returns its samples.
func runAsynq(ctx context.Context, bin, addr string, clients int, d time.Duration, prefix string) (Samples, error) {
	cmd := exec.CommandContext(ctx, bin, "--redis", addr, "--clients", strconv.Itoa(clients), "--duration", d.String(), "--prefix", prefix)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return Samples{}, fmt.Errorf("asynqbench: %w: %s", err, errb.String())
	}
	var s Samples
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		return Samples{}, fmt.Errorf("asynqbench output: %w", err)
	}
	if ps := cmd.ProcessState; ps != nil {
		s.ClientCPU = ps.UserTime() + ps.SystemTime()
	}
	return s, nil
}

package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// SecTracing is what OpenTelemetry costs: admission and the pipeline with
// tracing off, on with a 1% sampler and on with every job sampled, each
// against off in the same run. The target exports OTLP over HTTP to a
// receiver in this process that reads and acknowledges every export, so
// the export's own work (batching, encoding, the HTTP requests) counts.
const SecTracing = "tracing"

// tracingMode is one target configuration of the tracing section.
type tracingMode struct {
	name string
	env  func(endpoint string) []string
}

var tracingModes = []tracingMode{
	{"off", func(string) []string { return []string{"OTEL_SDK_DISABLED=true"} }},
	{"1% sampled", func(ep string) []string {
		return []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + ep, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
			"OTEL_TRACES_SAMPLER=parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG=0.01"}
	}},
	{"every job sampled", func(ep string) []string {
		return []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + ep, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
			"OTEL_TRACES_SAMPLER=always_on"}
	}},
}

// otlpSink is an OTLP/HTTP endpoint that reads each export and answers it
// with an empty (valid) ExportTraceServiceResponse.
type otlpSink struct {
	srv             *http.Server
	url             string
	exports, octets atomic.Int64
}

func startOTLPSink() (*otlpSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &otlpSink{url: "http://" + ln.Addr().String()}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, io.LimitReader(r.Body, 64<<20))
		s.exports.Add(1)
		s.octets.Add(n)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	})
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *otlpSink) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
}

// tracingSuite runs, per mode, saturated admission (Clients clients) and
// the pipeline (bench_noop, as the pipeline section) on a target of its
// own, and relates each figure to the same figure with tracing off.
func (r *runner) tracingSuite(ctx context.Context) error {
	sink, err := startOTLPSink()
	if err != nil {
		return err
	}
	defer sink.stop()
	full := []string{"dispatcher", "renderer", "notifier", "gateway", "noop"}
	var offAdm, offPipe *Row
	for _, m := range tracingModes {
		exports, octets := sink.exports.Load(), sink.octets.Load()
		p, err := r.startEnv(full, false, 0, m.env(sink.url))
		if err != nil {
			return err
		}
		if p == nil {
			return nil // --url: the target's environment is not ours to set
		}
		adm, pipe, err := r.tracingRound(ctx, p, m.name)
		p.stop() // flushes the spans still batched
		if err != nil {
			return err
		}
		note := fmt.Sprintf("%d OTLP exports, %.1f MiB received", sink.exports.Load()-exports, float64(sink.octets.Load()-octets)/(1<<20))
		adm.Note, pipe.Note = note+"; "+adm.Note, note+"; "+pipe.Note
		if offAdm == nil {
			offAdm, offPipe = adm, pipe
			continue
		}
		relate(adm, offAdm, "tracing off")
		relate(pipe, offPipe, "tracing off")
	}
	return nil
}

// tracingRound measures one mode's admission and pipeline rows.
func (r *runner) tracingRound(ctx context.Context, p *proc, mode string) (adm, pipe *Row, err error) {
	a, err := r.apiFor(p, "trace")
	if err != nil {
		return nil, nil, err
	}
	if err := awaitType(ctx, a, NoopType); err != nil {
		return nil, nil, err
	}
	n := r.o.Clients
	tokens := make([]string, n)
	for w := range tokens {
		tokens[w] = a.token("trace-" + strconv.Itoa(w))
	}
	r.logf("tracing %s: admission, %d clients, %s", mode, n, r.o.Duration)
	var s Summary
	u := r.measure(p, "tracing-admission-"+mode, func() {
		s = closedLoop(ctx, n, r.o.Duration, 0, func(w, i int) error {
			body := []byte(`{"type":"` + NoopType + `","params":{"n":` + strconv.Itoa(i) + `}}`)
			st, _, err := a.submit(tokens[w], "adm-"+strconv.Itoa(w)+"-"+strconv.Itoa(i), body)
			return expect(st, http.StatusAccepted, err)
		})
	})
	adm = r.rep.add(Row{Section: SecTracing, Name: fmt.Sprintf("admission, tracing %s, %d clients", mode, n), Fsync: "default",
		Value: s.Rate, Unit: "jobs/s", Summary: &s, Note: noteErrors(&s, "bench_noop jobs")}).use(u)
	if s.Rate > 0 {
		adm.ServerCPUPerOp = u.srv / s.Rate * 1e6
	}
	// Let the worker finish the admitted backlog before the pipeline runs.
	if err := r.drainNoop(ctx, p, s.Ops-s.Errors); err != nil {
		return nil, nil, err
	}
	pt := make([]string, pipelineInserters)
	for w := range pt {
		pt[w] = tokens[w]
	}
	r.logf("tracing %s: pipeline, %d clients, %s", mode, pipelineInserters, r.o.Duration)
	var pr PipeResult
	var perr error
	// Measured to the end of the relay's grace: the spans a round made are
	// exported in it.
	pu := r.measure(p, "tracing-pipeline-"+mode, func() {
		pr, _, perr = r.jobgatePipeline(ctx, p, a, pt, r.o.Duration, 0)
	})
	if perr != nil {
		return nil, nil, perr
	}
	var res PipeResult
	res.add(pr)
	pipe = r.rep.add(Row{Section: SecTracing, Name: fmt.Sprintf("bench_noop over HTTP → succeeded, tracing %s, %d clients, %d worker slots", mode, pipelineInserters, pipelineWorkers),
		Fsync: "default", Value: res.rate(), Unit: "jobs/s", Summary: res.summary(), Note: res.note("")}).use(pu)
	return adm, pipe, nil
}

// drainNoop waits until the target's worker finished n bench_noop jobs
// (at most two minutes).
func (r *runner) drainNoop(ctx context.Context, p *proc, n int64) error {
	deadline := time.Now().Add(2 * time.Minute)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		now, err := p.call(Request{Op: opPipeStats})
		if err != nil {
			return err
		}
		if now.Stats.Succeeded >= n {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("tracing: %d admitted bench_noop jobs not finished within 2 minutes", n)
}

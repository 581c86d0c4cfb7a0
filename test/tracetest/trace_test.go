package tracetest

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/jobgate/jobgate/test/jobtest"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobgate/jobgate/internal/auth"
)

// service is the OTEL_SERVICE_NAME jobgate is run with; every exported
// span's resource must carry it.
const service = "jobgate-tracetest"

// webhookSecret is a Standard Webhooks secret: "whsec_" + base64 of the key.
const webhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// OTLP span kinds as the JSON encoding numbers them.
const (
	kindServer   = 2
	kindClient   = 3
	kindProducer = 4
	kindConsumer = 5
)

// collectorConfig: OTLP over HTTP in, one OTLP JSON line per export out.
// service.telemetry is left out: tools/otelcol's telemetry takes no
// settings.
const collectorConfig = `receivers:
  otlp:
    protocols:
      http:
        endpoint: %q
exporters:
  file:
    path: %q
    flush_interval: 100ms
service:
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [file]
`

// serveConfig: one webhook for tenant 4, on loopback, for the job's
// success only, so the trace has exactly one delivery.
const serveConfig = `http_addr: %q
data_dir: %q
auth_secret: %q
notifier:
  allow_private_webhooks: true
  webhook_retries: [100ms, 100ms]
  webhooks:
    "4":
      - url: %q
        secret: %q
        states: [succeeded]
`

// One job's trace as it leaves the processes: `jobgate serve` exports over
// OTLP (configured by OTEL_* alone) to a real Collector, and the spans read
// back from the Collector's file are one trace, the caller's, nested as
// the contract says: the admission continues the caller's span; the
// relay's publish, the attempt and the webhook delivery are the
// admission's children; the worker's handler span and the result upload
// are the attempt's. The webhook receiver continues the delivery's span.
// serve is stopped with SIGTERM before anything is read: its spans reach
// the Collector because stopping flushes them.
func TestAJobsTraceReachesARealCollector(t *testing.T) {
	root := jobtest.RepoRoot(t)
	col := startCollector(t, root)
	dir := t.TempDir()
	jobgate := filepath.Join(dir, "jobgate")
	require.NoError(t, jobtest.GoBuild(root, jobgate, "./cmd/jobgate"))
	hooks := startHookReceiver(t)

	secret, httpAddr := "tracetest-secret", jobtest.FreeAddr(t)
	serveConf := writeFile(t, dir, "jobgate.yaml", fmt.Sprintf(serveConfig,
		httpAddr, filepath.Join(dir, "data"), secret, hooks.url, webhookSecret))
	serve := start(t, "jobgate serve", jobgate, []string{"serve", "--config", serveConf}, col.env(service))
	base := "http://" + httpAddr
	serve.waitFor(t, "/readyz to answer 200", 90*time.Second, func() error {
		if status, _ := get(base + "/readyz"); status != http.StatusOK {
			return fmt.Errorf("/readyz answers %d", status)
		}
		return nil
	})

	traceID, callerSpan := randomHex(t, 16), randomHex(t, 8)
	id := submit(t, base, mint(t, secret), "00-"+traceID+"-"+callerSpan+"-01", permitReport)
	hook := hooks.wait(t, id)
	// The delivery's span ends once the notifier has the receiver's answer;
	// the counter says it has, so the stop below cannot cut the span short.
	serve.waitFor(t, "the delivery to be counted", 30*time.Second, func() error {
		const line = `jobgate_deliveries_total{channel="webhook",outcome="delivered"} 1`
		if _, metrics := get(base + "/metrics"); !strings.Contains(metrics, line) {
			return fmt.Errorf("/metrics has no %s", line)
		}
		return nil
	})
	serve.stop(t, time.Minute)

	services := map[string]string{}
	for _, name := range jobSpans {
		services[name] = service
	}
	checkJobTrace(t, col.collect(t), jobTrace{traceID: traceID, callerSpan: callerSpan, jobID: id, hook: hook}, services)
}

// permitReport is the job both tests submit: the built-in type, two pages.
const permitReport = `{"type":"permit_report","params":{"case_id":47,"revision":29,"pages":2}}`

// jobSpans are the spans of one job that succeeds and is delivered by one
// webhook: the admission, the relay's publish, the attempt, the worker's
// handler, the result upload and the webhook delivery.
var jobSpans = []string{"POST /v1/jobs", "relay publish", "attempt permit_report", "run permit_report", "result upload", "webhook POST"}

// jobTrace is what a test knows of the trace its job should have made.
type jobTrace struct {
	traceID, callerSpan string // the caller's traceparent
	jobID               string
	hook                delivery // the webhook receiver's
}

// checkJobTrace asserts the exported spans are one trace, the caller's,
// nested as the contract says, whichever process exported each:
// services names the service.name each of jobSpans must be exported
// under, and every other span must carry one of those names too.
func checkJobTrace(t *testing.T, spans []span, jt jobTrace, services map[string]string) {
	t.Helper()
	known := map[string]bool{}
	for _, svc := range services {
		known[svc] = true
	}
	traces := map[string]int{}
	for _, s := range spans {
		traces[s.traceID]++
		if want, ok := services[s.name]; ok {
			require.Equal(t, want, s.service, "span %q: service.name is its process's OTEL_SERVICE_NAME", s.name)
		} else {
			require.True(t, known[s.service], "span %q: service.name %q is none of the processes' (%v)", s.name, s.service, services)
		}
	}
	require.Equal(t, map[string]int{jt.traceID: len(spans)}, traces, "every exported span is in the caller's trace")
	named := func(name string) []span {
		var out []span
		for _, s := range spans {
			if s.name == name {
				out = append(out, s)
			}
		}
		return out
	}
	one := func(name string) span {
		t.Helper()
		got := named(name)
		require.Len(t, got, 1, "one %q span", name)
		return got[0]
	}

	adm := one("POST /v1/jobs")
	require.Equal(t, jt.callerSpan, adm.parent, "the admission continues the caller's span")
	require.Equal(t, kindServer, adm.kind)
	require.Equal(t, jt.jobID, adm.attrs["jobgate.job.id"])
	require.Equal(t, "new", adm.attrs["jobgate.idempotency.outcome"])
	require.Equal(t, "POST", adm.attrs["http.request.method"], "the method as sent, not the bytes of a later request")

	relays := named("relay publish")
	require.NotEmpty(t, relays, "the relay's publish of the work")
	for _, r := range relays {
		require.Equal(t, adm.id, r.parent, "the relay's publish is the admission's child")
		require.Equal(t, kindProducer, r.kind)
		require.Equal(t, jt.jobID, r.attrs["jobgate.job.id"])
	}

	att := one("attempt permit_report")
	require.Equal(t, adm.id, att.parent, "the attempt is the admission's child")
	require.Equal(t, kindConsumer, att.kind)
	require.Equal(t, "succeeded", att.attrs["jobgate.attempt.outcome"])

	run := one("run permit_report")
	require.Equal(t, att.id, run.parent, "the worker's handler span is the attempt's child")
	require.Equal(t, "github.com/jobgate/jobgate/pkg/worker", run.scope, "the handler's span is pkg/worker's")

	up := one("result upload")
	require.Equal(t, att.id, up.parent, "the result upload is the attempt's child")
	require.Equal(t, "stored", up.attrs["jobgate.result.outcome"])

	wh := one("webhook POST")
	require.Equal(t, adm.id, wh.parent, "the webhook delivery is the admission's child")
	require.Equal(t, kindClient, wh.kind)
	require.Equal(t, "delivered", wh.attrs["jobgate.delivery.outcome"])
	require.Equal(t, jt.jobID, wh.attrs["jobgate.job.id"])

	require.Equal(t, "00-"+jt.traceID+"-"+wh.id+"-01", jt.hook.traceparent,
		"the receiver got the caller's trace, continued from the delivery's span")
}

// collector is a running OpenTelemetry Collector (tools/otelcol) taking
// OTLP over HTTP and writing what it gets to a file.
type collector struct {
	*proc
	addr  string // its OTLP/HTTP listener
	spans string // the file exporter's output
}

// startCollector starts bin/tools/otelcol; a missing one skips the test
// (fails it under CI=true).
func startCollector(t *testing.T, root string) *collector {
	t.Helper()
	bin := filepath.Join(root, "bin", "tools", "otelcol")
	if _, err := os.Stat(bin); err != nil {
		missing(t, "the test's OpenTelemetry Collector is not built (%s)", bin)
	}
	dir := t.TempDir()
	c := &collector{addr: jobtest.FreeAddr(t), spans: filepath.Join(dir, "spans.jsonl")}
	conf := writeFile(t, dir, "otelcol.yaml", fmt.Sprintf(collectorConfig, c.addr, c.spans))
	c.proc = start(t, "otelcol", bin, []string{"--config", conf}, jobtest.ChildEnv())
	c.waitFor(t, "the collector to be ready", time.Minute, func() error {
		if !strings.Contains(c.out.String(), "Everything is ready") {
			return errors.New("it has not logged that it is ready")
		}
		return nil
	})
	return c
}

// env is the environment of a jobgate process exporting its spans to c
// as service: the standard OTEL_* variables only, as an operator sets them.
func (c *collector) env(service string, extra ...string) []string {
	return jobtest.ChildEnv(append([]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + c.addr,
		"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_SERVICE_NAME=" + service,
		"OTEL_TRACES_SAMPLER=parentbased_always_on",
	}, extra...)...)
}

// collect waits until every one of jobSpans is in the collector's file,
// stops the collector (so the file is complete) and returns what it holds.
// Call it once the exporting processes are stopped: their spans are
// flushed then.
func (c *collector) collect(t *testing.T) []span {
	t.Helper()
	c.waitFor(t, "every span to reach the collector's file", 30*time.Second, func() error {
		got := map[string]bool{}
		for _, s := range readSpans(c.spans, true) {
			got[s.name] = true
		}
		var lack []string
		for _, n := range jobSpans {
			if !got[n] {
				lack = append(lack, n)
			}
		}
		if lack != nil {
			return fmt.Errorf("no span %q yet (only %v)", lack, slices.Sorted(maps.Keys(got)))
		}
		return nil
	})
	c.stop(t, 30*time.Second)
	spans := readSpans(c.spans, false)
	require.NotNil(t, spans, "the collector's file %s is not OTLP JSON lines", c.spans)
	return spans
}

// mint is a token of tenant 4, the tenant the webhook is configured for.
func mint(t *testing.T, secret string) string {
	t.Helper()
	tok, err := auth.Mint([]byte(secret), auth.Identity{Tenant: "4", Requester: "reviewer-47"}, time.Hour, time.Now())
	require.NoError(t, err)
	return tok
}

// submit admits one job under the caller's traceparent and returns its id.
func submit(t *testing.T, base, tok, traceparent, body string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/v1/jobs", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Idempotency-Key", "tracetest-1")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", traceparent)
	resp, err := httpClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, "%s", data)
	var r struct {
		ID string `json:"id"`
	}
	require.NoError(t, json.Unmarshal(data, &r))
	require.NotEmpty(t, r.ID, "%s", data)
	return r.ID
}

// httpClient bounds every request, so a wedged server fails a poll
// instead of hanging it.
var httpClient = &http.Client{Timeout: 10 * time.Second}

// get returns the status and body of a GET, 0 when the server is not
// answering (yet).
func get(url string) (int, string) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, err.Error()
	}
	return do(req)
}

// do is get's request and answer.
func do(req *http.Request) (int, string) {
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// delivery is one webhook request as the receiver got it.
type delivery struct {
	traceparent string
	body        string
}

// hookReceiver hands every delivery to the test and answers 204.
type hookReceiver struct {
	url string // where the webhook is configured to go
	got chan delivery
}

func startHookReceiver(t *testing.T) *hookReceiver {
	t.Helper()
	h := &hookReceiver{got: make(chan delivery, 8)}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	h.url = srv.URL + "/hooks/jobgate"
	return h
}

// wait returns the first delivery, which must be job id's.
func (h *hookReceiver) wait(t *testing.T, id string) delivery {
	t.Helper()
	select {
	case d := <-h.got:
		require.Contains(t, d.body, id, "the delivery is the job's")
		return d
	case <-time.After(90 * time.Second):
		t.Fatal("no webhook delivery within 90s of the admission")
		return delivery{}
	}
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	select {
	case h.got <- delivery{traceparent: r.Header.Get("traceparent"), body: string(body)}:
	default: // more deliveries than the test reads: the assertions count spans
	}
	w.WriteHeader(http.StatusNoContent)
}

// span is what the test reads of one exported span.
type span struct {
	traceID, id, parent string
	name, scope         string
	kind                int
	attrs               map[string]string
	service             string
}

// otlpFile is one line of the file exporter's output: an OTLP/JSON
// export request (ids in hex, 64-bit integers as strings).
type otlpFile struct {
	ResourceSpans []struct {
		Resource struct {
			Attributes []otlpAttr `json:"attributes"`
		} `json:"resource"`
		ScopeSpans []struct {
			Scope struct {
				Name string `json:"name"`
			} `json:"scope"`
			Spans []struct {
				TraceID      string     `json:"traceId"`
				SpanID       string     `json:"spanId"`
				ParentSpanID string     `json:"parentSpanId"`
				Name         string     `json:"name"`
				Kind         int        `json:"kind"`
				Attributes   []otlpAttr `json:"attributes"`
			} `json:"spans"`
		} `json:"scopeSpans"`
	} `json:"resourceSpans"`
}

type otlpAttr struct {
	Key   string `json:"key"`
	Value struct {
		StringValue *string      `json:"stringValue"`
		IntValue    *json.Number `json:"intValue"`
		BoolValue   *bool        `json:"boolValue"`
	} `json:"value"`
}

func attrMap(attrs []otlpAttr) map[string]string {
	m := make(map[string]string, len(attrs))
	for _, a := range attrs {
		switch v := a.Value; {
		case v.StringValue != nil:
			m[a.Key] = *v.StringValue
		case v.IntValue != nil:
			m[a.Key] = v.IntValue.String()
		case v.BoolValue != nil:
			m[a.Key] = fmt.Sprint(*v.BoolValue)
		}
	}
	return m
}

// readSpans parses the collector's file. While the collector runs its
// last line may be half written: partial skips a line that does not
// parse. Otherwise such a line makes the answer nil.
func readSpans(path string, partial bool) []span {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	spans := []span{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var f otlpFile
		if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
			if partial {
				continue
			}
			return nil
		}
		for _, rs := range f.ResourceSpans {
			svc := attrMap(rs.Resource.Attributes)["service.name"]
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					spans = append(spans, span{traceID: s.TraceID, id: s.SpanID, parent: s.ParentSpanID,
						name: s.Name, scope: ss.Scope.Name, kind: s.Kind, attrs: attrMap(s.Attributes), service: svc})
				}
			}
		}
	}
	if sc.Err() != nil && !partial {
		return nil
	}
	return spans
}

// proc is a child process whose output is kept for the failure message.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error // Wait's answer, set before done is closed
}

func start(t *testing.T, name, path string, args, env []string) *proc {
	t.Helper()
	p := &proc{name: name, cmd: exec.Command(path, args...), out: &syncBuffer{}, done: make(chan struct{})}
	p.cmd.Env, p.cmd.Stdout, p.cmd.Stderr = env, p.out, p.out
	require.NoError(t, p.cmd.Start(), "start %s", name)
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", name, p.out.String())
		}
	})
	return p
}

// waitFor polls cond until it answers nil; the process exiting first, or
// the deadline passing, fails the test with cond's last answer.
func (p *proc) waitFor(t *testing.T, what string, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for err := cond(); err != nil; err = cond() {
		select {
		case <-p.done:
			t.Fatalf("%s exited (%v) while the test waited for %s: %v", p.name, p.err, what, err)
		case <-deadline.C:
			t.Fatalf("waited %s for %s: %v", timeout, what, err)
		case <-tick.C:
		}
	}
}

// stop sends SIGTERM and requires a clean exit within timeout.
func (p *proc) stop(t *testing.T, timeout time.Duration) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM), "SIGTERM to %s", p.name)
	select {
	case <-p.done:
	case <-time.After(timeout):
		t.Fatalf("%s did not exit within %s of SIGTERM", p.name, timeout)
	}
	require.NoError(t, p.err, "%s's exit after SIGTERM", p.name)
}

// missing skips the test when the collector is not built here, and fails
// it under CI=true, where the suite must really run.
func missing(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true and "+format+"; `make test` builds it (scripts/ensure-otelcol.sh)", args...)
	}
	t.Skipf(format+"; `make test` builds it (scripts/ensure-otelcol.sh), or run that script", args...)
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

type syncBuffer = jobtest.SyncBuffer

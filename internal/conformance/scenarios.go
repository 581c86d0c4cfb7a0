package conformance

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/stretchr/testify/require"
)

// Impl is one implementation of the worker protocol under test: how to
// start its worker processes, and its main one, running the types
// <name>_work, <name>_timeout and <name>_small.
type Impl struct {
	// Name prefixes its types and is what its handlers write ("done by
	// <name> at attempt 2"): [a-z][a-z0-9]{0,15}.
	Name string
	// Start starts a worker process of the implementation running the
	// given kinds of the spec on a credential.
	Start  func(t T, name string, cred Credential, kinds ...string) *proc
	worker *proc
	// startVia starts a worker process as Start does, connected to
	// natsURL (the lease scenario's partition) instead.
	startVia func(t T, natsURL, name string, cred Credential, kinds ...string) *proc
}

// Suite is what the scenarios share: one deployment, the spec, the gates.
type Suite struct {
	d     *deployment
	gates string // hold-mode gates: a file here lets a handler finish
	spec  string // the spec's file (CONF_SPEC)
}

func (s *Suite) open(t T, gate string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(s.gates, gate), nil, 0o644))
}

// Scenario is one check of an implementation.
type Scenario struct {
	Name string
	Run  func(t T, s *Suite, im *Impl)
}

// Scenarios are what every implementation of the worker protocol must
// pass, each against its main worker process but handover, which starts
// three more, and lease, which starts one behind a partition.
var Scenarios = []Scenario{
	{"declare", scenarioDeclare},
	{"result", scenarioResult},
	{"progress", scenarioProgress},
	{"cancel", scenarioCancel},
	{"permanent", scenarioPermanent},
	{"retried_error", scenarioRetriedError},
	{"timeout", scenarioTimeout},
	{"oversize", scenarioOversize},
	{"quota_refused", scenarioQuotaRefused},
	{"handover", func(t T, s *Suite, im *Impl) { handover(t, s, im, im, "takeover", "giveback") }},
	{"lease", scenarioLease},
}

// mainKinds are the kinds of the spec an implementation's main worker
// process runs.
var mainKinds = []string{"work", "timeout", "small"}

// Its types are declared as the spec says: the schema, every limit, and a
// live worker process.
func scenarioDeclare(t T, s *Suite, im *Impl) {
	raw, err := os.ReadFile(s.spec)
	require.NoError(t, err)
	var spec struct {
		Schema json.RawMessage `json:"schema"`
		Types  map[string]struct {
			TimeoutSeconds int    `json:"timeout_seconds"`
			Attempts       int    `json:"attempts"`
			MaxResultBytes int64  `json:"max_result_bytes"`
			ContentType    string `json:"content_type"`
		} `json:"types"`
	}
	require.NoError(t, json.Unmarshal(raw, &spec))
	c := s.d.client(t, "declare-"+im.Name, "requester-"+im.Name)
	for _, kind := range mainKinds {
		name := im.Name + "_" + kind
		var ti typeInfo
		require.Eventually(t, func() bool {
			var ok bool
			ti, ok = c.typeInfo(t, name)
			return ok && ti.Workers >= 1
		}, 20*time.Second, 100*time.Millisecond, "type %s declared with a live worker", name)
		want := spec.Types[kind]
		require.JSONEq(t, string(spec.Schema), string(ti.Schema), "the schema of %s", name)
		require.Equal(t, want.TimeoutSeconds, ti.TimeoutSeconds, name)
		require.Equal(t, want.Attempts, ti.Attempts, name)
		require.Equal(t, want.MaxResultBytes, ti.MaxResultBytes, name)
		require.Equal(t, want.ContentType, ti.ContentType, name)
	}
}

// A result past the type's max_result_bytes is refused as it arrives: the
// worker fails the attempt with kind too_large, which is not retried, and
// the job fails budget_exceeded (docs/protocol.md, the kinds' table).
func scenarioOversize(t T, s *Suite, im *Impl) {
	c := s.d.client(t, "oversize-"+im.Name, "requester-"+im.Name)
	j := c.submit(t, im.Name+"_small", map[string]any{"mode": "result", "blocks": 200, "seed": 5})
	j = c.terminal(t, j.ID, 30*time.Second)
	require.Equal(t, "failed", j.State)
	require.NotNil(t, j.Error)
	require.Equal(t, "budget_exceeded", j.Error.Category)
	require.Equal(t, 1, j.Attempt)
	require.Nil(t, j.Result)
}

// expectedResult is what the result mode writes: per block a text line
// (written as a string, with non-ASCII characters) and 1000 binary bytes,
// then a tail of binary bytes in one write larger than a chunk.
func expectedResult(blocks, tail, seed int) []byte {
	var b bytes.Buffer
	for i := range blocks {
		fmt.Fprintf(&b, "%d %d ü€\n", i, seed)
		for j := range 1000 {
			b.WriteByte(byte(i*7 + j*13 + seed))
		}
	}
	for j := range tail {
		b.WriteByte(byte(j*31 + seed))
	}
	return b.Bytes()
}

// Params in, result out: a streamed result of more than 1 MiB (many
// chunks, the last one short), stored and served byte for byte, under the
// type's declared content type, with the size and SHA-256 the worker
// checked; the final progress arrives with the verdict.
func scenarioResult(t T, s *Suite, im *Impl) {
	c := s.d.client(t, "result-"+im.Name, "requester-"+im.Name)
	blocks, tailLen, seed := 1100, 300_001, 17
	seed += len(im.Name) // the implementations' results differ
	want := expectedResult(blocks, tailLen, seed)
	require.Greater(t, len(want), 1<<20)
	began := time.Now()
	// A traced job: the handler sees the caller's trace (the assignment's
	// traceparent; Go's handler ctx, TypeScript's job.traceparent).
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	j := c.submit(t, im.Name+"_work", map[string]any{"mode": "result", "blocks": blocks, "tail": tailLen, "seed": seed},
		"traceparent: 00-"+traceID+"-00f067aa0ba902b7-01")
	require.Equal(t, "queued", j.State)
	j = c.terminal(t, j.ID, 60*time.Second)
	took := time.Since(began)
	require.Equal(t, "succeeded", j.State, "%+v", j.Error)
	require.Equal(t, 1, j.Attempt)
	require.NotNil(t, j.Result)
	sum := sha256.Sum256(want)
	require.Equal(t, int64(len(want)), j.Result.Size)
	require.Equal(t, hex.EncodeToString(sum[:]), j.Result.SHA256)
	require.Equal(t, "application/vnd.jobgate.conformance", j.Result.ContentType)
	require.NotNil(t, j.Progress)
	require.Equal(t, blocks, j.Progress.Done)
	require.Equal(t, blocks, j.Progress.Total)
	require.Equal(t, "blocks", j.Progress.Unit)
	starts := im.worker.find(eventOf("started", j.ID))
	require.Len(t, starts, 1)
	require.Equal(t, traceID, starts[0].str("trace_id"), "the handler is in the caller's trace")

	got := c.download(t, j.ID)
	require.Equal(t, "application/vnd.jobgate.conformance", got.header.Get("Content-Type"))
	require.True(t, strings.HasPrefix(got.header.Get("Content-Disposition"), "attachment"), got.header.Get("Content-Disposition"))
	require.Equal(t, len(want), len(got.body), "result length")
	if !bytes.Equal(want, got.body) {
		i := 0
		for i < len(want) && want[i] == got.body[i] {
			i++
		}
		t.Fatalf("result differs from what the handler wrote at byte %d of %d", i, len(want))
	}
	t.Logf("%s: %d bytes streamed, stored and downloaded byte for byte; job done in %s", im.Name, len(want), took.Round(time.Millisecond))
}

// Progress reported by the handler is visible in the job resource while it
// runs (a change: a new ETag), and the last one stays with the verdict.
func scenarioProgress(t T, s *Suite, im *Impl) {
	c := s.d.client(t, "progress-"+im.Name, "requester-"+im.Name)
	gate := "progress-" + im.Name
	j := c.submit(t, im.Name+"_work", map[string]any{"mode": "hold", "gate": gate})
	began := time.Now()
	running := c.until(t, j.ID, 20*time.Second, "running with progress 1/2", func(j jobView) bool {
		return j.State == "running" && j.Progress != nil && j.Progress.Done == 1
	})
	t.Logf("%s: progress visible %s after submission", im.Name, time.Since(began).Round(time.Millisecond))
	require.Equal(t, 2, running.Progress.Total)
	require.Equal(t, "steps", running.Progress.Unit)
	require.NotEmpty(t, running.etag)
	im.worker.wait(t, 5*time.Second, "handler start", eventOf("started", j.ID))

	s.open(t, gate)
	done := c.terminal(t, j.ID, 20*time.Second)
	require.Equal(t, "succeeded", done.State, "%+v", done.Error)
	require.NotNil(t, done.Progress)
	require.Equal(t, 2, done.Progress.Done)
	require.Equal(t, 2, done.Progress.Total)
	require.NotEqual(t, running.etag, done.etag)
	got := c.download(t, j.ID)
	require.Equal(t, fmt.Sprintf("done by %s at attempt 1\n", im.Name), string(got.body))
}

// DELETE /v1/jobs/{id} of a running job: the job ends canceled at once, the
// handler sees its signal abort within a few beats, and nothing the worker
// does afterwards changes the job.
func scenarioCancel(t T, s *Suite, im *Impl) {
	c := s.d.client(t, "cancel-"+im.Name, "requester-"+im.Name)
	j := c.submit(t, im.Name+"_work", map[string]any{"mode": "hold"})
	c.until(t, j.ID, 20*time.Second, "running", func(j jobView) bool { return j.State == "running" && j.Progress != nil })
	im.worker.wait(t, 5*time.Second, "handler start", eventOf("started", j.ID))

	began := time.Now()
	r := c.do(t, http.MethodDelete, "/v1/jobs/"+j.ID, "")
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
	var after jobView
	require.NoError(t, json.Unmarshal(r.body, &after))
	require.Equal(t, "canceled", after.State)

	ab := im.worker.wait(t, 10*time.Second, "abort seen by the handler", eventOf("aborted", j.ID))
	t.Logf("%s: handler aborted (%s) %s after the DELETE", im.Name, ab.str("reason"), time.Since(began).Round(time.Millisecond))
	require.Contains(t, []string{"canceled", "lost"}, ab.str("reason"), "the reason the handler reads")
	im.worker.wait(t, 5*time.Second, "attempt end", func(e event) bool {
		return e.str("event") == "attempt" && e.str("type") == im.Name+"_work" && e.str("outcome") == "lost"
	})
	time.Sleep(700 * time.Millisecond) // a beat or so: a worker that went on would have reported by now
	j = c.job(t, j.ID)
	require.Equal(t, "canceled", j.State)
	require.Nil(t, j.Result)
	r = c.do(t, http.MethodGet, "/v1/jobs/"+j.ID+"/result", "")
	require.Equal(t, http.StatusConflict, r.status)
	require.Contains(t, string(r.body), "job-canceled")
	require.Len(t, im.worker.find(eventOf("started", j.ID)), 1, "a canceled job is not run again")
}

// A Permanent failure fails the job at once, its message shown to the user.
func scenarioPermanent(t T, s *Suite, im *Impl) {
	c := s.d.client(t, "permanent-"+im.Name, "requester-"+im.Name)
	msg := "case 47 has no revision 29 (" + im.Name + ")"
	j := c.submit(t, im.Name+"_work", map[string]any{"mode": "permanent", "message": msg})
	j = c.terminal(t, j.ID, 20*time.Second)
	require.Equal(t, "failed", j.State)
	require.Equal(t, 1, j.Attempt, "a permanent failure is not retried")
	require.NotNil(t, j.Error)
	require.Equal(t, "handler_error", j.Error.Category)
	require.Equal(t, msg, j.Error.Message)
	require.False(t, j.Error.Retryable)
	r := c.do(t, http.MethodGet, "/v1/jobs/"+j.ID+"/result", "")
	require.Equal(t, http.StatusConflict, r.status)
	require.Contains(t, string(r.body), "job-failed")
	require.Len(t, im.worker.find(eventOf("started", j.ID)), 1)
}

// A result past its tenant's result quota is refused as it arrives: jobgate
// fails the job budget_exceeded itself and says so ("failed": true), and
// the worker reports nothing more of the attempt, but logs the refusal.
func scenarioQuotaRefused(t T, s *Suite, im *Impl) {
	c := s.d.client(t, "quota-"+im.Name, "requester-"+im.Name)
	blocks, tailLen := 1100, 4_000_000
	require.Greater(t, len(expectedResult(blocks, tailLen, 3)), conformanceQuota)
	j := c.submit(t, im.Name+"_work", map[string]any{"mode": "result", "blocks": blocks, "tail": tailLen, "seed": 3})
	j = c.terminal(t, j.ID, 60*time.Second)
	require.Equal(t, "failed", j.State)
	require.NotNil(t, j.Error)
	require.Equal(t, "budget_exceeded", j.Error.Category)
	require.Equal(t, 1, j.Attempt)
	require.Eventually(t, func() bool {
		for _, line := range strings.Split(im.worker.stderr.String(), "\n") {
			if strings.Contains(line, "result refused") && strings.Contains(line, j.ID) {
				return true
			}
		}
		return false
	}, 10*time.Second, 20*time.Millisecond, "the worker logs the refusal of %s", j.ID)
}

// A plain error is retried after a backoff (the job stays running, with
// retry_at) and, when the attempts run out, fails with a generic message:
// the handler's text, meant for the operator, is never shown to the user.
func scenarioRetriedError(t T, s *Suite, im *Impl) {
	c := s.d.client(t, "error-"+im.Name, "requester-"+im.Name)
	secret := "dial db-7.internal: password hunter2 refused"
	j := c.submit(t, im.Name+"_work", map[string]any{"mode": "error", "message": secret})
	between := c.until(t, j.ID, 20*time.Second, "waiting to retry", func(j jobView) bool {
		return j.State == "running" && j.RetryAt != "" || j.terminal()
	})
	require.Equal(t, "running", between.State, "retried, not failed: %+v", between.Error)
	require.Equal(t, 1, between.Attempt)
	retryAt, err := time.Parse(time.RFC3339Nano, between.RetryAt)
	require.NoError(t, err)
	t.Logf("%s: attempt 1 failed, attempt 2 due in %s", im.Name, time.Until(retryAt).Round(time.Millisecond))

	j = c.terminal(t, j.ID, 60*time.Second)
	require.Equal(t, "failed", j.State)
	require.Equal(t, 2, j.Attempt)
	require.NotNil(t, j.Error)
	require.Equal(t, "handler_error", j.Error.Category)
	require.Contains(t, j.Error.Message, "the job's worker reported an error")
	require.NotContains(t, j.Error.Message, "hunter2")
	require.NotContains(t, j.Error.Message, "db-7")
	starts := im.worker.find(eventOf("started", j.ID))
	require.Len(t, starts, 2)
	require.Equal(t, 1, starts[0].num("attempt"))
	require.Equal(t, 2, starts[1].num("attempt"))
}

// The attempt's time budget: the handler's signal aborts (timeout), and
// the job fails timeout when its one attempt is used.
func scenarioTimeout(t T, s *Suite, im *Impl) {
	c := s.d.client(t, "timeout-"+im.Name, "requester-"+im.Name)
	j := c.submit(t, im.Name+"_timeout", map[string]any{"mode": "hold"})
	j = c.terminal(t, j.ID, 30*time.Second)
	require.Equal(t, "failed", j.State)
	require.NotNil(t, j.Error)
	require.Equal(t, "timeout", j.Error.Category)
	ab := im.worker.wait(t, 5*time.Second, "abort seen by the handler", eventOf("aborted", j.ID))
	require.Equal(t, "timeout", ab.str("reason"))
}

// handover: two worker processes of from hold a job each (kinds crash and
// drain of the spec, one attempt left after the first): one is killed
// with SIGKILL mid-job, the other stopped with SIGTERM (its drain time
// runs out, the handler aborts with "shutdown" and the job is given back;
// its bye withdraws its presence). A process of to on the same credential
// then finishes both: the given-back job at once without using up its
// only attempt, the crashed one once its claim went stale.
func handover(t T, s *Suite, from, to *Impl, crashKind, drainKind string) {
	c := s.d.client(t, "handover-"+from.Name+"-"+to.Name, "requester")
	crashType, drainType := typeName(from, crashKind, s), typeName(from, drainKind, s)
	cred := s.d.workerCredential(t, crashType, drainType)
	crash := from.Start(t, from.Name+"-crash", cred, crashKind)
	drain := from.Start(t, from.Name+"-drain", cred, drainKind)
	crash.wait(t, 30*time.Second, "ready", eventOf("ready", ""))
	drain.wait(t, 30*time.Second, "ready", eventOf("ready", ""))
	gate := "handover-" + from.Name + "-" + to.Name

	hj := c.submit(t, crashType, map[string]any{"mode": "hold", "gate": gate + "-crash"})
	dj := c.submit(t, drainType, map[string]any{"mode": "hold", "gate": gate + "-drain"})
	for _, id := range []string{hj.ID, dj.ID} {
		c.until(t, id, 20*time.Second, "running with progress", func(j jobView) bool {
			return j.State == "running" && j.Progress != nil && j.Progress.Done == 1
		})
	}
	crash.wait(t, 5*time.Second, "handler start", eventOf("started", hj.ID))
	drain.wait(t, 5*time.Second, "handler start", eventOf("started", dj.ID))
	c.untilWorkers(t, drainType, 15*time.Second, func(n int) bool { return n == 1 })

	killed := time.Now()
	require.NoError(t, crash.cmd.Process.Signal(syscall.SIGKILL))
	require.NoError(t, drain.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-drain.exited:
		require.NoError(t, drain.err, "the drained worker exits 0")
	case <-time.After(15 * time.Second):
		t.Fatalf("%s did not stop within 15s of SIGTERM", drain.name)
	}
	t.Logf("%s stopped %s after SIGTERM", drain.name, time.Since(killed).Round(time.Millisecond))
	ab := drain.wait(t, time.Second, "abort seen by the handler", eventOf("aborted", dj.ID))
	require.Equal(t, "shutdown", ab.str("reason"))
	drain.wait(t, time.Second, "give-back", func(e event) bool { return e.str("event") == "attempt" && e.str("outcome") == "given_back" })
	drain.wait(t, time.Second, "stopped", eventOf("stopped", ""))
	c.untilWorkers(t, drainType, 10*time.Second, func(n int) bool { return n == 0 })
	back := c.job(t, dj.ID)
	require.Equal(t, "running", back.State, "given back, not failed: %+v", back.Error)
	<-crash.exited

	s.open(t, gate+"-crash")
	s.open(t, gate+"-drain")
	rescue := to.Start(t, to.Name+"-rescue", cred, crashKind, drainKind)
	rescue.wait(t, 30*time.Second, "ready", eventOf("ready", ""))

	d := c.terminal(t, dj.ID, 20*time.Second)
	require.Equal(t, "succeeded", d.State, "the given-back job used none of its one attempt: %+v", d.Error)
	require.Equal(t, 2, d.Attempt)
	require.Equal(t, "done by "+to.Name+" at attempt 2\n", string(c.download(t, dj.ID).body))
	t.Logf("given-back job finished by %s %s after the SIGTERM", rescue.name, time.Since(killed).Round(time.Millisecond))

	h := c.terminal(t, hj.ID, 40*time.Second)
	require.Equal(t, "succeeded", h.State, "%+v", h.Error)
	require.Equal(t, 2, h.Attempt, "the rescuer took the crashed attempt over")
	require.Equal(t, "done by "+to.Name+" at attempt 2\n", string(c.download(t, hj.ID).body))
	rescue.wait(t, time.Second, "handler start", eventOf("started", hj.ID))
	t.Logf("crashed job taken over and finished by %s %s after the SIGKILL", rescue.name, time.Since(killed).Round(time.Millisecond))
}

// typeName is the type a worker of im runs for a kind of the spec:
// shared_<kind> for the spec's shared kinds, <name>_<kind> otherwise.
func typeName(im *Impl, kind string, s *Suite) string {
	raw, _ := os.ReadFile(s.spec)
	var spec struct {
		Types map[string]struct {
			Shared bool `json:"shared"`
		} `json:"types"`
	}
	_ = json.Unmarshal(raw, &spec)
	if spec.Types[kind].Shared {
		return "shared_" + kind
	}
	return im.Name + "_" + kind
}

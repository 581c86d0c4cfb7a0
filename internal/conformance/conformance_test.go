package conformance

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/jobgate/jobgate/internal/jobtest"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// impl is one implementation of the worker protocol under test: its worker
// process, running the types <prefix>_work and <prefix>_timeout.
type impl struct {
	name   string // "go" or "ts"
	worker *proc
	skip   string // why this implementation cannot run here
	// canceled is the reason its handler reads when the owner cancels:
	// pkg/worker's context says only that the claim is gone.
	canceled string
}

// suite is what the scenarios share: one deployment, both implementations.
type suite struct {
	d     *deployment
	root  string
	gates string // hold-mode gates: a file here lets a handler finish
	spec  string
	impls []*impl
	// runTS starts a TypeScript worker process (nil when it cannot run).
	runTS func(t *testing.T, name string, cred credential, kinds ...string) *proc
	runGo func(t *testing.T, name string, cred credential, kinds ...string) *proc
}

func (s *suite) open(t *testing.T, gate string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(s.gates, gate), nil, 0o644))
}

// TestConformance drives the Go worker (pkg/worker) and the TypeScript
// worker (sdk/typescript) through the same scenarios against one real
// `jobgate serve`, each on its own types and credential, side by side; a
// last scenario hands jobs from a TypeScript process to a Go one.
func TestConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and spawns jobgate and worker processes")
	}
	began := time.Now()
	root := jobtest.RepoRoot(t)
	tmp := t.TempDir()
	tsDir, tsSkip := typescript(t, root)

	bin, gobin := filepath.Join(tmp, "jobgate"), filepath.Join(tmp, "goworker")
	var wg sync.WaitGroup
	errs := make([]error, 3)
	wg.Add(3)
	go func() { defer wg.Done(); errs[0] = jobtest.GoBuild(root, bin, "./cmd/jobgate") }()
	go func() { defer wg.Done(); errs[1] = jobtest.GoBuild(root, gobin, "./internal/conformance/goworker") }()
	go func() {
		defer wg.Done()
		if tsSkip == "" {
			errs[2] = buildTypeScript(tsDir)
		}
	}()
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	built := "jobgate, goworker and the TypeScript worker"
	if tsSkip != "" {
		built = "jobgate and goworker (TypeScript half skipped: " + tsSkip + ")"
	}
	t.Logf("built %s in %s", built, time.Since(began).Round(time.Millisecond))

	d := startDeployment(t, bin)
	s := &suite{d: d, root: root, gates: filepath.Join(tmp, "gates"), spec: filepath.Join(root, "internal", "conformance", "testdata", "types.json")}
	require.NoError(t, os.MkdirAll(s.gates, 0o755))
	workerEnv := func(name, prefix string, cred credential, kinds []string) []string {
		return jobtest.ChildEnv("JOBGATE_NATS_URL="+d.natsURL, "JOBGATE_WORKER_USER="+cred.User, "JOBGATE_WORKER_PASSWORD="+cred.Password,
			"CONF_SPEC="+s.spec, "CONF_KINDS="+strings.Join(kinds, ","), "CONF_PREFIX="+prefix, "CONF_GATES="+s.gates,
			"CONF_NAME="+name, "CONF_HEARTBEAT_MS=500", "CONF_DRAIN_MS=1000")
	}
	s.runGo = func(t *testing.T, name string, cred credential, kinds ...string) *proc {
		return start(t, name, tmp, workerEnv(name, "go", cred, kinds), gobin)
	}
	if tsSkip == "" {
		s.runTS = func(t *testing.T, name string, cred credential, kinds ...string) *proc {
			return start(t, name, tsDir, workerEnv(name, "ts", cred, kinds), "node", filepath.Join("dist", "test", "conformance-worker.js"))
		}
	}

	goImpl := &impl{name: "go", canceled: "lost"}
	goImpl.worker = s.runGo(t, "go-main", d.workerCredential(t, "go_work", "go_timeout"), "work", "timeout")
	tsImpl := &impl{name: "ts", skip: tsSkip, canceled: "canceled"}
	if tsSkip == "" {
		tsImpl.worker = s.runTS(t, "ts-main", d.workerCredential(t, "ts_work", "ts_timeout"), "work", "timeout")
	}
	s.impls = []*impl{goImpl, tsImpl}
	for _, im := range s.impls {
		if im.worker != nil {
			im.worker.wait(t, 30*time.Second, "ready", eventOf("ready", ""))
		}
	}
	t.Logf("deployment and workers ready after %s", time.Since(began).Round(time.Millisecond))

	scenarios := []struct {
		name string
		run  func(t *testing.T, s *suite, im *impl)
	}{
		{"result", scenarioResult},
		{"progress", scenarioProgress},
		{"cancel", scenarioCancel},
		{"permanent", scenarioPermanent},
		{"retried_error", scenarioRetriedError},
		{"timeout", scenarioTimeout},
		{"quota_refused", scenarioQuotaRefused},
	}
	t.Run("scenarios", func(t *testing.T) {
		for _, im := range s.impls {
			for _, sc := range scenarios {
				t.Run(im.name+"/"+sc.name, func(t *testing.T) {
					if im.skip != "" {
						t.Skip("JOBGATE_SKIP_INTEROP=1 and " + im.skip)
					}
					t.Parallel()
					sc.run(t, s, im)
				})
			}
		}
		t.Run("side_by_side", func(t *testing.T) {
			if tsSkip != "" {
				t.Skip("JOBGATE_SKIP_INTEROP=1 and " + tsSkip)
			}
			t.Parallel()
			scenarioSideBySide(t, s)
		})
		t.Run("ts_crash_and_drain_taken_over_by_go", func(t *testing.T) {
			if tsSkip != "" {
				t.Skip("JOBGATE_SKIP_INTEROP=1 and " + tsSkip)
			}
			t.Parallel()
			scenarioHandover(t, s)
		})
	})
	t.Logf("whole suite: %s", time.Since(began).Round(time.Millisecond))
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
func scenarioResult(t *testing.T, s *suite, im *impl) {
	c := s.d.client(t, "result-"+im.name, "requester-"+im.name)
	blocks, tailLen, seed := 1100, 300_001, 17
	if im.name == "ts" {
		seed = 42
	}
	want := expectedResult(blocks, tailLen, seed)
	require.Greater(t, len(want), 1<<20)
	began := time.Now()
	// A traced job: the handler sees the caller's trace (the assignment's
	// traceparent; Go's handler ctx, TypeScript's job.traceparent).
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	j := c.submit(t, im.name+"_work", map[string]any{"mode": "result", "blocks": blocks, "tail": tailLen, "seed": seed},
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
	t.Logf("%s: %d bytes streamed, stored and downloaded byte for byte; job done in %s", im.name, len(want), took.Round(time.Millisecond))
}

// Progress reported by the handler is visible in the job resource while it
// runs (a change: a new ETag), and the last one stays with the verdict.
func scenarioProgress(t *testing.T, s *suite, im *impl) {
	c := s.d.client(t, "progress-"+im.name, "requester-"+im.name)
	gate := "progress-" + im.name
	j := c.submit(t, im.name+"_work", map[string]any{"mode": "hold", "gate": gate})
	began := time.Now()
	running := c.until(t, j.ID, 20*time.Second, "running with progress 1/2", func(j jobView) bool {
		return j.State == "running" && j.Progress != nil && j.Progress.Done == 1
	})
	t.Logf("%s: progress visible %s after submission", im.name, time.Since(began).Round(time.Millisecond))
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
	require.Equal(t, fmt.Sprintf("done by %s at attempt 1\n", im.name), string(got.body))
}

// DELETE /v1/jobs/{id} of a running job: the job ends canceled at once, the
// handler sees its signal abort within a few beats, and nothing the worker
// does afterwards changes the job.
func scenarioCancel(t *testing.T, s *suite, im *impl) {
	c := s.d.client(t, "cancel-"+im.name, "requester-"+im.name)
	j := c.submit(t, im.name+"_work", map[string]any{"mode": "hold"})
	c.until(t, j.ID, 20*time.Second, "running", func(j jobView) bool { return j.State == "running" && j.Progress != nil })
	im.worker.wait(t, 5*time.Second, "handler start", eventOf("started", j.ID))

	began := time.Now()
	r := c.do(t, http.MethodDelete, "/v1/jobs/"+j.ID, "")
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
	var after jobView
	require.NoError(t, json.Unmarshal(r.body, &after))
	require.Equal(t, "canceled", after.State)

	ab := im.worker.wait(t, 10*time.Second, "abort seen by the handler", eventOf("aborted", j.ID))
	t.Logf("%s: handler aborted (%s) %s after the DELETE", im.name, ab.str("reason"), time.Since(began).Round(time.Millisecond))
	require.Equal(t, im.canceled, ab.str("reason"))
	im.worker.wait(t, 5*time.Second, "attempt end", func(e event) bool {
		return e.str("event") == "attempt" && e.str("type") == im.name+"_work" && e.str("outcome") == "lost"
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
func scenarioPermanent(t *testing.T, s *suite, im *impl) {
	c := s.d.client(t, "permanent-"+im.name, "requester-"+im.name)
	msg := "case 47 has no revision 29 (" + im.name + ")"
	j := c.submit(t, im.name+"_work", map[string]any{"mode": "permanent", "message": msg})
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
func scenarioQuotaRefused(t *testing.T, s *suite, im *impl) {
	c := s.d.client(t, "quota-"+im.name, "requester-"+im.name)
	blocks, tailLen := 1100, 4_000_000
	require.Greater(t, len(expectedResult(blocks, tailLen, 3)), conformanceQuota)
	j := c.submit(t, im.name+"_work", map[string]any{"mode": "result", "blocks": blocks, "tail": tailLen, "seed": 3})
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
func scenarioRetriedError(t *testing.T, s *suite, im *impl) {
	c := s.d.client(t, "error-"+im.name, "requester-"+im.name)
	secret := "dial db-7.internal: password hunter2 refused"
	j := c.submit(t, im.name+"_work", map[string]any{"mode": "error", "message": secret})
	between := c.until(t, j.ID, 20*time.Second, "waiting to retry", func(j jobView) bool {
		return j.State == "running" && j.RetryAt != "" || j.terminal()
	})
	require.Equal(t, "running", between.State, "retried, not failed: %+v", between.Error)
	require.Equal(t, 1, between.Attempt)
	retryAt, err := time.Parse(time.RFC3339Nano, between.RetryAt)
	require.NoError(t, err)
	t.Logf("%s: attempt 1 failed, attempt 2 due in %s", im.name, time.Until(retryAt).Round(time.Millisecond))

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
func scenarioTimeout(t *testing.T, s *suite, im *impl) {
	c := s.d.client(t, "timeout-"+im.name, "requester-"+im.name)
	j := c.submit(t, im.name+"_timeout", map[string]any{"mode": "hold"})
	j = c.terminal(t, j.ID, 30*time.Second)
	require.Equal(t, "failed", j.State)
	require.NotNil(t, j.Error)
	require.Equal(t, "timeout", j.Error.Category)
	ab := im.worker.wait(t, 5*time.Second, "abort seen by the handler", eventOf("aborted", j.ID))
	require.Equal(t, "timeout", ab.str("reason"))
}

// Both implementations' types in one deployment: declared with identical
// limits and schema from the same spec, each announced by its live worker,
// and jobs of both running at the same time.
func scenarioSideBySide(t *testing.T, s *suite) {
	c := s.d.client(t, "side", "requester")
	r := c.do(t, http.MethodGet, "/v1/types?limit=200", "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	for _, name := range []string{"go_work", "ts_work", "go_timeout", "ts_timeout", "permit_report"} {
		require.Contains(t, string(r.body), `"name":"`+name+`"`)
	}
	goT, ok := c.typeInfo(t, "go_work")
	require.True(t, ok)
	tsT, ok := c.typeInfo(t, "ts_work")
	require.True(t, ok)
	require.JSONEq(t, string(goT.Schema), string(tsT.Schema))
	require.Equal(t, goT.TimeoutSeconds, tsT.TimeoutSeconds)
	require.Equal(t, goT.Attempts, tsT.Attempts)
	require.Equal(t, goT.MaxResultBytes, tsT.MaxResultBytes)
	require.Equal(t, goT.ContentType, tsT.ContentType)
	c.untilWorkers(t, "ts_work", 10*time.Second, func(n int) bool { return n == 1 })
	c.untilWorkers(t, "go_work", 10*time.Second, func(n int) bool { return n == 1 })

	gj := c.submit(t, "go_work", map[string]any{"mode": "hold", "gate": "side-go"})
	tj := c.submit(t, "ts_work", map[string]any{"mode": "hold", "gate": "side-ts"})
	for _, id := range []string{gj.ID, tj.ID} {
		c.until(t, id, 20*time.Second, "running", func(j jobView) bool { return j.State == "running" && j.Progress != nil })
	}
	// Both running at once, then both done.
	s.open(t, "side-go")
	s.open(t, "side-ts")
	for id, by := range map[string]string{gj.ID: "go", tj.ID: "ts"} {
		j := c.terminal(t, id, 20*time.Second)
		require.Equal(t, "succeeded", j.State)
		require.Equal(t, "done by "+by+" at attempt 1\n", string(c.download(t, id).body))
	}
}

// Two TypeScript worker processes hold a job each of the shared types: one
// is killed with SIGKILL mid-job, the other stopped with SIGTERM (its drain
// time runs out, the handler aborts with "shutdown" and the job is given
// back; its bye withdraws its presence). A Go worker on the same
// credential then finishes both: the given-back job at once without using
// up its only attempt, the crashed one once its claim went stale.
func scenarioHandover(t *testing.T, s *suite) {
	c := s.d.client(t, "handover", "requester")
	cred := s.d.workerCredential(t, "shared_handover", "shared_drain")
	crash := s.runTS(t, "ts-crash", cred, "handover")
	drain := s.runTS(t, "ts-drain", cred, "drain")
	crash.wait(t, 30*time.Second, "ready", eventOf("ready", ""))
	drain.wait(t, 30*time.Second, "ready", eventOf("ready", ""))

	hj := c.submit(t, "shared_handover", map[string]any{"mode": "hold", "gate": "handover"})
	dj := c.submit(t, "shared_drain", map[string]any{"mode": "hold", "gate": "drain"})
	for _, id := range []string{hj.ID, dj.ID} {
		c.until(t, id, 20*time.Second, "running with progress", func(j jobView) bool {
			return j.State == "running" && j.Progress != nil && j.Progress.Done == 1
		})
	}
	crash.wait(t, 5*time.Second, "handler start", eventOf("started", hj.ID))
	drain.wait(t, 5*time.Second, "handler start", eventOf("started", dj.ID))
	c.untilWorkers(t, "shared_drain", 15*time.Second, func(n int) bool { return n == 1 })

	killed := time.Now()
	require.NoError(t, crash.cmd.Process.Signal(syscall.SIGKILL))
	require.NoError(t, drain.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-drain.exited:
		require.NoError(t, drain.err, "the drained worker exits 0")
	case <-time.After(15 * time.Second):
		t.Fatal("the TypeScript worker did not stop within 15s of SIGTERM")
	}
	t.Logf("ts-drain stopped %s after SIGTERM", time.Since(killed).Round(time.Millisecond))
	ab := drain.wait(t, time.Second, "abort seen by the handler", eventOf("aborted", dj.ID))
	require.Equal(t, "shutdown", ab.str("reason"))
	drain.wait(t, time.Second, "give-back", func(e event) bool { return e.str("event") == "attempt" && e.str("outcome") == "given_back" })
	drain.wait(t, time.Second, "stopped", eventOf("stopped", ""))
	c.untilWorkers(t, "shared_drain", 10*time.Second, func(n int) bool { return n == 0 })
	back := c.job(t, dj.ID)
	require.Equal(t, "running", back.State, "given back, not failed: %+v", back.Error)
	<-crash.exited

	s.open(t, "handover")
	s.open(t, "drain")
	rescue := s.runGo(t, "go-rescue", cred, "handover", "drain")
	rescue.wait(t, 30*time.Second, "ready", eventOf("ready", ""))

	d := c.terminal(t, dj.ID, 20*time.Second)
	require.Equal(t, "succeeded", d.State, "the given-back job used none of its one attempt: %+v", d.Error)
	require.Equal(t, 2, d.Attempt)
	require.Equal(t, "done by go at attempt 2\n", string(c.download(t, dj.ID).body))
	t.Logf("given-back job finished by the Go worker %s after the SIGTERM", time.Since(killed).Round(time.Millisecond))

	h := c.terminal(t, hj.ID, 40*time.Second)
	require.Equal(t, "succeeded", h.State, "%+v", h.Error)
	require.Equal(t, 2, h.Attempt, "the Go worker took the crashed attempt over")
	require.Equal(t, "done by go at attempt 2\n", string(c.download(t, hj.ID).body))
	rescue.wait(t, time.Second, "handler start", eventOf("started", hj.ID))
	t.Logf("crashed job taken over and finished by the Go worker %s after the SIGKILL", time.Since(killed).Round(time.Millisecond))
}

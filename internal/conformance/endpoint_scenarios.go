package conformance

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/stretchr/testify/require"
)

// EndpointScenarios are what jobgate must do with every endpoint handler,
// the worker scenarios' counterparts (docs/conformance.md, "Endpoint
// types"), each against the implementation's main handler process but
// the dispatcher_ ones, each in a deployment of its own.
var EndpointScenarios = []EndpointScenario{
	{"forgery", endpointForgery},
	{"result", endpointResult},
	{"permanent", endpointPermanent},
	{"retry", endpointRetry},
	{"timeout", endpointTimeout},
	{"oversize", endpointOversize},
	{"quota_refused", endpointQuotaRefused},
	{"cancel", endpointCancel},
	{"async", endpointAsync},
	{"async_cancel", endpointAsyncCancel},
	{"late_callback", endpointLateCallback},
	{"dispatcher_killed", endpointDispatcherKilled},
	{"dispatcher_stopped", endpointDispatcherStopped},
	{"dispatcher_paused", endpointDispatcherPaused},
}

// callbacksOf are the callbacks the handler sent for attempt n of job id,
// with the status each was answered.
func callbacksOf(p *proc, id string, n int) []event {
	return p.find(func(e event) bool { return e.str("event") == "callback" && e.str("id") == id && e.num("attempt") == n })
}

// A request jobgate did not sign is refused by the handler (401): the
// suite's own check that the handler under test verifies what it runs.
func endpointForgery(t T, s *EndpointSuite, im *EndpointImpl) {
	body := `{"job":{"id":"job_forged","type":"` + im.Name + `_work","attempt":1,"params":{"mode":"result"}}}`
	req, err := http.NewRequest(http.MethodPost, handlerURL(t, im)+"/"+im.Name+"_work", strings.NewReader(body))
	require.NoError(t, err)
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("webhook-id", "job_forged.a1")
	req.Header.Set("webhook-timestamp", ts)
	req.Header.Set("webhook-signature", "v1,bm90IGpvYmdhdGUncyBzaWduYXR1cmUgYXQgYWxsIQ==")
	resp, err := noRedirect.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "a forged request is refused")
	require.Empty(t, im.handler.find(eventOf("started", "job_forged")), "a forged request is not run")
}

// handlerURL is where im's main handler listens (from its ready event).
func handlerURL(t T, im *EndpointImpl) string {
	t.Helper()
	ready := im.handler.wait(t, time.Second, "ready", eventOf("ready", ""))
	return "http://127.0.0.1:" + strconv.Itoa(ready.num("port"))
}

// A 200's body of over 1 MiB is the job's result, byte for byte, under the
// type's declared content type (the handler's is ignored); the request is
// signed (webhook-id <job>.a1) and carries the job's trace.
func endpointResult(t T, s *EndpointSuite, im *EndpointImpl) {
	c := s.d.client(t, "ep-result-"+im.Name, "requester")
	blocks, tailLen, seed := 1100, 300_001, 17+len(im.Name)
	want := expectedResult(blocks, tailLen, seed)
	require.Greater(t, len(want), 1<<20)
	const traceID = "5cf92f3577b34da6a3ce929d0e0e4736"
	j := c.submit(t, im.Name+"_work", map[string]any{"mode": "result", "blocks": blocks, "tail": tailLen, "seed": seed},
		"traceparent: 00-"+traceID+"-00f067aa0ba902b7-01")
	j = c.terminal(t, j.ID, 60*time.Second)
	require.Equal(t, "succeeded", j.State, "%+v", j.Error)
	require.Equal(t, 1, j.Attempt)
	require.NotNil(t, j.Result)
	sum := sha256.Sum256(want)
	require.Equal(t, int64(len(want)), j.Result.Size)
	require.Equal(t, hex.EncodeToString(sum[:]), j.Result.SHA256)
	require.Equal(t, "application/vnd.jobgate.conformance", j.Result.ContentType)
	starts := im.handler.started(t, j.ID, 1)
	require.Len(t, starts, 1)
	require.Equal(t, j.ID+".a1", starts[0].str("webhook_id"))
	require.Equal(t, traceID, starts[0].str("trace_id"), "the handler is in the caller's trace")
	got := c.download(t, j.ID)
	require.Equal(t, "application/vnd.jobgate.conformance", got.header.Get("Content-Type"))
	require.True(t, bytes.Equal(want, got.body), "the result is what the handler answered, byte for byte")
}

// Another 4xx fails the job at once (endpoint_rejected), the problem's
// detail its user's message.
func endpointPermanent(t T, s *EndpointSuite, im *EndpointImpl) {
	c := s.d.client(t, "ep-permanent-"+im.Name, "requester")
	msg := "case 47 has no revision 29 (" + im.Name + ")"
	j := c.submit(t, im.Name+"_work", map[string]any{"mode": "permanent", "message": msg})
	j = c.terminal(t, j.ID, 30*time.Second)
	require.Equal(t, "failed", j.State)
	require.Equal(t, 1, j.Attempt, "a 4xx is not retried")
	require.NotNil(t, j.Error)
	require.Equal(t, "endpoint_rejected", j.Error.Category)
	require.Equal(t, msg, j.Error.Message)
	require.Len(t, im.handler.started(t, j.ID, 1), 1)
}

// A 503 is retried after the backoff (Retry-After honoured), as a new
// request (webhook-id <job>.a2); the second attempt's 200 succeeds the job.
func endpointRetry(t T, s *EndpointSuite, im *EndpointImpl) {
	c := s.d.client(t, "ep-retry-"+im.Name, "requester")
	j := c.submit(t, im.Name+"_work", map[string]any{"mode": "flaky"})
	between := c.until(t, j.ID, 20*time.Second, "waiting to retry", func(j jobView) bool {
		return j.State == "running" && j.RetryAt != "" || j.terminal()
	})
	require.Equal(t, "running", between.State, "retried, not failed: %+v", between.Error)
	j = c.terminal(t, j.ID, 60*time.Second)
	require.Equal(t, "succeeded", j.State, "%+v", j.Error)
	require.Equal(t, 2, j.Attempt)
	require.Equal(t, "done by "+im.Name+" at attempt 2\n", string(c.download(t, j.ID).body))
	starts := im.handler.started(t, j.ID, 2)
	require.Len(t, starts, 2)
	require.Equal(t, j.ID+".a1", starts[0].str("webhook_id"))
	require.Equal(t, j.ID+".a2", starts[1].str("webhook_id"))
}

// No answer within timeout_seconds: the request is aborted (the handler
// sees its connection close) and the job fails timeout.
func endpointTimeout(t T, s *EndpointSuite, im *EndpointImpl) {
	c := s.d.client(t, "ep-timeout-"+im.Name, "requester")
	j := c.submit(t, im.Name+"_timeout", map[string]any{"mode": "hold"})
	j = c.terminal(t, j.ID, 30*time.Second)
	require.Equal(t, "failed", j.State)
	require.NotNil(t, j.Error)
	require.Equal(t, "timeout", j.Error.Category)
	im.handler.wait(t, 5*time.Second, "the request's end seen by the handler", eventOf("aborted", j.ID))
}

// A 200's body past max_result_bytes fails the job budget_exceeded, not
// retried.
func endpointOversize(t T, s *EndpointSuite, im *EndpointImpl) {
	c := s.d.client(t, "ep-oversize-"+im.Name, "requester")
	j := c.submit(t, im.Name+"_small", map[string]any{"mode": "result", "blocks": 200, "seed": 5})
	j = c.terminal(t, j.ID, 30*time.Second)
	require.Equal(t, "failed", j.State)
	require.NotNil(t, j.Error)
	require.Equal(t, "budget_exceeded", j.Error.Category)
	require.Equal(t, 1, j.Attempt)
	require.Nil(t, j.Result)
}

// A 200's body past its tenant's result quota is refused as it arrives:
// the job fails budget_exceeded, not retried.
func endpointQuotaRefused(t T, s *EndpointSuite, im *EndpointImpl) {
	c := s.d.client(t, "ep-quota-"+im.Name, "requester")
	blocks, tailLen := 1100, 4_000_000
	require.Greater(t, len(expectedResult(blocks, tailLen, 3)), conformanceQuota)
	j := c.submit(t, im.Name+"_work", map[string]any{"mode": "result", "blocks": blocks, "tail": tailLen, "seed": 3})
	j = c.terminal(t, j.ID, 60*time.Second)
	require.Equal(t, "failed", j.State)
	require.NotNil(t, j.Error)
	require.Equal(t, "budget_exceeded", j.Error.Category)
	require.Equal(t, 1, j.Attempt)
	require.Len(t, im.handler.started(t, j.ID, 1), 1)
}

// A cancel reaches the request in flight within a second or two: the
// handler sees its connection close, and the job is not run again.
func endpointCancel(t T, s *EndpointSuite, im *EndpointImpl) {
	c := s.d.client(t, "ep-cancel-"+im.Name, "requester")
	j := c.submit(t, im.Name+"_work", map[string]any{"mode": "hold", "gate": "never"})
	im.handler.wait(t, 20*time.Second, "the request", eventOf("started", j.ID))
	began := time.Now()
	r := c.do(t, http.MethodDelete, "/v1/jobs/"+j.ID, "")
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
	im.handler.wait(t, 5*time.Second, "the request's end seen by the handler", eventOf("aborted", j.ID))
	t.Logf("%s: request closed %s after the DELETE", im.Name, time.Since(began).Round(time.Millisecond))
	require.Less(t, time.Since(began), 3*time.Second, "a cancel closes the request within a second or so")
	time.Sleep(700 * time.Millisecond) // a beat or so: a request sent again would have started by now
	require.Equal(t, "canceled", c.job(t, j.ID).State)
	require.Len(t, im.handler.started(t, j.ID, 1), 1, "a canceled job is not run again")
}

// 202, then callbacks: beats with progress (visible on the job), the
// result upload, done. Every callback is taken (204) and the job succeeds
// with the uploaded result.
func endpointAsync(t T, s *EndpointSuite, im *EndpointImpl) {
	c := s.d.client(t, "ep-async-"+im.Name, "requester")
	gate := "ep-async-" + im.Name
	j := c.submit(t, im.Name+"_work", map[string]any{"mode": "async", "gate": gate})
	running := c.until(t, j.ID, 20*time.Second, "running with progress 1/2", func(j jobView) bool {
		return j.State == "running" && j.Progress != nil && j.Progress.Done == 1
	})
	require.Equal(t, "steps", running.Progress.Unit)
	require.True(t, im.handler.started(t, j.ID, 1)[0]["callback"] == true, "the request carries a callback URL")
	time.Sleep(1500 * time.Millisecond) // a beat without progress goes by: the attempt stays
	s.open(t, gate)
	j = c.terminal(t, j.ID, 20*time.Second)
	require.Equal(t, "succeeded", j.State, "%+v", j.Error)
	require.Equal(t, 1, j.Attempt)
	require.NotNil(t, j.Progress)
	require.Equal(t, 2, j.Progress.Done)
	require.Equal(t, "done by "+im.Name+" at attempt 1\n", string(c.download(t, j.ID).body))
	// The job is terminal once jobgate has taken the done callback; the
	// handler logs that callback only after reading jobgate's answer, so
	// wait for its line rather than reading the log at once.
	im.handler.wait(t, 5*time.Second, "the done callback logged by the handler", func(e event) bool {
		return e.str("event") == "callback" && e.str("id") == j.ID && e.str("op") == "done"
	})
	cbs := callbacksOf(im.handler, j.ID, 1)
	ops := map[string]int{}
	for _, cb := range cbs {
		require.Equal(t, http.StatusNoContent, cb.num("status"), "callback %v", cb)
		ops[cb.str("op")]++
	}
	require.GreaterOrEqual(t, ops["beat"], 3, "%v", cbs)
	require.Equal(t, 1, ops["result"], "%v", cbs)
	require.Equal(t, 1, ops["done"], "%v", cbs)
}

// A canceled job's asynchronous attempt learns it at its next callback:
// 409 attempt-lost with "canceled": true.
func endpointAsyncCancel(t T, s *EndpointSuite, im *EndpointImpl) {
	c := s.d.client(t, "ep-asynccancel-"+im.Name, "requester")
	j := c.submit(t, im.Name+"_work", map[string]any{"mode": "async", "gate": "never"})
	c.until(t, j.ID, 20*time.Second, "running with progress", func(j jobView) bool { return j.State == "running" && j.Progress != nil })
	r := c.do(t, http.MethodDelete, "/v1/jobs/"+j.ID, "")
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
	lost := im.handler.wait(t, 5*time.Second, "a callback answered 409", func(e event) bool {
		return e.str("event") == "callback" && e.str("id") == j.ID && e.num("status") == http.StatusConflict
	})
	require.Equal(t, true, lost["canceled"], "the 409 says the job was canceled: %v", lost)
	require.Equal(t, "canceled", c.job(t, j.ID).State)
}

// An answer after its attempt ended changes nothing: attempt 1 answers
// 202 and goes quiet past timeout_seconds; its beat, result and done, sent
// once the job moved on, are answered 409 attempt-lost (not canceled), and
// attempt 2's result stands.
func endpointLateCallback(t T, s *EndpointSuite, im *EndpointImpl) {
	c := s.d.client(t, "ep-late-"+im.Name, "requester")
	gate := "ep-late-" + im.Name
	j := c.submit(t, im.Name+"_late", map[string]any{"mode": "late", "gate": gate})
	c.until(t, j.ID, 20*time.Second, "attempt 1 timed out, waiting to retry", func(j jobView) bool {
		return j.State == "running" && j.RetryAt != "" || j.Attempt > 1 || j.terminal()
	})
	s.open(t, gate)
	deadline := time.Now().Add(10 * time.Second)
	for len(callbacksOf(im.handler, j.ID, 1)) < 4 { // the beat before, and the three after
		require.True(t, time.Now().Before(deadline), "attempt 1's late callbacks: %v", callbacksOf(im.handler, j.ID, 1))
		time.Sleep(50 * time.Millisecond)
	}
	for _, cb := range callbacksOf(im.handler, j.ID, 1)[1:] {
		require.Equal(t, http.StatusConflict, cb.num("status"), "a callback of an attempt that ended: %v", cb)
		require.Equal(t, false, cb["canceled"], "%v", cb)
	}
	j = c.terminal(t, j.ID, 60*time.Second)
	require.Equal(t, "succeeded", j.State, "%+v", j.Error)
	require.Equal(t, 2, j.Attempt)
	require.Equal(t, "done by "+im.Name+" at attempt 2\n", string(c.download(t, j.ID).body), "attempt 2's result stands")
}

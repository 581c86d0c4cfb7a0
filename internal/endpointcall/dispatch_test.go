package endpointcall_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobgate/jobgate/pkg/endpoint"
	"github.com/stretchr/testify/require"
)

// A 200's body is the job's result, stored with the declared content type
// whatever the handler says; the request is signed with the type's secret
// and names the job and the attempt.
func TestSignedRequestAndItsResult(t *testing.T) {
	t.Parallel()
	d := start(t)
	var secret atomic.Value
	got := make(chan *endpoint.Request, 1)
	hdr := make(chan http.Header, 1)
	url := handler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, err := endpoint.NewVerifier(secret.Load().(string))
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		req, err := v.Decode(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		got <- req
		hdr <- r.Header.Clone()
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "thumbnail of %s", req.Job.Params)
	}))
	secret.Store(d.declare(t, "thumbnail", url+"/run", nil))
	id := d.submit(t, "thumbnail", `{"n": 7}`)
	j := d.until(t, id, 30*time.Second, terminal)
	require.Equal(t, "succeeded", j.State, "%+v", j)
	body, ct := d.result(t, id)
	require.Equal(t, `thumbnail of {"n":7}`, body)
	require.Equal(t, "text/plain", ct, "the declared content type, not the handler's")

	req := <-got
	require.Equal(t, id, req.Job.ID)
	require.Equal(t, "thumbnail", req.Job.Type)
	require.Equal(t, "acme", req.Job.Tenant)
	require.Equal(t, "ann", req.Job.Requester)
	require.Equal(t, 1, req.Job.Attempt)
	require.Equal(t, 3, req.Job.Attempts)
	require.WithinDuration(t, time.Now().Add(5*time.Second), req.Job.Deadline, 5*time.Second)
	h := <-hdr
	require.Equal(t, id+".a1", h.Get("webhook-id"))
	require.Equal(t, "application/json", h.Get("Content-Type"))

	resp, err := http.Get(d.url + "/metrics")
	require.NoError(t, err)
	metrics, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Contains(t, string(metrics), `jobgate_endpoint_requests_total{answer="2xx",type="thumbnail"} 1`)
	require.Contains(t, string(metrics), `jobgate_endpoint_concurrency{type="thumbnail"} 4`)
	require.Contains(t, string(metrics), `jobgate_endpoint_requests_in_flight{type="thumbnail"} 0`)
	require.Contains(t, string(metrics), `jobgate_endpoint_request_duration_seconds_count{type="thumbnail"} 1`)
}

func TestNoContentSucceedsWithoutAResult(t *testing.T) {
	t.Parallel()
	d := start(t)
	url := handler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	d.declare(t, "ping", url, nil)
	id := d.submit(t, "ping", `{}`)
	j := d.until(t, id, 30*time.Second, terminal)
	require.Equal(t, "succeeded", j.State)
	require.Nil(t, j.Result)
	status, data, _ := d.do(t, d.user, http.MethodGet, "/v1/jobs/"+id+"/result", nil)
	require.Equal(t, http.StatusNotFound, status, string(data))
}

// A 4xx other than 408, 425 and 429 fails the job at once, its problem's
// detail as the owner's message; the handler sees one attempt.
func TestRejectionFailsAtOnceWithTheProblemsDetail(t *testing.T) {
	t.Parallel()
	d := start(t)
	var calls atomic.Int64
	url := handler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		endpoint.Reject("n must be even\nfor this thumbnail").Write(w)
	}))
	d.declare(t, "picky", url, nil)
	id := d.submit(t, "picky", `{"n": 3}`)
	j := d.until(t, id, 30*time.Second, terminal)
	require.Equal(t, "failed", j.State)
	require.Equal(t, "endpoint_rejected", j.Error.Category)
	require.Equal(t, "n must be even for this thumbnail", j.Error.Message)
	require.False(t, j.Error.Retryable)
	require.Equal(t, int64(1), calls.Load())
}

// 503 with Retry-After fails the attempt and the next waits at least that
// long (the backoff here is 200 ms); a connection refused is retried too.
func TestServerErrorsAreRetriedHonouringRetryAfter(t *testing.T) {
	t.Parallel()
	d := start(t)
	var mu sync.Mutex
	var at []time.Time
	url := handler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		at = append(at, time.Now())
		n := len(at)
		mu.Unlock()
		if n == 1 {
			endpoint.RetryLater(2 * time.Second).Write(w)
			return
		}
		io.WriteString(w, "second time lucky")
	}))
	d.declare(t, "flaky", url, nil)
	id := d.submit(t, "flaky", `{}`)
	j := d.until(t, id, 30*time.Second, terminal)
	require.Equal(t, "succeeded", j.State)
	require.Equal(t, 2, j.Attempt)
	body, _ := d.result(t, id)
	require.Equal(t, "second time lucky", body)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, at, 2)
	require.GreaterOrEqual(t, at[1].Sub(at[0]), 1900*time.Millisecond, "Retry-After honoured")

	// Nothing listens: every attempt fails endpoint_error, then the job.
	d.declare(t, "gone", "http://127.0.0.1:1/", map[string]any{"attempts": 2})
	id = d.submit(t, "gone", `{}`)
	j = d.until(t, id, 30*time.Second, terminal)
	require.Equal(t, "failed", j.State)
	require.Equal(t, "endpoint_error", j.Error.Category)
	require.Equal(t, 2, j.Attempt)
}

// A result past max_result_bytes fails the attempt too_large, without
// reading the rest of it.
func TestOversizedResultFails(t *testing.T) {
	t.Parallel()
	d := start(t)
	url := handler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, strings.Repeat("x", 4096))
	}))
	d.declare(t, "big", url, nil) // max_result_bytes 1024
	id := d.submit(t, "big", `{}`)
	j := d.until(t, id, 30*time.Second, terminal)
	require.Equal(t, "failed", j.State)
	require.Equal(t, "budget_exceeded", j.Error.Category)
}

// A cancel reaches the request in flight within a second: the handler's
// request context ends, and nothing the handler does after changes the
// job. The broker's fencing is what says the claim is lost: without it
// the attempt would run on until its timeout.
func TestCancelAbortsTheRequestInFlight(t *testing.T) {
	t.Parallel()
	d := start(t)
	started := make(chan struct{}, 1)
	ended := make(chan time.Time, 1)
	url := handler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A handler reads the request before it works on it; Go's server
		// sees the connection close (and ends the context) from then on.
		_, _ = io.ReadAll(r.Body)
		started <- struct{}{}
		<-r.Context().Done()
		ended <- time.Now()
	}))
	d.declare(t, "slow", url, map[string]any{"timeout_seconds": 60})
	id := d.submit(t, "slow", `{}`)
	<-started
	canceledAt := time.Now()
	status, data, _ := d.do(t, d.user, http.MethodDelete, "/v1/jobs/"+id, nil)
	require.Contains(t, []int{http.StatusOK, http.StatusAccepted}, status, string(data))
	select {
	case end := <-ended:
		took := end.Sub(canceledAt)
		t.Logf("the handler's request ended %s after the cancel", took)
		require.Less(t, took, 1500*time.Millisecond)
	case <-time.After(10 * time.Second):
		t.Fatalf("the request was not aborted; logs:\n%s", d.logs.String())
	}
	j := d.job(t, id)
	require.Equal(t, "canceled", j.State)
	require.Equal(t, 1, j.Attempt)
}

// An answer after its attempt ended changes nothing: the first attempt's
// handler answers 200 after the attempt's timeout; the job moved on, and
// its result is the second attempt's.
func TestAnAnswerAfterItsAttemptEndedChangesNothing(t *testing.T) {
	t.Parallel()
	d := start(t)
	var n atomic.Int64
	lateSent := make(chan error, 1)
	url := handler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			time.Sleep(2500 * time.Millisecond) // deaf to the request's end
			_, err := io.WriteString(w, "late first")
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
			lateSent <- err
			return
		}
		io.WriteString(w, "attempt "+strconv.FormatInt(n.Load(), 10))
	}))
	d.declare(t, "late", url, map[string]any{"timeout_seconds": 1})
	id := d.submit(t, "late", `{}`)
	j := d.until(t, id, 30*time.Second, terminal)
	require.Equal(t, "succeeded", j.State)
	require.Equal(t, 2, j.Attempt)
	<-lateSent
	body, _ := d.result(t, id)
	require.Equal(t, "attempt 2", body)
	status, data, _ := d.do(t, d.operator, http.MethodGet, "/v1/admin/jobs/"+id+"?tenant=acme", nil)
	require.Equal(t, http.StatusOK, status, string(data))
	var adm struct {
		Attempts []struct {
			Attempt int    `json:"attempt"`
			Outcome string `json:"outcome"`
		} `json:"attempts"`
	}
	require.NoError(t, json.Unmarshal(data, &adm))
	require.NotEmpty(t, adm.Attempts)
	require.NotEqual(t, "succeeded", adm.Attempts[0].Outcome, "%s", data)
}

// The endpoint's concurrency bounds the requests in flight.
func TestConcurrencyBoundsTheRequestsInFlight(t *testing.T) {
	t.Parallel()
	d := start(t)
	var c counting
	url := c.serve(t, 150*time.Millisecond)
	d.declare(t, "bounded", url, map[string]any{"endpoint": map[string]any{"url": url, "concurrency": 2}})
	var ids []string
	for range 8 {
		ids = append(ids, d.submit(t, "bounded", `{}`))
	}
	for _, id := range ids {
		require.Equal(t, "succeeded", d.until(t, id, 30*time.Second, terminal).State)
	}
	require.Equal(t, int64(2), c.most.Load())
}

// A 200 the handler sends right after the job was canceled, before the
// caller's next beat could abort the request, changes nothing: the
// broker refuses the success of an attempt that is no longer the job's.
func TestAnAnswerAfterTheCancelChangesNothing(t *testing.T) {
	t.Parallel()
	d := start(t)
	started := make(chan struct{}, 1)
	goAhead := make(chan struct{})
	url := handler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		started <- struct{}{}
		<-goAhead
		io.WriteString(w, "too late")
	}))
	d.declare(t, "quick", url, nil)
	id := d.submit(t, "quick", `{}`)
	<-started
	status, data, _ := d.do(t, d.user, http.MethodDelete, "/v1/jobs/"+id, nil)
	require.Contains(t, []int{http.StatusOK, http.StatusAccepted}, status, string(data))
	close(goAhead)
	// Past the caller's next beat and any report it made.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		j := d.job(t, id)
		require.Equal(t, "canceled", j.State)
		require.Nil(t, j.Result)
		time.Sleep(50 * time.Millisecond)
	}
	status, data, _ = d.do(t, d.user, http.MethodGet, "/v1/jobs/"+id+"/result", nil)
	require.Equal(t, http.StatusConflict, status)
	require.Contains(t, string(data), "job-canceled")
}

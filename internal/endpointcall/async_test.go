package endpointcall_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/config"
	"github.com/jobgate/jobgate/internal/endpointcall"
	"github.com/stretchr/testify/require"
)

// startAsync is a deployment whose asynchronous attempts are lost after
// quiet without a callback.
func startAsync(t *testing.T, quiet time.Duration) *deployment {
	t.Helper()
	settings := config.Default()
	settings.DataDir, settings.HTTPAddr = t.TempDir(), "127.0.0.1:0"
	return startWith(t, settings, func(c *endpointcall.Config) { c.AsyncBeatTimeout = quiet })
}

// accepted is a handler that answers every attempt 202 and hands its
// callback URL to the test, one attempt after another.
func accepted(t *testing.T) (string, chan string) {
	t.Helper()
	calls := make(chan string, 16)
	url := handler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Callback string `json:"callback"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Callback == "" {
			http.Error(w, "no callback", http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		calls <- req.Callback
	}))
	return url, calls
}

func nextCallback(t *testing.T, calls chan string) string {
	t.Helper()
	select {
	case cb := <-calls:
		return cb
	case <-time.After(20 * time.Second):
		t.Fatal("the handler was not called")
		return ""
	}
}

// callback sends one callback (no bearer token: the URL is the
// credential) and returns the status and body.
func callback(t *testing.T, method, url, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, data
}

type lostProblem struct {
	Type     string `json:"type"`
	Status   int    `json:"status"`
	Canceled bool   `json:"canceled"`
}

func requireLost(t *testing.T, status int, data []byte, canceled bool) {
	t.Helper()
	require.Equal(t, http.StatusConflict, status, string(data))
	var p lostProblem
	require.NoError(t, json.Unmarshal(data, &p), string(data))
	require.Equal(t, "/problems/attempt-lost", p.Type)
	require.Equal(t, canceled, p.Canceled, string(data))
}

// A 202 keeps the attempt: the handler's beats show as progress, its
// result upload is the job's result, and done succeeds the job.
func TestAsyncAttemptBeatsUploadsAndSucceeds(t *testing.T) {
	t.Parallel()
	d := startAsync(t, 3*time.Second)
	url, calls := accepted(t)
	d.declare(t, "async_ok", url, map[string]any{"timeout_seconds": 60})
	id := d.submit(t, "async_ok", `{}`)
	cb := nextCallback(t, calls)
	require.True(t, strings.HasPrefix(cb, d.url+"/v1/callbacks/"), cb)

	status, data := callback(t, http.MethodPost, cb+"/beat", `{"progress":{"done":3,"total":10,"unit":"pages"}}`)
	require.Equal(t, http.StatusNoContent, status, string(data))
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, raw, _ := d.do(t, d.user, http.MethodGet, "/v1/jobs/"+id, nil)
		var j struct {
			State    string `json:"state"`
			Progress *struct {
				Done, Total int
				Unit        string
			} `json:"progress"`
		}
		require.NoError(t, json.Unmarshal(raw, &j))
		if j.Progress != nil && j.Progress.Done == 3 {
			require.Equal(t, "running", j.State)
			require.Equal(t, 10, j.Progress.Total)
			require.Equal(t, "pages", j.Progress.Unit)
			break
		}
		require.False(t, time.Now().After(deadline), "no progress shown: %s", raw)
		time.Sleep(20 * time.Millisecond)
	}
	// Beats keep the attempt past the quiet time.
	for range 3 {
		time.Sleep(1500 * time.Millisecond)
		status, data = callback(t, http.MethodPost, cb+"/beat", `{}`)
		require.Equal(t, http.StatusNoContent, status, string(data))
	}
	status, data = callback(t, http.MethodPut, cb+"/result", "made in the background")
	require.Equal(t, http.StatusNoContent, status, string(data))
	status, data = callback(t, http.MethodPost, cb+"/done", "")
	require.Equal(t, http.StatusNoContent, status, string(data))

	j := d.until(t, id, 10*time.Second, terminal)
	require.Equal(t, "succeeded", j.State)
	require.Equal(t, 1, j.Attempt)
	body, ct := d.result(t, id)
	require.Equal(t, "made in the background", body)
	require.Equal(t, "text/plain", ct)
	// The attempt is over: its token is refused, and changes nothing.
	status, data = callback(t, http.MethodPost, cb+"/fail", `{"message":"too late"}`)
	requireLost(t, status, data, false)
	require.Equal(t, "succeeded", d.job(t, id).State)
}

// fail ends the attempt with the handler's message for the owner.
func TestAsyncAttemptFails(t *testing.T) {
	t.Parallel()
	d := startAsync(t, 10*time.Second)
	url, calls := accepted(t)
	d.declare(t, "async_fail", url, nil)
	id := d.submit(t, "async_fail", `{}`)
	cb := nextCallback(t, calls)
	status, data := callback(t, http.MethodPost, cb+"/fail", `{"message":"disk full on worker 3","user_message":"the file could not be converted","retryable":false}`)
	require.Equal(t, http.StatusNoContent, status, string(data))
	j := d.until(t, id, 10*time.Second, terminal)
	require.Equal(t, "failed", j.State)
	require.Equal(t, 1, j.Attempt, "not retried")
	require.Equal(t, "the file could not be converted", j.Error.Message)
}

// A callback after the owner canceled answers 409 attempt-lost with
// canceled: true.
func TestAsyncCallbackAfterCancel(t *testing.T) {
	t.Parallel()
	d := startAsync(t, 10*time.Second)
	url, calls := accepted(t)
	d.declare(t, "async_cancel", url, map[string]any{"timeout_seconds": 60})
	id := d.submit(t, "async_cancel", `{}`)
	cb := nextCallback(t, calls)
	status, data, _ := d.do(t, d.user, http.MethodDelete, "/v1/jobs/"+id, nil)
	require.Contains(t, []int{http.StatusOK, http.StatusAccepted}, status, string(data))
	d.until(t, id, 10*time.Second, terminal)
	// The caller learns the cancel at its next beat to the broker (within
	// a second); until then the token may still be held.
	deadline := time.Now().Add(5 * time.Second)
	for {
		status, data := callback(t, http.MethodPost, cb+"/beat", `{}`)
		if status == http.StatusConflict {
			requireLost(t, status, data, true)
			break
		}
		require.Equal(t, http.StatusNoContent, status, string(data))
		require.False(t, time.Now().After(deadline), "the canceled attempt's token still works")
		time.Sleep(50 * time.Millisecond)
	}
	status, data = callback(t, http.MethodPost, cb+"/done", "")
	requireLost(t, status, data, true)
	require.Equal(t, "canceled", d.job(t, id).State)
}

// An attempt that answered 202 and then went quiet is lost and retried;
// its stale token is refused and changes nothing of the next attempt.
func TestAsyncQuietAttemptIsLostAndItsTokenGoesStale(t *testing.T) {
	t.Parallel()
	d := startAsync(t, time.Second)
	url, calls := accepted(t)
	d.declare(t, "async_quiet", url, map[string]any{"timeout_seconds": 60})
	id := d.submit(t, "async_quiet", `{}`)
	first := nextCallback(t, calls)
	second := nextCallback(t, calls) // the first attempt was lost for its silence
	require.NotEqual(t, first, second)
	j := d.job(t, id)
	require.Equal(t, "running", j.State)
	require.Equal(t, 2, j.Attempt)

	for _, c := range []struct{ method, op, body string }{
		{http.MethodPost, "beat", `{}`},
		{http.MethodPut, "result", "stale bytes"},
		{http.MethodPost, "fail", `{"message":"stale","retryable":false}`},
		{http.MethodPost, "done", ""},
	} {
		status, data := callback(t, c.method, first+"/"+c.op, c.body)
		requireLost(t, status, data, false)
	}
	j = d.job(t, id)
	require.Equal(t, "running", j.State, "a stale token changes nothing")
	require.Equal(t, 2, j.Attempt)

	status, data := callback(t, http.MethodPut, second+"/result", "second attempt")
	require.Equal(t, http.StatusNoContent, status, string(data))
	status, data = callback(t, http.MethodPost, second+"/done", "")
	require.Equal(t, http.StatusNoContent, status, string(data))
	j = d.until(t, id, 10*time.Second, terminal)
	require.Equal(t, "succeeded", j.State)
	require.Equal(t, 2, j.Attempt)
	body, _ := d.result(t, id)
	require.Equal(t, "second attempt", body)
}

// A token jobgate did not mint names no attempt: 404, whether made up or
// a real one altered.
func TestAsyncUnknownTokenIsNotFound(t *testing.T) {
	t.Parallel()
	d := startAsync(t, 10*time.Second)
	url, calls := accepted(t)
	d.declare(t, "async_unknown", url, nil)
	id := d.submit(t, "async_unknown", `{}`)
	cb := nextCallback(t, calls)
	tok := cb[strings.LastIndex(cb, "/")+1:]
	body, sig, _ := strings.Cut(tok, ".")
	forged := body + "." + strings.Repeat("A", len(sig))
	for _, u := range []string{d.url + "/v1/callbacks/nosuchtoken", d.url + "/v1/callbacks/" + forged} {
		status, data := callback(t, http.MethodPost, u+"/done", "")
		require.Equal(t, http.StatusNotFound, status, string(data))
		require.Contains(t, string(data), "/problems/not-found")
	}
	require.Equal(t, "running", d.job(t, id).State, "nothing changed")
	status, data := callback(t, http.MethodPost, cb+"/done", "")
	require.Equal(t, http.StatusNoContent, status, string(data))
	require.Equal(t, "succeeded", d.until(t, id, 10*time.Second, terminal).State)
}

// A result upload past max_result_bytes answers 413 and fails the
// attempt too_large, as a synchronous answer's would.
func TestAsyncOversizedResultFails(t *testing.T) {
	t.Parallel()
	d := startAsync(t, 10*time.Second)
	url, calls := accepted(t)
	d.declare(t, "async_big", url, nil) // max_result_bytes 1024
	id := d.submit(t, "async_big", `{}`)
	cb := nextCallback(t, calls)
	status, data := callback(t, http.MethodPut, cb+"/result", strings.Repeat("x", 2048))
	require.Equal(t, http.StatusRequestEntityTooLarge, status, string(data))
	require.Contains(t, string(data), "/problems/payload-too-large")
	j := d.until(t, id, 10*time.Second, terminal)
	require.Equal(t, "failed", j.State)
	require.Equal(t, "budget_exceeded", j.Error.Category)
	status, data = callback(t, http.MethodPost, cb+"/done", "")
	requireLost(t, status, data, false)

	// Past the gateway's body limit (1 MiB) the upload is refused before
	// it reaches the attempt, which goes on.
	d.declare(t, "async_huge", url, map[string]any{"max_result_bytes": 4 << 20})
	id = d.submit(t, "async_huge", `{}`)
	cb = nextCallback(t, calls)
	status, data = callback(t, http.MethodPut, cb+"/result", strings.Repeat("x", 1<<20+1))
	require.Equal(t, http.StatusRequestEntityTooLarge, status, string(data))
	status, data = callback(t, http.MethodPost, cb+"/done", "")
	require.Equal(t, http.StatusNoContent, status, string(data))
	require.Equal(t, "succeeded", d.until(t, id, 10*time.Second, terminal).State)
}

package endpointcall_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobgate/jobgate/dispatcher"
	"github.com/jobgate/jobgate/internal/auth"
	"github.com/jobgate/jobgate/internal/config"
	"github.com/jobgate/jobgate/internal/endpointcall"
	"github.com/jobgate/jobgate/system"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

// deployment is a whole jobgate (serve) on an embedded JetStream, with
// loopback allowed for endpoints, a short retry backoff, and tokens.
type deployment struct {
	sys      *system.System
	url      string
	operator string
	user     string
	dataDir  string
	logs     *jobtest.SyncBuffer
}

func start(t *testing.T) *deployment {
	t.Helper()
	return startOn(t, t.TempDir())
}

func startOn(t *testing.T, dataDir string) *deployment {
	t.Helper()
	settings := config.Default()
	settings.DataDir, settings.HTTPAddr = dataDir, "127.0.0.1:0"
	return startWith(t, settings)
}

// startWith starts serve with settings, loopback allowed for endpoints,
// and the endpoint caller's settings adjusted by caller, if any.
func startWith(t *testing.T, settings config.Config, caller ...func(*endpointcall.Config)) *deployment {
	t.Helper()
	dataDir := settings.DataDir
	settings.EndpointAllow = "127.0.0.0/8"
	settings.Gateway.ReadRate, settings.Gateway.ReadBurst = 10000, 10000 // the tests poll
	logs := &jobtest.SyncBuffer{}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sys, err := system.Start(ctx, system.Config{Settings: &settings, LogOutput: logs,
		Dispatcher: func(c *dispatcher.Config) { c.Broker.RetryBase = 200 * time.Millisecond },
		EndpointCaller: func(c *endpointcall.Config) {
			for _, fn := range caller {
				fn(c)
			}
		}})
	require.NoError(t, err)
	d := &deployment{sys: sys, url: sys.URL(), dataDir: dataDir, logs: logs}
	t.Cleanup(func() { d.stop(t) })
	d.operator, err = sys.Token(auth.Identity{Operator: true, Requester: "ops"}, time.Hour)
	require.NoError(t, err)
	d.user, err = sys.Token(auth.Identity{Tenant: "acme", Requester: "ann"}, time.Hour)
	require.NoError(t, err)
	return d
}

func (d *deployment) stop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, d.sys.Stop(ctx))
}

// do sends one request with token and returns the status and body.
func (d *deployment) do(t *testing.T, token, method, path string, body any, headers ...string) (int, []byte, http.Header) {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		require.NoError(t, err)
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, d.url+path, r)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	if r != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, data, resp.Header
}

// declare PUTs an endpoint type and returns its secret (the 201's).
func (d *deployment) declare(t *testing.T, name, url string, extra map[string]any) string {
	t.Helper()
	body := map[string]any{
		"description": "test type", "schema": json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","minimum":0,"maximum":100}},"additionalProperties":false}`),
		"timeout_seconds": 5, "attempts": 3, "max_result_bytes": 1024, "content_type": "text/plain",
		"endpoint": map[string]any{"url": url, "concurrency": 4},
	}
	for k, v := range extra {
		body[k] = v
	}
	status, data, _ := d.do(t, d.operator, http.MethodPut, "/v1/admin/types/"+name, body)
	require.Equal(t, http.StatusCreated, status, string(data))
	var got struct {
		Endpoint struct {
			Secret string `json:"secret"`
		} `json:"endpoint"`
	}
	require.NoError(t, json.Unmarshal(data, &got))
	require.True(t, strings.HasPrefix(got.Endpoint.Secret, "whsec_"), string(data))
	// Every gateway accepts the type within moments, as it does a
	// worker's declaration.
	require.Eventually(t, func() bool {
		status, _, _ := d.do(t, d.user, http.MethodGet, "/v1/types/"+name, nil)
		return status == http.StatusOK
	}, 10*time.Second, 10*time.Millisecond)
	return got.Endpoint.Secret
}

var keys atomic.Int64

// submit admits a job of typ with params and returns its id.
func (d *deployment) submit(t *testing.T, typ string, params string) string {
	t.Helper()
	status, data, _ := d.do(t, d.user, http.MethodPost, "/v1/jobs", fmt.Sprintf(`{"type":%q,"params":%s}`, typ, params),
		"Idempotency-Key", fmt.Sprintf("k-%d", keys.Add(1)))
	require.Equal(t, http.StatusAccepted, status, string(data))
	var j struct {
		ID string `json:"id"`
	}
	require.NoError(t, json.Unmarshal(data, &j))
	return j.ID
}

type jobView struct {
	ID      string `json:"id"`
	State   string `json:"state"`
	Attempt int    `json:"attempt"`
	Error   *struct {
		Category  string `json:"category"`
		Message   string `json:"message"`
		Retryable bool   `json:"retryable"`
	} `json:"error"`
	Result *struct {
		ContentType string `json:"content_type"`
		Size        int64  `json:"size"`
	} `json:"result"`
}

func (d *deployment) job(t *testing.T, id string) jobView {
	t.Helper()
	status, data, _ := d.do(t, d.user, http.MethodGet, "/v1/jobs/"+id, nil)
	require.Equal(t, http.StatusOK, status, string(data))
	var j jobView
	require.NoError(t, json.Unmarshal(data, &j))
	return j
}

// until polls the job until cond holds, within a deadline.
func (d *deployment) until(t *testing.T, id string, within time.Duration, cond func(jobView) bool) jobView {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		j := d.job(t, id)
		if cond(j) {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s: condition not met within %s; last seen %+v\nlogs:\n%s", id, within, j, d.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func terminal(j jobView) bool {
	return j.State == "succeeded" || j.State == "failed" || j.State == "canceled"
}

// result downloads a succeeded job's result.
func (d *deployment) result(t *testing.T, id string) (string, string) {
	t.Helper()
	status, data, h := d.do(t, d.user, http.MethodGet, "/v1/jobs/"+id+"/result", nil)
	require.Equal(t, http.StatusSeeOther, status, string(data))
	resp, err := http.Get(d.url + h.Get("Location"))
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	return string(body), resp.Header.Get("Content-Type")
}

// handler is a real net/http server on loopback.
func handler(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// counting is a handler that answers 204 after hold (or when the request
// ends), counting its requests and the most in flight at once.
type counting struct {
	inFlight, most, calls atomic.Int64
}

func (c *counting) serve(t *testing.T, hold time.Duration) string {
	return handler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.calls.Add(1)
		now := c.inFlight.Add(1)
		defer c.inFlight.Add(-1)
		for {
			m := c.most.Load()
			if now <= m || c.most.CompareAndSwap(m, now) {
				break
			}
		}
		select {
		case <-time.After(hold):
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusNoContent)
	}))
}

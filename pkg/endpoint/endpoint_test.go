package endpoint_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/pkg/endpoint"
	"github.com/stretchr/testify/require"
)

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func serve(t *testing.T, fn func(ctx context.Context, a *endpoint.Attempt) endpoint.Answer) *httptest.Server {
	t.Helper()
	v, err := endpoint.NewVerifier("whsec_"+"b2xkIHNlY3JldCBrZXk=", secret)
	require.NoError(t, err)
	srv := httptest.NewServer(endpoint.Handler(v, fn))
	t.Cleanup(srv.Close)
	return srv
}

func send(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(body)
}

func TestAnswers(t *testing.T) {
	t.Parallel()
	answers := map[string]endpoint.Answer{
		"result": endpoint.Result([]byte("pdf bytes")), "none": endpoint.NoResult(),
		"reject": endpoint.Reject("the invoice is already paid"), "later": endpoint.RetryLater(1500 * time.Millisecond),
	}
	srv := serve(t, func(ctx context.Context, a *endpoint.Attempt) endpoint.Answer {
		var p struct{ Want string }
		_ = json.Unmarshal(a.Params, &p)
		dl, ok := ctx.Deadline()
		if !ok || dl.After(a.Deadline) {
			return endpoint.Reject("no deadline")
		}
		return answers[p.Want]
	})
	attempt := func(want string) *http.Request {
		req, err := endpoint.NewTestRequest(secret, srv.URL, endpoint.Attempt{ID: "job_1", Attempt: 2, Attempts: 3,
			Params: json.RawMessage(`{"want":"` + want + `"}`), Deadline: time.Now().Add(time.Minute)}, time.Now())
		require.NoError(t, err)
		return req
	}
	resp, body := send(t, attempt("result"))
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, "pdf bytes", body)
	resp, body = send(t, attempt("none"))
	require.Equal(t, 204, resp.StatusCode)
	require.Empty(t, body)
	resp, body = send(t, attempt("reject"))
	require.Equal(t, 422, resp.StatusCode)
	require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
	require.Contains(t, body, `"detail":"the invoice is already paid"`)
	resp, _ = send(t, attempt("later"))
	require.Equal(t, 503, resp.StatusCode)
	require.Equal(t, "2", resp.Header.Get("Retry-After"), "rounded up to whole seconds")
}

func TestRefusesWhatJobgateDidNotSign(t *testing.T) {
	t.Parallel()
	srv := serve(t, func(context.Context, *endpoint.Attempt) endpoint.Answer { return endpoint.NoResult() })
	a := endpoint.Attempt{ID: "job_1", Attempt: 1}

	old, err := endpoint.NewTestRequest(secret, srv.URL, a, time.Now().Add(-10*time.Minute))
	require.NoError(t, err)
	resp, body := send(t, old)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "a replay past the tolerance")
	require.Contains(t, body, "not signed")

	other, err := endpoint.NewTestRequest("whsec_"+"c29tZW9uZSBlbHNl", srv.URL, a, time.Now())
	require.NoError(t, err)
	resp, _ = send(t, other)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	req, err := endpoint.NewTestRequest(secret, srv.URL, a, time.Now())
	require.NoError(t, err)
	req.Body = io.NopCloser(strings.NewReader(`{"job":{"id":"job_2","attempt":1}}`))
	req.ContentLength = -1
	resp, _ = send(t, req)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "a body changed after signing")

	resp, _ = send(t, mustGet(t, srv.URL))
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)

	// Either of two secrets (a rotation) passes.
	rotated, err := endpoint.NewTestRequest("whsec_"+"b2xkIHNlY3JldCBrZXk=", srv.URL, a, time.Now())
	require.NoError(t, err)
	resp, _ = send(t, rotated)
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
}

func mustGet(t *testing.T, url string) *http.Request {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	return req
}

func TestNewVerifierRefusesABadSecret(t *testing.T) {
	t.Parallel()
	_, err := endpoint.NewVerifier()
	require.Error(t, err)
	_, err = endpoint.NewVerifier("whsec_!!!")
	require.Error(t, err)
}

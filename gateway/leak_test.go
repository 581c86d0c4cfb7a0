package gateway

import (
	"context"
	"errors"
	"fmt"
	"github.com/jobgate/jobgate/test/jobtest"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/auth"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/stretchr/testify/require"
)

// brokenRecords is a record store whose every call fails with err.
type brokenRecords struct {
	memRecords
	err error
}

func (s *brokenRecords) Create(context.Context, *job.Record) error { return s.err }
func (s *brokenRecords) Get(context.Context, string) (*job.Record, error) {
	return nil, s.err
}
func (s *brokenRecords) List(context.Context, string, string) ([]*job.Record, error) {
	return nil, s.err
}

type lockedBuffer = jobtest.SyncBuffer

// What a JetStream outage looks like by the time it reaches a handler.
const jetStreamText = "nats: no responders available for request"

// Neither a store outage nor an internal error shows its cause to the
// client: the body has the catalogue's words and a request id, the log has
// the cause under that id (a 500 at error level, a 503 at warn).
func TestProblemsShowNoInternalsAndLogTheCause(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		err    error
		status int
		level  string
	}{
		{"outage", fmt.Errorf("index read: %w: %w", job.ErrUnavailable, errors.New(jetStreamText)), http.StatusServiceUnavailable, "WARN"},
		{"internal", fmt.Errorf("decode JOBGATE_JOBS entry 4.reviewer-47: %w", errors.New(jetStreamText)), http.StatusInternalServerError, "ERROR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			logs := &lockedBuffer{}
			secret := []byte("0123456789abcdef0123456789abcdef")
			g := memGatewayOn(t, Config{AuthSecret: secret}, &brokenRecords{err: tc.err}, slog.New(slog.NewTextHandler(logs, nil)))
			tok, err := auth.Mint(secret, auth.Identity{Tenant: "4", Requester: "reviewer-47"}, time.Hour, time.Now())
			require.NoError(t, err)
			for _, req := range []struct{ method, target, body string }{
				{http.MethodGet, "/v1/jobs/job_abcdefghijklmnopqrstuvwxyz", ""},
				{http.MethodGet, "/v1/jobs", ""},
				{http.MethodGet, "/v1/jobs/job_abcdefghijklmnopqrstuvwxyz/result", ""},
				{http.MethodPost, "/v1/jobs", `{"type":"permit_report","params":{"case_id":47,"revision":29}}`},
			} {
				resp, body := call(t, g, req.method, req.target, req.body, "Authorization: Bearer "+tok,
					"Content-Type: application/json", "Idempotency-Key: k-1")
				what := req.method + " " + req.target
				require.Equal(t, tc.status, resp.StatusCode, "%s: %s", what, body)
				for _, internal := range []string{"nats", "responders", "index read", "JOBGATE_JOBS", "decode"} {
					require.NotContains(t, body, internal, what)
				}
				require.NotEmpty(t, jsonField(t, body, "detail"), what)
				id := jsonField(t, body, "request_id")
				require.NotEmpty(t, id, what)
				require.Equal(t, id, resp.Header.Get("X-Request-Id"), what)
				line := lineWith(logs.String(), "request_id="+id)
				require.NotEmpty(t, line, "%s: the cause is logged under the request id:\n%s", what, logs.String())
				require.Contains(t, line, "level="+tc.level, what)
				require.Contains(t, line, jetStreamText, what)
			}
		})
	}
}

// A client's own request id names its request in the log; one that could
// forge a log line is replaced.
func TestRequestIDFromTheClient(t *testing.T) {
	t.Parallel()
	g := memGateway(t, Config{})
	resp, body := call(t, g, http.MethodGet, "/v1/jobs", "", "X-Request-Id: checkout-7f3a.2")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Equal(t, "checkout-7f3a.2", resp.Header.Get("X-Request-Id"))
	require.Empty(t, jsonField(t, body, "request_id"), "a 4xx body is the same for the same answer")
	resp, _ = call(t, g, http.MethodGet, "/v1/jobs", "", "X-Request-Id: a b\" level=ERROR")
	require.Regexp(t, `^[0-9a-f]{24}$`, resp.Header.Get("X-Request-Id"))
}

func lineWith(logs, s string) string {
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}

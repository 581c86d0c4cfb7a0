package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/stretchr/testify/require"
)

func TestProblemParsing(t *testing.T) {
	t.Parallel()
	resp := &http.Response{StatusCode: 502, Header: http.Header{"Content-Type": {"text/html"}},
		Body: nopBody("<html>Bad gateway from the proxy</html>\nmore")}
	err := problemFrom(resp, time.Now())
	require.Equal(t, "<html>Bad gateway from the proxy</html> (502)", err.Error())

	resp = &http.Response{StatusCode: 409, Header: http.Header{"Content-Type": {"application/problem+json"}},
		Body: nopBody(`{"type":"/problems/idempotency-key-reused","title":"t","status":409,"detail":"key used for job_abcdefghijklmnopqrstuvwxyz with another request"}`)}
	err = problemFrom(resp, time.Now())
	var ce *ConflictError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "job_abcdefghijklmnopqrstuvwxyz", ce.JobID, "a job named only in the detail is still found")
}

type body struct{ *strings.Reader }

func (body) Close() error { return nil }

func nopBody(s string) body { return body{strings.NewReader(s)} }

// A reconnect whose Last-Event-ID is the terminal event's id answers 204:
// the waiter reads the job once instead of treating it as a failure.
func TestWaitAfter204ReadsTheJobOnce(t *testing.T) {
	t.Parallel()
	var events, reads atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/jobs/job_aaaaaaaaaaaaaaaaaaaaaaaaaa/events":
			events.Add(1)
			require.Equal(t, "7", r.Header.Get("Last-Event-ID"))
			w.WriteHeader(http.StatusNoContent)
		case "/v1/jobs/job_aaaaaaaaaaaaaaaaaaaaaaaaaa":
			reads.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("ETag", `"7"`)
			_, _ = w.Write([]byte(`{"id":"job_aaaaaaaaaaaaaaaaaaaaaaaaaa","type":"permit_report","params":{},"state":"succeeded","attempt":1,"created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:01Z","links":{"self":"/v1/jobs/job_aaaaaaaaaaaaaaaaaaaaaaaaaa","events":"/v1/jobs/job_aaaaaaaaaaaaaaaaaaaaaaaaaa/events","result":"/v1/jobs/job_aaaaaaaaaaaaaaaaaaaaaaaaaa/result"}}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	c, err := New(srv.URL, "tok", WithoutJournal())
	require.NoError(t, err)
	w := &waiter{c: c, id: "job_aaaaaaaaaaaaaaaaaaaaaaaaaa", eventID: "7"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := w.run(ctx)
	require.NoError(t, err)
	require.Equal(t, job.StateSucceeded, res.State)
	require.Equal(t, int32(1), events.Load(), "no second reconnect after the 204")
	require.Equal(t, int32(1), reads.Load())
}

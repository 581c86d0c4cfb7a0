package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobgate/jobgate/pkg/client"
	"github.com/jobgate/jobgate/pkg/workertest/jobgatetest"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// fasthttp (the in-process jobgate's HTTP server) keeps a clock and a worker
// pool cleaner past its server's end, by design.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"))
}

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

type processed struct {
	mu  sync.Mutex
	ids []string
}

func (p *processed) add(e Event) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ids = append(p.ids, e.ID)
	return nil
}

func (p *processed) list() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.ids...)
}

func setup(t *testing.T, process func(Event) error) (*Receiver, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "seen.db")
	r, err := Open(path, secret, 5*time.Minute, process)
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	return r, path
}

// signed builds a delivery signed the way jobgate's notifier signs it.
func signed(t *testing.T, id string, ts time.Time, body string) *http.Request {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	require.NoError(t, err)
	req := httptest.NewRequest(http.MethodPost, "/", bytes.NewBufferString(body))
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set("webhook-signature", sign(key, id, ts.Unix(), body))
	return req
}

// sign is Standard Webhooks' signature: v1, base64 of HMAC-SHA256 over
// "id.timestamp.body".
func sign(key []byte, id string, ts int64, body string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + strconv.FormatInt(ts, 10) + "." + body))
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

func serve(r http.Handler, req *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	r.ServeHTTP(w, req)
	return w
}

const body = `{"type":"job.succeeded","timestamp":"2026-01-02T03:04:05.000Z","data":{"id":"job_x","state":"succeeded"}}`

func TestVerifiesAndDedupes(t *testing.T) {
	t.Parallel()
	var p processed
	r, path := setup(t, p.add)
	now := time.Now()

	require.Equal(t, http.StatusNoContent, serve(r, signed(t, "job_x.succeeded.1", now, body)).Code)
	w := serve(r, signed(t, "job_x.succeeded.1", now.Add(time.Second), body))
	require.Equal(t, http.StatusOK, w.Code, "a retry is acknowledged")
	require.Equal(t, "true", w.Header().Get("X-Duplicate"))
	require.Equal(t, []string{"job_x.succeeded.1"}, p.list(), "and processed once")

	// The record survives a restart of the receiver.
	require.NoError(t, r.Close())
	r2, err := Open(path, secret, 5*time.Minute, p.add)
	require.NoError(t, err)
	defer r2.Close()
	require.Equal(t, http.StatusOK, serve(r2, signed(t, "job_x.succeeded.1", now, body)).Code)
	require.Len(t, p.list(), 1)
}

func TestRejectsForgedAndStaleDeliveries(t *testing.T) {
	t.Parallel()
	var p processed
	r, _ := setup(t, p.add)
	now := time.Now()

	tampered := signed(t, "id-1", now, body)
	tampered.Body = http.NoBody
	require.Equal(t, http.StatusUnauthorized, serve(r, tampered).Code)

	stale := signed(t, "id-2", now.Add(-10*time.Minute), body)
	require.Equal(t, http.StatusUnauthorized, serve(r, stale).Code)

	bare := httptest.NewRequest(http.MethodPost, "/", bytes.NewBufferString(body))
	require.Equal(t, http.StatusUnauthorized, serve(r, bare).Code)

	// Several signatures (a rotated secret): one valid is enough.
	multi := signed(t, "id-3", now, body)
	multi.Header.Set("webhook-signature", "v1,AAAA "+multi.Header.Get("webhook-signature"))
	require.Equal(t, http.StatusNoContent, serve(r, multi).Code)
	require.Equal(t, []string{"id-3"}, p.list())
}

func TestFailedProcessingIsRetried(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	r, _ := setup(t, func(Event) error {
		if calls.Add(1) == 1 {
			return errors.New("database down")
		}
		return nil
	})
	now := time.Now()
	require.Equal(t, http.StatusInternalServerError, serve(r, signed(t, "id-1", now, body)).Code)
	require.False(t, r.Seen("id-1"), "a failed processing is not recorded")
	require.Equal(t, http.StatusNoContent, serve(r, signed(t, "id-1", now, body)).Code)
	require.True(t, r.Seen("id-1"))
}

// End to end: jobgate's notifier delivers to this receiver; the first answer
// is lost (the receiver processed, the sender saw a 503), so the notifier
// retries with the same webhook-id and the receiver processes only once.
// A real jobgate (pkg/workertest/jobgatetest) sends the receiver a job's terminal
// webhook; the first delivery's acknowledgement is lost (the endpoint
// answers 503 after processing it), jobgate delivers it again, and the
// receiver processes it once.
func TestWithJobgateLostAcknowledgement(t *testing.T) {
	t.Parallel()
	var p processed
	r, _ := setup(t, p.add)
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, req)
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(rec.Code)
	}))
	defer srv.Close()
	d := jobgatetest.StartWith(t, jobgatetest.Options{Webhooks: map[string][]jobgatetest.Webhook{
		"4": {{URL: srv.URL, Secret: secret, States: []string{"succeeded"}}},
	}})
	tok, err := d.Token("4", "reviewer-47")
	require.NoError(t, err)
	c, err := client.New(d.URL(), tok, client.WithoutJournal())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sub, err := c.Submit(ctx, "permit_report", map[string]any{"case_id": 47, "revision": 29, "pages": 1})
	require.NoError(t, err)
	done, err := c.Wait(ctx, sub.Job.ID, nil)
	require.NoError(t, err)
	require.Equal(t, "succeeded", string(done.State))
	require.Eventually(t, func() bool { return calls.Load() >= 2 }, 30*time.Second, 20*time.Millisecond, "delivered again")
	ids := p.list()
	require.Len(t, ids, 1, "processed once: %v", ids)
	require.Contains(t, ids[0], sub.Job.ID)
}

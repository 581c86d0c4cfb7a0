package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/notifier"
	"github.com/jobgate/jobgate/pkg/job"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

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
	key, err := notifier.DecodeSecret(secret)
	require.NoError(t, err)
	req := httptest.NewRequest(http.MethodPost, "/", bytes.NewBufferString(body))
	req.Header.Set(notifier.HeaderID, id)
	req.Header.Set(notifier.HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set(notifier.HeaderSignature, notifier.Sign(key, id, ts.Unix(), []byte(body)))
	return req
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
	multi.Header.Set(notifier.HeaderSignature, "v1,AAAA "+multi.Header.Get(notifier.HeaderSignature))
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
func TestWithNotifierLostAcknowledgement(t *testing.T) {
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

	emb, err := natsjs.StartEmbedded(natsjs.EmbeddedConfig{StoreDir: t.TempDir()})
	require.NoError(t, err)
	defer emb.Shutdown()
	nc, err := emb.Connect("receiver-test")
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := natsjs.Provision(ctx, js, natsjs.DefaultLayout())
	require.NoError(t, err)
	n, err := notifier.New(notifier.Config{
		Webhooks:     map[string][]notifier.Webhook{"4": {{URL: srv.URL, Secret: secret}}},
		AllowPrivate: true, // the receiver runs on loopback here
		Retries:      []time.Duration{20 * time.Millisecond},
	}, res, nil)
	require.NoError(t, err)
	require.NoError(t, n.Start(ctx))
	defer n.Stop()

	now := time.Now().UTC()
	rec := &job.Record{ID: "job_e2e", Tenant: "4", Requester: "reviewer-47", Type: "permit_report",
		Params: []byte(`{}`), State: job.StateCanceled, CreatedAt: now, UpdatedAt: now}
	require.NoError(t, natsjs.PublishEvent(ctx, js, rec))
	// The notifier takes the event at once and delivers it from the
	// endpoint's own queue: wait for the delivery that is acknowledged.
	require.Eventually(t, func() bool { return n.Stats().WebhooksDelivered == 1 }, 20*time.Second, 10*time.Millisecond)
	require.Equal(t, int32(2), calls.Load(), "delivered twice")
	require.Equal(t, []string{natsjs.EventMsgID(rec)}, p.list(), "processed once")
	require.Equal(t, int64(1), n.Stats().WebhooksDelivered)
}

package notifier

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/test/jobtest"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/natsserver"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testBundle is the real embedded JetStream a notifier test runs on.
type testBundle struct {
	emb *natsserver.Embedded
	res *natsjs.Resources
}

// waitTimeout bounds every wait for asynchronous work in these tests.
const waitTimeout = 20 * time.Second

// setup starts an embedded JetStream and a notifier with cfg on it. Tests
// that need more instances call b.start again.
func setup(t testing.TB, cfg Config) (*Notifier, *testBundle) {
	t.Helper()
	env := jobtest.Start(t)
	b := &testBundle{emb: env.Emb, res: env.Connect(t, "notifier-test").Res}
	return b.start(t, cfg), b
}

// start runs one more notifier instance on the bundle.
func (b *testBundle) start(t testing.TB, cfg Config) *Notifier {
	t.Helper()
	n := b.build(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	require.NoError(t, n.Start(ctx))
	return n
}

// build makes a notifier without starting it, stopped at cleanup.
func (b *testBundle) build(t testing.TB, cfg Config) *Notifier {
	t.Helper()
	if cfg.StopGrace == 0 {
		cfg.StopGrace = 5 * time.Second
	}
	if cfg.AckWait == 0 {
		cfg.AckWait = 5 * time.Second
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("instance", cfg.Instance)
	}
	n, err := New(cfg, storesOf(b.res), log)
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Stop(context.Background()) }) // a test that stops it checks how
	return n
}

// storesOf is system's notifierStores, which this package's tests
// cannot import (it imports the notifier).
func storesOf(res *natsjs.Resources) Stores {
	return Stores{Events: res.Events, Deliveries: res.Deliveries, Notices: res.Notices, Jobs: res.Jobs, Batches: res.Batches}
}

// record builds a job record of tenant/requester in state, as the
// renderer leaves it.
func record(tenant, requester, id string, state job.State) *job.Record {
	now := time.Now().UTC().Truncate(time.Millisecond)
	r := &job.Record{ID: id, Tenant: tenant, Requester: requester, Type: "permit_report",
		Params: json.RawMessage(`{"case_id":47,"pages":63,"revision":29}`), State: job.StateQueued, CreatedAt: now, UpdatedAt: now,
		Revision: 1} // each stored change has its own revision, and its event the id <job>.<revision>
	if state == job.StateQueued {
		return r
	}
	mustTransition(r, job.StateRunning, now)
	r.Attempt, r.Revision = 1, 2
	if state == job.StateRunning {
		return r
	}
	mustTransition(r, state, now.Add(time.Second))
	r.Revision = 3
	switch state {
	case job.StateSucceeded:
		r.Output = &job.Output{Object: id, ContentType: "application/pdf", Size: 12345, SHA256: strings.Repeat("ab", 32)}
	case job.StateFailed:
		r.Error = &job.Failure{Category: job.CategoryRenderError, Message: "page 12 did not render"}
	}
	return r
}

// publish publishes r's event as the dispatcher relay does.
func (b *testBundle) publish(t testing.TB, r *job.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	require.NoError(t, natsjs.PublishEvent(ctx, b.res.JS, r))
}

// publishAs publishes r's event under another message id: a second copy of
// one state change that JetStream's de-duplication does not catch.
func (b *testBundle) publishAs(t testing.TB, r *job.Record, msgID string) {
	t.Helper()
	data, err := json.Marshal(r.Resource("", r.UpdatedAt))
	require.NoError(t, err)
	msg := &nats.Msg{Subject: natsjs.EventSubject(r.Tenant, r.Requester, r.ID), Data: data, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, msgID)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	_, err = b.res.JS.PublishMsg(ctx, msg)
	require.NoError(t, err)
}

// settled sums the delivery tasks the given instances finished for good.
func settled(ns ...*Notifier) int64 {
	var sum int64
	for _, n := range ns {
		sum += n.Stats().Settled
	}
	return sum
}

// eventsAcked sums the acknowledged events of the given instances.
func eventsAcked(ns ...*Notifier) int64 {
	var sum int64
	for _, n := range ns {
		sum += n.Stats().Events
	}
	return sum
}

// delivery is one request a webhook receiver got.
type delivery struct {
	at     time.Time
	header http.Header
	body   []byte
}

// receiver is an httptest webhook endpoint answering with the statuses of
// respond (the last one repeats) and recording every request.
type receiver struct {
	srv     *httptest.Server
	mu      sync.Mutex
	got     []delivery
	respond func(n int, w http.ResponseWriter) // n counts from 1
}

func newReceiver(t testing.TB, respond func(n int, w http.ResponseWriter)) *receiver {
	t.Helper()
	r := &receiver{respond: respond}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		assert.NoError(t, err) // the handler's goroutine: no require here
		r.mu.Lock()
		r.got = append(r.got, delivery{at: time.Now(), header: req.Header.Clone(), body: body})
		n := len(r.got)
		r.mu.Unlock()
		r.respond(n, w)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func statuses(codes ...int) func(int, http.ResponseWriter) {
	return func(n int, w http.ResponseWriter) {
		w.WriteHeader(codes[min(n, len(codes))-1])
	}
}

func (r *receiver) deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.got...)
}

func (r *receiver) count() int { return len(r.deliveries()) }

func mustAddr(t testing.TB, s string) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(s)
	require.NoError(t, err)
	return a
}

// mustTransition moves a fixture record; an illegal move is a broken test.
func mustTransition(r *job.Record, to job.State, at time.Time) {
	if err := r.Transition(to, at); err != nil {
		panic(fmt.Sprintf("fixture %s: %v", r.ID, err))
	}
}

package notifier

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

// publishJob publishes the three changes of one job (queued, running,
// terminal), as the writers of a job do.
func (b *testBundle) publishJob(t testing.TB, tenant, requester, id string) {
	t.Helper()
	for _, s := range []job.State{job.StateQueued, job.StateRunning, job.StateSucceeded} {
		b.publish(t, record(tenant, requester, id, s))
	}
}

// Tenant A's endpoint answers 503 with Retry-After: 3600 to every delivery
// of a backlog that would have filled every slot of the old shared consumer
// (MaxPending is far below A's backlog here). The endpoint asked for an
// hour's pause: it gets the few requests in flight when it answered, then
// none; A's whole backlog waits in its queue. Tenant B's webhooks and mails
// still arrive at once.
func TestFailingEndpointDelaysOnlyItsOwnDeliveries(t *testing.T) {
	t.Parallel()
	failing := newReceiver(t, func(_ int, w http.ResponseWriter) {
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	working := newReceiver(t, statuses(http.StatusNoContent))
	sink := jobtest.NewSMTPSink(t)
	cfg := Config{
		Webhooks: map[string][]Webhook{
			"A": {{URL: failing.srv.URL, Secret: testSecret}},
			"B": {{URL: working.srv.URL, Secret: testSecret}},
		},
		Mail: Mail{Host: sink.Host, Port: sink.Port, From: "jobgate@example.test", Addresses: map[string]string{
			"A/alice": "alice@example.test", "B/bob": "bob@example.test",
		}},
		AllowPrivate:  true,
		MaxRetryAfter: 2 * time.Hour,
		Concurrency:   2,
		MaxPending:    20, // the old design stalled everyone once 20 events waited
	}
	n, b := setup(t, cfg)

	const backlogJobs = 100 // 300 events, every one answered 503 at A
	for i := range backlogJobs {
		b.publishJob(t, "A", "alice", "job_a_"+strconv.Itoa(i))
	}
	// A's endpoint has answered, and A's destination holds the backlog.
	aPending := func() int {
		for _, d := range n.dests {
			if d.tenant == "A" && d.ep != nil {
				p, err := n.queue.Pending(context.Background(), d.id)
				require.NoError(t, err)
				return int(p)
			}
		}
		return 0
	}
	require.Eventually(t, func() bool { return failing.count() >= 1 && aPending() == 3*backlogJobs }, waitTimeout, 10*time.Millisecond)

	const bJobs = 10
	start := time.Now()
	for i := range bJobs {
		b.publishJob(t, "B", "bob", "job_b_"+strconv.Itoa(i))
	}
	require.Eventually(t, func() bool {
		return working.count() == 3*bJobs && len(mailsTo(sink, "bob@example.test")) == bJobs
	}, 10*time.Second, 10*time.Millisecond, "B's webhooks and mails arrive while A's backlog stands")
	t.Logf("B's %d webhooks and %d mails took %s behind A's backlog", 3*bJobs, bJobs, time.Since(start))

	// A's backlog still stands, held by A's destination only.
	require.LessOrEqual(t, failing.count(), DefaultConfig().DestinationConcurrency,
		"A's endpoint gets the attempts in flight when it asked for a pause, then none")
	pending := map[string]float64{}
	for _, p := range n.pendingDeliveries() {
		pending[p.Tenant+"/"+p.Channel] = p.Count
	}
	require.Eventually(t, func() bool {
		pending = map[string]float64{}
		for _, d := range n.dests {
			p, err := n.queue.Pending(context.Background(), d.id)
			require.NoError(t, err)
			pending[d.tenant+"/"+d.channel()] = float64(p)
		}
		return pending["A/webhook"] == 3*backlogJobs && pending["B/webhook"] == 0
	}, waitTimeout, 50*time.Millisecond, "pending per destination: %v", pending)
	// A's mails do not depend on A's webhooks.
	require.Len(t, mailsTo(sink, "alice@example.test"), backlogJobs)
}

func mailsTo(s *jobtest.SMTPSink, addr string) []jobtest.Mail {
	var out []jobtest.Mail
	for _, m := range s.Received() {
		for _, to := range m.To {
			if to == addr {
				out = append(out, m)
			}
		}
	}
	return out
}

// One endpoint receives one job's changes in the order they were made, even
// when an earlier change needs retries: a later change waits for it.
func TestDeliveriesToOneEndpointKeepJobOrder(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	failedOnce := map[string]bool{}
	rcv := newReceiver(t, func(_ int, w http.ResponseWriter) { w.WriteHeader(http.StatusNoContent) })
	// The first attempt of every job's first change fails.
	rcv.respond = nil
	type got struct {
		job      string
		revision uint64
		status   int
	}
	var seen []got
	rcv.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var p struct {
			Revision uint64       `json:"revision"`
			Data     job.Resource `json:"data"`
		}
		_ = json.NewDecoder(req.Body).Decode(&p)
		mu.Lock()
		defer mu.Unlock()
		status := http.StatusNoContent
		if p.Revision == 1 && !failedOnce[p.Data.ID] {
			failedOnce[p.Data.ID] = true
			w.Header().Set("Retry-After", "1")
			status = http.StatusServiceUnavailable
		}
		seen = append(seen, got{p.Data.ID, p.Revision, status})
		w.WriteHeader(status)
	})
	n, b := setup(t, Config{
		Webhooks:     map[string][]Webhook{"4": {{URL: rcv.srv.URL, Secret: testSecret}}},
		AllowPrivate: true,
		Retries:      []time.Duration{10 * time.Millisecond, 10 * time.Millisecond},
	})
	const jobs = 8
	for i := range jobs {
		b.publishJob(t, "4", "reviewer-47", "job_order_"+strconv.Itoa(i))
	}
	require.Eventually(t, func() bool { return n.Stats().Settled == 3*jobs }, waitTimeout, 10*time.Millisecond)

	mu.Lock()
	defer mu.Unlock()
	delivered := map[string][]uint64{}
	for _, g := range seen {
		require.NotZero(t, g.revision, "the payload carries the change's revision")
		if g.status == http.StatusServiceUnavailable {
			require.Empty(t, delivered[g.job], "the first change of %s was the first one sent", g.job)
			continue
		}
		delivered[g.job] = append(delivered[g.job], g.revision)
	}
	require.Len(t, delivered, jobs)
	for id, revs := range delivered {
		require.Equal(t, []uint64{1, 2, 3}, revs, "deliveries of %s in revision order", id)
	}
	require.Positive(t, n.Stats().HeldForOrder, "later changes waited for the retried first one")
}

// A destination's pending deliveries are capped: past the cap, new notices
// for it are dropped and counted, except a job's terminal change, which is
// still queued up to twice the cap; other destinations are untouched.
func TestPendingDeliveriesPerDestinationAreCapped(t *testing.T) {
	t.Parallel()
	failing := newReceiver(t, func(_ int, w http.ResponseWriter) {
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	working := newReceiver(t, statuses(http.StatusNoContent))
	n, b := setup(t, Config{
		Webhooks: map[string][]Webhook{
			"A": {{URL: failing.srv.URL, Secret: testSecret}},
			"B": {{URL: working.srv.URL, Secret: testSecret}},
		},
		AllowPrivate:             true,
		MaxRetryAfter:            2 * time.Hour,
		DestinationConcurrency:   1,
		MaxPendingPerDestination: 6,
	})
	const jobs, bJobs = 10, 5 // B stays below the cap
	for i := range jobs {
		b.publishJob(t, "A", "alice", "job_cap_"+strconv.Itoa(i))
	}
	require.Eventually(t, func() bool { return n.Stats().Events == 3*jobs }, waitTimeout, 10*time.Millisecond)
	for i := range bJobs {
		b.publish(t, record("B", "bob", "job_fine_"+strconv.Itoa(i), job.StateSucceeded))
	}
	require.Eventually(t, func() bool { return working.count() == bJobs }, waitTimeout, 10*time.Millisecond)
	// The cap's 6 are any changes; the 6 past it are terminal ones.
	s := n.Stats()
	require.Equal(t, int64(3*jobs-12), s.WebhooksDropped, "one instance: exactly twice the cap is kept")
	dest := "w" + n.endpoints["A"][0].id
	p, err := n.queue.Pending(context.Background(), dest)
	require.NoError(t, err)
	require.Equal(t, 12, p)
	terminal := 0
	for i := range jobs {
		tasks, err := n.queue.JobTasks(context.Background(), dest, "job_cap_"+strconv.Itoa(i), 64)
		require.NoError(t, err)
		for _, q := range tasks {
			ev, err := decodeEvent(q.Subject, q.Data, q.EventID)
			require.NoError(t, err)
			if ev.Job.State.Terminal() {
				terminal++
			}
		}
	}
	require.GreaterOrEqual(t, terminal, 6, "past the cap only terminal changes were queued")
}

// A notifier with nothing in flight stops at once: its grace is for
// deliveries being made, not for its own bookkeeping (the pending-count
// watcher held every Stop for the whole grace, so `serve` took 16 s to
// stop and warned of deliveries that did not exist).
func TestStopWithNothingInFlightDoesNotWaitItsGrace(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, statuses(http.StatusNoContent))
	n, _ := setup(t, Config{
		Webhooks:     map[string][]Webhook{"4": {{URL: rcv.srv.URL, Secret: testSecret}}},
		AllowPrivate: true,
		StopGrace:    time.Minute,
	})
	stopped := make(chan error, 1)
	go func() { stopped <- n.Stop(context.Background()) }()
	select {
	case err := <-stopped:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("Stop waited for its grace with nothing in flight")
	}
}

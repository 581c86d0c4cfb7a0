package conformance

import (
	"net/http"
	"time"

	"github.com/stretchr/testify/require"
)

// leaseSlack is how long after the end of its lease a worker may stop its
// handler: the handler's 50 ms poll, the event's way through a pipe, a
// loaded machine's timers; the lease itself is over ten seconds. It may
// stop up to leaseEarly before the end the partition computes, which
// counts a beat answered ok that reached the worker too late to count.
const (
	leaseSlack = 2 * time.Second
	leaseEarly = time.Second
)

// scenarioLease: a worker whose beats go unanswered stops its handler once
// the lease of jobgate's last answer runs out (lease_ms, counted from when
// the beat answered ok was sent, or from the assignment's arrival) and
// reports no verdict (no done, no fail), since by then jobgate may have
// handed the job to another attempt; it may give the job back once the
// handler returned (the Go, TypeScript and Python workers do, reason
// lease_lapsed: refused if the claim was taken over). The worker process
// connects through a partition the scenario cuts once beats have been
// answered ok for a few seconds (so that a worker that never moves its
// deadline past the assignment's fails); healed, the job runs again as
// attempt 2 (given back, or taken over), and is canceled.
func scenarioLease(t T, s *Suite, im *Impl) {
	if im.startVia == nil {
		t.Fatalf("%s: a worker process on another NATS URL cannot be started", im.Name)
	}
	c := s.d.client(t, "lease-"+im.Name, "requester-"+im.Name)
	typ := typeName(im, "lease", s)
	px := newPartition(t, s.d.natsURL)
	w := im.startVia(t, px.url(), im.Name+"-lease", s.d.workerCredential(t, typ), "lease")
	w.wait(t, 30*time.Second, "ready", eventOf("ready", ""))

	j := c.submit(t, typ, map[string]any{"mode": "hold"})
	w.wait(t, 20*time.Second, "handler start", eventOf("started", j.ID))
	var asg leased
	require.Eventually(t, func() bool {
		for _, l := range px.leases() {
			if l.op == "next" {
				asg = l
				return true
			}
		}
		return false
	}, 5*time.Second, 20*time.Millisecond, "the assignment delivered")
	require.Positive(t, asg.lease, "the assignment carries lease_ms")
	// Beats answered ok with a lease for 3 s past the assignment.
	require.Eventually(t, func() bool {
		for _, l := range px.leases() {
			if l.op == "beat" && l.lease > 0 && l.at.Sub(asg.at) >= 3*time.Second {
				return true
			}
		}
		return false
	}, 20*time.Second, 20*time.Millisecond, "beats answered ok with lease_ms, 3 s after the assignment")

	px.cut()
	cut := time.Now()
	// The worker's lease ends at the latest one it was told, counted from
	// when its request reached the partition (the worker sent it a little
	// earlier, so its own end is no later).
	var end time.Time
	for _, l := range px.leases() {
		if e := l.at.Add(l.lease); e.After(end) {
			end = e
		}
	}
	ab := w.wait(t, time.Until(end)+leaseSlack+5*time.Second, "the handler stopped", eventOf("aborted", j.ID))
	stopped := time.Now()
	t.Logf("%s: handler stopped (%s) %s after the cut, %s from the end of its lease (%s after the cut)",
		im.Name, ab.str("reason"), stopped.Sub(cut).Round(time.Millisecond), stopped.Sub(end).Round(time.Millisecond), end.Sub(cut).Round(time.Millisecond))
	require.Equal(t, "lost", ab.str("reason"), "the handler is stopped as for a lost claim")
	require.Less(t, stopped.Sub(end), leaseSlack, "stopped within its lease (+%s)", leaseSlack)
	require.Greater(t, stopped.Sub(end), -leaseEarly, "not stopped long before its lease ran out")
	// No verdict: a done or a fail would follow the handler's return at
	// once (held by the partition, seen all the same).
	for window := time.Now().Add(time.Second); time.Now().Before(window); time.Sleep(20 * time.Millisecond) {
		require.Empty(t, px.sent(cut, "done", "fail"), "no verdict after the lease ran out")
	}

	// Healed, the job runs again as attempt 2: given back, or its claim
	// taken over, gone stale.
	px.heal()
	healed := time.Now()
	ended := w.wait(t, 20*time.Second, "the attempt's end", func(e event) bool { return e.str("event") == "attempt" && e.str("type") == typ })
	require.Contains(t, []string{"lost", "given_back"}, ended.str("outcome"), "the attempt ends with no verdict")
	w.wait(t, 40*time.Second, "the job run again as attempt 2", func(e event) bool {
		return e.str("event") == "started" && e.str("id") == j.ID && e.num("attempt") == 2
	})
	require.Empty(t, px.sent(cut, "done", "fail"), "no verdict of attempt 1")
	for _, g := range px.sent(cut, "giveback") {
		require.False(t, g.at.Before(end.Add(-leaseEarly)), "given back only once the handler stopped, not while it ran")
	}
	t.Logf("%s: the job ran again as attempt 2 %s after the heal; attempt 1 ended %s, %d give-back requests",
		im.Name, time.Since(healed).Round(time.Millisecond), ended.str("outcome"), len(px.sent(cut, "giveback")))
	r := c.do(t, http.MethodDelete, "/v1/jobs/"+j.ID, "")
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
	w.wait(t, 10*time.Second, "attempt 2 aborted by the cancel", func(e event) bool {
		return e.str("event") == "aborted" && e.str("id") == j.ID && e.num("attempt") == 2
	})
}

package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
)

// The fairness section, notices: tenant A's webhook endpoint answers 503
// with Retry-After: 3600 to every delivery of a backlog of events; tenant B's
// webhook and mail latency (event published → webhook received, → .eml
// written) is measured alone, again right after A's backlog was published
// (A's failing endpoint only), and again while A's own working mail for a
// second backlog is delivered, in one target (the notifier alone, mail to
// its outbox).

// SecFairness is the section name.
const SecFairness = "fairness"

// noticeSamples is how many B jobs each phase times.
const noticeSamples = 100

// publishNoticeEvents publishes the events of jobs as their writers would:
// with states 3 queued, running and succeeded; with 1 only succeeded.
func publishNoticeEvents(ctx context.Context, res *natsjs.Resources, tenant, requester string, ids []string, states int) (int64, error) {
	now := time.Now().UTC().Truncate(time.Millisecond)
	var n int64
	for _, id := range ids {
		r := &job.Record{ID: id, Tenant: tenant, Requester: requester, Type: "permit_report",
			Params: json.RawMessage(`{"case_id":1,"revision":1,"pages":1}`), State: job.StateQueued, CreatedAt: now, UpdatedAt: now, Revision: 1}
		steps := []func() error{
			func() error { return nil },
			func() error { r.Attempt, r.Revision = 1, 2; return r.Transition(job.StateRunning, now) },
			func() error {
				r.Revision = 3
				r.Output = &job.Output{Object: id, ContentType: "application/pdf", Size: 1234, SHA256: fmt.Sprintf("%064x", 1)}
				return r.Transition(job.StateSucceeded, now)
			},
		}
		for i, step := range steps {
			if err := step(); err != nil {
				return n, err
			}
			if i < 3-states {
				continue
			}
			if err := natsjs.PublishEvent(ctx, res.JS, r); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}

// hookReceiver is a webhook endpoint in the bench process.
type hookReceiver struct {
	srv    *http.Server
	url    string
	status int
	mu     sync.Mutex
	got    map[string]time.Time // webhook-id → first arrival
	n      int
}

func newHookReceiver(status int) (*hookReceiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h := &hookReceiver{status: status, got: map[string]time.Time{}, url: "http://" + ln.Addr().String() + "/hook"}
	h.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		now := time.Now()
		h.mu.Lock()
		h.n++
		if _, ok := h.got[req.Header.Get("webhook-id")]; !ok {
			h.got[req.Header.Get("webhook-id")] = now
		}
		h.mu.Unlock()
		if h.status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "3600")
		}
		w.WriteHeader(h.status)
	})}
	go func() { _ = h.srv.Serve(ln) }()
	return h, nil
}

func (h *hookReceiver) arrival(id string) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t, ok := h.got[id]
	return t, ok
}

func (h *hookReceiver) requests() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// fairnessSuite runs the notices half of the fairness section.
func (r *runner) fairnessSuite(ctx context.Context) error {
	failing, err := newHookReceiver(http.StatusServiceUnavailable)
	if err != nil {
		return err
	}
	defer failing.srv.Close()
	working, err := newHookReceiver(http.StatusNoContent)
	if err != nil {
		return err
	}
	defer working.srv.Close()
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	cfgPath := filepath.Join(r.o.WorkDir, "fairness.yaml")
	yaml := fmt.Sprintf(`notifier:
  allow_private_webhooks: true
  webhooks:
    A: [{url: %q, secret: %q}]
    B: [{url: %q, secret: %q}]
  mail:
    addresses: {"A/alice": "alice@example.test", "B/bob": "bob@example.test"}
`, failing.url, secret, working.url, secret)
	if err := os.MkdirAll(r.o.WorkDir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		return err
	}
	p, err := r.startEnv([]string{"notifier"}, false, 0, []string{"JOBGATE_BENCH_CONFIG=" + cfgPath})
	if err != nil {
		return err
	}
	if p == nil {
		return errors.New("fairness: needs the target process (not with --url)")
	}
	defer p.stop()
	outbox := filepath.Join(p.spec.DataDir, "outbox")

	// phase times noticeSamples B jobs, one at a time, from the request that
	// publishes its event to its webhook and its mail.
	phase := func(name string) (hooks, mails []time.Duration, err error) {
		for i := range noticeSamples {
			id := fmt.Sprintf("job_b_%s_%d", name, i)
			start := time.Now()
			if _, err := p.call(Request{Op: opNoticeEvents, Tenant: "B", Path: "bob", Keys: []string{id}, Pages: 1}); err != nil {
				return nil, nil, err
			}
			var hook, mail time.Duration
			deadline := start.Add(2 * time.Minute)
			for hook == 0 || mail == 0 {
				if time.Now().After(deadline) {
					return nil, nil, fmt.Errorf("fairness: B's notices of %s did not arrive within 2m (webhook %v, mail %v)", id, hook != 0, mail != 0)
				}
				if t, ok := working.arrival(id + ".3"); ok && hook == 0 {
					hook = t.Sub(start)
				}
				if mail == 0 {
					if _, err := os.Stat(filepath.Join(outbox, "B.bob."+id+".succeeded.eml")); err == nil {
						mail = time.Since(start)
					}
				}
				time.Sleep(2 * time.Millisecond)
			}
			hooks, mails = append(hooks, hook), append(mails, mail)
		}
		return hooks, mails, nil
	}
	aloneHooks, aloneMails, err := phase("alone")
	if err != nil {
		return err
	}

	// A's backlog: jobs of three events each, published as fast as the
	// target can, or for at most a minute. First under a requester of A
	// without mail (the scenario: A's failing endpoint and its
	// backlog, nothing else of A's), then under one with mail, so A's own
	// mails (one per job, working) are delivered while B is measured.
	const backlogEvents = 10_000
	backlog := func(requester, prefix string) (int64, error) {
		var published int64
		started := time.Now()
		for i := 0; published < backlogEvents && time.Since(started) < time.Minute; i++ {
			ids := make([]string, 0, 100)
			for j := range 100 {
				ids = append(ids, prefix+strconv.Itoa(i*100+j))
			}
			resp, err := p.call(Request{Op: opNoticeEvents, Tenant: "A", Path: requester, Keys: ids, Pages: 3})
			if err != nil {
				return published, err
			}
			published += resp.Changes
		}
		r.logf("fairness: A's backlog of %d events (requester %s) published in %s", published, requester, time.Since(started).Round(time.Millisecond))
		return published, nil
	}
	published, err := backlog("ann", "job_a_")
	if err != nil {
		return err
	}
	traced := false
	if r.o.ProfileDir != "" {
		// Where B's notices wait while A's backlog is routed (go tool
		// trace -pprof=sync|sched).
		path, _ := filepath.Abs(filepath.Join(r.o.ProfileDir, "fairness-notices-with.trace"))
		if _, err := p.call(Request{Op: opTraceStart, Path: path}); err != nil {
			r.logf("trace: %v", err)
		} else {
			traced = true
		}
	}
	withHooks, withMails, err := phase("with")
	if traced {
		_, _ = p.call(Request{Op: opTraceStop})
	}
	if err != nil {
		return err
	}
	aRequests := failing.requests()
	mailed, err := backlog("alice", "job_am_")
	if err != nil {
		return err
	}
	mailHooks, mailMails, err := phase("with-mail")
	if err != nil {
		return err
	}

	add := func(what string, alone, with, withMail []time.Duration) {
		a, w, m := Summarize(alone, 0, 0), Summarize(with, 0, 0), Summarize(withMail, 0, 0)
		r.rep.add(Row{Section: SecFairness, Name: "notices: B " + what + " p99, alone", Value: a.P99, Unit: "ms", Summary: &a})
		ratio := w.P99 / a.P99
		met := ratio <= 2
		r.rep.add(Row{Section: SecFairness, Name: fmt.Sprintf("notices: B %s p99, A's %d-event backlog at 503 + Retry-After 3600", what, published),
			Value: w.P99, Unit: "ms", Summary: &w, Ratio: ratio, RatioOf: "alone", Target: "≤ 2×", Met: &met})
		r.rep.add(Row{Section: SecFairness, Name: fmt.Sprintf("notices: B %s p99, and A's own mails of %d more events being delivered", what, mailed),
			Value: m.P99, Unit: "ms", Summary: &m, Ratio: m.P99 / a.P99, RatioOf: "alone"})
	}
	add("webhook", aloneHooks, withHooks, mailHooks)
	add("mail", aloneMails, withMails, mailMails)
	r.rep.note("fairness (notices): %d B jobs per phase, one at a time; A's endpoint got %d requests for its first backlog "+
		"(it asked for an hour's pause: the rest wait unsent in A's queue); the last rows add A's working mail (one per job, "+
		"%d jobs) on the same 2 cores", noticeSamples, aRequests, mailed/3)
	return nil
}

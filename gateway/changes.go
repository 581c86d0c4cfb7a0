package gateway

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jobgate/jobgate/pkg/job"
	"github.com/jobgate/jobgate/pkg/wiring"
	"github.com/nats-io/nats.go"
)

// changeFeed fans the job record change log out to waiting requests: one
// NATS subscription per gateway process, however many long-polls and SSE
// streams are open. It subscribes while anyone waits and lets go of the
// subscription after a quiet period, so a gateway nobody watches receives no
// change traffic.
type changeFeed struct {
	nc      *nats.Conn
	linger  time.Duration
	mu      sync.Mutex
	waiters map[string]map[chan struct{}]struct{}
	count   int
	sub     *nats.Subscription
	idle    *time.Timer
}

func newChangeFeed(nc *nats.Conn) *changeFeed {
	return &changeFeed{nc: nc, linger: 30 * time.Second, waiters: make(map[string]map[chan struct{}]struct{})}
}

// watch registers interest in one record key. The returned channel receives
// a signal (coalesced) after each change; the caller must re-read the record.
// The subscription is confirmed by the server before watch returns, so a
// read made after watch cannot miss a change.
func (f *changeFeed) watch(key string) (chan struct{}, error) {
	ch := make(chan struct{}, 1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sub == nil {
		sub, err := f.nc.Subscribe(wiring.JobChanges, f.deliver)
		if err != nil {
			return nil, err
		}
		if err := f.nc.FlushTimeout(5 * time.Second); err != nil {
			_ = sub.Unsubscribe()
			return nil, err
		}
		f.sub = sub
	}
	if f.idle != nil {
		f.idle.Stop()
		f.idle = nil
	}
	set := f.waiters[key]
	if set == nil {
		set = make(map[chan struct{}]struct{})
		f.waiters[key] = set
	}
	set[ch] = struct{}{}
	f.count++
	return ch, nil
}

func (f *changeFeed) unwatch(key string, ch chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	set := f.waiters[key]
	if _, ok := set[ch]; !ok {
		return
	}
	delete(set, ch)
	if len(set) == 0 {
		delete(f.waiters, key)
	}
	f.count--
	if f.count == 0 && f.sub != nil && f.idle == nil {
		f.idle = time.AfterFunc(f.linger, f.release)
	}
}

// release drops the subscription if nobody started watching meanwhile.
func (f *changeFeed) release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.idle = nil
	if f.count == 0 && f.sub != nil {
		_ = f.sub.Unsubscribe()
		f.sub = nil
	}
}

// watchers is the number of open long-polls and streams.
func (f *changeFeed) watchers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.count
}

func (f *changeFeed) deliver(m *nats.Msg) {
	key := wiring.JobChangeKey(m.Subject)
	f.mu.Lock()
	for ch := range f.waiters[key] {
		select {
		case ch <- struct{}{}:
		default: // a signal is already pending; the reader re-reads anyway
		}
	}
	f.mu.Unlock()
}

func (f *changeFeed) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.idle != nil {
		f.idle.Stop()
	}
	if f.sub != nil {
		_ = f.sub.Unsubscribe()
		f.sub = nil
	}
}

// waitForChange blocks until the job's record differs from rec, wait
// passes, or the gateway stops; it returns the record as it then is.
func (g *Gateway) waitForChange(ctx context.Context, rec *job.Record, wait time.Duration) (*job.Record, error) {
	ch, err := g.changes.watch(rec.Key())
	if err != nil {
		return nil, errors.Join(job.ErrUnavailable, err)
	}
	defer g.changes.unwatch(rec.Key(), ch)
	g.cfg.Metrics.LongPoll(1)
	defer g.cfg.Metrics.LongPoll(-1)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	cur := rec
	for {
		// Re-read after registering: a change between the caller's read and
		// the registration is seen here.
		rctx, cancel := context.WithTimeout(ctx, readTimeout)
		latest, err := g.res.Jobs.Get(rctx, rec.Key())
		cancel()
		if err != nil {
			return nil, err
		}
		if latest.Revision != rec.Revision {
			return latest, nil
		}
		cur = latest
		select {
		case <-ch:
		case <-timer.C:
			return cur, nil
		case <-ctx.Done():
			return cur, nil
		case <-g.stopped:
			return cur, nil
		}
	}
}

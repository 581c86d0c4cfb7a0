package gateway

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jobgate/jobgate/internal/job"
)

// changeFeed fans job record changes out to waiting requests: one KV watch
// (a single ordered consumer) per gateway process, however many long-polls
// and SSE streams are open. It watches while anyone waits and lets go after
// a quiet period, so a gateway nobody watches receives no change traffic.
//
// It follows the stream, not the publish subject: a change arrives only once
// JetStream has stored it, and it carries the stored record and revision, so
// a waiter never re-reads an older record than the one it was woken for.
type changeFeed struct {
	start   func() (recordWatch, error)
	linger  time.Duration
	mu      sync.Mutex
	waiters map[string]map[chan *job.Record]struct{}
	count   int
	watcher recordWatch
	idle    *time.Timer
}

func newChangeFeed(start func() (recordWatch, error)) *changeFeed {
	return &changeFeed{start: start, linger: 30 * time.Second, waiters: make(map[string]map[chan *job.Record]struct{})}
}

// watch registers interest in one record key. The channel holds the newest
// stored record after a change (older undelivered ones are replaced). The
// watch is in place when watch returns, so a read made afterwards cannot
// miss a change.
func (f *changeFeed) watch(key string) (chan *job.Record, error) {
	ch := make(chan *job.Record, 1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.watcher == nil {
		w, err := f.start()
		if err != nil {
			return nil, err
		}
		f.watcher = w
		go f.run(w)
	}
	if f.idle != nil {
		f.idle.Stop()
		f.idle = nil
	}
	set := f.waiters[key]
	if set == nil {
		set = make(map[chan *job.Record]struct{})
		f.waiters[key] = set
	}
	set[ch] = struct{}{}
	f.count++
	return ch, nil
}

func (f *changeFeed) unwatch(key string, ch chan *job.Record) {
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
	if f.count == 0 && f.watcher != nil && f.idle == nil {
		f.idle = time.AfterFunc(f.linger, f.release)
	}
}

// release stops the watch if nobody started watching meanwhile.
func (f *changeFeed) release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.idle = nil
	if f.count == 0 && f.watcher != nil {
		f.stopWatch()
	}
}

// watchers is the number of open long-polls and streams.
func (f *changeFeed) watchers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.count
}

// run hands each stored change to the waiters of its key until w stops.
func (f *changeFeed) run(w recordWatch) {
	for e := range w.Changes() {
		f.mu.Lock()
		set := f.waiters[e.Key]
		if len(set) > 0 {
			if rec, err := e.Record(); err == nil {
				for ch := range set {
					select { // keep only the newest: drop an undelivered older one
					case <-ch:
					default:
					}
					ch <- rec
				}
			}
		}
		f.mu.Unlock()
	}
}

func (f *changeFeed) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.idle != nil {
		f.idle.Stop()
	}
	if f.watcher != nil {
		f.stopWatch()
	}
}

func (f *changeFeed) stopWatch() {
	f.watcher.Stop()
	f.watcher = nil
}

// waitForChange blocks until the job's record is newer than rec, wait
// passes, or the gateway stops; it returns the record as it then is.
func (g *Gateway) waitForChange(ctx context.Context, rec *job.Record, wait time.Duration) (*job.Record, error) {
	ch, err := g.changes.watch(rec.Key())
	if err != nil {
		return nil, errors.Join(job.ErrUnavailable, err)
	}
	defer g.changes.unwatch(rec.Key(), ch)
	g.cfg.Metrics.LongPoll(1)
	defer g.cfg.Metrics.LongPoll(-1)
	// Re-read after registering: a change between the caller's read and the
	// registration is seen here.
	rctx, cancel := context.WithTimeout(ctx, readTimeout)
	latest, err := g.jobs.Get(rctx, rec.Key())
	cancel()
	if err != nil {
		return nil, err
	}
	if latest.Revision > rec.Revision {
		return latest, nil
	}
	// Never answer older than the caller's version (see readAtLeast).
	latest = rec
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case next := <-ch:
			if next.Revision > rec.Revision {
				return next, nil
			}
		case <-timer.C:
			return latest, nil
		case <-ctx.Done():
			return latest, nil
		case <-g.stopped:
			return latest, nil
		}
	}
}

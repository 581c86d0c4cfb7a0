package endpointcall

import (
	"context"
	"math"
	"sync"
	"time"
)

// An endpoint's rate_per_second holds across the deployment: a slot asks
// the broker for a job only once the type's rate allows another request
// (workerhook.Pace, so the wait is not an attempt's: a job claimed has its
// whole time budget). The starts of each window (a second, or 1/rate
// seconds below one a second) are counted in JetStream KV
// (natsjs.SlotStore.TakeRate), taken a few at a time by each dispatcher;
// those a dispatcher took and did not use by the window's end are lost,
// so the rate may be undershot, never exceeded. Without the store (a
// caller of its own), a limiter of the process holds it there.

// rateWindow is what this process holds of the current window.
type rateWindow struct {
	mu    sync.Mutex
	start int64 // the window's first Unix second
	left  int   // starts taken and not used yet
}

// paced says the type has a rate.
func (r *runner) paced() bool { return r.endpoint.Load().RatePerSecond > 0 }

// pace waits, within ctx, until the type's rate allows one more request.
func (r *runner) pace(ctx context.Context) error {
	perSecond := r.endpoint.Load().RatePerSecond
	if perSecond <= 0 {
		return nil
	}
	if r.c.leases == nil {
		if l := r.limiter.Load(); l != nil {
			return l.Wait(ctx)
		}
		return nil
	}
	// A window is a second, or as many as one start takes below one a
	// second; its starts are the rate times its length.
	period := int64(1)
	if perSecond < 1 {
		period = int64(math.Ceil(1 / perSecond))
	}
	limit := max(1, int(perSecond*float64(period)))
	for {
		now := r.c.cfg.Now()
		start := now.Unix() / period * period
		r.window.mu.Lock()
		if r.window.start == start && r.window.left > 0 {
			r.window.left--
			r.window.mu.Unlock()
			return nil
		}
		r.window.mu.Unlock()
		// A share of the window at a time: another dispatcher gets the
		// rest, and what this one does not use is little.
		n, err := r.c.leases.store.TakeRate(ctx, r.typ, start, max(1, limit/8), limit)
		if err != nil {
			return err
		}
		if n > 0 {
			r.window.mu.Lock()
			if r.window.start != start {
				r.window.start, r.window.left = start, 0
			}
			r.window.left += n - 1
			r.window.mu.Unlock()
			return nil
		}
		next := time.Unix(start+period, 0)
		t := time.NewTimer(next.Sub(now) + time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

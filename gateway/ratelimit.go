package gateway

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// limiterCap bounds the requesters a limiter tracks at once; past it, the
// ones whose bucket is full again (idle) are dropped at once instead of at
// the next periodic sweep.
const limiterCap = 1 << 16

// limiter is a token bucket (golang.org/x/time/rate) per requester. Buckets
// idle long enough to be full again are dropped, so memory follows the
// active requesters.
type limiter struct {
	limit rate.Limit
	burst int
	now   func() time.Time
	mu    sync.Mutex
	b     map[string]*rate.Limiter
	sweep time.Time
}

func newLimiter(perSecond float64, burst int, now func() time.Time) *limiter {
	return &limiter{limit: rate.Limit(perSecond), burst: burst, now: now, b: make(map[string]*rate.Limiter)}
}

// allow takes a token for who; when none is left it says after how many
// whole seconds one will be.
func (l *limiter) allow(who string) (retryAfter int, ok bool) {
	return l.allowKey([]byte(who))
}

// allowScope is allow for tenant + "/" + requester, without building that
// string on every request.
func (l *limiter) allowScope(tenant, requester string) (retryAfter int, ok bool) {
	var buf [2*64 + 1]byte // ids are at most 64 characters
	return l.allowKey(append(append(append(buf[:0], tenant...), '/'), requester...))
}

func (l *limiter) allowKey(who []byte) (retryAfter int, ok bool) {
	now := l.now()
	l.mu.Lock()
	if now.Sub(l.sweep) > time.Minute || len(l.b) >= limiterCap {
		l.dropIdle(now)
	}
	lim, found := l.b[string(who)] // no allocation for the lookup
	if !found {
		lim = rate.NewLimiter(l.limit, l.burst)
		l.b[string(who)] = lim
	}
	l.mu.Unlock()
	r := lim.ReserveN(now, 1)
	d := r.DelayFrom(now)
	if d == 0 {
		return 0, true
	}
	r.CancelAt(now) // a refused request takes no token
	return max(1, int(math.Ceil(d.Seconds()))), false
}

// dropIdle forgets the requesters whose bucket is full: a new bucket would
// be the same. If most are active, the map is cleared rather than grown (a
// burst is then granted again), so a full map does not make every call
// sweep it. l.mu is held.
func (l *limiter) dropIdle(now time.Time) {
	for k, lim := range l.b {
		if lim.TokensAt(now) >= float64(l.burst) {
			delete(l.b, k)
		}
	}
	if len(l.b) >= limiterCap*3/4 {
		clear(l.b)
	}
	l.sweep = now
}

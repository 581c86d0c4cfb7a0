package gateway

import (
	"math"
	"sync"
	"time"
)

// limiter is a token bucket per requester. Buckets idle long enough to be
// full again are dropped, so memory follows the active requesters.
type limiter struct {
	rate  float64
	burst float64
	now   func() time.Time
	mu    sync.Mutex
	b     map[string]*bucket
	sweep time.Time
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newLimiter(rate float64, burst int, now func() time.Time) *limiter {
	return &limiter{rate: rate, burst: float64(burst), now: now, b: make(map[string]*bucket)}
}

// allow takes a token for who; when none is left it says after how many
// whole seconds one will be.
func (l *limiter) allow(who string) (retryAfter int, ok bool) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.sweep) > time.Minute {
		full := time.Duration(l.burst / l.rate * float64(time.Second))
		for k, b := range l.b {
			if now.Sub(b.last) > full {
				delete(l.b, k)
			}
		}
		l.sweep = now
	}
	b, found := l.b[who]
	if !found {
		b = &bucket{tokens: l.burst, last: now}
		l.b[who] = b
	}
	b.tokens = math.Min(l.burst, b.tokens+now.Sub(b.last).Seconds()*l.rate)
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return 0, true
	}
	return int(math.Ceil((1 - b.tokens) / l.rate)), false
}

package broker

import "time"

// maxCredentials bounds the rate-limit state kept: past it the oldest
// buckets are dropped (a dropped bucket starts full again).
const maxCredentials = 10000

// bucket is a token bucket of one credential's requests.
type bucket struct {
	tokens float64
	at     time.Time
}

// allow takes a token of cred's bucket.
func (b *Broker) allow(cred string) bool {
	now := b.cfg.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	k := b.limits[cred]
	if k == nil {
		if len(b.limits) >= maxCredentials {
			clear(b.limits)
		}
		k = &bucket{tokens: b.cfg.Burst, at: now}
		b.limits[cred] = k
	}
	k.tokens = min(b.cfg.Burst, k.tokens+now.Sub(k.at).Seconds()*b.cfg.Rate)
	k.at = now
	if k.tokens < 1 {
		return false
	}
	k.tokens--
	return true
}

// wait counts a held next request of cred; false past MaxWaiting.
func (b *Broker) wait(cred string) (func(), bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.waiting[cred] >= b.cfg.MaxWaiting {
		return nil, false
	}
	b.waiting[cred]++
	return func() {
		b.mu.Lock()
		if b.waiting[cred]--; b.waiting[cred] <= 0 {
			delete(b.waiting, cred)
		}
		b.mu.Unlock()
	}, true
}

package broker

import "time"

// maxCredentials bounds the rate-limit state kept: past it the oldest
// buckets are dropped (a dropped bucket starts full again).
const maxCredentials = 10000

// bucket is a token bucket of one credential's requests.
type bucket struct {
	tokens float64
	at     time.Time
	// warned is when a refusal of the bucket was last logged at warn
	// (declaration changes: one line per DeclareEvery, not one a request).
	warned time.Time
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

// takeChange takes a token of cred's bucket of declaration changes
// (Config.DeclareBurst, one more every DeclareEvery); when it has none, it
// says how long until it has one.
func (b *Broker) takeChange(cred string) (time.Duration, bool) {
	now := b.cfg.Now()
	every := b.cfg.DeclareEvery
	b.mu.Lock()
	defer b.mu.Unlock()
	k := b.changes[cred]
	if k == nil {
		if len(b.changes) >= maxCredentials {
			clear(b.changes)
		}
		k = &bucket{tokens: float64(b.cfg.DeclareBurst), at: now}
		b.changes[cred] = k
	}
	k.tokens = min(float64(b.cfg.DeclareBurst), k.tokens+float64(now.Sub(k.at))/float64(every))
	k.at = now
	if k.tokens < 1 {
		return time.Duration((1 - k.tokens) * float64(every)), false
	}
	k.tokens--
	return 0, true
}

// warnChange reports whether a refusal of cred's declaration changes
// should be logged at warn: the first in each DeclareEvery.
func (b *Broker) warnChange(cred string) bool {
	now := b.cfg.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	k := b.changes[cred]
	if k == nil || now.Sub(k.warned) < b.cfg.DeclareEvery {
		return false
	}
	k.warned = now
	return true
}

// giveChange returns a token takeChange took for a change that did not
// happen for want of the compiler.
func (b *Broker) giveChange(cred string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if k := b.changes[cred]; k != nil {
		k.tokens = min(float64(b.cfg.DeclareBurst), k.tokens+1)
	}
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

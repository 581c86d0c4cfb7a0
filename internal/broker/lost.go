package broker

import (
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
)

// A claim's write can be stored with its answer lost (the record store's
// leader stops between the two). This broker then sent no assignment, so
// no worker holds the claim; left alone it would go silent and be taken
// over after StaleAfter, costing the job an attempt an outage caused. The
// broker remembers such claims by their ClaimID and, when it next meets
// one still standing, hands it to the asking worker as the same attempt.

const (
	// maxLost bounds the claims remembered: past it the oldest is
	// forgotten (and, if it stands, taken over as any silent claim).
	maxLost = 4096
	// lostFor is how long one is remembered, in StaleAfters: long enough
	// for an outage, short enough that a standing one is long taken over.
	lostFor = 10
)

type lostClaim struct {
	id      string
	attempt int
	at      time.Time
}

// newClaimID returns a fresh claim id.
func newClaimID() string {
	var b [9]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// lose remembers rec's claim, written with its answer lost.
func (b *Broker) lose(rec *job.Record) {
	b.lostMu.Lock()
	defer b.lostMu.Unlock()
	now := b.cfg.Now()
	if b.lost == nil {
		b.lost = map[string]lostClaim{}
	}
	if len(b.lost) >= maxLost {
		oldest, at := "", now
		for k, c := range b.lost {
			if c.at.Before(at) || oldest == "" {
				oldest, at = k, c.at
			}
		}
		delete(b.lost, oldest)
	}
	b.lost[rec.Key()] = lostClaim{id: rec.ClaimID, attempt: rec.Attempt, at: now}
}

// ownLost reports whether cur's standing claim is one this broker wrote
// and never answered, forgetting a remembered claim that cur no longer
// shows.
func (b *Broker) ownLost(cur *job.Record) bool {
	b.lostMu.Lock()
	defer b.lostMu.Unlock()
	c, ok := b.lost[cur.Key()]
	if !ok {
		return false
	}
	if cur.State == job.StateRunning && cur.Worker != "" && cur.ClaimID != "" &&
		cur.ClaimID == c.id && cur.Attempt == c.attempt &&
		b.cfg.Now().Sub(c.at) < lostFor*b.cfg.StaleAfter {
		return true
	}
	delete(b.lost, cur.Key())
	return false
}

// unanswered is a claim made too late for its asker (take): remembered as
// lost, its job looked at again shortly rather than after StaleAfter.
func (b *Broker) unanswered(s *sched, msg *natsjs.LaneMsg, now time.Time) {
	rec, _ := s.known(msg.Key)
	if rec == nil {
		return
	}
	b.lose(rec)
	s.later(msg, now.Add(outageDelay(1)))
	b.log.Warn("claim made after its worker gave up on the answer: handed to the next worker", "job_id", rec.ID, "attempt", rec.Attempt)
}

// found forgets key's lost claim: it was handed out, or is gone.
func (b *Broker) found(key string) {
	b.lostMu.Lock()
	defer b.lostMu.Unlock()
	delete(b.lost, key)
}

package job

import (
	"time"
	"unicode/utf8"

	"github.com/jobgate/jobgate/pkg/api"
)

// The attempt history of a record: the lifecycle moves (lifecycle.go)
// write it as attempts start and end, so every writer of a record keeps it
// without knowing of it. It is bounded: the latest api.MaxAttemptHistory
// attempts, each message at most api.MaxAttemptMessage bytes.

// startAttempt opens the history entry of the attempt r.Attempt.
func (r *Record) startAttempt(worker string, now time.Time) {
	r.Attempts = append(r.Attempts, Attempt{Attempt: r.Attempt, Worker: clipMessage(worker), StartedAt: now})
	if n := len(r.Attempts) - api.MaxAttemptHistory; n > 0 {
		r.Attempts = append(r.Attempts[:0:0], r.Attempts[n:]...)
	}
}

// endAttempt closes the open history entry of the current attempt, if any,
// with outcome and f (copied, its message clipped).
func (r *Record) endAttempt(outcome string, f *Failure, now time.Time) {
	a := r.openAttempt()
	if a == nil {
		return
	}
	end := now
	a.EndedAt = &end
	a.Outcome = outcome
	if f != nil {
		e := *f
		e.Message = clipMessage(e.Message)
		a.Error = &e
	}
}

// openAttempt is the history entry of the current attempt while it has no
// outcome yet (nil otherwise).
func (r *Record) openAttempt() *Attempt {
	if len(r.Attempts) == 0 {
		return nil
	}
	a := &r.Attempts[len(r.Attempts)-1]
	if a.Attempt != r.Attempt || a.EndedAt != nil {
		return nil
	}
	return a
}

// NoteCause puts the full message of the latest attempt's failure (the
// operator's, which may name internals) in its history entry, clipped to
// api.MaxAttemptMessage bytes; the job's owner keeps reading r.Error. A
// writer that has such a message calls it after ScheduleRetry or Fail; an
// attempt without one shows the message the owner reads.
func (r *Record) NoteCause(message string) {
	if message == "" || len(r.Attempts) == 0 {
		return
	}
	a := &r.Attempts[len(r.Attempts)-1]
	if a.Attempt != r.Attempt || a.Error == nil {
		return
	}
	a.Error.Message = clipMessage(message)
}

// clipMessage cuts s to at most api.MaxAttemptMessage bytes on a rune
// boundary.
func clipMessage(s string) string {
	if len(s) <= api.MaxAttemptMessage {
		return s
	}
	s = s[:api.MaxAttemptMessage]
	for len(s) > 0 && !utf8.ValidString(s[max(0, len(s)-utf8.UTFMax):]) {
		s = s[:len(s)-1]
	}
	return s
}

// AttemptTook is how long attempt n ran, from its start to its end as its
// history entry records them; false when the entry is gone (past
// api.MaxAttemptHistory) or still open.
func (r *Record) AttemptTook(n int) (time.Duration, bool) {
	for i := len(r.Attempts) - 1; i >= 0; i-- {
		a := r.Attempts[i]
		if a.Attempt != n {
			continue
		}
		if a.EndedAt == nil {
			return 0, false
		}
		return max(a.EndedAt.Sub(a.StartedAt), 0), true
	}
	return 0, false
}

package worker

import (
	"context"
	"time"

	"github.com/jobgate/jobgate/internal/workerhook"
)

// The hooks of jobgate's own endpoint caller (internal/workerhook): no
// user's worker reaches them.
func init() {
	workerhook.Undeclared = func(wa any) {
		w := wa.(*Workers)
		w.mu.Lock()
		w.undeclared = true
		w.mu.Unlock()
	}
	workerhook.Gate = func(wa any, gate func(ctx context.Context) (func(), error)) {
		w := wa.(*Workers)
		w.mu.Lock()
		w.gate = gate
		w.mu.Unlock()
	}
	workerhook.Pace = func(wa any, pace func(ctx context.Context) error, active func() bool) {
		w := wa.(*Workers)
		w.mu.Lock()
		w.pace, w.paceActive = pace, active
		w.mu.Unlock()
	}
	workerhook.Verdict = func(wa any, fn func(id string, attempt int, outcome string)) {
		w := wa.(*Workers)
		w.mu.Lock()
		w.verdict = fn
		w.mu.Unlock()
	}
	workerhook.Failure = func(kind string, retryable bool, user string, cause error, retryAfter time.Duration) error {
		return &failure{kind: kind, retryable: retryable, user: user, err: cause, retryAfter: retryAfter}
	}
}

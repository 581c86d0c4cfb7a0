package client

import (
	"context"
	"time"
)

// Clock is the time source of the retry loop and the journal. Tests inject
// one whose Sleep advances a fake time, so backoff and Retry-After are
// asserted without real waiting.
type Clock interface {
	Now() time.Time
	// Sleep waits d or until ctx is done, whichever comes first, and
	// returns ctx.Err() in the latter case.
	Sleep(ctx context.Context, d time.Duration) error
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

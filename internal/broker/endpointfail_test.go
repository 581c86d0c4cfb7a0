package broker

import (
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/wire"
	"github.com/stretchr/testify/require"
)

// The endpoint categories say jobgate itself called a handler: a worker
// credential may not claim them. A retried failure may ask for a later
// next attempt (an endpoint's Retry-After), bounded, never sooner than
// the backoff.
func TestEndpointKindsAreJobgatesAndRetryAfterIsHonoured(t *testing.T) {
	t.Parallel()
	_, tb := setup(t)
	require.Nil(t, tb.declare(t, credA, "hooky", "text/plain").Error)
	rec := tb.admit(t, "hooky", "h-1")
	a := tb.next(t, credA, "hooky", "worker-a")
	held := wire.Held{Key: a.Key, Token: a.Token}
	for _, kind := range []string{wire.KindEndpointRejected, wire.KindEndpointError} {
		r := tb.ask(t, credA, "hooky", wire.OpFail, wire.FailRequest{Held: held, Kind: kind, Message: "pretend"})
		require.NotNil(t, r.Error, kind)
		require.Equal(t, wire.CodeBadRequest, r.Error.Code, kind)
	}
	r := tb.ask(t, credA, "hooky", wire.OpFail, wire.FailRequest{Held: held, Kind: wire.KindError, Message: "x", RetryAfterMS: -1})
	require.Equal(t, wire.CodeBadRequest, r.Error.Code)
	require.Equal(t, job.StateRunning, tb.record(t, rec.Key()).State, "nothing was written")

	before := time.Now()
	r = tb.ask(t, credA, "hooky", wire.OpFail, wire.FailRequest{Held: held, Kind: wire.KindError, Message: "busy", RetryAfterMS: 20_000})
	require.Nil(t, r.Error)
	retry := tb.record(t, rec.Key())
	require.NotNil(t, retry.RetryAt)
	require.WithinDuration(t, before.Add(20*time.Second), *retry.RetryAt, 2*time.Second, "the backoff here is about 1 s")

	b := tb.admit(t, "hooky", "h-2")
	c := tb.next(t, credA, "hooky", "worker-a")
	require.Equal(t, b.ID, c.ID)
	r = tb.ask(t, credA, "hooky", wire.OpFail, wire.FailRequest{Held: wire.Held{Key: c.Key, Token: c.Token}, Kind: wire.KindError,
		Message: "busy", RetryAfterMS: int64(48 * time.Hour / time.Millisecond)})
	require.Nil(t, r.Error)
	retry = tb.record(t, b.Key())
	require.WithinDuration(t, time.Now().Add(wire.MaxRetryAfter), *retry.RetryAt, 5*time.Second, "at most an hour")
}

package broker

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/wire"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// Stop takes a deadline like every service's: a worker's next request
// held for work is ended at once, not waited out, the broker answers
// nothing after it, and a second Stop (the test's cleanup) returns how the
// first ended.
func TestStopEndsHeldRequestsWithinItsDeadline(t *testing.T) {
	t.Parallel()
	b, tb := setup(t)
	require.Nil(t, tb.declare(t, credA, "idle", "text/plain").Error)

	held := make(chan error, 1)
	go func() {
		data, _ := json.Marshal(wire.NextRequest{Worker: "w", WaitMS: wire.MaxWait.Milliseconds()})
		_, err := tb.conn.NC.Request(wire.Subject(credA, "idle", wire.OpNext), data, 2*wire.MaxWait)
		held <- err
	}()
	require.Eventually(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.waiting[credA] > 0
	}, 10*time.Second, 10*time.Millisecond, "the next request is held for work")

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	require.NoError(t, b.Stop(ctx))
	require.Less(t, time.Since(start), wire.MaxWait/2, "the held request was not waited out")
	select {
	case <-held:
	case <-time.After(wire.MaxWait):
		t.Fatal("the held request got no end")
	}

	_, err := tb.conn.NC.Request(wire.Subject(credA, "idle", wire.OpHello), []byte(`{}`), time.Second)
	require.True(t, errors.Is(err, nats.ErrNoResponders) || errors.Is(err, nats.ErrTimeout), "a stopped broker answers nothing: %v", err)
	require.NoError(t, b.Stop(ctx), "a second Stop")
}

// A broker never started stops at once.
func TestStopWithoutStart(t *testing.T) {
	t.Parallel()
	_, tb := setup(t)
	b, err := New(testConfig(), storesOf(tb.conn), nil)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, b.Stop(ctx))
}

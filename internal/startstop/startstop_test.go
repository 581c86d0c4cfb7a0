package startstop

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestStopBeforeStartAndTwiceIsNil(t *testing.T) {
	t.Parallel()
	var l Lifecycle
	require.NoError(t, l.Stop(context.Background()))
	require.NoError(t, l.Stop(context.Background()))
	err := l.Start(context.Background(), func(context.Context, context.Context) error { return nil }, nil)
	require.ErrorIs(t, err, ErrStopped, "a stopped service does not start")

	var r Lifecycle
	stops := 0
	require.NoError(t, r.Start(context.Background(), func(context.Context, context.Context) error { return nil },
		func(context.Context) error { stops++; return nil }))
	require.ErrorIs(t, r.Start(context.Background(), func(context.Context, context.Context) error { return nil }, nil), ErrStarted)
	require.NoError(t, r.Stop(context.Background()))
	require.NoError(t, r.Stop(context.Background()))
	require.Equal(t, 1, stops)
}

// Ending Start's ctx after Start returned leaves the run context alone.
func TestRunOutlivesTheStartContext(t *testing.T) {
	t.Parallel()
	var l Lifecycle
	var run context.Context
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "v"))
	require.NoError(t, l.Start(ctx, func(_, r context.Context) error { run = r; return nil },
		func(context.Context) error { return nil }))
	cancel()
	require.NoError(t, run.Err())
	require.Equal(t, "v", run.Value(ctxKey{}), "the run context keeps the start context's values")
	require.NoError(t, l.Stop(context.Background()))
	require.ErrorIs(t, context.Cause(run), ErrStopped)
}

type ctxKey struct{}

// Stop during a start-up cancels it and returns at once; Start fails.
func TestStopDuringStartCancelsTheStartUp(t *testing.T) {
	t.Parallel()
	var l Lifecycle
	waiting := make(chan struct{})
	startErr := make(chan error, 1)
	go func() {
		startErr <- l.Start(context.Background(), func(sctx, _ context.Context) error {
			close(waiting)
			<-sctx.Done()
			return sctx.Err()
		}, func(context.Context) error { t.Error("stop of a service that never started"); return nil })
	}()
	<-waiting
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, l.Stop(ctx))
	err := <-startErr
	require.ErrorIs(t, err, ErrStopped)
	require.ErrorIs(t, err, context.Canceled)
}

// A start-up that ignores its context does not hold Stop past its deadline;
// what it started is stopped once it ends.
func TestStopDoesNotWaitBehindAStuckStartUp(t *testing.T) {
	t.Parallel()
	var l Lifecycle
	release, waiting := make(chan struct{}), make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		_ = l.Start(context.Background(), func(context.Context, context.Context) error {
			close(waiting)
			<-release
			return nil
		}, func(context.Context) error { close(stopped); return nil })
	}()
	<-waiting
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	began := time.Now()
	err := l.Stop(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(began), 2*time.Second)
	close(release)
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("what the start-up started was not stopped")
	}
	require.NoError(t, l.Stop(context.Background()), "a later Stop waits for the stop to end and returns how it ended")
}

// A drain that outlasts Stop's deadline is forced, and Stop says so.
func TestWaitForcesAtTheDeadline(t *testing.T) {
	t.Parallel()
	done := make(chan struct{})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := Wait(ctx, done, func() { close(done) })
	require.ErrorIs(t, err, context.DeadlineExceeded)

	never := make(chan struct{})
	began := time.Now()
	err = Wait(ctx, never, nil)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(began), ForceGrace+time.Second)
	require.NoError(t, Wait(context.Background(), done, nil))
	require.False(t, errors.Is(Wait(ctx, done, nil), context.DeadlineExceeded))
}

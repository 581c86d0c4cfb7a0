package renderer

import (
	"context"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/pkg/worker"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

// holdRender makes the first attempt of the job whose id *id holds wait in
// its render until wait returns: a render that cannot finish before Stop
// acts, however fast the machine.
func holdRender(id *atomic.Pointer[string], holding chan<- struct{}, wait func(ctx context.Context)) func(*Config) {
	return func(c *Config) {
		prev := c.OnRender
		c.OnRender = func(ctx context.Context, r *job.Record) {
			prev(ctx, r)
			if p := id.Load(); p != nil && *p == r.ID && r.Attempt == 1 {
				close(holding)
				wait(ctx)
			}
		}
	}
}

func TestStopGivesBackARenderItCannotFinish(t *testing.T) {
	t.Parallel()
	var id atomic.Pointer[string]
	holding := make(chan struct{})
	a, b := setup(t, func(c *Config) { c.DrainTimeout = 100 * time.Millisecond },
		holdRender(&id, holding, func(ctx context.Context) { <-ctx.Done() })) // until Stop interrupts it
	b.terminal(t, b.admit(t, "warm-up", 1), 30*time.Second) // a job that does finish
	rec := b.env.Commit(t, b.conn.Res, jobtest.Request{Key: "stopped-mid-render", Pages: 150})
	id.Store(&rec.ID)
	history := jobtest.Watch(t, b.conn.Res, rec.Key())
	require.NoError(t, natsjs.PublishWork(context.Background(), b.conn.Res.JS, rec, 0))
	select {
	case <-holding:
	case <-time.After(30 * time.Second):
		t.Fatal("the render never started")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, a.Stop(ctx), "the interrupted render was given back within the deadline")
	given := jobtest.WaitFor(t, b.conn.Res, rec.Key(), 5*time.Second, func(r *job.Record) bool { return r.Worker == "" })
	require.Equal(t, job.StateRunning, given.State)
	require.Equal(t, 1, given.Attempt)
	require.Nil(t, given.Error, "being stopped is no verdict on the job")
	require.Equal(t, 1, given.GivenBack, "and uses up none of its attempts")

	b.start(t, "renderer-b")
	done := b.terminal(t, rec, 60*time.Second)
	require.Equal(t, job.StateSucceeded, done.State)
	require.Equal(t, 2, done.Attempt)
	require.Equal(t, []int{1, 2}, b.renders.of(rec.ID))
	require.NotNil(t, history.Find(func(r *job.Record) bool { return r.Worker == "" && r.Attempt == 1 }))
	require.Equal(t, 150, pdfPages(t, b.result(t, done)))
}

// A render that ignores its context does not hold Stop past its deadline:
// Stop interrupts it, forces what it can and returns, in time, an error
// that says the deadline passed.
func TestStopReturnsAtItsDeadline(t *testing.T) {
	t.Parallel()
	var id atomic.Pointer[string]
	holding, release := make(chan struct{}), make(chan struct{})
	a, b := setup(t, holdRender(&id, holding, func(context.Context) { <-release }))
	t.Cleanup(func() { close(release) })
	rec := b.env.Commit(t, b.conn.Res, jobtest.Request{Key: "stuck-render", Pages: 3})
	id.Store(&rec.ID)
	require.NoError(t, natsjs.PublishWork(context.Background(), b.conn.Res.JS, rec, 0))
	select {
	case <-holding:
	case <-time.After(30 * time.Second):
		t.Fatal("the render never started")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	began := time.Now()
	err := a.Stop(ctx)
	took := time.Since(began)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, took, 3*time.Second, "Stop outlived its deadline")
	require.ErrorIs(t, a.Stop(context.Background()), context.DeadlineExceeded, "a second Stop says how the first ended")
}

func TestStopLeavesNoGoroutineBehind(t *testing.T) {
	// Not parallel: it counts the package's goroutines.
	a, b := setup(t)
	c := b.start(t, "renderer-b")
	rec := b.admit(t, "before-stop", 5)
	b.terminal(t, rec, 30*time.Second)
	require.NoError(t, a.Stop(context.Background()))
	require.NoError(t, c.Stop(context.Background()))
	require.NoError(t, a.Stop(context.Background()), "a second Stop is a no-op")
	require.Eventually(t, func() bool { return rendererGoroutines() == 0 }, 5*time.Second, 20*time.Millisecond,
		"goroutines left:\n%s", goroutineDump())
}

// Stop before Start returns nil, and the renderer does not start after it.
func TestStopBeforeStart(t *testing.T) {
	t.Parallel()
	env := jobtest.Start(t)
	r, err := New(testConfig(), worker.Config{Conn: env.Connect(t, "unstarted").NC})
	require.NoError(t, err)
	require.NoError(t, r.Stop(context.Background()))
	require.NoError(t, r.Stop(context.Background()))
	require.Error(t, r.Start(context.Background()))
}

func rendererGoroutines() int {
	d := goroutineDump()
	return strings.Count(d, "jobgate/renderer.(*") + strings.Count(d, "jobgate/pkg/worker.")
}

func goroutineDump() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}

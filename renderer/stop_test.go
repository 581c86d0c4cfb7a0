package renderer

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/jobtest"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/stretchr/testify/require"
)

func TestStopGivesBackARenderItCannotFinish(t *testing.T) {
	t.Parallel()
	a, b := setup(t, func(c *Config) { c.DrainTimeout = 100 * time.Millisecond })
	rec := b.env.Commit(t, b.conn.Res, jobtest.Request{Key: "stopped-mid-render", Pages: 150})
	history := jobtest.Watch(t, b.conn.Res, rec.Key())
	b.env.Admit(t, b.conn.Res, jobtest.Request{Key: "warm-up", Pages: 1}) // a job that does finish
	require.NoError(t, natsjs.PublishWork(context.Background(), b.conn.Res.JS, rec, 0))
	jobtest.WaitFor(t, b.conn.Res, rec.Key(), 30*time.Second, func(r *job.Record) bool {
		return r.State == job.StateRunning && r.Progress != nil && r.Progress.Done > 0
	})

	stopped := make(chan struct{})
	go func() { a.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(20 * time.Second):
		t.Fatal("Stop did not return")
	}
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

func TestStopLeavesNoGoroutineBehind(t *testing.T) {
	// Not parallel: it counts the package's goroutines.
	a, b := setup(t)
	c := b.start(t, "renderer-b")
	rec := b.admit(t, "before-stop", 5)
	b.terminal(t, rec, 30*time.Second)
	a.Stop()
	c.Stop()
	a.Stop() // a second Stop is a no-op
	require.Eventually(t, func() bool { return rendererGoroutines() == 0 }, 5*time.Second, 20*time.Millisecond,
		"goroutines left:\n%s", goroutineDump())
}

func rendererGoroutines() int {
	d := goroutineDump()
	return strings.Count(d, "jobgate/renderer.(*") + strings.Count(d, "jobgate/pkg/worker.")
}

func goroutineDump() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}

package notifier

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/stretchr/testify/require"
)

// A delivery that outlasts Stop's deadline does not hold Stop: it is
// cancelled (and redelivered to another instance) and Stop returns, in
// time, an error that says the deadline passed. A second Stop returns how
// the first ended.
func TestStopReturnsAtItsDeadline(t *testing.T) {
	t.Parallel()
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case arrived <- struct{}{}:
		default:
		}
		select { // answers nothing until the notifier gives up
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	n, b := setup(t, Config{
		Webhooks:     map[string][]Webhook{"4": {{URL: srv.URL, Secret: testSecret}}},
		AllowPrivate: true,
		StopGrace:    time.Minute,
		Timeout:      time.Minute,
	})
	t.Cleanup(func() { close(release) }) // before srv.Close, which waits for the handler
	b.publish(t, record("4", "reviewer-47", "job_slow_receiver", job.StateSucceeded))
	select {
	case <-arrived:
	case <-time.After(waitTimeout):
		t.Fatal("the delivery never reached the receiver")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	began := time.Now()
	err := n.Stop(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(began), 3*time.Second, "Stop outlived its deadline")
	require.ErrorIs(t, n.Stop(context.Background()), context.DeadlineExceeded)
}

// Stop before Start and a second Stop return nil; a stopped notifier does
// not start.
func TestStopBeforeStart(t *testing.T) {
	t.Parallel()
	_, b := setup(t, Config{})
	n, err := New(Config{Instance: "never-started"}, storesOf(b.res), nil)
	require.NoError(t, err)
	require.NoError(t, n.Stop(context.Background()))
	require.NoError(t, n.Stop(context.Background()))
	require.Error(t, n.Start(context.Background()))
}

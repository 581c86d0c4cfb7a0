package worker_test

import (
	"context"
	"testing"

	"github.com/jobgate/jobgate/pkg/api"
	"github.com/jobgate/jobgate/pkg/worker"
	"github.com/stretchr/testify/require"
)

type flowParams struct {
	Customer string `json:"customer" jsonschema:"maxLength=32"`
}

// A type's flow fields are checked at Register, as jobgate will check
// them: a limit out of bounds names itself before anything is sent.
func TestRegisterChecksTheFlowFields(t *testing.T) {
	t.Parallel()
	w, err := worker.New(worker.Config{URL: "nats://127.0.0.1:1", User: "u", Password: "p"})
	require.NoError(t, err)
	work := func(context.Context, *worker.Job[flowParams]) error { return nil }
	err = worker.Register(w, worker.Type[flowParams]{Name: "export_bad", Work: work,
		ConcurrencyKeys: []api.ConcurrencyKey{{Key: "/params/customer", Limit: 0}},
		RateLimit:       &api.RateLimit{PerSecond: 1, Burst: 100},
		Retry:           &api.RetryPolicy{Multiplier: 0.5}})
	require.ErrorIs(t, err, api.ErrInvalidType)
	for _, want := range []string{"concurrency[0].limit", "rate_limit.burst", "retry.multiplier"} {
		require.ErrorContains(t, err, want)
	}
	require.NoError(t, worker.Register(w, worker.Type[flowParams]{Name: "export", Work: work,
		ConcurrencyKeys: []api.ConcurrencyKey{{Key: "/params/customer", Limit: 1}, {Key: "tenant", Limit: 3}},
		RateLimit:       &api.RateLimit{PerSecond: 10, Burst: 10},
		Retry:           &api.RetryPolicy{InitialSeconds: 10, MaxSeconds: 600, Multiplier: 3}}))
}

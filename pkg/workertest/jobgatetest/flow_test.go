package jobgatetest_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/pkg/api"
	"github.com/jobgate/jobgate/pkg/client"
	"github.com/jobgate/jobgate/pkg/worker"
	"github.com/jobgate/jobgate/pkg/workertest/jobgatetest"
	"github.com/stretchr/testify/require"
)

type customer struct {
	Customer string `json:"customer" jsonschema:"maxLength=32"`
}

// The jobs a type's flow control holds back are visible to an operator:
// the stats count those waiting for a concurrency place and those rate
// limited, the job list filters them by what they wait for, and the
// metrics show the places in use per key class and the jobs waiting. The
// counts move back to 0 once the jobs ran.
func TestHeldBackJobsAreCountedListedAndExported(t *testing.T) {
	t.Parallel()
	d := jobgatetest.Start(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	release := make(chan struct{})
	work := func(ctx context.Context, _ *worker.Job[customer]) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}
	creds, err := d.WorkerCredentials("export", "partner_call")
	require.NoError(t, err)
	w, err := worker.New(creds.Config())
	require.NoError(t, err)
	// One export at a time per customer; partner calls at most one per 20 s.
	require.NoError(t, worker.Register(w, worker.Type[customer]{Name: "export", Timeout: time.Minute, Concurrency: 8, Work: work,
		ConcurrencyKeys: []api.ConcurrencyKey{{Key: "/params/customer", Limit: 1}}}))
	require.NoError(t, worker.Register(w, worker.Type[customer]{Name: "partner_call", Timeout: time.Minute, Concurrency: 8, Work: work,
		RateLimit: &api.RateLimit{PerSecond: 0.05, Burst: 1}}))
	require.NoError(t, w.Start(ctx))
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
	require.NoError(t, d.WaitForType(ctx, "export"))
	require.NoError(t, d.WaitForType(ctx, "partner_call"))

	tok, err := d.Token("4", "reviewer-47")
	require.NoError(t, err)
	c, err := client.New(d.URL(), tok, client.WithoutJournal())
	require.NoError(t, err)
	op, err := d.OperatorToken("ops")
	require.NoError(t, err)
	admin, err := client.New(d.URL(), op, client.WithoutJournal())
	require.NoError(t, err)

	var exports, calls []string
	for range 3 {
		s, err := c.Submit(ctx, "export", customer{Customer: "acme"}, client.WithFreshKey())
		require.NoError(t, err)
		exports = append(exports, s.Job.ID)
	}
	other, err := c.Submit(ctx, "export", customer{Customer: "globex"}, client.WithFreshKey())
	require.NoError(t, err)
	for range 2 {
		s, err := c.Submit(ctx, "partner_call", customer{Customer: "acme"}, client.WithFreshKey())
		require.NoError(t, err)
		calls = append(calls, s.Job.ID)
	}

	counts := func() (waiting, limited int64) {
		s, err := admin.Admin().Stats(ctx, "")
		require.NoError(t, err)
		for _, ts := range s.Types {
			switch ts.Type {
			case "export":
				waiting = ts.WaitingConcurrency
			case "partner_call":
				limited = ts.RateLimited
			}
		}
		return waiting, limited
	}
	require.Eventually(t, func() bool {
		waiting, limited := counts()
		return waiting == 2 && limited == 1
	}, 30*time.Second, 100*time.Millisecond, "two acme exports wait for acme's place, one partner call for a token")

	page, err := admin.Admin().List(ctx, api.AdminJobFilter{WaitingFor: api.WaitingForConcurrency})
	require.NoError(t, err)
	var listed []string
	for _, j := range page.Jobs {
		require.Equal(t, api.WaitingForConcurrency, j.WaitingFor)
		listed = append(listed, j.ID)
	}
	require.Len(t, listed, 2, "the acme exports not running")
	require.Subset(t, exports, listed)
	require.NotContains(t, listed, other.Job.ID, "globex's export runs beside acme's")
	page, err = admin.Admin().List(ctx, api.AdminJobFilter{WaitingFor: api.WaitingForRateLimit, Type: "partner_call"})
	require.NoError(t, err)
	require.Len(t, page.Jobs, 1)
	require.Contains(t, calls, page.Jobs[0].ID)
	_, err = admin.Admin().List(ctx, api.AdminJobFilter{WaitingFor: "nothing"})
	require.ErrorIs(t, err, api.ErrBadRequest)

	metric := func(line string) bool {
		resp, err := http.Get(d.URL() + "/metrics")
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return strings.Contains(string(body), line+"\n")
	}
	require.Eventually(t, func() bool {
		return metric(`jobgate_flow_places_in_use{key_class="params",type="export"} 2`) &&
			metric(`jobgate_flow_waiting_jobs{reason="concurrency",type="export"} 2`) &&
			metric(`jobgate_flow_waiting_jobs{reason="rate_limit",type="partner_call"} 1`)
	}, 30*time.Second, 100*time.Millisecond, "acme's and globex's places in use, the jobs waiting")

	close(release) // every export runs in turn
	for _, id := range append(exports, other.Job.ID) {
		j, err := c.Wait(ctx, id, nil)
		require.NoError(t, err)
		require.Equal(t, api.StateSucceeded, j.State)
	}
	require.Eventually(t, func() bool {
		waiting, _ := counts()
		return waiting == 0 && metric(`jobgate_flow_places_in_use{key_class="params",type="export"} 0`) &&
			metric(`jobgate_flow_waiting_jobs{reason="concurrency",type="export"} 0`)
	}, 30*time.Second, 100*time.Millisecond, "nothing waits, no place is held")
}

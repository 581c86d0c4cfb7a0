package index

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/pkg/api"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

// Minutes counts each finish in the minute it happened, the last hour
// only, per tenant and for every tenant.
func TestIndexMinutesCountsTheLastHourByMinute(t *testing.T) {
	t.Parallel()
	env := jobtest.Start(t)
	res := env.Connect(t, "index-minutes").Res
	ctx := context.Background()
	now := time.Now().UTC()
	ends := []struct {
		tenant string
		ago    time.Duration
		fail   bool
	}{{"4", 0, false}, {"4", 0, true}, {"4", 30 * time.Minute, true}, {"5", 30 * time.Minute, false}, {"4", 70 * time.Minute, false}}
	for i, e := range ends {
		rec := env.CommitAs(t, res, jobtest.Request{Tenant: e.tenant, Requester: "alice", Key: jobtest.ID("m", i)}, nil)
		at := now.Add(-e.ago)
		_, err := res.Jobs.Mutate(ctx, rec.Key(), func(r *job.Record) error {
			if err := r.Claim("w1", at); err != nil {
				return err
			}
			if e.fail {
				return r.Fail(&job.Failure{Category: job.CategoryTimeout, Message: "late"}, at)
			}
			return r.Succeed(&job.Output{Object: "o", ContentType: "text/plain", Size: 1}, at)
		})
		require.NoError(t, err)
	}
	x := openIndex(t, filepath.Join(t.TempDir(), "index.db"), res)
	caughtUp(t, x)

	m, err := x.Minutes("4", now)
	require.NoError(t, err)
	s := m["permit_report"]
	require.NotNil(t, s)
	require.Len(t, s.Succeeded, api.SeriesMinutes)
	require.Equal(t, time.Unix(now.Unix()/60*60, 0).Add(-(api.SeriesMinutes-1)*time.Minute).UTC(), s.Start)
	last, half := api.SeriesMinutes-1, api.SeriesMinutes-1-30
	require.EqualValues(t, 1, s.Succeeded[last], "this minute's success")
	require.EqualValues(t, 1, s.Failed[last], "this minute's failure")
	require.EqualValues(t, 1, s.Failed[half], "half an hour ago")
	require.EqualValues(t, 0, s.Succeeded[half], "tenant 5's is not tenant 4's")
	sum := func(v []int64) (n int64) {
		for _, x := range v {
			n += x
		}
		return n
	}
	require.EqualValues(t, 1, sum(s.Succeeded), "the finish 70 minutes ago is out of the hour")
	require.EqualValues(t, 2, sum(s.Failed))
	all, err := x.Minutes("", now)
	require.NoError(t, err)
	require.EqualValues(t, 1, all["permit_report"].Succeeded[half], "every tenant's")
}

package natsjs_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/stretchr/testify/require"
)

// smallLayout has byte budgets a test fills in moments.
func smallLayout() natsjs.Layout {
	l := natsjs.DefaultLayout()
	l.StoreMaxBytes, l.ResultsMaxBytes = 64<<10, 64<<10
	return l
}

func TestEveryResourceHasAByteBudgetAndRefusesPastIt(t *testing.T) {
	t.Parallel()
	js := setupProvision(t)
	res, err := provision(js, smallLayout())
	require.NoError(t, err)
	for _, s := range []string{"KV_" + natsjs.BucketJobs, natsjs.StreamWork, natsjs.StreamEvents,
		"KV_" + natsjs.BucketNotices, natsjs.StreamDeliveries} {
		cfg := streamConfig(t, js, s)
		require.EqualValues(t, 64<<10, cfg.MaxBytes, s)
		require.Equal(t, "DiscardNew", cfg.Discard.String(), "%s: a full stream refuses writes, it never drops what it holds", s)
	}
	require.EqualValues(t, 64<<10, streamConfig(t, js, "OBJ_"+natsjs.BucketResults).MaxBytes)
	for _, s := range []string{"KV_" + natsjs.BucketMeta, "KV_" + natsjs.BucketTypes, "KV_" + natsjs.BucketWorkers, "KV_" + natsjs.BucketSlots} {
		require.Positive(t, streamConfig(t, js, s).MaxBytes, s)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	now := time.Now().UTC()
	var first *job.Record
	var full error
	for i := 0; i < 1000 && full == nil; i++ {
		r := &job.Record{ID: fmt.Sprintf("job_%026d", i), Tenant: "4", Requester: "r", Type: "permit_report",
			Params: []byte(`{"pad":"` + strings.Repeat("x", 400) + `"}`), State: job.StateQueued, CreatedAt: now, UpdatedAt: now}
		if full = res.Jobs.Create(ctx, r); full == nil && first == nil {
			first = r
		}
	}
	require.ErrorIs(t, full, job.ErrStorageFull, "the records' budget ends admissions")
	require.False(t, errors.Is(full, job.ErrUnavailable), "full is not an outage: a retry does not help soon")
	_, err = res.Jobs.Get(ctx, first.Key())
	require.NoError(t, err, "what was stored stays")

	use, err := res.StorageUse(ctx)
	require.NoError(t, err)
	require.Equal(t, natsjs.BucketJobs, use[0].Resource)
	require.EqualValues(t, 64<<10, use[0].MaxBytes)
	require.Greater(t, use[0].Bytes, int64(60<<10))

	_, err = res.PutResult(ctx, natsjs.ResultObject{Name: "job_big.a1", Tenant: "4", ContentType: "text/plain", Description: "too big"},
		strings.NewReader(strings.Repeat("y", 100<<10)))
	require.ErrorIs(t, err, job.ErrStorageFull, "the results' budget")
}

func TestProvisionNamesAnotherByteBudget(t *testing.T) {
	t.Parallel()
	js := setupProvision(t)
	_, err := provision(js, smallLayout())
	require.NoError(t, err)
	l := smallLayout()
	l.StoreMaxBytes *= 2
	_, err = provision(js, l)
	require.ErrorIs(t, err, natsjs.ErrLayoutMismatch)
	require.ErrorContains(t, err, "JOBGATE_STORE_MAX_BYTES")
	require.EqualValues(t, 64<<10, streamConfig(t, js, "KV_"+natsjs.BucketJobs).MaxBytes, "a mismatch changes nothing")
}

package natsjs_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/stretchr/testify/require"
)

// A batch record is created once, and one past job.MaxBatchRecord is
// refused as too large before anything is written.
func TestBatchStoreCreateIsCreateOnlyAndBounded(t *testing.T) {
	t.Parallel()
	res, err := provision(setupProvision(t), natsjs.DefaultLayout())
	require.NoError(t, err)
	ctx := storeCtx(t)
	b := &job.BatchRecord{ID: "bat_" + strings.Repeat("a", 26), Tenant: "4", Requester: "r", Fingerprint: "f",
		CreatedAt: time.Now().UTC(), Items: []job.BatchItem{{JobID: "job_" + strings.Repeat("b", 26), Type: "t", Params: []byte(`{}`)}}}
	require.NoError(t, res.Batches.Create(ctx, b))
	require.ErrorIs(t, res.Batches.Create(ctx, b), natsjs.ErrExists)
	got, err := res.Batches.Get(ctx, b.Key())
	require.NoError(t, err)
	require.Equal(t, b.Items, got.Items)

	huge := *b
	huge.ID = "bat_" + strings.Repeat("c", 26)
	huge.Items = []job.BatchItem{{JobID: "job_x", Type: "t", Params: []byte(`"` + strings.Repeat("x", job.MaxBatchRecord) + `"`)}}
	require.ErrorIs(t, res.Batches.Create(ctx, &huge), job.ErrPayloadTooLarge)
	_, err = res.Batches.Get(ctx, huge.Key())
	require.ErrorIs(t, err, job.ErrNotFound, "nothing written")
}

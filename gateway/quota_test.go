package gateway

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/metrics"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/stretchr/testify/require"
)

// Filling one tenant's small result quota: at 90% of it the tenant's
// admissions (jobs and batches) answer 507 storage-full naming its result
// quota and write nothing, while a key it took still replays and another
// tenant admits as before; once its results are gone it admits again.
func TestATenantAtItsResultQuotaIsRefusedAndOthersAreNot(t *testing.T) {
	t.Parallel()
	const quota = 1 << 20
	g, b := setup(t, func(c *Config) {
		c.TenantResultsMaxBytes = quota
		c.Metrics = metrics.New()
		c.SubmitRate, c.SubmitBurst = 1e6, 1e6
	})
	m := g.cfg.Metrics
	// The gateway reads the tenants' stored results at start, in the
	// background.
	require.Eventually(t, func() bool { return value(t, m.TenantResultQuota) == quota }, 10*time.Second, 10*time.Millisecond)

	a := b.token(t, "A", "reviewer-47", false)
	other := b.token(t, "B", "reviewer-47", false)
	require.Equal(t, http.StatusAccepted, b.submit(t, a, "a-1", permit).status)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	put := func(name, tenant string, size int) {
		t.Helper()
		_, err := b.res.PutResult(ctx, natsjs.ResultObject{Name: name, Tenant: tenant, ContentType: "application/pdf"},
			strings.NewReader(strings.Repeat("%", size)))
		require.NoError(t, err)
	}
	put("job_a.a1", "A", 900<<10) // 87.9%: still admitted
	put("job_b.a1", "B", 900<<10)
	require.NoError(t, g.storage.tenants.Refresh(ctx))
	require.Equal(t, http.StatusAccepted, b.submit(t, a, "a-2", permit).status, "below 90%% of the quota")
	put("job_a.a2", "A", 30<<10) // 90.8%
	require.NoError(t, g.storage.tenants.Refresh(ctx))

	jobs := b.countJobs(t)
	full := b.submit(t, a, "a-3", permit)
	require.Equal(t, http.StatusInsufficientStorage, full.status, "body: %s", full.body)
	p := full.json(t)
	require.Equal(t, "/problems/storage-full", p["type"])
	require.Contains(t, p["detail"], "result quota of 1048576 bytes")
	require.Equal(t, "60", full.header.Get("Retry-After"))
	batch := b.postBatch(t, a, "a-batch", `{"jobs":[`+permit+`]}`)
	require.Equal(t, http.StatusInsufficientStorage, batch.status, "body: %s", batch.body)
	require.Contains(t, batch.json(t)["detail"], "result quota")
	require.Equal(t, jobs, b.countJobs(t), "nothing was admitted")

	replay := b.submit(t, a, "a-1", permit)
	require.Equal(t, http.StatusOK, replay.status, "a key already taken still answers with its job")
	require.Equal(t, "true", replay.header.Get("Idempotent-Replayed"))
	require.Equal(t, http.StatusAccepted, b.submit(t, other, "b-1", permit).status, "B's quota is its own (87.9%)")

	require.EqualValues(t, 1, value(t, m.TenantsAtResultQuota))
	require.EqualValues(t, 930<<10, value(t, m.TenantResultBytes.WithLabelValues("A")))
	require.EqualValues(t, 2, value(t, m.TenantResultsQuotaFull.WithLabelValues("admission")))
	require.EqualValues(t, 1, value(t, m.Admissions.WithLabelValues("storage_full")))

	// Its results expire (deleted here): the next reading lets A in.
	require.NoError(t, b.res.DeleteResult(ctx, "job_a.a1"))
	require.NoError(t, g.storage.tenants.Refresh(ctx))
	require.Equal(t, http.StatusAccepted, b.submit(t, a, "a-3", permit).status, "the same key, once there is room")
	require.EqualValues(t, 0, value(t, m.TenantsAtResultQuota))
}

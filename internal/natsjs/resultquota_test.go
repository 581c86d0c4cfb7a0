package natsjs_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// A result object records its tenant when it is put, and a tenant's use is
// the sum of its stored objects' sizes: a deleted object, another tenant's
// and one that names no tenant (stored by an earlier version) do not count.
func TestTenantUseSumsEachTenantsStoredResults(t *testing.T) {
	t.Parallel()
	js := setupProvision(t)
	res, err := provision(js, natsjs.DefaultLayout())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	use, err := res.Files.TenantUse(ctx)
	require.NoError(t, err, "an empty store is no error")
	require.Empty(t, use)

	put := func(name, tenant string, size int) {
		t.Helper()
		n, err := res.PutResult(ctx, natsjs.ResultObject{Name: name, Tenant: tenant, ContentType: "text/plain"},
			strings.NewReader(strings.Repeat("r", size)))
		require.NoError(t, err)
		require.EqualValues(t, size, n)
	}
	// More objects than the listing's channel holds, and one of several
	// chunks.
	for i := range 40 {
		put(fmt.Sprintf("job_a%02d.a1", i), "4", 1000)
	}
	put("job_big.a1", "4", 300<<10)
	put("job_b.a1", "7", 5000)
	put("job_gone.a1", "4", 7000)
	require.NoError(t, res.DeleteResult(ctx, "job_gone.a1"))
	_, err = res.Results.Put(ctx, jetstream.ObjectMeta{Name: "job_old.a1"}, strings.NewReader("no tenant named"))
	require.NoError(t, err)

	info, err := res.Results.GetInfo(ctx, "job_b.a1")
	require.NoError(t, err)
	require.Equal(t, "7", info.Headers.Get(natsjs.HeaderTenant))

	use, err = res.Files.TenantUse(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"4": 40*1000 + 300<<10, "7": 5000}, use)
	use, err = res.TenantUse(ctx)
	require.NoError(t, err, "the broker reads it through the resources it stores results with")
	require.Equal(t, map[string]int64{"4": 40*1000 + 300<<10, "7": 5000}, use)

	done, stop := context.WithCancel(ctx)
	stop()
	_, err = res.Files.TenantUse(done)
	require.ErrorIs(t, err, job.ErrUnavailable, "a reading that cannot finish is an outage, not a count")
}
